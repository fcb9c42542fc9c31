#include "common/server_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <thread>

namespace glossa::testing {

ServerProcess::ServerProcess(const std::string& binary, const std::vector<std::string>& args) {
  int fds[2];
  if (pipe(fds) != 0) return;
  pid_ = fork();
  if (pid_ == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<std::string> all = {binary, "--listen", "127.0.0.1:0"};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(fds[1]);
  stdout_fd_ = fds[0];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  const std::regex listening("listening on 127\\.0\\.0\\.1:([0-9]+)");
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{stdout_fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(stdout_fd_, buf, sizeof(buf));
    if (n <= 0) break;  // the server exited
    output_.append(buf, n);
    std::smatch m;
    if (std::regex_search(output_, m, listening)) {
      port_ = std::stoi(m[1]);
      break;
    }
  }
  fcntl(stdout_fd_, F_SETFL, O_NONBLOCK);
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0 && !reaped_) {
    Signal(SIGTERM);
    if (Wait(20) == -1 && !reaped_) {
      kill(pid_, SIGKILL);
      Wait(5);
    }
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

void ServerProcess::Signal(int signal) {
  if (pid_ > 0 && !reaped_) kill(pid_, signal);
}

int ServerProcess::Wait(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int>(timeout_s * 1000));
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      char buf[4096];
      ssize_t n;
      while ((n = read(stdout_fd_, buf, sizeof(buf))) > 0) output_.append(buf, n);
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

long ServerProcess::RssKb() const {
  std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

}  // namespace glossa::testing
