// Keeps slow clients from taking every HTTP thread. civetweb serves each connection on a thread
// of its own from the moment it takes it, headers included, so a few hundred connections that
// send their headers a byte at a time (slowloris) or nothing at all would hold every thread
// until --http_timeout, and /health with them.
//
// A thread of its own looks at this server's connections every 25 ms, every 10 ms while some
// have no whole head (civetweb does not expose its sockets: they are found in /proc/self/fd).
// A connection is "slow" while its request head is not complete: not yet handed to the handler
// (Enter/Leave), and neither a whole head (a request in civetweb's queue) nor body bytes (a
// head read, about to be handed over) waiting to be read. Part of a head waiting is slow at
// once; nothing waiting (a thread has read what came) is slow at the second look, since a
// thread that has read a whole head may wait for a core before it hands the request over,
// unless its address holds its share of slow connections already. Each client address may
// keep `max_per_address` slow connections, those seen first; the guard shuts the others down
// (shutdown(2)), and civetweb's read ends at once. A client that sends its request whole, as
// browsers and HTTP libraries do, is never slow. Behind a reverse proxy every client shares
// the proxy's address; proxies send whole heads, so they are not slow either.
#ifndef GLOSSA_SERVER_HTTP_SLOW_CLIENTS_H_
#define GLOSSA_SERVER_HTTP_SLOW_CLIENTS_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/http/read_watchdog.h"

namespace glossa::server {

class SlowClientGuard {
 public:
  // Watches the connections on local port `port`; max_per_address <= 0: watches nothing.
  SlowClientGuard(int port, int max_per_address);
  ~SlowClientGuard();
  SlowClientGuard(const SlowClientGuard&) = delete;
  SlowClientGuard& operator=(const SlowClientGuard&) = delete;

  // The handler has the request of this client connection (its head is read), until Leave.
  void Enter(const std::string& peer, int peer_port);
  void Leave(const std::string& peer, int peer_port);
  // Connections shut down so far.
  int64_t cut() const { return cut_.load(); }

 private:
  using Peer = std::pair<std::string, int>;
  struct Candidate {
    absl::Time since;        // first seen without a whole head
    ConnectedSocket socket;
    bool slow;               // by itself, whatever its address holds
  };
  void Run();
  // One look; true when some connection had no whole head.
  bool Scan(absl::Time now);
  // Shuts down those of one address's connections past its share.
  void Cut(std::vector<Candidate>& connections);

  const int port_;
  const int max_per_address_;
  absl::Mutex mu_;
  std::set<Peer> handled_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::map<Peer, absl::Time> slow_since_;  // the scanning thread's own
  std::atomic<int64_t> cut_{0};
  std::thread thread_;
};

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_HTTP_SLOW_CLIENTS_H_
