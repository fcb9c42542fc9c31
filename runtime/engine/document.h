// Whole documents as sentences: each text is cut into sentences (ICU, text/sentences.h), the
// sentences of all texts are translated together as one job, and each text is rebuilt from its
// sentences' translations with its own whitespace, newlines and blank lines in between.
#ifndef GLOSSA_RUNTIME_ENGINE_DOCUMENT_H_
#define GLOSSA_RUNTIME_ENGINE_DOCUMENT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model.h"
#include "engine/text_job.h"

namespace glossa {

struct Documents {
  // What is translated: every sentence of every text, in order.
  std::vector<std::string> sentences;
  // Text i is gaps[0] + sentence[first] + gaps[1] + ... + sentence[first + n - 1] + gaps[n],
  // n = gaps.size() - 1: the gaps are the whitespace the text had around its sentences.
  struct Layout {
    size_t first = 0;
    std::vector<std::string> gaps;
  };
  std::vector<Layout> texts;
};

// Splits each text into sentences for `language` (the source language; "" = ICU's root rules).
// A sentence with more source tokens than max_tokens (0: the model's limit) is cut further, at
// the whitespace nearest its middle, preferring a clause boundary (after , ; :); a piece without
// whitespace is cut between characters. INVALID_ARGUMENT names a text that is not UTF-8.
absl::StatusOr<Documents> SplitDocuments(const Model& model, const std::vector<std::string>& texts,
                                         absl::string_view language, int max_tokens = 0);

// One Translation per text, from one Translation per sentence (in Documents::sentences' order).
// Hypothesis k of a text joins hypothesis k of each sentence (the sentence's last one when it has
// fewer); its score is their sum and its token ids their concatenation.
std::vector<Translation> JoinDocuments(const Documents& documents,
                                       const std::vector<Translation>& sentences);

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_ENGINE_DOCUMENT_H_
