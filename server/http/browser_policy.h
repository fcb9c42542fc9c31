// What web browsers may do with the HTTP API. A page the server's user opens on another site can
// send requests to a server on that user's machine or network: with CORS, and without it as
// "simple" requests (a form POST) whose answer the page cannot read but whose effect happens,
// and through DNS rebinding, where the other site's name resolves to the server's address. So:
//  - a request whose Origin is neither the server's own nor one of cors_origins is refused (403)
//    before its body is read; clients that are not browsers send no Origin;
//  - CORS headers go only to the origins in cors_origins ("*": any);
//  - with check_host (a server on loopback), the Host header must name the machine (localhost,
//    127.0.0.1, [::1]) or one of allowed_hosts: another name is a rebinding.
#ifndef GLOSSA_SERVER_HTTP_BROWSER_POLICY_H_
#define GLOSSA_SERVER_HTTP_BROWSER_POLICY_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace glossa::server {

struct BrowserPolicy {
  std::vector<std::string> cors_origins;   // "https://app.example"; "*": every origin
  std::vector<std::string> allowed_hosts;  // host names accepted besides the loopback ones
  bool check_host = false;
};

// Why a request with these Host and Origin headers ("" when absent) is refused: a 403's message;
// "" when it may be served.
std::string BrowserRefusal(const BrowserPolicy& policy, absl::string_view host,
                           absl::string_view origin);

// The CORS headers (each ending in CRLF) for a request from `origin`: none for a request without
// one, or from the server's own origin, or from an origin not in cors_origins.
std::string CorsHeaders(const BrowserPolicy& policy, absl::string_view host,
                        absl::string_view origin);

// "127.0.0.1", "localhost", "::1" and the like: whether `host` (an address without its port)
// names this machine's loopback.
bool IsLoopbackHost(absl::string_view host);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_HTTP_BROWSER_POLICY_H_
