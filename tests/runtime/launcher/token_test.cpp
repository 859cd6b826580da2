// The store token's file for pdsh agents (token.hpp): private directories and file, the token
// inside, never written through an existing link, gone with its owner.

#include "runtime/launcher/token.hpp"

#include <cstdlib>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"
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

}  // namespace
