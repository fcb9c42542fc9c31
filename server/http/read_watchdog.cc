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

int FindConnectionSocket(absl::string_view remote_addr, int remote_port, int local_port) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::atoi(entry->d_name);
    sockaddr_storage peer = {}, local = {};
    socklen_t peer_size = sizeof(peer), local_size = sizeof(local);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) != 0) {
      continue;  // not a connected socket
    }
    std::string peer_host, local_host;
    int peer_port = 0, port = 0;
    if (Describe(peer, &peer_host, &peer_port) && Describe(local, &local_host, &port) &&
        peer_port == remote_port && port == local_port && peer_host == remote_addr) {
      found = fd;
      break;
    }
  }
  closedir(dir);
  return found;
}

}  // namespace glossa::server
