// Sentence boundaries in a text, from ICU's sentence BreakIterator (Unicode UAX #29 rules with
// the locale's abbreviation list, so that "Sr. García" stays one sentence).
#ifndef GLOSSA_RUNTIME_TEXT_SENTENCES_H_
#define GLOSSA_RUNTIME_TEXT_SENTENCES_H_

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace glossa {

// A sentence as byte offsets into the text, without the whitespace around it.
struct TextSpan {
  size_t begin = 0;
  size_t end = 0;
};

// The sentences of `text` (UTF-8, checked by the caller), in order; whitespace between them
// (spaces, newlines, blank lines) is in no span. A newline always ends a sentence. language: a
// BCP 47 / ISO 639 code such as "es" ("" or unknown: ICU's root rules). INTERNAL only if ICU
// cannot start (missing data).
absl::StatusOr<std::vector<TextSpan>> SplitSentences(absl::string_view text,
                                                     absl::string_view language);

// The whitespace kept around sentences: ASCII only, so that trimming never cuts a character.
inline bool IsLayoutSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_TEXT_SENTENCES_H_
