#include "server/file_api/multipart.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace glossa::server {
namespace {

constexpr size_t kMaxPartHeaderBytes = 8 << 10;

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed multipart/form-data body: ", what));
}

// A header's parameters: `; name=value` or `; name="quoted \" value"`, names lowercased.
// False when a quoted value does not end.
bool ParseParameters(absl::string_view in, std::vector<std::pair<std::string, std::string>>* out) {
  size_t i = 0;
  while (i < in.size()) {
    while (i < in.size() && (in[i] == ';' || absl::ascii_isspace(static_cast<unsigned char>(in[i]))))
      ++i;
    if (i >= in.size()) break;
    const size_t eq = in.find('=', i);
    const size_t semi = in.find(';', i);
    if (eq == absl::string_view::npos || (semi != absl::string_view::npos && semi < eq)) {
      // A parameter without a value (a bare token): skip it.
      i = semi == absl::string_view::npos ? in.size() : semi;
      continue;
    }
    std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(in.substr(i, eq - i)));
    i = eq + 1;
    while (i < in.size() && (in[i] == ' ' || in[i] == '\t')) ++i;
    std::string value;
    if (i < in.size() && in[i] == '"') {
      ++i;
      bool closed = false;
      while (i < in.size()) {
        const char c = in[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\' && i < in.size()) {
          value += in[i++];
        } else {
          value += c;
        }
      }
      if (!closed) return false;
    } else {
      const size_t end = in.find(';', i);
      value = std::string(absl::StripAsciiWhitespace(
          in.substr(i, end == absl::string_view::npos ? absl::string_view::npos : end - i)));
      i = end == absl::string_view::npos ? in.size() : end;
    }
    out->emplace_back(std::move(name), std::move(value));
  }
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = absl::ascii_tolower(static_cast<unsigned char>(c));
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// RFC 5987's ext-value (`UTF-8''na%C3%AFve.txt`), as some clients send filename*: the decoded
// value; false when it is not one in UTF-8.
bool DecodeExtValue(absl::string_view in, std::string* out) {
  const size_t quote = in.find('\'');
  if (quote == absl::string_view::npos) return false;
  const size_t second = in.find('\'', quote + 1);
  if (second == absl::string_view::npos) return false;
  if (!absl::EqualsIgnoreCase(in.substr(0, quote), "utf-8")) return false;
  out->clear();
  for (size_t i = second + 1; i < in.size(); ++i) {
    if (in[i] != '%') {
      *out += in[i];
      continue;
    }
    if (i + 2 >= in.size() || HexValue(in[i + 1]) < 0 || HexValue(in[i + 2]) < 0) return false;
    *out += static_cast<char>(HexValue(in[i + 1]) * 16 + HexValue(in[i + 2]));
    i += 2;
  }
  return true;
}

// One part's header block (lines without their final CRLF CRLF) into `part`.
absl::Status ParsePartHeaders(absl::string_view block, FormPart* part) {
  bool disposition = false;
  while (!block.empty()) {
    const size_t end = block.find("\r\n");
    const absl::string_view line = block.substr(0, end);
    block = end == absl::string_view::npos ? absl::string_view() : block.substr(end + 2);
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos || colon == 0) return Malformed("a header line has no name");
    const absl::string_view name = absl::StripAsciiWhitespace(line.substr(0, colon));
    const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (absl::EqualsIgnoreCase(name, "Content-Type")) {
      part->content_type = std::string(value);
      continue;
    }
    if (!absl::EqualsIgnoreCase(name, "Content-Disposition")) continue;
    const size_t semi = value.find(';');
    if (!absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(value.substr(0, semi)), "form-data")) {
      return Malformed("a part's Content-Disposition is not form-data");
    }
    std::vector<std::pair<std::string, std::string>> params;
    if (semi != absl::string_view::npos && !ParseParameters(value.substr(semi + 1), &params)) {
      return Malformed("a quoted parameter does not end");
    }
    std::string extended;
    for (const auto& [key, text] : params) {
      if (key == "name") part->name = text;
      if (key == "filename") {
        part->file_name = text;
        part->has_file_name = true;
      }
      if (key == "filename*" && DecodeExtValue(text, &extended)) {
        part->file_name = extended;  // preferred over filename (RFC 6266)
        part->has_file_name = true;
      }
    }
    disposition = true;
  }
  if (!disposition) return Malformed("a part has no Content-Disposition header");
  if (part->name.empty()) return Malformed("a part has no name");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> MultipartBoundary(absl::string_view content_type) {
  const size_t semi = content_type.find(';');
  const absl::string_view media = absl::StripAsciiWhitespace(content_type.substr(0, semi));
  if (!absl::EqualsIgnoreCase(media, "multipart/form-data")) {
    return absl::InvalidArgumentError(
        "the body must be multipart/form-data, with the file in a field named file");
  }
  std::vector<std::pair<std::string, std::string>> params;
  if (semi == absl::string_view::npos || !ParseParameters(content_type.substr(semi + 1), &params)) {
    return Malformed("the Content-Type has no boundary");
  }
  for (const auto& [key, value] : params) {
    if (key != "boundary") continue;
    if (value.empty() || value.size() > 70) {
      return Malformed("the boundary must be 1 to 70 characters");
    }
    return value;
  }
  return Malformed("the Content-Type has no boundary");
}

absl::StatusOr<std::vector<FormPart>> ParseMultipart(absl::string_view content_type,
                                                     absl::string_view body, int max_parts) {
  auto boundary = MultipartBoundary(content_type);
  if (!boundary.ok()) return boundary.status();
  const std::string delimiter = absl::StrCat("--", *boundary);
  const std::string separator = absl::StrCat("\r\n", delimiter);
  // The first delimiter: at the start, or after a preamble (RFC 2046), on a line of its own.
  size_t pos;
  if (absl::StartsWith(body, delimiter)) {
    pos = delimiter.size();
  } else {
    pos = body.find(separator);
    if (pos == absl::string_view::npos) return Malformed("no boundary line");
    pos += separator.size();
  }
  std::vector<FormPart> parts;
  for (;;) {
    if (body.substr(pos, 2) == "--") return parts;  // the close delimiter; an epilogue may follow
    while (pos < body.size() && (body[pos] == ' ' || body[pos] == '\t')) ++pos;
    if (body.substr(pos, 2) != "\r\n") return Malformed("a boundary line does not end in CRLF");
    pos += 2;
    if (static_cast<int>(parts.size()) >= max_parts) {
      return Malformed(absl::StrCat("more than ", max_parts, " parts"));
    }
    FormPart part;
    // The header block ends at an empty line; a part without headers starts with it.
    size_t headers_end;
    if (body.substr(pos, 2) == "\r\n") {
      headers_end = pos;
    } else {
      headers_end = body.find("\r\n\r\n", pos);
      if (headers_end == absl::string_view::npos || headers_end - pos > kMaxPartHeaderBytes) {
        return Malformed("a part's headers do not end");
      }
    }
    if (absl::Status s = ParsePartHeaders(body.substr(pos, headers_end - pos), &part); !s.ok()) {
      return s;
    }
    const size_t data_start = headers_end + (headers_end == pos ? 2 : 4);
    const size_t data_end = body.find(separator, data_start);
    if (data_end == absl::string_view::npos) return Malformed("the final boundary is missing");
    part.data = body.substr(data_start, data_end - data_start);
    parts.push_back(std::move(part));
    pos = data_end + separator.size();
  }
}

}  // namespace glossa::server
