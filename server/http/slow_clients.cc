#include "server/http/slow_clients.h"

#include <sys/socket.h>

#include <algorithm>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "server/http/read_watchdog.h"

namespace glossa::server {
namespace {

// How often the connections are looked at: while none is slow, and while some are.
constexpr absl::Duration kScanIdle = absl::Milliseconds(25);
constexpr absl::Duration kScanBusy = absl::Milliseconds(10);

enum class Waiting { kNothing, kPartOfAHead, kAHead, kABody };

// Whether `bytes` may be the start of a request line: a method (capital letters), then a space.
bool StartsARequest(absl::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size() && i < 16 && bytes[i] >= 'A' && bytes[i] <= 'Z') ++i;
  return i > 0 && (i == bytes.size() || bytes[i] == ' ');
}

// What waits to be read on `fd`: nothing (a thread has read what came), part of a request head
// or a whole one (a connection in civetweb's queue, or one a thread is about to read), or
// body bytes (a thread has read the head and is about to hand the request over).
Waiting WaitingOn(int fd) {
  char buffer[16 << 10];
  const ssize_t n = recv(fd, buffer, sizeof(buffer), MSG_PEEK | MSG_DONTWAIT);
  if (n <= 0) return Waiting::kNothing;
  const absl::string_view bytes(buffer, n);
  if (!StartsARequest(bytes)) return Waiting::kABody;
  return bytes.find("\r\n\r\n") != absl::string_view::npos ? Waiting::kAHead
                                                              : Waiting::kPartOfAHead;
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
  bool busy = false;
  while (!mu_.AwaitWithTimeout(absl::Condition(&stop_), busy ? kScanBusy : kScanIdle)) {
    mu_.Unlock();
    busy = Scan(absl::Now());
    mu_.Lock();
  }
}

bool SlowClientGuard::Scan(absl::Time now) {
  std::set<Peer> handled;
  {
    absl::MutexLock lock(&mu_);
    handled = handled_;
  }
  // Per client address: its connections without a whole head, and whether each is slow by
  // itself (part of a head nobody reads, or nothing to read at a second look).
  std::map<std::string, std::vector<Candidate>> slow;
  std::map<Peer, absl::Time> seen;
  for (const ConnectedSocket& socket : ConnectedSockets(port_)) {
    const Peer peer{socket.peer, socket.peer_port};
    if (handled.count(peer) > 0) continue;
    const Waiting waiting = WaitingOn(socket.fd);
    if (waiting == Waiting::kAHead || waiting == Waiting::kABody) continue;
    auto before = slow_since_.find(peer);
    const absl::Time since = before == slow_since_.end() ? now : before->second;
    seen[peer] = since;
    slow[socket.peer].push_back({since, socket, waiting == Waiting::kPartOfAHead || since < now});
  }
  slow_since_ = std::move(seen);
  for (auto& [address, connections] : slow) Cut(connections);
  return !slow.empty();
}

void SlowClientGuard::Cut(std::vector<Candidate>& connections) {
  // An address that holds its share of slow connections already gets no benefit of the doubt.
  const int surely = static_cast<int>(std::count_if(
      connections.begin(), connections.end(), [](const Candidate& c) { return c.slow; }));
  if (surely < max_per_address_) {
    connections.erase(std::remove_if(connections.begin(), connections.end(),
                                     [](const Candidate& c) { return !c.slow; }),
                      connections.end());
  }
  if (static_cast<int>(connections.size()) <= max_per_address_) return;
  std::sort(connections.begin(), connections.end(),
            [](const Candidate& a, const Candidate& b) { return a.since < b.since; });
  for (size_t i = max_per_address_; i < connections.size(); ++i) {
    const ConnectedSocket& socket = connections[i].socket;
    if (!IsConnectedTo(socket.fd, socket.peer, socket.peer_port)) continue;  // closed since
    shutdown(socket.fd, SHUT_RDWR);
    cut_.fetch_add(1);
  }
}

}  // namespace glossa::server
