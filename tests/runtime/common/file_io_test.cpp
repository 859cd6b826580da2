// readFile: bytes come back unchanged; a file that cannot be read is an IoError naming it.

#include "runtime/common/file_io.hpp"

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <sys/stat.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/test_support.hpp"

namespace stretch {
namespace {

using ::testing::HasSubstr;

using test::errorOf;

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
  EXPECT_EQ(errorOf<IoError>([&] { readFile(missing); }),
            "cannot read " + missing.string() + ": No such file or directory");
  EXPECT_EQ(errorOf<IoError>([&] { readFile(missing, "cluster preset"); }),
            "cannot read cluster preset " + missing.string() + ": No such file or directory");
  EXPECT_EQ(errorOf<IoError>([&] { readFile(dir.path(), "hostfile"); }),
            "cannot read hostfile " + dir.path().string() + ": Is a directory");
  const auto file = dir.path() / "plain.txt";
  std::ofstream(file) << "x";
  EXPECT_EQ(errorOf<IoError>([&] { readFile(file / "inside.json", "scenario"); }),
            "cannot read scenario " + (file / "inside.json").string() + ": Not a directory");
}

TEST(ReadFileIfExists, AMissingFileIsNulloptAndEverythingElseAsReadFile) {
  test::TempDir dir("file-io");
  ASSERT_FALSE(dir.path().empty());
  EXPECT_EQ(readFileIfExists(dir.path() / "none"), std::nullopt);
  EXPECT_EQ(readFileIfExists(dir.path() / "no-dir" / "none", "tag file"), std::nullopt);
  const auto path = dir.path() / "latest";
  std::ofstream(path) << "global_step7";
  EXPECT_EQ(readFileIfExists(path, "tag file", 4096), std::optional<std::string>("global_step7"));
  EXPECT_THAT(errorOf<IoError>([&] { readFileIfExists(path, "tag file", 5); }),
              HasSubstr("more than the limit of 5 bytes"));
  EXPECT_EQ(errorOf<IoError>([&] { readFileIfExists(dir.path(), "tag file"); }),
            "cannot read tag file " + dir.path().string() + ": Is a directory");
  EXPECT_EQ(errorOf<IoError>([&] { readFileIfExists(path / "inside"); }),
            "cannot read " + (path / "inside").string() + ": Not a directory");
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
  EXPECT_THAT(errorOf<IoError>([&] { readFile(path, "scenario"); }),
              HasSubstr("cannot read scenario " + path.string() + ": Permission denied"));
}

// Devices and FIFOs are refused before a byte is read: /dev/zero used to grow memory until
// std::bad_alloc, and a FIFO without a writer blocked forever.
TEST(ReadFile, DevicesAndFifosAreRefusedAtOnce) {
  test::TempDir dir("file-io");
  ASSERT_FALSE(dir.path().empty());
  EXPECT_EQ(errorOf<IoError>([&] { readFile("/dev/zero", "--config"); }),
            "cannot read --config /dev/zero: it is a character device, not a regular file");
  const auto fifo = (dir.path() / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(errorOf<IoError>([&] { readFile(fifo, "hostfile"); }),
            "cannot read hostfile " + fifo + ": it is a FIFO, not a regular file");
}

TEST(ReadFile, FilesLongerThanTheLimitAreRefusedSayingHowToRaiseIt) {
  test::TempDir dir("file-io");
  ASSERT_FALSE(dir.path().empty());
  const auto path = (dir.path() / "big.json").string();
  std::ofstream(path) << std::string(11, 'x');
  EXPECT_EQ(readFile(path, "scenario", 11), std::string(11, 'x'));
  EXPECT_EQ(errorOf<IoError>([&] { readFile(path, "scenario", 10); }),
            "cannot read scenario " + path +
                ": it is 11 bytes, more than the limit of 10 bytes (set STRETCH_MAX_INPUT_BYTES "
                "to read larger files)");
  EXPECT_EQ(maxInputBytes(), kDefaultMaxInputBytes);
  ::setenv(kMaxInputBytesVariable, "5", 1);
  EXPECT_EQ(maxInputBytes(), 5u);
  EXPECT_THAT(errorOf<IoError>([&] { readFile(path); }),
              HasSubstr("more than the limit of 5 bytes"));
  ::setenv(kMaxInputBytesVariable, "lots", 1);
  EXPECT_THAT(errorOf<IoError>([&] { readFile(path); }), HasSubstr("STRETCH_MAX_INPUT_BYTES"));
  EXPECT_THAT(errorOf<IoError>([&] { readFile(path); }), HasSubstr("lots"));
  ::unsetenv(kMaxInputBytesVariable);
  EXPECT_EQ(readFile(path).size(), 11u);
}

}  // namespace
}  // namespace stretch
