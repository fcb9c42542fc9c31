#include "text/sentences.h"

#include <unicode/brkiter.h>
#include <unicode/utext.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"

namespace glossa {
namespace {

struct UTextCloser {
  void operator()(UText* text) const { utext_close(text); }
};

// "@ss=standard" turns on ICU's sentence-break suppressions (abbreviations such as "Sr." or
// "Mr."), for the locales that have a list.
icu::Locale SentenceLocale(absl::string_view language) {
  std::string id(language.substr(0, 32));
  for (char& c : id) {
    if (c == '-') c = '_';
  }
  return icu::Locale(absl::StrCat(id, "@ss=standard").c_str());
}

}  // namespace

absl::StatusOr<std::vector<TextSpan>> SplitSentences(absl::string_view text,
                                                     absl::string_view language) {
  std::vector<TextSpan> spans;
  if (text.empty()) return spans;
  UErrorCode status = U_ZERO_ERROR;
  // A UTF-8 UText: the iterator's offsets are byte offsets into `text`, no UTF-16 copy.
  std::unique_ptr<UText, UTextCloser> utext(
      utext_openUTF8(nullptr, text.data(), static_cast<int64_t>(text.size()), &status));
  std::unique_ptr<icu::BreakIterator> it(
      icu::BreakIterator::createSentenceInstance(SentenceLocale(language), status));
  if (U_SUCCESS(status)) it->setText(utext.get(), status);
  if (U_FAILURE(status) || it == nullptr) {
    return absl::InternalError(
        absl::StrCat("ICU's sentence break iterator failed: ", u_errorName(status)));
  }
  size_t begin = static_cast<size_t>(it->first());
  for (int32_t end = it->next(); end != icu::BreakIterator::DONE; end = it->next()) {
    TextSpan span{begin, static_cast<size_t>(end)};
    begin = span.end;
    while (span.begin < span.end && IsLayoutSpace(text[span.begin])) ++span.begin;
    while (span.end > span.begin && IsLayoutSpace(text[span.end - 1])) --span.end;
    if (span.begin < span.end) spans.push_back(span);
  }
  return spans;
}

}  // namespace glossa
