// readFile: bytes come back unchanged; a file that cannot be read is an IoError naming it.

#include "runtime/common/file_io.hpp"

#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "tests/runtime/common/io_error_support.hpp"
#include "tests/support/test_support.hpp"

namespace stretch {
namespace {

using ::testing::HasSubstr;

using test::ioError;

TEST(ReadFile, ReturnsTheBytesUnchanged) {
  test::TempDir dir("file-io");
  ASSERT_FALSE(dir.path().empty());
  const auto path = dir.path() / "data.bin";
  std::string bytes = "line 1\r\nline 2\n";
  bytes += std::string("\0\xff\x01", 3);
  bytes += std::string(200'000, 'x');  // more than one read buffer
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_EQ(readFile(path), bytes);

  const auto empty = dir.path() / "empty.json";
  { std::ofstream create(empty); }
  EXPECT_EQ(readFile(empty, "job file"), "");
}

TEST(ReadFile, MissingFilesAndDirectoriesAreIoErrorsNamingThePath) {
  test::TempDir dir("file-io");
  ASSERT_FALSE(dir.path().empty());
  const auto missing = dir.path() / "none.json";
  EXPECT_EQ(ioError([&] { readFile(missing); }),
            "cannot read " + missing.string() + ": No such file or directory");
  EXPECT_EQ(ioError([&] { readFile(missing, "cluster preset"); }),
            "cannot read cluster preset " + missing.string() + ": No such file or directory");
  EXPECT_EQ(ioError([&] { readFile(dir.path(), "hostfile"); }),
            "cannot read hostfile " + dir.path().string() + ": Is a directory");
  const auto file = dir.path() / "plain.txt";
  std::ofstream(file) << "x";
  EXPECT_EQ(ioError([&] { readFile(file / "inside.json", "scenario"); }),
            "cannot read scenario " + (file / "inside.json").string() + ": Not a directory");
}

TEST(ReadFile, UnreadableFilesNameTheReason) {
  test::TempDir dir("file-io");
  ASSERT_FALSE(dir.path().empty());
  const auto path = dir.path() / "secret.json";
  std::ofstream(path) << "{}";
  std::filesystem::permissions(path, std::filesystem::perms::none);
  std::ifstream probe(path);
  if (probe.is_open()) {
    GTEST_SKIP() << "running with privileges that read any file";
  }
  EXPECT_THAT(ioError([&] { readFile(path, "scenario"); }),
              HasSubstr("cannot read scenario " + path.string() + ": Permission denied"));
}

}  // namespace
}  // namespace stretch
