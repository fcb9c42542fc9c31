#include "text/glossary.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf16.h>

#include "absl/strings/str_cat.h"
#include "text/tokenizer.h"

namespace glossa {
namespace {

// NFKC_Casefold of `text` in UTF-16; false when ICU fails (invalid UTF-8 becomes U+FFFD first).
bool Normalise(absl::string_view text, std::u16string* out) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfkc_cf = icu::Normalizer2::getNFKCCasefoldInstance(status);
  if (U_FAILURE(status)) return false;
  const icu::UnicodeString source = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  icu::UnicodeString normal = nfkc_cf->normalize(source, status);
  if (U_FAILURE(status)) return false;
  out->assign(reinterpret_cast<const char16_t*>(normal.getBuffer()), normal.length());
  return true;
}

// A letter, digit or mark (a combining accent continues the word before it).
bool WordChar(UChar32 c) { return u_isalnum(c) || (U_GET_GC_MASK(c) & U_GC_M_MASK) != 0; }

bool WordBefore(const std::u16string& s, size_t pos) {
  if (pos == 0) return false;
  UChar32 c;
  size_t i = pos;
  U16_PREV(s.data(), 0, i, c);
  return WordChar(c);
}

bool WordAt(const std::u16string& s, size_t pos) {
  if (pos >= s.size()) return false;
  UChar32 c;
  size_t i = pos;
  U16_NEXT(s.data(), i, s.size(), c);
  return WordChar(c);
}

// `term` without the white space around it.
std::u16string Trimmed(const std::u16string& term) {
  size_t begin = 0, end = term.size();
  while (begin < end && u_isUWhiteSpace(term[begin])) ++begin;
  while (end > begin && u_isUWhiteSpace(term[end - 1])) --end;
  return term.substr(begin, end - begin);
}

bool OccursAsWords(const std::u16string& text, const std::u16string& term) {
  for (size_t at = text.find(term); at != std::u16string::npos; at = text.find(term, at + 1)) {
    if (!WordBefore(text, at) && !WordAt(text, at + term.size())) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<GlossaryMatcher> GlossaryMatcher::Create(const std::vector<GlossaryTerm>& terms,
                                                        size_t first_index) {
  GlossaryMatcher matcher;
  matcher.sources_.reserve(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    std::u16string normal;
    if (!IsValidUtf8(terms[i].source)) {
      return absl::InvalidArgumentError(
          absl::StrCat("glossary entry ", first_index + i, ": the source term is not valid UTF-8"));
    }
    if (!Normalise(terms[i].source, &normal) || (normal = Trimmed(normal)).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("glossary entry ", first_index + i, ": the source term is empty"));
    }
    matcher.sources_.push_back(std::move(normal));
  }
  return matcher;
}

std::vector<int> GlossaryMatcher::Match(absl::string_view text) const {
  std::vector<int> found;
  std::u16string normal;
  if (sources_.empty() || !Normalise(text, &normal)) return found;
  for (size_t i = 0; i < sources_.size(); ++i) {
    if (OccursAsWords(normal, sources_[i])) found.push_back(static_cast<int>(i));
  }
  return found;
}

absl::StatusOr<CompiledGlossary> CompiledGlossary::Compile(std::vector<GlossaryTerm> terms,
                                                           size_t first_index) {
  absl::StatusOr<GlossaryMatcher> matcher = GlossaryMatcher::Create(terms, first_index);
  if (!matcher.ok()) return matcher.status();
  return CompiledGlossary{std::move(terms), *std::move(matcher)};
}

}  // namespace glossa
