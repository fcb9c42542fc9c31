#include "server/http/slow_clients.h"

#include <sys/socket.h>

#include <algorithm>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "server/http/read_watchdog.h"

namespace glossa::server {
namespace {

constexpr absl::Duration kScanEvery = absl::Milliseconds(25);

// Whether a whole request head waits to be read on `fd` (a connection in civetweb's queue).
bool HeadWaiting(int fd) {
  char head[16 << 10];
  const ssize_t n = recv(fd, head, sizeof(head), MSG_PEEK | MSG_DONTWAIT);
  return n > 0 && absl::string_view(head, n).find("\r\n\r\n") != absl::string_view::npos;
}

}  // namespace

SlowClientGuard::SlowClientGuard(int port, int max_per_address)
    : port_(port), max_per_address_(max_per_address) {
  if (max_per_address_ > 0) thread_ = std::thread([this] { Run(); });
}

SlowClientGuard::~SlowClientGuard() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void SlowClientGuard::Enter(const std::string& peer, int peer_port) {
  absl::MutexLock lock(&mu_);
  handled_.insert({peer, peer_port});
}

void SlowClientGuard::Leave(const std::string& peer, int peer_port) {
  absl::MutexLock lock(&mu_);
  handled_.erase({peer, peer_port});
}

void SlowClientGuard::Run() {
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stop_), kScanEvery)) {
    mu_.Unlock();
    Scan(absl::Now());
    mu_.Lock();
  }
}

void SlowClientGuard::Scan(absl::Time now) {
  const std::vector<ConnectedSocket> sockets = ConnectedSockets(port_);
  std::set<Peer> handled;
  {
    absl::MutexLock lock(&mu_);
    handled = handled_;
  }
  // Per client address: its slow connections, oldest first once sorted.
  std::map<std::string, std::vector<std::pair<absl::Time, const ConnectedSocket*>>> slow;
  std::map<Peer, absl::Time> seen;
  for (const ConnectedSocket& socket : sockets) {
    const Peer peer{socket.peer, socket.peer_port};
    if (handled.count(peer) > 0 || HeadWaiting(socket.fd)) continue;
    auto before = slow_since_.find(peer);
    const absl::Time since = before == slow_since_.end() ? now : before->second;
    seen[peer] = since;
    if (since < now) slow[socket.peer].push_back({since, &socket});  // slow twice in a row
  }
  slow_since_ = std::move(seen);
  for (auto& [address, connections] : slow) {
    if (static_cast<int>(connections.size()) <= max_per_address_) continue;
    std::sort(connections.begin(), connections.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = max_per_address_; i < connections.size(); ++i) {
      const ConnectedSocket& socket = *connections[i].second;
      if (!IsConnectedTo(socket.fd, socket.peer, socket.peer_port)) continue;  // closed since
      shutdown(socket.fd, SHUT_RDWR);
      cut_.fetch_add(1);
    }
  }
}

}  // namespace glossa::server
