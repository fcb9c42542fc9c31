// The language pair of a request, resolved against one model.
//
// Multilingual models (M2M100, NLLB-200, mBART-50) need both languages. A code is accepted in the
// model's own form ("spa_Latn", "es_XX", "es"), as its token ("__es__"), or as an ISO 639-1 or
// 639-3 code ("es", "spa") that names exactly one of the model's languages; an unknown or
// ambiguous code is INVALID_ARGUMENT listing the choices.
// Bilingual Marian models accept an empty language or their own (ISO 639-1 and 639-3 forms are
// the same language); a Marian multi-target model (">>fra<<" tokens in its vocabulary) takes its
// target language as that token (">>fra<<" or "fra"), which goes before the source text.
#ifndef GLOSSA_RUNTIME_TEXT_LANGUAGES_H_
#define GLOSSA_RUNTIME_TEXT_LANGUAGES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/config.h"
#include "text/tokenizer.h"

namespace glossa {

struct LanguagePair {
  int source_token = -1;   // the language token of the source, -1 for none
  int forced_bos_id = -1;  // the first generated token, -1 for none
};

absl::StatusOr<LanguagePair> ResolveLanguages(const ModelInfo& info, const Tokenizer& tokenizer,
                                              absl::string_view source_language,
                                              absl::string_view target_language);

// Whether ResolveLanguages would accept the pair, from the model's header and its Marian target
// tokens (Tokenizer::target_prefix_tokens) alone: for a model that is not loaded.
absl::Status CheckLanguages(const ModelInfo& info,
                            const std::vector<std::string>& target_prefix_tokens,
                            absl::string_view source_language, absl::string_view target_language);

// What ListModels reports: the codes a request may give.
std::vector<std::string> SourceLanguages(const ModelInfo& info);
std::vector<std::string> TargetLanguages(const ModelInfo& info, const Tokenizer& tokenizer);
std::vector<std::string> TargetLanguages(const ModelInfo& info,
                                         const std::vector<std::string>& target_prefix_tokens);

// The ISO 639-3 code of an ISO 639-1 code ("es" -> "spa"); other codes lower-cased as they are.
std::string Iso639_3(absl::string_view code);
// The ISO 639-1 code of a language code ("spa", "es", "ES" -> "es"); other codes lower-cased as
// they are.
std::string Iso639_1(absl::string_view code);

}  // namespace glossa

#endif  // GLOSSA_RUNTIME_TEXT_LANGUAGES_H_
