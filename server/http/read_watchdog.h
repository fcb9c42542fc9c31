// Cuts off HTTP clients that send their request body too slowly. civetweb's mg_read waits until
// it has as many bytes as asked for, each recv up to the request timeout, so a client trickling
// a byte now and then would hold a server thread for (body size × timeout). At the deadline the
// watchdog shuts the socket's read side (shutdown(SHUT_RD)): the blocked read returns at once
// with what it has, and the handler answers 408. (civetweb bounds the time for headers itself.)
#ifndef GLOSSA_SERVER_HTTP_READ_WATCHDOG_H_
#define GLOSSA_SERVER_HTTP_READ_WATCHDOG_H_

#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace glossa::server {

class ReadWatchdog {
 public:
  ReadWatchdog();
  ~ReadWatchdog();
  ReadWatchdog(const ReadWatchdog&) = delete;
  ReadWatchdog& operator=(const ReadWatchdog&) = delete;

  // Watches `fd` until Disarm. The caller keeps the socket open until then.
  uint64_t Arm(int fd, absl::Time deadline);
  // Stops watching; after it returns the watchdog never touches the socket. True when the
  // deadline had passed and the read side was shut.
  bool Disarm(uint64_t ticket);

 private:
  struct Entry {
    int fd;
    absl::Time deadline;
    bool fired = false;
  };
  void Run();

  absl::Mutex mu_;
  absl::CondVar changed_;
  std::map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// This process's connected TCP sockets whose local port is `local_port`.
struct ConnectedSocket {
  int fd;
  std::string peer;  // the client's address, as inet_ntop writes it
  int peer_port;
};
std::vector<ConnectedSocket> ConnectedSockets(int local_port);
// Whether socket `fd` is connected to this peer (a number may be reused once a socket closes).
bool IsConnectedTo(int fd, absl::string_view peer, int peer_port);

// The socket of this process whose TCP connection has these two ends, found by comparing every
// open socket's peer and local addresses (civetweb does not expose its sockets); -1 if none.
int FindConnectionSocket(absl::string_view remote_addr, int remote_port, int local_port);

}  // namespace glossa::server

#endif  // GLOSSA_SERVER_HTTP_READ_WATCHDOG_H_
