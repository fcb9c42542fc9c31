#include "server/text/language_detector.h"

#include <cctype>
#include <climits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

struct Guess {
  DetectedLanguage language;
  double score = 0.0;  // CLD2's normalized score of the language
};

// CLD2's guesses, most likely first; `hint` (ISO 639-1, or empty) is a language to expect.
std::vector<Guess> Guesses(absl::string_view text, const std::string& hint) {
  std::vector<Guess> out;
  if (text.empty() || text.size() > INT_MAX) return out;
  CLD2::CLDHints hints = {nullptr, "", CLD2::UNKNOWN_ENCODING, CLD2::UNKNOWN_LANGUAGE};
  if (!hint.empty()) hints.language_hint = CLD2::GetLanguageFromName(hint.c_str());
  CLD2::Language languages[3];
  int percents[3];
  double scores[3];
  int text_bytes = 0;
  bool reliable = false;
  CLD2::ExtDetectLanguageSummary(text.data(), static_cast<int>(text.size()),
                                 /*is_plain_text=*/true, &hints,
                                 CLD2::kCLDFlagBestEffort,  // a guess for short texts too
                                 languages, percents, scores, /*resultchunkvector=*/nullptr,
                                 &text_bytes, &reliable);
  for (int i = 0; i < 3; ++i) {
    if (languages[i] == CLD2::UNKNOWN_LANGUAGE || percents[i] <= 0) continue;
    out.push_back({{IsoCode(CLD2::LanguageCode(languages[i])), static_cast<double>(percents[i])},
                   scores[i]});
  }
  return out;
}

int Letters(absl::string_view text) {
  int n = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    // ASCII letters, and every non-ASCII character once (its lead byte).
    if ((c < 0x80 && std::isalpha(c)) || c >= 0xC0) ++n;
  }
  return n;
}

absl::Status Undetected(absl::string_view why, const std::set<std::string>& candidates) {
  return absl::InvalidArgumentError(absl::StrCat(
      why, ": give source_language instead of auto (this server translates from ",
      absl::StrJoin(candidates, ", "), ")"));
}

}  // namespace

std::vector<DetectedLanguage> DetectLanguages(absl::string_view text) {
  std::vector<DetectedLanguage> out;
  for (Guess& guess : Guesses(text, "")) out.push_back(std::move(guess.language));
  return out;
}

absl::StatusOr<DetectedLanguage> DetectAmong(absl::string_view text,
                                             const std::set<std::string>& candidates) {
  const int letters = Letters(text);
  if (letters < kMinDetectLetters) {
    return Undetected(absl::StrCat("the text has ", letters, " letters, too few to tell its language"),
                      candidates);
  }
  for (Guess& guess : Guesses(text, "")) {
    if (candidates.count(guess.language.language) > 0) return std::move(guess.language);
  }
  std::optional<Guess> best;
  for (const std::string& candidate : candidates) {
    std::vector<Guess> guesses = Guesses(text, candidate);
    if (guesses.empty() || guesses.front().language.language != candidate) continue;
    if (!best || guesses.front().score > best->score) best = guesses.front();
  }
  if (best) return best->language;
  return Undetected("the language of the text is none the server translates from", candidates);
}

}  // namespace glossa::server
