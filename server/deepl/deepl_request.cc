#include "server/deepl/deepl_request.h"

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/http_api/libretranslate.h"
#include "text/tokenizer.h"

namespace glossa::server {
namespace {

using json = nlohmann::ordered_json;

absl::Status Unsupported(absl::string_view name) {
  return absl::InvalidArgumentError(absl::StrCat("Value for '", name, "' not supported."));
}

bool IsMedia(absl::string_view content_type, absl::string_view media) {
  const absl::string_view m =
      absl::StripAsciiWhitespace(content_type.substr(0, content_type.find(';')));
  return absl::EqualsIgnoreCase(m, media);
}

// One JSON member as fields: a string, number or boolean as one, an array of them as one each.
absl::Status AddJsonField(const std::string& name, const json& value, DeeplFields* out) {
  if (value.is_null()) return absl::OkStatus();
  if (value.is_string()) {
    out->emplace_back(name, value.get<std::string>());
  } else if (value.is_boolean()) {
    out->emplace_back(name, value.get<bool>() ? "1" : "0");
  } else if (value.is_number()) {
    out->emplace_back(name, value.dump());
  } else if (value.is_array()) {
    for (const json& item : value) {
      if (item.is_array() || item.is_object()) return Unsupported(name);
      if (absl::Status s = AddJsonField(name, item, out); !s.ok()) return s;
    }
  } else {
    return Unsupported(name);
  }
  return absl::OkStatus();
}

// "0", "1", "true", "false" (any case).
absl::StatusOr<bool> ParseBool(absl::string_view name, absl::string_view value) {
  if (value == "1" || absl::EqualsIgnoreCase(value, "true")) return true;
  if (value == "0" || absl::EqualsIgnoreCase(value, "false")) return false;
  return Unsupported(name);
}

// "b,i, code" -> {"b", "i", "code"}.
void AddTags(absl::string_view value, std::set<std::string>* out) {
  for (absl::string_view tag : absl::StrSplit(value, ',')) {
    tag = absl::StripAsciiWhitespace(tag);
    if (!tag.empty()) out->insert(std::string(tag));
  }
}

absl::Status CheckValues(const DeeplRequest& r) {
  if (r.texts.empty()) return absl::InvalidArgumentError("Parameter 'text' not specified.");
  if (r.texts.size() > static_cast<size_t>(kMaxDeeplTexts)) {
    return absl::OutOfRangeError(absl::StrCat("Too many texts: ", r.texts.size(),
                                              "; /v2/translate takes at most ", kMaxDeeplTexts,
                                              " a request."));
  }
  for (size_t i = 0; i < r.texts.size(); ++i) {
    if (!IsValidUtf8(r.texts[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("Parameter 'text' (", i, ") is not valid UTF-8."));
    }
  }
  if (r.target_lang.empty()) {
    return absl::InvalidArgumentError("Parameter 'target_lang' not specified.");
  }
  if (r.split_sentences != "0" && r.split_sentences != "1" && r.split_sentences != "nonewlines") {
    return Unsupported("split_sentences");
  }
  if (!r.tag_handling.empty() && r.tag_handling != "xml" && r.tag_handling != "html") {
    return Unsupported("tag_handling");
  }
  static const std::set<std::string> kFormality = {"default", "more",   "less",    "prefer_more",
                                                   "prefer_less", "formal", "informal"};
  if (kFormality.count(r.formality) == 0) return Unsupported("formality");
  return absl::OkStatus();
}

// One field of /v2/translate into the request.
absl::Status ReadField(const std::string& name, const std::string& value, DeeplRequest* r) {
  absl::StatusOr<bool> flag = true;
  if (name == "text") {
    r->texts.push_back(value);
  } else if (name == "source_lang") {
    r->source_lang = value;
  } else if (name == "target_lang") {
    r->target_lang = value;
  } else if (name == "split_sentences") {
    r->split_sentences = absl::AsciiStrToLower(value);
  } else if (name == "tag_handling") {
    r->tag_handling = absl::AsciiStrToLower(value);
  } else if (name == "ignore_tags") {
    AddTags(value, &r->ignore_tags);
  } else if (name == "splitting_tags") {
    AddTags(value, &r->splitting_tags);
  } else if (name == "non_splitting_tags") {
    AddTags(value, &r->non_splitting_tags);
  } else if (name == "formality") {
    r->formality = absl::AsciiStrToLower(value);
  } else if (name == "glossary_id") {
    r->glossary_id = value;
  } else if (name == "glossary_ids") {
    std::set<std::string> ids;
    AddTags(value, &ids);
    if (ids.size() > 1) {
      return absl::InvalidArgumentError(
          "This server applies one glossary a request: give one glossary_id.");
    }
    if (!ids.empty()) r->glossary_id = *ids.begin();
  } else if (name == "outline_detection" && (flag = ParseBool(name, value)).ok()) {
    r->outline_detection = *flag;
  } else if (name == "preserve_formatting" && (flag = ParseBool(name, value)).ok()) {
    r->preserve_formatting = *flag;
  } else if (name == "show_billed_characters" && (flag = ParseBool(name, value)).ok()) {
    r->show_billed_characters = *flag;
  }
  return flag.status();  // anything else (context, model_type, ...) is ignored
}

}  // namespace

absl::StatusOr<DeeplFields> ParseDeeplFields(absl::string_view content_type,
                                             absl::string_view body, absl::string_view query) {
  DeeplFields fields;
  if (IsMedia(content_type, "application/json")) {
    const json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) {
      return absl::InvalidArgumentError("The body is not valid JSON (UTF-8).");
    }
    if (!doc.is_object()) return absl::InvalidArgumentError("The body must be a JSON object.");
    for (const auto& [name, value] : doc.items()) {
      if (absl::Status s = AddJsonField(name, value, &fields); !s.ok()) return s;
    }
  } else if (IsMedia(content_type, "multipart/form-data")) {
    return absl::InvalidArgumentError(
        "multipart/form-data is for documents: send the parameters form-encoded "
        "(application/x-www-form-urlencoded) or as JSON (application/json).");
  } else {
    fields = ParseFormFields(body);
  }
  for (auto& field : ParseFormFields(query)) fields.push_back(std::move(field));
  return fields;
}

std::string FieldValue(const DeeplFields& fields, absl::string_view name) {
  for (const auto& [key, value] : fields) {
    if (key == name) return value;
  }
  return "";
}

absl::StatusOr<DeeplRequest> ParseDeeplRequest(absl::string_view content_type,
                                               absl::string_view body, absl::string_view query) {
  auto fields = ParseDeeplFields(content_type, body, query);
  if (!fields.ok()) return fields.status();
  DeeplRequest r;
  bool split_given = false;
  for (const auto& [name, value] : *fields) {
    if (absl::Status s = ReadField(name, value, &r); !s.ok()) return s;
    split_given = split_given || name == "split_sentences";
  }
  // DeepL's default: "nonewlines" for HTML, "1" otherwise.
  if (!split_given && r.tag_handling == "html") r.split_sentences = "nonewlines";
  if (absl::Status s = CheckValues(r); !s.ok()) return s;
  return r;
}

int64_t CodePoints(absl::string_view text) {
  int64_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace glossa::server
