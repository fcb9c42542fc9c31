// --auth_token_file's clients: the file's two forms, its refusals (by line, never quoting a
// token), and the lookup of a presented token.
#include "server/common/client_tokens.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace glossa::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ClientTokensTest, OneBareTokenIsTheDefaultClient) {
  for (const char* text : {"s3cret\n", "  s3cret  ", "# the token\n\ns3cret\r\n"}) {
    absl::StatusOr<ClientTokens> clients = ClientTokens::Parse(text);
    ASSERT_TRUE(clients.ok()) << clients.status();
    EXPECT_EQ(clients->size(), 1);
    EXPECT_EQ(clients->name(1), "default");
    EXPECT_EQ(clients->Find("s3cret"), 1);
    EXPECT_EQ(clients->Find("s3cre"), 0);
    EXPECT_EQ(clients->Find("s3crett"), 0);
    EXPECT_EQ(clients->Find(""), 0);
  }
}

TEST(ClientTokensTest, NamedClientsByLine) {
  absl::StatusOr<ClientTokens> clients = ClientTokens::Parse(
      "# clients\n"
      "alice   token-a\n"
      "\n"
      "  # indented comment\n"
      "bob\ttoken-b\r\n"
      "ci.runner_2 token-c\n");
  ASSERT_TRUE(clients.ok()) << clients.status();
  EXPECT_EQ(clients->size(), 3);
  EXPECT_EQ(clients->Find("token-a"), 1);
  EXPECT_EQ(clients->Find("token-b"), 2);
  EXPECT_EQ(clients->Find("token-c"), 3);
  EXPECT_EQ(clients->Find("alice"), 0);  // a name is not a token
  EXPECT_EQ(clients->Find("token-"), 0);
  EXPECT_EQ(clients->name(0), "anonymous");
  EXPECT_EQ(clients->name(2), "bob");
  EXPECT_EQ(clients->name(4), "anonymous");
  EXPECT_EQ(clients->names(),
            (std::vector<std::string>{"anonymous", "alice", "bob", "ci.runner_2"}));
}

TEST(ClientTokensTest, MalformedFilesNameTheLineNeverTheToken) {
  const std::string t = "TOPSECRET";
  const std::pair<std::string, std::string> cases[] = {
      {"alice " + t + "1\nalice " + t + "2\n", "line 2: the client's name is that of line 1"},
      {"alice " + t + "1\n# c\nbob " + t + "1\n", "line 3: the token is that of line 1"},
      {"alice " + t + "1\nbob " + t + "2 more\n", "line 2: expected 'NAME TOKEN', found 3"},
      {"alice " + t + "1\n" + t + "2\n", "line 2: expected 'NAME TOKEN', found 1"},
      {t + "1 alice bob\n", "line 1: expected 'NAME TOKEN', found 3"},
      {"anonymous " + t + "1\n", "line 1: a client's name is"},
      {"a/b " + t + "1\n", "line 1: a client's name is"},
      {std::string(65, 'n') + " " + t + "1\n", "line 1: a client's name is"},
      {"alice " + t + "\x01\n", "line 1: a token is visible ASCII"},
      {"alice " + t + "\xc3\xa9\n", "line 1: a token is visible ASCII"},
      {"", "holds no token"},
      {"\n  \n# only comments\n", "holds no token"},
  };
  for (const auto& [text, message] : cases) {
    absl::StatusOr<ClientTokens> clients = ClientTokens::Parse(text);
    ASSERT_FALSE(clients.ok()) << text;
    EXPECT_EQ(clients.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(clients.status().message()), HasSubstr(message)) << text;
    EXPECT_THAT(std::string(clients.status().message()), Not(HasSubstr(t))) << text;
  }
}

TEST(ClientTokensTest, AtMostMaxClients) {
  std::string text;
  for (int i = 0; i <= kMaxClients; ++i) {
    text += "c" + std::to_string(i) + " t" + std::to_string(i) + "\n";
  }
  absl::StatusOr<ClientTokens> clients = ClientTokens::Parse(text);
  ASSERT_FALSE(clients.ok());
  EXPECT_THAT(std::string(clients.status().message()),
              HasSubstr("line " + std::to_string(kMaxClients + 1) + ": more than"));
}

TEST(ClientTokensTest, NoClientsRequireNothing) {
  const ClientTokens none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.Find("anything"), 0);
  EXPECT_EQ(none.names(), std::vector<std::string>{"anonymous"});
}

}  // namespace
}  // namespace glossa::server
