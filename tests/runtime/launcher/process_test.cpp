// The one process spawner: environment, log files, pipes, stdin data, exit statuses, process
// group teardown by the destructor. (Process groups under stopAll and the parent-death signal:
// local_workers_test.cpp, which drives them through WorkerProcesses.)

#include "runtime/launcher/process.hpp"

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <pthread.h>
#include <string>
#include <thread>
#include <unistd.h>

#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::launcher {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Everything the child writes to its stdout pipe, up to its end.
std::string readStdout(const ChildProcess& child) {
  std::string out;
  char buf[256];
  for (ssize_t n; (n = ::read(child.stdoutFd(), buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<std::size_t>(n));
  return out;
}

TEST(Process, EnvironmentAndCapturedOutput) {
  ::setenv("STRETCH_PROCESS_TEST_INHERITED", "kept", 1);
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "echo $A $STRETCH_PROCESS_TEST_INHERITED; echo oops >&2; exit 3"};
  o.env = {{"A", "given"}};
  const auto captured = runCaptured(o.argv, {});  // no extra variables there
  o.pipeOutput = true;
  ChildProcess child = spawnProcess(o);
  const std::string out = readStdout(child);
  const ProcessExit exit = child.wait();
  EXPECT_EQ(out, "given kept\n");
  EXPECT_EQ(exit.code, 3);
  EXPECT_FALSE(exit.signaled);
  EXPECT_FALSE(exit.ok());
  EXPECT_EQ(captured.out, "kept\n");
  EXPECT_EQ(captured.exit.code, 3);
}

// Workers start with the live-generation signal ignored, so that signalling a worker's process
// group (WorkerProcesses::signalLocalRanks) reaches the program behind a wrapper without killing
// the wrapper; without the option the signal's default action applies.
TEST(Process, AnIgnoredSignalReachesTheWholeGroupWithoutKillingIt) {
  for (const bool ignored : {true, false}) {
    SpawnOptions o;
    o.argv = {"/bin/sh", "-c", "sh -c 'sleep 0.3; echo child' & kill -USR1 0; wait; echo parent"};
    o.pipeOutput = true;
    if (ignored)
      o.ignoredSignal = SIGUSR1;
    ChildProcess child = spawnProcess(o);
    const std::string out = readStdout(child);
    const ProcessExit exit = child.wait();
    if (ignored) {
      EXPECT_EQ(exit.code, 0) << out;
      EXPECT_EQ(out, "child\nparent\n");
    } else {
      EXPECT_TRUE(exit.signaled) << out;
      EXPECT_EQ(exit.signal(), SIGUSR1) << out;
    }
    child.signal(SIGKILL);  // what the run without the option left behind
  }
}

// The child shares this process's memory until it execs (spawnProcess's CLONE_VM child): a
// handler of the parent must never run there, and the child starts with every disposition a
// fresh program expects. Here the parent handles SIGUSR2 and blocks it in the spawning thread;
// the child gets the default action (it dies of it) with nothing blocked, and the parent's
// handler never ran.
std::atomic<int> gParentHandlerRuns{0};
TEST(Process, TheChildGetsDefaultHandlersAndNoBlockedSignalFromTheParent) {
  struct sigaction handler {};
  handler.sa_handler = [](int) { gParentHandlerRuns.fetch_add(1); };
  struct sigaction old {};
  ASSERT_EQ(::sigaction(SIGUSR2, &handler, &old), 0);
  sigset_t usr2;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  sigset_t oldMask;
  ::pthread_sigmask(SIG_BLOCK, &usr2, &oldMask);
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "kill -USR2 $$; sleep 5; echo survived"};
  o.pipeOutput = true;
  ChildProcess child = spawnProcess(o);
  const std::string out = readStdout(child);
  const ProcessExit exit = child.wait();
  ::pthread_sigmask(SIG_SETMASK, &oldMask, nullptr);
  ::sigaction(SIGUSR2, &old, nullptr);
  EXPECT_TRUE(exit.signaled) << out;
  EXPECT_EQ(exit.signal(), SIGUSR2) << out;
  EXPECT_EQ(gParentHandlerRuns.load(), 0);
}

TEST(Process, RunCapturedAppendsStderrToTheLog) {
  stretch::test::TempDir dir("stretch-process");
  const fs::path log = dir.path() / "err.log";
  const auto first = runCaptured({"/bin/sh", "-c", "echo out; echo err1 >&2"}, log);
  const auto second = runCaptured({"/bin/sh", "-c", "echo err2 >&2; exit 0"}, log);
  EXPECT_EQ(first.out, "out\n");
  EXPECT_TRUE(second.exit.ok());
  EXPECT_EQ(stretch::test::readFileIfAny(log), "err1\nerr2\n");
}

// The log (calibration.log of `stretch sim --calibrate`) is opened with O_NOFOLLOW: a link planted
// at its path, to a file or to nothing, is refused with an IoError naming the path, before the
// program runs; the link's target is left as it was (not appended to, not created). (Before, the
// log was an std::ofstream that followed the link and appended the program's stderr to its
// target.)
TEST(Process, RunCapturedNeverWritesItsLogThroughAPlantedLink) {
  stretch::test::TempDir dir("stretch-process");
  const fs::path victim = dir.path() / "victim";
  { std::ofstream(victim) << "precious\n"; }
  const fs::path missing = dir.path() / "created-through-the-link";
  for (const fs::path& target : {victim, missing}) {
    const fs::path log = dir.path() / "calibration.log";
    fs::remove(log);
    fs::create_symlink(target, log);
    const fs::path ran = dir.path() / "ran";
    try {
      runCaptured({"/bin/sh", "-c", "echo err >&2; touch '" + ran.string() + "'"}, log);
      ADD_FAILURE() << "the log was opened through a link to " << target;
    } catch (const IoError& e) {
      EXPECT_EQ(std::string(e.what()),
                log.string() +
                    ": cannot open for writing: it is a symbolic link; nothing was written "
                    "through it");
    }
    EXPECT_TRUE(fs::is_symlink(log));
    EXPECT_FALSE(fs::exists(ran)) << "the program ran with nowhere to log";
  }
  EXPECT_EQ(stretch::test::readFileIfAny(victim), "precious\n");
  EXPECT_FALSE(fs::exists(missing));
  // A plain path still works, and /dev/null (a character device) too.
  const auto plain = runCaptured({"/bin/sh", "-c", "echo err >&2"}, dir.path() / "plain.log");
  EXPECT_TRUE(plain.exit.ok());
  EXPECT_EQ(stretch::test::readFileIfAny(dir.path() / "plain.log"), "err\n");
  EXPECT_TRUE(runCaptured({"/bin/sh", "-c", "echo err >&2"}, "/dev/null").exit.ok());
}

TEST(Process, StdinDataReachesTheChild) {
  stretch::test::TempDir dir("stretch-process");
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "read line; echo got:$line"};
  o.stdinData = "secret-token";
  o.logFile = dir.path() / "out.log";
  ChildProcess child = spawnProcess(o);
  EXPECT_TRUE(child.wait().ok());
  EXPECT_EQ(stretch::test::readFileIfAny(o.logFile), "got:secret-token\n");
}

TEST(Process, AMissingProgramExits127NamingIt) {
  stretch::test::TempDir dir("stretch-process");
  SpawnOptions o;
  o.argv = {"/nonexistent/worker", "--flag"};
  o.logFile = dir.path() / "out.log";
  o.execErrorPrefix = "test: ";
  ChildProcess child = spawnProcess(o);
  EXPECT_EQ(child.wait().code, 127);
  EXPECT_NE(stretch::test::readFileIfAny(o.logFile).find(
                "test: cannot execute /nonexistent/worker: No such file"),
            std::string::npos)
      << stretch::test::readFileIfAny(o.logFile);
}

TEST(Process, BadInputIsAnError) {
  EXPECT_THROW(spawnProcess(SpawnOptions{}), ConfigError);
  SpawnOptions o;
  o.argv = {"/bin/true"};
  o.logFile = "/nonexistent-dir/log";
  EXPECT_THROW(spawnProcess(o), IoError);
}

TEST(Process, PollReportsAnExitOnceAndSignalsAsCodes) {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "kill -9 $$"};
  ChildProcess child = spawnProcess(o);
  std::optional<ProcessExit> exit;
  for (int i = 0; i < 2000 && !exit; ++i) {
    exit = child.poll();
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(exit);
  EXPECT_TRUE(exit->signaled);
  EXPECT_EQ(exit->signal(), SIGKILL);
  EXPECT_EQ(exit->code, 128 + SIGKILL);
  EXPECT_NE(exit->describe().find("signal 9"), std::string::npos);
  EXPECT_FALSE(child.poll());
  EXPECT_FALSE(child.running());
  EXPECT_EQ(child.exit()->code, 128 + SIGKILL);
}

TEST(Process, TheDestructorKillsAndReaps) {
  pid_t pid = -1;
  {
    SpawnOptions o;
    o.argv = {"sleep", "60"};  // found in PATH
    ChildProcess child = spawnProcess(o);
    pid = child.pid();
    EXPECT_TRUE(child.running());
  }
  // Reaped: the pid no longer names a process (not even a zombie).
  EXPECT_FALSE(stretch::test::processAlive(pid));
}

}  // namespace
}  // namespace stretch::launcher
