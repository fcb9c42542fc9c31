// Glossary terms found in source texts. A term matches where it occurs as whole words once both
// the text and the term are normalised with Unicode's NFKC_Casefold (compatibility forms folded,
// e.g. "ﬁ" as "fi", full-width letters as ASCII, case folded: "Señor" = "SEÑOR" = "señor", a
// composed "ñ" = "n" + combining tilde): the characters on either side of the occurrence, if any,
// are not letters, digits or combining marks. White space around a term is ignored. Scripts written
// without spaces between words therefore match only terms that stand apart (next to punctuation or
// spaces).
#ifndef GLOSSA_RUNTIME_TEXT_GLOSSARY_H_
#define GLOSSA_RUNTIME_TEXT_GLOSSARY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace glossa {

struct GlossaryTerm {
  std::string source;                // as it occurs in source texts
  std::vector<std::string> targets;  // its translations: any one of them
};

class GlossaryMatcher {
 public:
  // INVALID_ARGUMENT names the first term whose source is not UTF-8 or normalises to nothing
  // ("glossary entry N", N counted from first_index: terms that follow another glossary's).
  static absl::StatusOr<GlossaryMatcher> Create(const std::vector<GlossaryTerm>& terms,
                                                size_t first_index = 0);

  // The indices of the terms that occur in `text` (UTF-8), in ascending order.
  std::vector<int> Match(absl::string_view text) const;

 private:
  std::vector<std::u16string> sources_;  // normalised, UTF-16
};

// A glossary's terms with their matcher, which normalises every source term once: compiled once
// for a glossary that many texts or requests use, and shared by them.
struct CompiledGlossary {
  // INVALID_ARGUMENT as GlossaryMatcher::Create.
  static absl::StatusOr<CompiledGlossary> Compile(std::vector<GlossaryTerm> terms,
                                                  size_t first_index = 0);

  std::vector<GlossaryTerm> terms;
  GlossaryMatcher matcher;  // of terms
};

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_TEXT_GLOSSARY_H_
