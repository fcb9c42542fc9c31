// The clients of --auth_token_file: a name and a secret bearer token each. A request that
// presents a client's token is that client's; its name (never the token) is what the request
// log, the request metrics' `client` label and the per-client rate limit use.
//
// The file is either one bare token (surrounding whitespace ignored; the client is "default"),
// or lines "NAME TOKEN" (separated by spaces or tabs), '#' starting a comment line and blank
// lines skipped. A name is 1 to 64 letters, digits, '.', '_' or '-' ("anonymous" is taken: it
// labels requests that present no client's token); a token is visible ASCII. Errors name the
// line, never its content: a line may hold a token.
#ifndef GLOSSA_SERVER_COMMON_CLIENT_TOKENS_H_
#define GLOSSA_SERVER_COMMON_CLIENT_TOKENS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace glossa::server {

// The client of requests that present no client's token: every request when no token is
// required, and those refused or on open routes otherwise. Client id 0.
inline constexpr absl::string_view kAnonymousClient = "anonymous";
// The client of a file that holds one bare token.
inline constexpr absl::string_view kDefaultClient = "default";
// Most clients one file may name: each is a label value of glossa_requests_total.
inline constexpr int kMaxClients = 256;
inline constexpr size_t kMaxClientNameBytes = 64;

class ClientTokens {
 public:
  // No clients: no token is required.
  ClientTokens() = default;
  // The clients the file's text names; INVALID_ARGUMENT "line N: ..." for a malformed line, a
  // name or token given twice, more than kMaxClients clients, or a text without any token.
  static absl::StatusOr<ClientTokens> Parse(absl::string_view text);

  // The id (1..size()) of the client whose token `presented` is; 0 when it is no client's.
  // Every token is compared, each in time that depends on the presented length only.
  int Find(absl::string_view presented) const;
  // Clients configured (0: no token required).
  int size() const { return static_cast<int>(tokens_.size()); }
  bool empty() const { return tokens_.empty(); }
  // A client's name by id; id 0 (and any id out of range) is kAnonymousClient.
  absl::string_view name(int id) const;
  // Every client's name, by id (index 0 holds kAnonymousClient).
  std::vector<std::string> names() const;

 private:
  absl::Status Add(int line, absl::string_view name, absl::string_view token);

  std::vector<std::string> names_;   // by id - 1
  std::vector<std::string> tokens_;  // by id - 1
  std::vector<int> lines_;           // the line each client is on, by id - 1
};

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_COMMON_CLIENT_TOKENS_H_
