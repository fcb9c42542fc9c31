// LibreTranslate's request: JSON, or form fields (body and query string, as Flask's
// request.values), with its wording for the errors.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "server/http_api/libretranslate.h"

namespace glossa::server {
namespace {

using json = nlohmann::ordered_json;  // a glossary's entries keep the order they came in

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("Invalid request: ", what));
}

// Decodes %XX and '+' (form encoding). Malformed escapes stay as they are.
std::string FormDecode(absl::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    int hi = 0, lo = 0;
    auto hex = [](char h, int* v) {
      if (!absl::ascii_isxdigit(static_cast<unsigned char>(h))) return false;
      *v = absl::ascii_isdigit(static_cast<unsigned char>(h)) ? h - '0'
                                                              : absl::ascii_tolower(h) - 'a' + 10;
      return true;
    };
    if (c == '+') {
      out += ' ';
    } else if (c == '%' && i + 2 < in.size() && hex(in[i + 1], &hi) && hex(in[i + 2], &lo)) {
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

bool IsJson(absl::string_view content_type) {
  const absl::string_view media = content_type.substr(0, content_type.find(';'));
  const absl::string_view m = absl::StripAsciiWhitespace(media);
  return absl::EqualsIgnoreCase(m, "application/json") || absl::EndsWithIgnoreCase(m, "+json");
}

// {"term": "translation" | ["translation", ...], ...}, in the object's order.
absl::Status ParseGlossary(const json& glossary, LibreRequest* r) {
  constexpr char kShape[] =
      "glossary must be an object of source terms, each a translation or a list of them";
  if (glossary.is_null()) return absl::OkStatus();
  if (!glossary.is_object()) return Invalid(kShape);
  for (const auto& [source, targets] : glossary.items()) {
    std::vector<std::string> list;
    if (targets.is_string()) {
      list.push_back(targets.get<std::string>());
    } else if (targets.is_array()) {
      for (const json& target : targets) {
        if (!target.is_string()) return Invalid(kShape);
        list.push_back(target.get<std::string>());
      }
    } else {
      return Invalid(kShape);
    }
    r->glossary.emplace_back(source, std::move(list));
  }
  return absl::OkStatus();
}

absl::StatusOr<LibreRequest> FromJson(absl::string_view body) {
  const json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Invalid("the body is not valid JSON");
  if (!doc.is_object()) return Invalid("the body must be a JSON object");
  LibreRequest r;
  auto string_field = [&](const char* name, std::string* out) -> absl::Status {
    auto it = doc.find(name);
    if (it == doc.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_string()) return Invalid(absl::StrCat(name, " must be a string"));
    *out = it->get<std::string>();
    return absl::OkStatus();
  };
  for (auto [name, out] : {std::pair{"source", &r.source},
                           {"target", &r.target},
                           {"format", &r.format},
                           {"api_key", &r.api_key},
                           {"glossary_id", &r.glossary_id}}) {
    if (absl::Status s = string_field(name, out); !s.ok()) return s;
  }
  if (auto g = doc.find("glossary"); g != doc.end()) {
    if (absl::Status s = ParseGlossary(*g, &r); !s.ok()) return s;
  }
  if (auto q = doc.find("q"); q != doc.end()) {
    if (q->is_string()) {
      if (!q->get_ref<const std::string&>().empty()) r.q.push_back(q->get<std::string>());
    } else if (q->is_array()) {
      r.batch = true;
      for (const json& text : *q) {
        if (!text.is_string()) return Invalid("q must be a string or an array of strings");
        r.q.push_back(text.get<std::string>());
      }
    } else if (!q->is_null()) {
      return Invalid("q must be a string or an array of strings");
    }
  }
  if (auto n = doc.find("alternatives"); n != doc.end() && !n->is_null()) {
    if (n->is_number_integer() && n->get<int64_t>() >= 0 && n->get<int64_t>() <= 64) {
      r.alternatives = static_cast<int>(n->get<int64_t>());
    } else if (!(n->is_string() && absl::SimpleAtoi(n->get<std::string>(), &r.alternatives) &&
                 r.alternatives >= 0 && r.alternatives <= 64)) {
      return Invalid("alternatives must be a whole number from 0 to 64");
    }
  }
  return r;
}

absl::StatusOr<LibreRequest> FromForm(const HttpRequest& request) {
  LibreRequest r;
  // Fields of the body first, then of the query string (request.values, as Flask merges them).
  auto fields = ParseFormFields(request.body);
  for (auto& field : ParseFormFields(request.query)) fields.push_back(std::move(field));
  std::set<std::string> seen;
  for (auto& [name, value] : fields) {
    if (!seen.insert(name).second) continue;
    if (name == "q") {
      // As LibreTranslate: line endings of form text become \n.
      if (!value.empty()) r.q.push_back(absl::StrReplaceAll(value, {{"\r\n", "\n"}, {"\r", "\n"}}));
    } else if (name == "source") {
      r.source = value;
    } else if (name == "target") {
      r.target = value;
    } else if (name == "format") {
      r.format = value;
    } else if (name == "api_key") {
      r.api_key = value;
    } else if (name == "glossary_id") {
      r.glossary_id = value;
    } else if (name == "glossary" && !value.empty()) {
      const json glossary = json::parse(value, nullptr, /*allow_exceptions=*/false);
      if (glossary.is_discarded()) return Invalid("glossary must be a JSON object");
      if (absl::Status s = ParseGlossary(glossary, &r); !s.ok()) return s;
    } else if (name == "alternatives" && !value.empty()) {
      if (!absl::SimpleAtoi(value, &r.alternatives) || r.alternatives < 0 || r.alternatives > 64) {
        return Invalid("alternatives must be a whole number from 0 to 64");
      }
    }
  }
  return r;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ParseFormFields(absl::string_view body) {
  std::vector<std::pair<std::string, std::string>> fields;
  while (!body.empty()) {
    const size_t end = std::min(body.find('&'), body.size());
    const absl::string_view field = body.substr(0, end);
    body.remove_prefix(std::min(end + 1, body.size()));
    if (field.empty()) continue;
    const size_t eq = field.find('=');
    fields.emplace_back(FormDecode(field.substr(0, eq)),
                        eq == absl::string_view::npos ? "" : FormDecode(field.substr(eq + 1)));
  }
  return fields;
}

absl::StatusOr<LibreRequest> ParseLibreRequest(const HttpRequest& request) {
  return IsJson(request.content_type) ? FromJson(request.body) : FromForm(request);
}

}  // namespace glossa::server
