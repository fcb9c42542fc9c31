#include "server/text/language_detector.h"

#include <climits>

// compact_lang_det.h uses FILE and std::vector without including their headers.
// clang-format off
#include <cstdio>
#include <vector>
#include <cld2/public/compact_lang_det.h>
#include <cld2/public/encodings.h>
// clang-format on

namespace CLD2 {
const char* LanguageCode(Language lang);  // lang_script.h, an internal header
}  // namespace CLD2

namespace glossa::server {
namespace {

// CLD2 keeps a few codes that ISO 639-1 has since replaced.
std::string IsoCode(const char* cld2_code) {
  const std::string code = cld2_code == nullptr ? "" : cld2_code;
  if (code == "iw") return "he";
  if (code == "jw") return "jv";
  return code;
}

}  // namespace

std::vector<DetectedLanguage> DetectLanguages(absl::string_view text) {
  std::vector<DetectedLanguage> out;
  if (text.empty() || text.size() > INT_MAX) return out;
  CLD2::Language languages[3];
  int percents[3];
  double scores[3];
  int text_bytes = 0;
  bool reliable = false;
  CLD2::ExtDetectLanguageSummary(text.data(), static_cast<int>(text.size()),
                                 /*is_plain_text=*/true, /*cld_hints=*/nullptr,
                                 CLD2::kCLDFlagBestEffort,  // a guess for short texts too
                                 languages, percents, scores, /*resultchunkvector=*/nullptr,
                                 &text_bytes, &reliable);
  for (int i = 0; i < 3; ++i) {
    if (languages[i] == CLD2::UNKNOWN_LANGUAGE || percents[i] <= 0) continue;
    out.push_back({IsoCode(CLD2::LanguageCode(languages[i])), static_cast<double>(percents[i])});
  }
  return out;
}

}  // namespace glossa::server
