// The store token's file for pdsh agents (token.hpp): private directories and file, the token
// inside, never written through an existing link, gone with its owner.

#include "runtime/launcher/token.hpp"

#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/launcher/node_agent.hpp"
#include "tests/support/test_support.hpp"

namespace {

mode_t modeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

class TokenFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* home = std::getenv("HOME"))
      savedHome_ = home;
    ::setenv("HOME", home_.path().c_str(), 1);
  }
  void TearDown() override { ::setenv("HOME", savedHome_.c_str(), 1); }
  stretch::test::TempDir home_{"stretch-token-home"};
  std::string savedHome_;
};

TEST_F(TokenFileTest, IsPrivateHoldsTheTokenAndGoesAwayWithItsOwner) {
  std::string path;
  {
    const stretch::launcher::TokenFile file("s3cret");
    path = file.path();
    EXPECT_EQ(path.rfind(home_.path().string() + "/.stretch/tokens/job-", 0), 0u) << path;
    EXPECT_EQ(stretch::readFile(path), "s3cret\n");
    EXPECT_EQ(modeOf(path), 0600u);
    EXPECT_EQ(modeOf(home_.path().string() + "/.stretch"), 0700u);
    EXPECT_EQ(modeOf(home_.path().string() + "/.stretch/tokens"), 0700u);
  }
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

TEST_F(TokenFileTest, AnExistingLinkIsReplacedNotWrittenThrough) {
  const std::string target = (home_.path() / "victim").string();
  const std::string link = (home_.path() / "token").string();
  stretch::launcher::writePrivateFile(target, "keep\n");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  stretch::launcher::writePrivateFile(link, "tok\n");
  EXPECT_EQ(stretch::readFile(target), "keep\n");
  EXPECT_EQ(stretch::readFile(link), "tok\n");
  EXPECT_EQ(modeOf(link), 0600u);
}

TEST_F(TokenFileTest, AGroupReadableTokenDirectoryIsMadePrivateAndNoHomeIsAnError) {
  ASSERT_EQ(::mkdir((home_.path() / ".stretch").c_str(), 0755), 0);
  { const stretch::launcher::TokenFile file("t"); }
  EXPECT_EQ(modeOf(home_.path().string() + "/.stretch"), 0700u);
  ::unsetenv("HOME");
  EXPECT_THROW(stretch::launcher::TokenFile("t"), stretch::IoError);
}

// A token a user chooses needs 16 characters other than whitespace (issue 42, item 10: 16
// spaces were accepted); the error names where the token came from and never the token.
TEST(TokenStrength, ShortBlankAndPaddedTokensAreRefusedNamingTheirSource) {
  using stretch::launcher::checkTokenStrength;
  const auto message = [](const std::string& token, const std::string& source) -> std::string {
    try {
      checkTokenStrength(token, source);
    } catch (const stretch::ConfigError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(message("short", "STRETCH_STORE_TOKEN"),
            "STRETCH_STORE_TOKEN = a token of 5 character(s): expected at least 16 characters, "
            "e.g. `openssl rand -hex 16`");
  EXPECT_EQ(message(std::string(16, ' '), "STRETCH_STORE_TOKEN"),
            "STRETCH_STORE_TOKEN = a token of 16 character(s), all whitespace: expected at least "
            "16 characters other than whitespace (spaces, tabs, line breaks), e.g. `openssl rand "
            "-hex 16`");
  EXPECT_EQ(message(" \t\n\v\f\r          ", "--token_stdin"),
            "--token_stdin = a token of 16 character(s), all whitespace: expected at least 16 "
            "characters other than whitespace (spaces, tabs, line breaks), e.g. `openssl rand -hex "
            "16`");
  EXPECT_EQ(message("abc" + std::string(20, ' '), "--token_file"),
            "--token_file = a token of 23 character(s), 20 of them whitespace: expected at least "
            "16 characters other than whitespace (spaces, tabs, line breaks), e.g. `openssl rand "
            "-hex 16`");
  EXPECT_EQ(message("0123456789abcdef", "STRETCH_STORE_TOKEN"), "accepted");
  EXPECT_EQ(message("correct horse battery staple", "STRETCH_STORE_TOKEN"), "accepted");
  EXPECT_EQ(message(stretch::launcher::randomToken(), "STRETCH_STORE_TOKEN"), "accepted");
}

// `stretch agent`'s token (joinJob) is checked before anything connects, and a weak one is
// named by where it came from: STRETCH_STORE_TOKEN or --token_stdin (they used to be called
// "--token", a flag that does not exist), and --token_file by its file (it used to say only
// "--token_file").
TEST(TokenStrength, AnAgentsWeakTokenIsNamedByWhereItCameFrom) {
  const auto message = [](stretch::launcher::JoinRequest request) -> std::string {
    request.rdzv = "127.0.0.1:1";  // never reached: the token is refused first
    request.nodeRank = 0;
    try {
      stretch::launcher::joinJob(request);
    } catch (const stretch::ConfigError& e) {
      return e.what();
    }
    return "accepted";
  };
  stretch::launcher::JoinRequest fromEnv;
  fromEnv.token = "short";
  EXPECT_EQ(message(fromEnv),
            "STRETCH_STORE_TOKEN = a token of 5 character(s): expected at least 16 characters, "
            "e.g. `openssl rand -hex 16`");
  stretch::launcher::JoinRequest fromStdin;
  fromStdin.token = std::string(16, ' ');
  fromStdin.tokenSource = "--token_stdin";
  EXPECT_EQ(
      message(fromStdin).rfind("--token_stdin = a token of 16 character(s), all whitespace", 0), 0u)
      << message(fromStdin);

  stretch::test::TempDir dir("stretch-token-file");
  const std::string file = (dir.path() / "job_token").string();
  std::ofstream(file) << "abc\n";
  stretch::launcher::JoinRequest fromFile;
  fromFile.tokenFile = file;
  EXPECT_EQ(message(fromFile),
            "--token_file = " + file +
                ": expected a file whose first line is the job's token, at least 16 characters, "
                "e.g. `openssl rand -hex 16` (it holds a token of 3 character(s))");
}

}  // namespace
