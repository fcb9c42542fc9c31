#include "server/http/http_server.h"

#include <civetweb.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/http/browser_policy.h"
#include "server/http/read_watchdog.h"

namespace glossa::server {
namespace {

std::string Header(mg_connection* connection, const char* name) {
  const char* value = mg_get_header(connection, name);
  return value == nullptr ? std::string() : std::string(value);
}

std::string ErrorJson(absl::string_view message) {
  // Only ASCII messages without quotes or backslashes come here: no escaping needed.
  return absl::StrCat("{\"error\":\"", message, "\"}");
}

// `cors`: the CORS headers for the request's origin (browser_policy.h), or "".
void Write(mg_connection* connection, const HttpResponse& response,
           const std::string& cors = "") {
  const std::string disposition =
      response.content_disposition.empty()
          ? std::string()
          : absl::StrCat("Content-Disposition: ", response.content_disposition, "\r\n");
  const std::string head =
      absl::StrCat("HTTP/1.1 ", response.status, " ", HttpReason(response.status), "\r\n",
                   "Content-Type: ", response.content_type, "\r\n", disposition,
                   "Content-Length: ", response.body.size(), "\r\n", cors,
                   "Cache-Control: no-store\r\n"
                   "X-Content-Type-Options: nosniff\r\n"
                   "Connection: close\r\n\r\n");
  if (mg_write(connection, head.data(), head.size()) <= 0) return;  // the client went away
  if (!response.body.empty()) mg_write(connection, response.body.data(), response.body.size());
}

bool HasBody(absl::string_view method) {
  return method == "POST" || method == "PUT" || method == "PATCH";
}

// The local port of a TCP socket, -1 if `fd` is none.
int LocalPort(int fd) {
  sockaddr_storage local = {};
  socklen_t size = sizeof(local);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &size) != 0) return -1;
  if (local.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&local)->sin_port);
  }
  if (local.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&local)->sin6_port);
  }
  return -1;
}

// Shuts down the sockets on local `port` that are listening (`listening`) or connected (not
// `listening`), with `how`. Each is checked and shut through a dup of its descriptor: should the
// descriptor be closed and its number reused meanwhile, the dup still holds the socket checked.
int ShutdownSockets(int port, bool listening, int how) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  int count = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = fcntl(std::atoi(entry->d_name), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) continue;
    int accepting = 0;
    socklen_t size = sizeof(accepting);
    sockaddr_storage peer = {};
    socklen_t peer_size = sizeof(peer);
    const bool match =
        LocalPort(fd) == port &&
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &size) == 0 &&
        (accepting != 0) == listening &&
        (listening || getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_size) == 0);
    if (match && shutdown(fd, how) == 0) ++count;
    close(fd);
  }
  closedir(dir);
  return count;
}

// Whether the peer of connected socket `fd` has closed its side, reset it, or it failed.
bool ClientGone(int fd) {
  pollfd watched{fd, POLLRDHUP, 0};
  return poll(&watched, 1, 0) > 0 && (watched.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace

int WakeForStop(int port) {
  // Listeners first: no connection is accepted after them, so the second pass sees every one.
  const int listeners = ShutdownSockets(port, /*listening=*/true, SHUT_RDWR);
  return listeners + ShutdownSockets(port, /*listening=*/false, SHUT_RD);
}

const char* HttpReason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 429:
      return "Too Many Requests";
    case 456:
      return "Quota Exceeded";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 507:
      return "Insufficient Storage";
  }
  return "Unknown";
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              HttpHandler handler) {
  std::unique_ptr<HttpServer> server(new HttpServer());
  server->options_ = options;
  server->handler_ = std::move(handler);
  mg_init_library(0);
  const std::string threads = absl::StrCat(options.threads);
  const std::string timeout_ms = absl::StrCat(absl::ToInt64Milliseconds(options.timeout));
  const std::string header_bytes = absl::StrCat(options.max_header_bytes);
  const char* config[] = {"listening_ports",
                          options.address.c_str(),
                          "num_threads",
                          threads.c_str(),
                          "request_timeout_ms",
                          timeout_ms.c_str(),
                          "max_request_size",
                          header_bytes.c_str(),
                          "enable_keep_alive",
                          "no",
                          nullptr};
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  callbacks.begin_request = &HttpServer::OnRequest;
  callbacks.log_message = [](const mg_connection*, const char*) { return 1; };  // quiet
  server->context_ = mg_start(&callbacks, server.get(), config);
  if (server->context_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve HTTP on ", options.address,
                     " (the port is in use, or the host is not an address of this machine)"));
  }
  mg_server_port ports[4];
  const int n = mg_get_server_ports(server->context_, 4, ports);
  if (n <= 0) return absl::UnavailableError(absl::StrCat("cannot listen on ", options.address));
  server->port_ = ports[0].port;
  const int slow = options.max_slow_per_address <= 0
                       ? 0
                       : std::min(options.max_slow_per_address, std::max(1, options.threads / 4));
  auto guard = std::make_unique<SlowClientGuard>(server->port_, slow);
  absl::MutexLock lock(&server->mu_);
  server->slow_clients_ = std::move(guard);
  return server;
}

HttpServer::~HttpServer() {
  if (context_ == nullptr) return;
  WakeForStop(port_);
  mg_stop(context_);
}

HttpServer::BodyRead HttpServer::ReadBody(mg_connection* connection, const mg_request_info* info,
                                          int64_t limit, std::string* body) {
  // civetweb reads Content-Length and chunked bodies alike; the watchdog ends a read that is
  // still going at the deadline (see read_watchdog.h).
  // A client that asks before sending its body (curl does for large ones) would wait for a
  // second or more: civetweb answers "Expect: 100-continue" only for its own file handlers.
  const char* expect = mg_get_header(connection, "Expect");
  if (expect != nullptr && absl::EqualsIgnoreCase(expect, "100-continue")) {
    mg_printf(connection, "HTTP/1.1 100 Continue\r\n\r\n");
  }
  const int fd = FindConnectionSocket(info->remote_addr, info->remote_port, info->server_port);
  const uint64_t ticket = fd >= 0 ? watchdog_.Arm(fd, absl::Now() + options_.timeout) : 0;
  BodyRead result = BodyRead::kComplete;
  char buffer[16384];
  for (;;) {
    const int n = mg_read(connection, buffer, sizeof(buffer));
    if (n < 0) result = BodyRead::kFailed;
    if (n <= 0) break;
    if (static_cast<int64_t>(body->size()) + n > limit) {
      result = BodyRead::kTooLarge;
      break;
    }
    body->append(buffer, static_cast<size_t>(n));
  }
  if (ticket != 0 && watchdog_.Disarm(ticket)) result = BodyRead::kTooSlow;
  return result;
}

void HttpServer::Drain(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_progress_ == 0; };
  mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

int HttpServer::OnRequest(mg_connection* connection) {
  auto* self = static_cast<HttpServer*>(mg_get_user_data(mg_get_context(connection)));
  const mg_request_info* info = mg_get_request_info(connection);
  const std::string peer = info->remote_addr;
  SlowClientGuard* guard = nullptr;
  {
    absl::MutexLock lock(&self->mu_);
    ++self->in_progress_;
    guard = self->slow_clients_.get();
  }
  if (guard != nullptr) guard->Enter(peer, info->remote_port);
  // No exception may cross civetweb's C frames: anything unexpected is a 500.
  try {
    self->Serve(connection);
  } catch (...) {
    Write(connection, {500, "application/json", ErrorJson("internal error")});
  }
  if (guard != nullptr) guard->Leave(peer, info->remote_port);
  absl::MutexLock lock(&self->mu_);
  --self->in_progress_;
  return 1;  // answered: civetweb does nothing more with this request
}

void HttpServer::Serve(mg_connection* connection) {
  const mg_request_info* info = mg_get_request_info(connection);
  HttpRequest request;
  request.method = info->request_method != nullptr ? info->request_method : "";
  request.path = info->local_uri != nullptr ? info->local_uri : "";
  request.query = info->query_string != nullptr ? info->query_string : "";
  request.content_type = Header(connection, "Content-Type");
  request.authorization = Header(connection, "Authorization");
  request.host = Header(connection, "Host");
  request.remote_address = info->remote_addr;
  request.client_gone = [remote = request.remote_address, remote_port = info->remote_port,
                         local_port = info->server_port, fd = std::make_shared<int>(-2)] {
    if (*fd == -2) *fd = FindConnectionSocket(remote, remote_port, local_port);
    return *fd >= 0 && ClientGone(*fd);
  };
  // Browsers: refused before the body is read; a preflight is answered here.
  const std::string origin = Header(connection, "Origin");
  if (const std::string refusal = BrowserRefusal(options_.browsers, request.host, origin);
      !refusal.empty()) {
    Write(connection, {403, "application/json", ErrorJson(refusal)});
    return;
  }
  const std::string cors = CorsHeaders(options_.browsers, request.host, origin);
  if (request.method == "OPTIONS") {
    Write(connection, {204, "text/plain", ""}, cors);
    return;
  }
  if (HasBody(request.method)) {
    const auto bound = options_.path_max_body_bytes.find(request.path);
    const int64_t limit =
        bound == options_.path_max_body_bytes.end() ? options_.max_body_bytes : bound->second;
    const std::string too_large =
        ErrorJson(absl::StrCat("the body is larger than ", limit, " bytes"));
    if (info->content_length > limit) {
      Write(connection, {413, "application/json", too_large});
      return;
    }
    switch (ReadBody(connection, info, limit, &request.body)) {
      case BodyRead::kComplete:
        break;
      case BodyRead::kTooLarge:
        Write(connection, {413, "application/json", too_large});
        return;
      case BodyRead::kTooSlow:
        Write(connection, {408, "application/json", ErrorJson("the body arrived too slowly")});
        return;
      case BodyRead::kFailed:
        return;  // the connection failed: nobody to answer
    }
  }
  Write(connection, handler_(request), cors);
}

}  // namespace glossa::server
