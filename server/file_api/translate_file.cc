#include "server/file_api/translate_file.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/common/status_util.h"
#include "server/files/read_document.h"
#include "server/file_api/multipart.h"
#include "server/http_api/http_api.h"
#include "server/request/routing.h"
#include "server/text/language_detector.h"
#include "server/text/placeholders.h"
#include "util/status_macros.h"

namespace glossa::server {
namespace {

constexpr absl::string_view kDownloadPrefix = "/download_file/";
// Detection reads this much of a document's text: enough for CLD2, bounded for a large file.
constexpr size_t kDetectBytes = 256 << 10;

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("Invalid request: ", what));
}

// The upload's fields, as LibreTranslate reads them from the form.
struct FileRequest {
  const FormPart* file = nullptr;
  std::string source, target, api_key;
};

FileRequest Fields(const std::vector<FormPart>& parts) {
  FileRequest r;
  for (const FormPart& part : parts) {
    if (part.name == "file" && part.has_file_name && r.file == nullptr) r.file = &part;
    if (part.name == "source" && r.source.empty()) r.source = std::string(part.data);
    if (part.name == "target" && r.target.empty()) r.target = std::string(part.data);
    if (part.name == "api_key" && r.api_key.empty()) r.api_key = std::string(part.data);
  }
  return r;
}

// The host part of a link back to this server: the request's Host header when it is one
// (letters, digits, '.', '-', ':', '[', ']'), else the loopback address.
std::string LinkHost(const std::string& host) {
  const bool ok = !host.empty() && host.size() <= 255 &&
                  std::all_of(host.begin(), host.end(), [](char c) {
                    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                           c == '-' || c == ':' || c == '[' || c == ']';
                  });
  return ok ? host : "127.0.0.1";
}

// The text "auto" detects from: the segments, one a line, up to kDetectBytes (whole segments,
// so the text stays UTF-8), without their placeholders.
std::string DetectionText(const std::vector<std::string>& segments, bool inline_tags) {
  std::string out;
  for (const std::string& segment : segments) {
    const std::string text = inline_tags ? PlainText(segment) : segment;
    if (!out.empty() && out.size() + text.size() > kDetectBytes) break;
    absl::StrAppend(&out, out.empty() ? "" : "\n", text);
  }
  return out;
}

// Content-Disposition for a download: the name in ASCII ('_' for other bytes, quotes and
// backslashes), and in UTF-8 as RFC 6266's filename* when it differs.
std::string Disposition(const std::string& file_name) {
  std::string ascii;
  std::string encoded;
  for (unsigned char c : file_name) {
    const bool plain = c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
    ascii += plain ? static_cast<char>(c) : '_';
    if (absl::ascii_isalnum(c) || c == '.' || c == '-' || c == '_') {
      encoded += static_cast<char>(c);
    } else {
      absl::StrAppend(&encoded, "%", absl::AsciiStrToUpper(absl::StrCat(absl::Hex(c, absl::kZeroPad2))));
    }
  }
  std::string out = absl::StrCat("attachment; filename=\"", ascii, "\"");
  if (ascii != file_name) absl::StrAppend(&out, "; filename*=UTF-8''", encoded);
  return out;
}

absl::string_view Extension(absl::string_view name) {
  const size_t dot = name.rfind('.');
  return dot == absl::string_view::npos ? absl::string_view() : name.substr(dot);
}

}  // namespace

std::string TranslatedFileName(absl::string_view file_name, absl::string_view target) {
  const size_t slash = file_name.find_last_of("/\\");
  if (slash != absl::string_view::npos) file_name = file_name.substr(slash + 1);
  const size_t dot = file_name.rfind('.');
  if (dot == absl::string_view::npos || dot == 0) return absl::StrCat(file_name, ".", target);
  return absl::StrCat(file_name.substr(0, dot), ".", target, file_name.substr(dot));
}

std::string ContentTypeFor(absl::string_view file_name) {
  const std::string ext = absl::AsciiStrToLower(Extension(file_name));
  if (ext == ".txt") return "text/plain; charset=utf-8";
  if (ext == ".md" || ext == ".markdown") return "text/markdown; charset=utf-8";
  if (ext == ".srt") return "application/x-subrip; charset=utf-8";
  if (ext == ".vtt") return "text/vtt; charset=utf-8";
  if (ext == ".html" || ext == ".htm") return "text/html; charset=utf-8";
  static constexpr std::pair<absl::string_view, absl::string_view> kOffice[] = {
      {".docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
      {".pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"},
      {".xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
      {".odt", "application/vnd.oasis.opendocument.text"},
      {".odp", "application/vnd.oasis.opendocument.presentation"},
      {".epub", "application/epub+zip"}};
  for (const auto& [extension, type] : kOffice) {
    if (ext == extension) return std::string(type);
  }
  return "application/octet-stream";
}

HttpResponse FileApi::Handle(const HttpRequest& request) {
  if (request.path == "/translate_file") {
    if (request.method == "POST") return TranslateFile(request);
  } else if (absl::StartsWith(request.path, kDownloadPrefix)) {
    if (request.method == "GET") {
      return Download(absl::string_view(request.path).substr(kDownloadPrefix.size()));
    }
  } else {
    return JsonError(404, "no such path");
  }
  return JsonError(405, absl::StrCat(request.method, " is not allowed on ", request.path));
}

HttpResponse FileApi::Download(absl::string_view name) {
  auto file = store_.Get(std::string(name), absl::Now());
  if (file == nullptr) {
    return JsonError(404, "no such file: it was never made, or it expired");
  }
  HttpResponse response{200, ContentTypeFor(file->file_name), file->bytes};
  response.content_disposition = Disposition(file->file_name);
  return response;
}

absl::StatusOr<std::vector<std::string>> FileApi::TranslateSegments(
    const std::vector<std::string>& texts, bool inline_tags, const std::string& source,
    const std::string& target, RpcRecord* record) const {
  std::vector<std::string> out;
  out.reserve(texts.size());
  size_t next = 0;
  while (next < texts.size()) {
    v1::TranslateRequest request;
    request.set_source_language(source);
    request.set_target_language(target);
    request.set_split_sentences(true);  // as /translate's format=text
    const size_t first = next;
    int64_t bytes = 0;
    while (next < texts.size() && request.texts_size() < options_.batch_texts &&
           (request.texts_size() == 0 ||
            bytes + static_cast<int64_t>(texts[next].size()) <= options_.batch_bytes)) {
      bytes += static_cast<int64_t>(texts[next].size());
      request.add_texts(texts[next++]);
    }
    // Placeholder texts hold tags or escaped characters only where they have markup.
    for (const std::string& text : request.texts()) {
      if (inline_tags && text.find_first_of("<&") != std::string::npos) {
        request.set_inline_tags(true);
      }
    }
    auto response = TranslateAndWait(*service_, request, options_.timeout, record);
    if (!response.ok()) {
      // The service's message counts texts within one request: name the file's segments.
      return absl::Status(response.status().code(),
                          absl::StrCat("segments ", first + 1, " to ", next, " of the file: ",
                                       response.status().message()));
    }
    for (int k = 0; k < response->translations_size(); ++k) {
      const v1::Translation& t = response->translations(k);
      out.push_back(t.hypotheses_size() > 0 ? t.hypotheses(0).text() : std::string());
    }
  }
  if (out.size() != texts.size()) return absl::InternalError("a translation is missing");
  return out;
}

HttpResponse FileApi::TranslateFile(const HttpRequest& http) {
  RpcRecord record(service_->metrics(), Method::kHttpTranslateFile);
  int error_status = 0;  // an HTTP status that no absl code gives (413), else 0
  absl::StatusOr<std::string> body = [&]() -> absl::StatusOr<std::string> {
    GLOSSA_ASSIGN_OR_RETURN(const std::vector<FormPart> parts,
                            ParseMultipart(http.content_type, http.body));
    FileRequest r = Fields(parts);
    const std::string api_key =
        r.api_key.empty() ? std::string(BearerToken(http.authorization)) : r.api_key;
    GLOSSA_RETURN_IF_ERROR(CheckLibreRate(http, api_key, *limits_));
    if (!service_->CheckToken(api_key).ok()) return absl::UnauthenticatedError("Invalid API key");
    if (r.file == nullptr) return Invalid("missing file parameter");
    if (r.source.empty()) return Invalid("missing source parameter");
    if (r.target.empty()) return Invalid("missing target parameter");
    if (r.file->data.empty()) return Invalid("empty file");
    if (static_cast<int64_t>(r.file->data.size()) > options_.max_file_bytes) {
      error_status = 413;
      return Invalid(absl::StrCat("the file is ", r.file->data.size(), " bytes; the limit is ",
                                  options_.max_file_bytes));
    }
    DocumentLimits document_limits;
    document_limits.max_bytes = options_.max_file_bytes;
    GLOSSA_ASSIGN_OR_RETURN(
        const std::unique_ptr<Document> document,
        ReadDocument(r.file->file_name, std::string(r.file->data), document_limits));
    std::string source = r.source;
    if (source == "auto") {
      const std::set<std::string> candidates = AutoCandidates(
          service_->registry(), "", r.target, service_->pivot_language());
      if (candidates.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(QuoteForMessage(r.target), " is not supported"));
      }
      GLOSSA_ASSIGN_OR_RETURN(const DetectedLanguage detected,
                              DetectAmong(DetectionText(document->texts(), document->inline_tags()), candidates));
      source = detected.language;
    }
    GLOSSA_RETURN_IF_ERROR(CheckLibrePair(*service_, source, r.target));
    GLOSSA_ASSIGN_OR_RETURN(const std::vector<std::string> translations,
                            TranslateSegments(document->texts(), document->inline_tags(),
                                              source, r.target, &record));
    GLOSSA_ASSIGN_OR_RETURN(std::string written, document->Write(translations));
    auto name = store_.Put({TranslatedFileName(r.file->file_name, r.target), std::move(written)},
                           absl::Now());
    if (!name.ok()) {
      // Larger than all the store keeps (--file_keep_mb): the file's size, not the client's rate.
      if (absl::IsResourceExhausted(name.status())) error_status = 413;
      return name.status();
    }
    const nlohmann::json out = {
        {"translatedFileUrl",
         absl::StrCat("http://", LinkHost(http.host), kDownloadPrefix, *name)}};
    return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }();
  record.Finish(ToGrpcStatus(body.status()));
  if (!body.ok()) {
    return error_status != 0 ? JsonError(error_status, body.status().message())
                             : JsonError(body.status());
  }
  return {200, "application/json", *std::move(body)};
}

}  // namespace glossa::server
