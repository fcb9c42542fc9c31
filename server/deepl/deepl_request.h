// DeepL's request bodies: form fields (application/x-www-form-urlencoded, a field repeated for
// each text) or a JSON object, as DeepL takes both, with the query string's fields after the
// body's. Parameters DeepL's API does not have, or Glossa does not read, are ignored as DeepL
// ignores them (its client libraries pass extra parameters through for features a server may
// not have). Errors are INVALID_ARGUMENT with DeepL's wording ("Value for 'split_sentences' not
// supported."), OUT_OF_RANGE for a request too large (413).
#ifndef GLOSSA_SERVER_DEEPL_DEEPL_REQUEST_H_
#define GLOSSA_SERVER_DEEPL_DEEPL_REQUEST_H_

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace glossa::server {

// A request's fields in order, a JSON array as one field per item; JSON true and false as "1"
// and "0", numbers as written.
using DeeplFields = std::vector<std::pair<std::string, std::string>>;
absl::StatusOr<DeeplFields> ParseDeeplFields(absl::string_view content_type,
                                             absl::string_view body, absl::string_view query);
// The first value of a field ("" when absent).
std::string FieldValue(const DeeplFields& fields, absl::string_view name);

// The most texts one /v2/translate takes, as DeepL.
inline constexpr int kMaxDeeplTexts = 50;

// POST /v2/translate.
struct DeeplRequest {
  std::vector<std::string> texts;
  std::string source_lang, target_lang;  // as sent ("" when absent)
  std::string split_sentences = "1";     // "0", "1" or "nonewlines"
  std::string tag_handling;              // "", "xml" or "html"
  std::set<std::string> ignore_tags, splitting_tags, non_splitting_tags;
  bool outline_detection = true;
  std::string formality = "default";  // lower-case, one of DeepL's values
  std::string glossary_id;
  bool show_billed_characters = false;
  bool preserve_formatting = false;  // accepted; Glossa keeps the text's formatting anyway
};
absl::StatusOr<DeeplRequest> ParseDeeplRequest(absl::string_view content_type,
                                               absl::string_view body, absl::string_view query);

// Code points of UTF-8 text (what DeepL bills: billed_characters, /v2/usage).
int64_t CodePoints(absl::string_view text);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_DEEPL_DEEPL_REQUEST_H_
