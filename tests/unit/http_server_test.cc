// server/http/http_server.h: stopping is prompt (civetweb's threads poll for up to 2 s at a time;
// WakeForStop wakes them), and Drain still lets a request in progress be answered first.
#include "server/http/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace glossa::server {
namespace {

// Far below civetweb's 2 s poll, far above what a stop costs on a loaded machine (milliseconds).
constexpr absl::Duration kPromptStop = absl::Seconds(1);

std::unique_ptr<HttpServer> StartServer(HttpHandler handler) {
  HttpServerOptions options;
  options.address = "127.0.0.1:0";
  options.threads = 4;
  auto server = HttpServer::Start(options, std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

HttpResponse Ok(const HttpRequest&) { return {200, "application/json", "{}"}; }

// A connected client socket (-1 on failure).
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Everything the server sends until it closes the connection.
std::string ReadAll(int fd) {
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) out.append(buffer, n);
  return out;
}

absl::Duration TimeToDestroy(std::unique_ptr<HttpServer> server) {
  const absl::Time start = absl::Now();
  server.reset();
  return absl::Now() - start;
}

TEST(HttpServerStopTest, IdleServerStopsAtOnce) {
  // Right after Start the master thread has just begun a 2 s poll: without the wake-up this
  // takes about 2 s every time.
  for (int i = 0; i < 2; ++i) {
    auto server = StartServer(&Ok);
    ASSERT_NE(server, nullptr);
    EXPECT_LT(TimeToDestroy(std::move(server)), kPromptStop);
  }
}

TEST(HttpServerStopTest, SilentConnectionDoesNotHoldTheStop) {
  auto server = StartServer(&Ok);
  ASSERT_NE(server, nullptr);
  const int fd = Connect(server->port());
  ASSERT_GE(fd, 0);
  const std::string partial = "GET / HTTP/1.1\r\n";  // the head never ends
  ASSERT_EQ(send(fd, partial.data(), partial.size(), 0), static_cast<ssize_t>(partial.size()));
  absl::SleepFor(absl::Milliseconds(200));  // a worker is now waiting for the rest of the head
  EXPECT_LT(TimeToDestroy(std::move(server)), kPromptStop);
  close(fd);
}

TEST(HttpServerStopTest, WakeForStopShutsTheListenerAndConnections) {
  auto server = StartServer(&Ok);
  ASSERT_NE(server, nullptr);
  const int fd = Connect(server->port());
  ASSERT_GE(fd, 0);
  absl::SleepFor(absl::Milliseconds(200));  // accepted
  EXPECT_EQ(WakeForStop(server->port()), 2);  // the listener and the accepted connection
  EXPECT_EQ(ReadAll(fd), "");                 // closed without an answer
  close(fd);
  EXPECT_EQ(Connect(server->port()), -1);  // nobody listens any more
  EXPECT_EQ(WakeForStop(0), 0);
}

TEST(HttpServerStopTest, DrainAnswersTheRequestInProgressBeforeTheStop) {
  absl::Notification entered, release;
  auto server = StartServer([&](const HttpRequest&) {
    entered.Notify();
    release.WaitForNotification();
    return HttpResponse{200, "application/json", "{\"done\":true}"};
  });
  ASSERT_NE(server, nullptr);
  const int fd = Connect(server->port());
  ASSERT_GE(fd, 0);
  const std::string request = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string answer;
  std::thread client([&] { answer = ReadAll(fd); });
  entered.WaitForNotification();
  std::thread finish([&] {
    absl::SleepFor(absl::Milliseconds(300));
    release.Notify();
  });
  server->Drain(absl::Now() + absl::Seconds(30));  // returns once the answer is out
  EXPECT_TRUE(release.HasBeenNotified());
  EXPECT_LT(TimeToDestroy(std::move(server)), kPromptStop);
  finish.join();
  client.join();
  close(fd);
  EXPECT_EQ(answer.substr(0, 15), "HTTP/1.1 200 OK") << answer;
  EXPECT_NE(answer.find("{\"done\":true}"), std::string::npos) << answer;
}

}  // namespace
}  // namespace glossa::server
