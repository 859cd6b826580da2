#pragma once
// Helpers shared by the test executables.

#include <filesystem>
#include <string>
#include <sys/types.h>

namespace stretch::test {

// The repository root: $STRETCH_SOURCE_DIR when set (CTest sets it), else the configure-time path.
std::filesystem::path sourceDir();

// sourceDir() / "fixtures" / relative.
std::filesystem::path fixturePath(const std::string& relative);

// Whole file as a string; fails the current test (ADD_FAILURE) and returns "" when unreadable.
std::string readFile(const std::filesystem::path& path);

// Whole file as a string, "" when it is missing or unreadable (files a test polls for, /proc).
std::string readFileIfAny(const std::filesystem::path& path);

// `command` run by /bin/sh (popen): its exit status (-1 when it did not exit normally or could
// not start) and what it wrote to its standard output (redirect stderr in `command` to have it).
struct ShellRun {
  int exitCode = -1;
  std::string out;
};
ShellRun runShell(const std::string& command);

// The positive integer in environment variable `name` (at least 1: trial counts, limits), or
// `fallback` when it is not set.
int positiveFromEnvironment(const char* name, int fallback);

// A random loopback port P such that P and the next `alsoFree` ports are free at the moment of
// the call, drawn below the kernel's ephemeral range (the source ports of outgoing connections,
// 32768-60999 by default; above it when the range starts too low). A port inside that range can
// be taken by any connection on the machine between this check and the bind of the process
// that serves on it (seconds later for a worker that loads LibTorch first): a launched job's
// rank 0 then failed at every restart, 1 in about 80 of CI's live-recovery trials. Tests running
// at the same time draw from different sequences.
int freeTestPort(int alsoFree = 0);

// A fresh directory under $TMPDIR (or /tmp) named <prefix>-XXXXXX, removed with everything in
// it on destruction. path() is empty when it could not be created.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "stretch-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

// The start of a command line that runs a program under `mpirun -n ranks` on this machine
// (oversubscribed, loopback, allowed as root, bounded by `timeout`), or "" when mpirun is not
// installed or `cli report --json` says the stretch build has no MPI.
std::string mpirunPrefix(const std::string& cli, int ranks, int timeoutSeconds);

// True while `pid` runs or sleeps; false once it is gone or a zombie (state Z: dead, waiting
// for whoever reaps orphans here).
bool processAlive(pid_t pid);

}  // namespace stretch::test
