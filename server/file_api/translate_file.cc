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
#include "server/file_api/multipart.h"
#include "server/http_api/http_api.h"
#include "util/status_macros.h"

namespace glossa::server {
namespace {

constexpr absl::string_view kDownloadPrefix = "/download_file/";

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

absl::StatusOr<TranslatedDocument> FileApi::Wait(DocumentJob job, const HttpRequest& http,
                                                 RpcRecord* record) {
  if (waiting_.fetch_add(1) >= options_.max_waiting) {
    waiting_.fetch_sub(1);
    return absl::ResourceExhaustedError(absl::StrCat(
        options_.max_waiting, " uploads are waiting for their documents already, as many as "
        "this server's HTTP threads may hold (--http_threads): try again later"));
  }
  auto translated =
      TranslateWaiting(*jobs_, std::move(job), absl::InfiniteFuture(), record, http.client_gone);
  waiting_.fetch_sub(1);
  return translated;
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
    const absl::StatusOr<int> client = service_->Identify(api_key, &record);
    if (!client.ok()) return absl::UnauthenticatedError("Invalid API key");
    GLOSSA_RETURN_IF_ERROR(CheckLibreRate(*service_, http, *client, *limits_));
    if (r.file == nullptr) return Invalid("missing file parameter");
    if (r.source.empty()) return Invalid("missing source parameter");
    if (r.target.empty()) return Invalid("missing target parameter");
    if (r.file->data.empty()) return Invalid("empty file");
    if (static_cast<int64_t>(r.file->data.size()) > options_.max_file_bytes) {
      error_status = 413;
      return Invalid(absl::StrCat("the file is ", r.file->data.size(), " bytes; the limit is ",
                                  options_.max_file_bytes));
    }
    GLOSSA_ASSIGN_OR_RETURN(
        TranslatedDocument translated,
        Wait({r.file->file_name, std::string(r.file->data), r.source, r.target, ""}, http,
             &record));
    auto name = store_.Put({std::move(translated.file_name), std::move(translated.bytes)},
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
