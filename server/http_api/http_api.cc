#include "server/http_api/http_api.h"

#include <google/protobuf/util/json_util.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "server/http_api/libretranslate.h"
#include "server/common/status_util.h"
#include "server/http_api/web_page.h"

namespace glossa::server {
namespace {

HttpResponse JsonOk(std::string body) { return {200, "application/json", std::move(body)}; }

// The result of a job, handed from the engine's worker to the waiting HTTP thread.
struct Pending {
  absl::Notification done;
  absl::StatusOr<v1::TranslateResponse> result = absl::UnknownError("no result");
};

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message) {
  std::string json;
  const auto status = google::protobuf::util::MessageToJsonString(message, &json);
  if (!status.ok()) return absl::InternalError(std::string(status.message()));
  return json;
}

// LibreTranslate's GET /health.
HttpResponse Health() { return JsonOk(R"({"status":"ok"})"); }

// LibreTranslate's GET /frontend/settings: what its web page and clients read before they
// translate. charLimit is --char_limit (-1, as LibreTranslate says none; the token limit still
// applies); the --auth_token_file clients' tokens rather than a key database, no suggestions;
// files when the file API is set, in the formats it reads. The default pair is the first model's
// (by name) with both languages, named as /languages names them.
HttpResponse FrontendSettings(const TranslatorService& service, int char_limit,
                              const std::vector<std::string>& file_formats) {
  const bool key_required = !service.CheckToken("").ok();
  nlohmann::json source = {{"code", "auto"}, {"name", "Auto Detect"}};
  nlohmann::json target = {{"code", "en"}, {"name", "en"}};
  for (const auto& [name, card] : service.registry().cards()) {
    const ModelInfo& info = card->info;
    if (info.source_language.empty() || info.target_language.empty()) continue;
    source = {{"code", info.source_language}, {"name", LanguageName(info.source_language)}};
    target = {{"code", info.target_language}, {"name", LanguageName(info.target_language)}};
    break;
  }
  const nlohmann::json settings = {
      {"charLimit", char_limit},
      {"frontendTimeout", 500},
      {"apiKeys", key_required},
      {"keyRequired", key_required},
      {"suggestions", false},
      {"filesTranslation", !file_formats.empty()},
      {"supportedFilesFormat", file_formats},
      {"language", {{"source", source}, {"target", target}}}};
  return JsonOk(settings.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace

int HttpStatusFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

HttpResponse JsonError(int status, absl::string_view message) {
  nlohmann::json body = {{"error", std::string(message)}};
  // Messages may quote client bytes: anything that is not UTF-8 becomes U+FFFD, never a throw.
  return {status, "application/json",
          body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

HttpResponse JsonError(const absl::Status& status) {
  return JsonError(HttpStatusFor(status), status.message());
}

absl::string_view BearerToken(absl::string_view authorization) {
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWithIgnoreCase(authorization, kBearer)) return "";
  return authorization.substr(kBearer.size());
}

absl::StatusOr<v1::TranslateResponse> TranslateAndWait(const TranslatorService& service,
                                                       const v1::TranslateRequest& request,
                                                       absl::Duration timeout, RpcRecord* record,
                                                       const std::atomic<bool>* cancelled) {
  auto pending = std::make_shared<Pending>();
  auto job = service.NewTranslateJob(request, absl::Now() + timeout, record,
                                     [pending](absl::StatusOr<v1::TranslateResponse> result) {
                                       pending->result = std::move(result);
                                       pending->done.Notify();
                                     });
  if (!job.ok()) return job.status();
  if (absl::Status started = (*job)->Start(); !started.ok()) return started;
  // The engine ends a job past its deadline within one decoder step by itself. Should that ever
  // not happen, cancel it (it then stops within a step) rather than leave `record` in use.
  const absl::Time give_up = absl::Now() + timeout + absl::Seconds(30);
  const absl::Duration slice =
      cancelled != nullptr ? absl::Milliseconds(50) : give_up - absl::Now();
  while (!pending->done.WaitForNotificationWithTimeout(slice)) {
    if ((cancelled != nullptr && cancelled->load()) || absl::Now() >= give_up) {
      (*job)->Cancel();
      pending->done.WaitForNotification();
    }
  }
  return pending->result;
}

HttpResponse HttpApi::Handle(const HttpRequest& request) const {
  const std::string& path = request.path;
  const bool get = request.method == "GET";
  const bool post = request.method == "POST";
  if (path == "/" || path == "/index.html") {
    if (get) return {200, "text/html; charset=utf-8", page_};
  } else if (path == "/translate") {
    if (post) return LibreTranslate(*service_, request, timeout_, libre_limits_);
  } else if (path == "/languages") {
    if (get) return LibreLanguages(*service_);
  } else if (path == "/detect") {
    if (post) return LibreDetect(*service_, request, libre_limits_);
  } else if (path == "/health") {
    if (get) return Health();
  } else if (path == "/frontend/settings") {
    if (get) return FrontendSettings(*service_, libre_limits_.char_limit, file_formats_);
  } else if (file_handler_ &&
             (path == "/translate_file" || absl::StartsWith(path, "/download_file/"))) {
    return file_handler_(request);
  } else if (path == "/suggest") {
    if (post) return JsonError(403, "Suggestions are disabled on this server.");
  } else if (path == "/v1/translate") {
    if (post) return V1Translate(request);
  } else if (path == "/v1/models") {
    if (get) return V1Models(request);
  } else if (path == "/v1/glossaries" || absl::StartsWith(path, "/v1/glossaries/")) {
    return V1Glossaries(request);
  } else if (deepl_handler_ && absl::StartsWith(path, "/v2/")) {
    return deepl_handler_(request);
  } else {
    return JsonError(404,
                     "no such path: this server has POST /translate, GET /languages, "
                     "POST /detect, GET /health, GET /frontend/settings, POST /suggest, "
                     "POST /translate_file, GET /download_file/<name> (LibreTranslate), "
                     "POST /v1/translate, GET /v1/models, "
                     "/v1/glossaries (POST, GET; GET, DELETE /v1/glossaries/<id>), "
                     "DeepL's API under /v2/ and the page at /");
  }
  return JsonError(405, absl::StrCat(request.method, " is not allowed on ", path));
}

HttpResponse HttpApi::V1Translate(const HttpRequest& http) const {
  RpcRecord record(service_->metrics(), Method::kHttpV1Translate);
  absl::StatusOr<std::string> json = [&]() -> absl::StatusOr<std::string> {
    if (absl::Status auth = service_->CheckToken(BearerToken(http.authorization), &record);
        !auth.ok()) {
      return absl::UnauthenticatedError(
          "this server requires a bearer token: send the header 'Authorization: Bearer <token>'");
    }
    v1::TranslateRequest request;
    const auto parsed = google::protobuf::util::JsonStringToMessage(http.body, &request);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the body is not a glossa.v1.TranslateRequest in protobuf's JSON mapping: ",
                       std::string(parsed.message()).substr(0, 300)));
    }
    auto response = TranslateAndWait(*service_, request, timeout_, &record);
    if (!response.ok()) return response.status();
    return ToJson(*response);
  }();
  record.Finish(ToGrpcStatus(json.status()));
  return json.ok() ? JsonOk(*std::move(json)) : JsonError(json.status());
}

HttpResponse HttpApi::V1Models(const HttpRequest& http) const {
  RpcRecord record(service_->metrics(), Method::kHttpV1Models);
  absl::StatusOr<std::string> json = [&]() -> absl::StatusOr<std::string> {
    if (absl::Status auth = service_->CheckToken(BearerToken(http.authorization), &record);
        !auth.ok()) {
      return absl::UnauthenticatedError(
          "this server requires a bearer token: send the header 'Authorization: Bearer <token>'");
    }
    return ToJson(service_->Models());
  }();
  record.Finish(ToGrpcStatus(json.status()));
  return json.ok() ? JsonOk(*std::move(json)) : JsonError(json.status());
}

}  // namespace glossa::server
