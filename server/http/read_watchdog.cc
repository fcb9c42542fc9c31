#include "server/http/read_watchdog.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <string>

namespace glossa::server {
namespace {

// The address and port of a socket address, as civetweb prints them.
bool Describe(const sockaddr_storage& address, std::string* host, int* port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    *port = ntohs(in->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    *port = ntohs(in6->sin6_port);
  } else {
    return false;
  }
  *host = text;
  return true;
}

}  // namespace

ReadWatchdog::ReadWatchdog() : thread_([this] { Run(); }) {}

ReadWatchdog::~ReadWatchdog() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    changed_.Signal();
  }
  thread_.join();
}

uint64_t ReadWatchdog::Arm(int fd, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  const uint64_t ticket = next_ticket_++;
  entries_[ticket] = Entry{fd, deadline};
  changed_.Signal();
  return ticket;
}

bool ReadWatchdog::Disarm(uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(ticket);
  if (it == entries_.end()) return false;
  const bool fired = it->second.fired;
  entries_.erase(it);
  return fired;
}

void ReadWatchdog::Run() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    absl::Time next = absl::InfiniteFuture();
    const absl::Time now = absl::Now();
    for (auto& [ticket, entry] : entries_) {
      if (entry.fired) continue;
      if (entry.deadline <= now) {
        // Under the lock: Disarm cannot return, so the caller cannot close the socket, meanwhile.
        shutdown(entry.fd, SHUT_RD);
        entry.fired = true;
      } else {
        next = std::min(next, entry.deadline);
      }
    }
    changed_.WaitWithDeadline(&mu_, next);
  }
}

std::vector<ConnectedSocket> ConnectedSockets(int local_port) {
  std::vector<ConnectedSocket> out;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return out;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::atoi(entry->d_name);
    sockaddr_storage peer = {}, local = {};
    socklen_t peer_size = sizeof(peer), local_size = sizeof(local);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0) {
      continue;  // not a connected socket
    }
    ConnectedSocket socket{fd, "", 0};
    std::string local_host;
    int port = 0;
    if (Describe(local, &local_host, &port) && port == local_port &&
        Describe(peer, &socket.peer, &socket.peer_port)) {
      out.push_back(std::move(socket));
    }
  }
  closedir(dir);
  return out;
}

bool IsConnectedTo(int fd, absl::string_view peer, int peer_port) {
  sockaddr_storage address = {};
  socklen_t size = sizeof(address);
  std::string host;
  int port = 0;
  return getpeername(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0 &&
         Describe(address, &host, &port) && port == peer_port && host == peer;
}

int FindConnectionSocket(absl::string_view remote_addr, int remote_port, int local_port) {
  for (const ConnectedSocket& socket : ConnectedSockets(local_port)) {
    if (socket.peer_port == remote_port && socket.peer == remote_addr) return socket.fd;
  }
  return -1;
}

}  // namespace glossa::server
