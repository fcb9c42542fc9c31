// Runs the real glossa-server binary for a test: ephemeral port, stdout captured, stopped (and
// reaped) when the object goes away.
#ifndef GLOSSA_TESTS_COMMON_SERVER_PROCESS_H_
#define GLOSSA_TESTS_COMMON_SERVER_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace glossa::testing {

class ServerProcess {
 public:
  // Starts `binary --listen 127.0.0.1:0 args...` and waits (up to 60 s) for its "listening on"
  // line. ok() tells whether it came.
  ServerProcess(const std::string& binary, const std::vector<std::string>& args);
  ~ServerProcess();

  bool ok() const { return port_ > 0; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& output() const { return output_; }

  void Signal(int signal);
  // Waits for the exit (up to timeout_s) and returns the exit code, or -1 (killed or timed out).
  int Wait(double timeout_s);
  // Resident memory of the server (VmRSS), in KiB.
  long RssKb() const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int stdout_fd_ = -1;
  std::string output_;
  bool reaped_ = false;
};

}  // namespace glossa::testing

#endif  // GLOSSA_TESTS_COMMON_SERVER_PROCESS_H_
