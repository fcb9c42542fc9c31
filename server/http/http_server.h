// A small HTTP/1.1 server over civetweb (the library prometheus-cpp already links for /metrics,
// so the HTTP API adds no new runtime dependency): it reads each request whole, within bounds,
// hands it to one handler function and writes the handler's answer. Every connection is closed
// after one request (no keep-alive), so that an idle client holds a thread at most `timeout`.
#ifndef GLOSSA_SERVER_HTTP_HTTP_SERVER_H_
#define GLOSSA_SERVER_HTTP_HTTP_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/http/browser_policy.h"
#include "server/http/read_watchdog.h"
#include "server/http/slow_clients.h"

struct mg_context;
struct mg_connection;
struct mg_request_info;

namespace glossa::server {

struct HttpRequest {
  std::string method;        // "GET", "POST", ...
  std::string path;          // URL-decoded, without the query
  std::string query;         // raw, without '?'
  std::string content_type;  // the header's value, as sent
  std::string host;          // the Host header, as sent (links back to this server use it)
  std::string authorization;
  std::string body;
  std::string remote_address;  // the client's IP address, as the connection gives it
  // True once the client has closed its side of the connection, reset it, or it failed: for a
  // handler that runs long, to stop working for nobody (it polls the socket; a client that
  // half-closes and still waits reads as gone). Only on the handler's thread.
  std::function<bool()> client_gone = [] { return false; };
};

struct HttpResponse {
  HttpResponse() = default;
  // Most answers: a status, a type and a body (braced, as {404, "application/json", body}).
  HttpResponse(int status, std::string content_type, std::string body)
      : status(status), content_type(std::move(content_type)), body(std::move(body)) {}

  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // A download's "attachment; filename=..." (empty: no Content-Disposition header).
  std::string content_disposition;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  std::string address = "127.0.0.1:8080";  // HOST:PORT; port 0 picks a free one
  int threads = 16;                        // requests served at once (a thread each)
  // Reading a request (headers and body, in total) and each network write; a slower client is
  // disconnected (slowloris).
  absl::Duration timeout = absl::Seconds(30);
  int64_t max_body_bytes = 4 << 20;  // larger bodies: 413, unread
  // Paths whose bodies have their own bound instead (a file upload is larger than a request of
  // texts): exact path -> bytes.
  std::map<std::string, int64_t> path_max_body_bytes;
  int max_header_bytes = 16 << 10;   // the request line and headers together
  // Connections of one client address that may send their request head slowly, or nothing, at
  // once, and never more than a quarter of the threads; the guard cuts the others
  // (slow_clients.h). 0: no guard.
  int max_slow_per_address = 4;
  BrowserPolicy browsers;            // what web pages may call (browser_policy.h)
};

class HttpServer {
 public:
  // Fails (UNAVAILABLE) when it cannot listen at the address.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           HttpHandler handler);
  // Waits until no request is in progress, or until the deadline. For a graceful stop: civetweb
  // can no longer write once it stops, so the answers in progress must be out before that.
  void Drain(absl::Time deadline);
  // Stops listening and waits for the requests in progress (whose answers are then lost). Idle,
  // it returns within milliseconds (see WakeForStop).
  ~HttpServer();
  int port() const { return port_; }

 private:
  HttpServer() = default;
  static int OnRequest(mg_connection* connection);
  void Serve(mg_connection* connection);
  enum class BodyRead { kComplete, kTooLarge, kTooSlow, kFailed };
  BodyRead ReadBody(mg_connection* connection, const mg_request_info* info, int64_t limit,
                    std::string* body);

  HttpServerOptions options_;
  HttpHandler handler_;
  ReadWatchdog watchdog_;
  std::unique_ptr<SlowClientGuard> slow_clients_;
  absl::Mutex mu_;
  int in_progress_ ABSL_GUARDED_BY(mu_) = 0;
  mg_context* context_ = nullptr;
  int port_ = 0;
};

// Wakes a civetweb server's threads for mg_stop: shuts down (shutdown(2), never close) this
// process's TCP sockets on local port `port`, the listening ones entirely, the accepted
// connections' read side. civetweb's threads wait in poll() for up to 2 s at a time (its
// SOCKET_TIMEOUT_QUANTUM): the master thread for new connections, a worker for the head of a
// request on a connection that is open but silent; each sees mg_stop's request only when its
// poll returns, so mg_stop alone takes up to 2 s. A socket that is shut down wakes its poll at
// once (Linux). Call it right before mg_stop, once the answers in progress are out: a request
// still being read then ends, and its answer would be lost in mg_stop anyway; until mg_stop the
// master thread retries at once (its accept fails). Returns how many sockets it shut down.
int WakeForStop(int port);

// The reason phrase of the status codes this server answers with ("OK", "Bad Request", ...).
const char* HttpReason(int status);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_HTTP_HTTP_SERVER_H_
