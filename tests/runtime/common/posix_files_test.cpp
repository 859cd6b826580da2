// runtime/common/posix_files: path strings, queries, mkdir -p, rm -rf, rename, atomic writes, and
// IoErrors that name the path and the system's reason. (That none of it calls std::filesystem is
// fs_trap_test's job, tests/runtime/engine.)

#include "runtime/common/posix_files.hpp"

#include <fstream>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/test_support.hpp"

namespace stretch {
namespace {

using ::testing::HasSubstr;

using test::errorOf;

// A scratch directory as a string path.
struct Scratch {
  test::TempDir dir{"posix-files"};
  std::string root = dir.path().native();
  std::string operator/(const std::string& relative) const { return joinPath(root, relative); }
};

TEST(PathStrings, JoinParentAndFileName) {
  EXPECT_EQ(joinPath("a", "b"), "a/b");
  EXPECT_EQ(joinPath("a/", "b"), "a/b");
  EXPECT_EQ(joinPath("/", "b"), "/b");
  EXPECT_EQ(joinPath("", "b"), "b");
  EXPECT_EQ(joinPath("a", ""), "a");
  EXPECT_EQ(joinPath("a", "/abs"), "/abs");
  EXPECT_EQ(joinPath("a", "b/c"), "a/b/c");

  EXPECT_EQ(parentPath("a/b/c"), "a/b");
  EXPECT_EQ(parentPath("a//b"), "a");
  EXPECT_EQ(parentPath("/a"), "/");
  EXPECT_EQ(parentPath("a"), "");
  EXPECT_EQ(parentPath("a/"), "a");
  EXPECT_EQ(parentPath(""), "");

  EXPECT_EQ(fileName("a/b.pt"), "b.pt");
  EXPECT_EQ(fileName("b.pt"), "b.pt");
  EXPECT_EQ(fileName("a/"), "");
  EXPECT_EQ(fileName("/"), "");
}

TEST(PosixFiles, QueriesFollowWhatIsThere) {
  Scratch s;
  ASSERT_FALSE(s.root.empty());
  std::ofstream(s / "f") << "12345";
  ASSERT_EQ(::mkdir((s / "d").c_str(), 0777), 0);
  ASSERT_EQ(::symlink("f", (s / "link").c_str()), 0);
  EXPECT_TRUE(pathExists(s / "f"));
  EXPECT_TRUE(isRegularFile(s / "f"));
  EXPECT_FALSE(isDirectory(s / "f"));
  EXPECT_TRUE(isDirectory(s / "d"));
  EXPECT_FALSE(isRegularFile(s / "d"));
  EXPECT_TRUE(isRegularFile(s / "link"));  // stat follows links
  EXPECT_FALSE(pathExists(s / "none"));
  EXPECT_FALSE(pathExists(s / "f/below"));
  EXPECT_FALSE(pathExists(""));
  EXPECT_EQ(fileSize(s / "f"), 5u);
  EXPECT_EQ(fileSize(s / "link"), 5u);
  EXPECT_EQ(errorOf<IoError>([&] { fileSize(s / "none"); }),
            "cannot get the size of '" + (s / "none") + "': No such file or directory");
  EXPECT_THAT(errorOf<IoError>([&] { fileSize(s / "d"); }), HasSubstr("Is a directory"));
  EXPECT_EQ(listDirectory(s.root), (std::vector<std::string>{"d", "f", "link"}));
  EXPECT_TRUE(listDirectory(s / "d").empty());
  EXPECT_EQ(errorOf<IoError>([&] { listDirectory(s / "none"); }),
            "cannot open directory '" + (s / "none") + "': No such file or directory");
}

TEST(PosixFiles, MakeDirectoriesIsMkdirP) {
  Scratch s;
  ASSERT_FALSE(s.root.empty());
  makeDirectories(s / "a/b//c/");
  EXPECT_TRUE(isDirectory(s / "a/b/c"));
  makeDirectories(s / "a/b/c");  // nothing to do
  makeDirectories(s / "a/./b/../x");
  EXPECT_TRUE(isDirectory(s / "a/x"));
  std::ofstream(s / "a/file") << "x";
  EXPECT_EQ(errorOf<IoError>([&] { makeDirectories(s / "a/file"); }),
            "cannot create directory '" + (s / "a/file") + "': Not a directory");
  EXPECT_EQ(errorOf<IoError>([&] { makeDirectories(s / "a/file/sub/deeper"); }),
            "cannot create directory '" + (s / "a/file/sub/deeper") + "': '" + (s / "a/file") +
                "': Not a directory");
  EXPECT_THAT(errorOf<IoError>([] { makeDirectories(""); }), HasSubstr("expected a path"));
  // Threads racing to create the same tree all succeed.
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] { makeDirectories(s / "race/x/y/z"); });
  for (auto& t : threads)
    t.join();
  EXPECT_TRUE(isDirectory(s / "race/x/y/z"));
}

TEST(PosixFiles, RemoveTreeIsRmRfAndDoesNotFollowLinks) {
  Scratch s;
  ASSERT_FALSE(s.root.empty());
  test::TempDir outside("posix-files-outside");
  const std::string kept = joinPath(outside.path().native(), "kept");
  std::ofstream(kept) << "must survive";
  makeDirectories(s / "t/a/b");
  std::ofstream(s / "t/a/b/f1") << "1";
  std::ofstream(s / "t/f2") << "2";
  ASSERT_EQ(::symlink(outside.path().c_str(), (s / "t/a/to_outside").c_str()), 0);
  EXPECT_EQ(removeTree(s / "t"), 6u);  // t, a, b, f1, f2, the link
  EXPECT_FALSE(pathExists(s / "t"));
  EXPECT_TRUE(isRegularFile(kept));
  EXPECT_EQ(removeTree(s / "t"), 0u);  // nothing there
  EXPECT_EQ(removeTree(""), 0u);
  std::ofstream(s / "single") << "x";
  EXPECT_EQ(removeTree(s / "single"), 1u);

  EXPECT_FALSE(removePath(s / "none"));
  makeDirectories(s / "full/inner");
  EXPECT_THAT(errorOf<IoError>([&] { removePath(s / "full"); }),
              HasSubstr("cannot remove '" + (s / "full") + "': Directory not empty"));
  EXPECT_TRUE(removePath(s / "full/inner"));
  EXPECT_TRUE(removePath(s / "full"));
}

TEST(PosixFiles, RenameReplacesAndNamesBothPaths) {
  Scratch s;
  ASSERT_FALSE(s.root.empty());
  std::ofstream(s / "a") << "new";
  std::ofstream(s / "b") << "old";
  renamePath(s / "a", s / "b");
  EXPECT_EQ(readFile(s / "b"), "new");
  EXPECT_FALSE(pathExists(s / "a"));
  EXPECT_EQ(errorOf<IoError>([&] { renamePath(s / "a", s / "c"); }),
            "cannot rename '" + (s / "a") + "' to '" + (s / "c") + "': No such file or directory");
}

TEST(PosixFiles, WriteFileAtomicallyReplacesCreatesParentsAndLeavesNoTemporaries) {
  Scratch s;
  ASSERT_FALSE(s.root.empty());
  const std::string file = s / "x/y/latest";
  writeFileAtomically(file, "first");
  EXPECT_EQ(readFile(file), "first");
  writeFileAtomically(file, std::string("second\0bytes", 12));
  EXPECT_EQ(readFile(file), std::string("second\0bytes", 12));
  writeFileAtomically(file, "");
  EXPECT_EQ(fileSize(file), 0u);
  EXPECT_EQ(listDirectory(s / "x/y"), std::vector<std::string>{"latest"});
  syncDirectory(s / "x/y");

  // A relative path: the working directory.
  const std::string cwdFile = "stretch-posix-files-" + std::to_string(::getpid());
  writeFileAtomically(cwdFile, "here");
  EXPECT_EQ(readFile(cwdFile), "here");
  EXPECT_TRUE(removePath(cwdFile));
}

TEST(PosixFiles, WriteFileAtomicallyFailuresNameThePath) {
  Scratch s;
  ASSERT_FALSE(s.root.empty());
  std::ofstream(s / "plain") << "x";
  EXPECT_THAT(errorOf<IoError>([&] { writeFileAtomically(s / "plain/f", "t"); }),
              HasSubstr("cannot create directory '" + (s / "plain") + "': Not a directory"));
  makeDirectories(s / "isdir/inner");
  EXPECT_THAT(errorOf<IoError>([&] { writeFileAtomically(s / "isdir", "t"); }),
              HasSubstr("cannot rename '" + (s / "isdir") + ".tmp."));
  EXPECT_EQ(errorOf<IoError>([&] { writeFileAtomically(s / "dir/", "t"); }),
            "cannot write '" + (s / "dir/") + "': expected a file path");
  // The failed rename left no temporary behind.
  EXPECT_EQ(listDirectory(s.root), (std::vector<std::string>{"isdir", "plain"}));
  if (::geteuid() != 0) {  // root writes anywhere
    makeDirectories(s / "ro");
    ASSERT_EQ(::chmod((s / "ro").c_str(), 0555), 0);
    EXPECT_THAT(errorOf<IoError>([&] { writeFileAtomically(s / "ro/f", "t"); }),
                HasSubstr("Permission denied"));
    ASSERT_EQ(::chmod((s / "ro").c_str(), 0755), 0);
  }
}

}  // namespace
}  // namespace stretch
