// DeepL's language codes over the served models' languages.
//
// The served languages are ISO 639-1 codes where the language has one (server/models/router.h),
// else the model's own code ("ast", "ace_Arab"). DeepL's code of a language is that code in
// upper case with '-' for '_' ("ES", "AST", "ACE-ARAB"). A request's code is read in any case;
// a regional or script variant names its base language (EN-GB and EN-US: en; PT-BR and PT-PT:
// pt; ZH-HANS: zh, or a model's zho_Hans), except ZH-HANT, which names a model's zho_Hant first
// and zh only when no model has it. The target list offers DeepL's variants of English and
// Portuguese (EN-GB, EN-US, PT-BR, PT-PT), as DeepL's clients refuse a bare EN or PT target,
// and ZH-HANS beside ZH: each is translated into the base language.
#ifndef GLOSSA_SERVER_DEEPL_DEEPL_LANGUAGES_H_
#define GLOSSA_SERVER_DEEPL_DEEPL_LANGUAGES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/grpc/service.h"

namespace glossa::server {

// The language pair a request translates, as the service takes it ("es", "en").
struct DeeplPair {
  std::string source;  // empty: detected per text
  std::string target;
};

// source_lang (empty: none) and target_lang of a request as a pair the server translates.
// INVALID_ARGUMENT with DeepL's wording ("Value for 'target_lang' not supported.") for a code
// the server does not have, and naming the languages for a pair no model joins.
absl::StatusOr<DeeplPair> ResolveDeeplPair(const TranslatorService& service,
                                           absl::string_view source_lang,
                                           absl::string_view target_lang);

// DeepL's code of a served language: "es" -> "ES", "ace_Arab" -> "ACE-ARAB".
std::string DeeplCode(absl::string_view code);

// GET /v2/languages: [{"language": "ES", "name": "Spanish"}, ...]; the targets also with
// "supports_formality": false.
std::string DeeplLanguagesJson(const TranslatorService& service, bool target);
// GET /v2/glossary-language-pairs: {"supported_languages": [{"source_lang": "es",
// "target_lang": "en"}, ...]}, every pair the server translates (through the pivot too).
std::string DeeplGlossaryPairsJson(const TranslatorService& service);
// Whether the server translates source -> target (DeepL codes): a glossary's pair.
bool IsDeeplGlossaryPair(const TranslatorService& service, absl::string_view source,
                         absl::string_view target);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_DEEPL_DEEPL_LANGUAGES_H_
