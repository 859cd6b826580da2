// WorkerProcesses: environment, logs, exit codes and signals, stop() leaving nothing behind
// (not the workers, not their children), and hang detection killing a frozen worker only.

#include "runtime/launcher/local_workers.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <signal.h>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>

#include <gtest/gtest.h>

#include "runtime/launcher/log_pump.hpp"
#include "runtime/launcher/process.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::launcher {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::vector<WorkerExit> waitAll(WorkerProcesses& group, std::chrono::seconds limit = 20s) {
  std::vector<WorkerExit> exits;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (group.running() > 0 && std::chrono::steady_clock::now() < deadline) {
    for (auto& e : group.poll())
      exits.push_back(e);
    std::this_thread::sleep_for(5ms);
  }
  return exits;
}

TEST(LocalWorkers, EachWorkerGetsItsEnvironmentAndItsOwnLog) {
  stretch::test::TempDir dir("stretch-workers");
  WorkerProcesses group;
  group.start(
      {"/bin/sh", "-c", "echo rank=$RANK local=$LOCAL_RANK; exit $RANK"},
      {{0, 4, {{"RANK", "4"}, {"LOCAL_RANK", "0"}}}, {1, 5, {{"RANK", "5"}, {"LOCAL_RANK", "1"}}}},
      dir.path(), 3);
  auto exits = waitAll(group);
  ASSERT_EQ(exits.size(), 2u);
  for (const auto& e : exits) {
    EXPECT_FALSE(e.exit.signaled);
    EXPECT_EQ(e.exit.code, e.globalRank);
  }
  EXPECT_EQ(stretch::test::readFileIfAny(dir.path() / "attempt_3" / "rank_4.log"),
            "rank=4 local=0\n");
  EXPECT_EQ(stretch::test::readFileIfAny(dir.path() / "attempt_3" / "rank_5.log"),
            "rank=5 local=1\n");
}

TEST(LocalWorkers, AKilledWorkerReportsTheSignal) {
  WorkerProcesses group;
  group.start({"/bin/sh", "-c", "kill -9 $$"}, {{0, 0, {}}}, {}, 0);
  auto exits = waitAll(group);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_TRUE(exits[0].exit.signaled);
  EXPECT_EQ(exits[0].exit.code, 128 + SIGKILL);
  EXPECT_NE(exits[0].exit.describe().find("signal 9"), std::string::npos)
      << exits[0].exit.describe();
}

TEST(LocalWorkers, AMissingProgramExitsWith127AndSaysWhyInTheLog) {
  stretch::test::TempDir dir("stretch-workers");
  WorkerProcesses group;
  group.start({"/nonexistent/program"}, {{0, 0, {}}}, dir.path(), 0);
  auto exits = waitAll(group);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit.code, 127);
  EXPECT_NE(
      stretch::test::readFileIfAny(dir.path() / "attempt_0" / "rank_0.log").find("cannot execute"),
      std::string::npos);
}

TEST(LocalWorkers, StopKillsWorkersAndTheirChildrenEvenWhenTheyIgnoreSigterm) {
  stretch::test::TempDir dir("stretch-workers");
  const fs::path pidFile = dir.path() / "grandchild.pid";
  WorkerProcesses group;
  // The worker ignores SIGTERM and starts a child that does too.
  group.start(
      {"/bin/sh", "-c",
       "trap '' TERM; (trap '' TERM; sleep 60) & echo $! > " + pidFile.string() + "; sleep 60"},
      {{0, 0, {}}}, {}, 0);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!fs::exists(pidFile) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(50ms);
  const pid_t worker = group.pids().at(0);
  const pid_t grandchild = std::stoi(stretch::test::readFileIfAny(pidFile));
  ASSERT_TRUE(stretch::test::processAlive(worker));
  ASSERT_TRUE(stretch::test::processAlive(grandchild));
  const auto start = std::chrono::steady_clock::now();
  group.stop(300ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(group.running(), 0);
  // The grandchild was re-parented; give the kernel a moment to deliver SIGKILL.
  for (int i = 0; i < 200 && stretch::test::processAlive(grandchild); ++i)
    std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(stretch::test::processAlive(grandchild));
}

TEST(LocalWorkers, WorkersAndWhatTheyStartedDieWithTheirAgent) {
  // A stand-in agent (a forked child) starts a worker, which starts a child of its own (a
  // wrapper script's training process), and is then SIGKILLed: both must go. The parent-death
  // signal reaches the worker only; the orphan guard reaches its process group.
  stretch::test::TempDir dir("stretch-workers");
  const fs::path pidFile = dir.path() / "worker.pid";
  const fs::path childFile = dir.path() / "child.pid";
  const pid_t agent = ::fork();
  ASSERT_GE(agent, 0);
  if (agent == 0) {
    WorkerProcesses group;
    group.start({"/bin/sh", "-c",
                 "sleep 60 & echo $! > " + childFile.string() + "; echo $$ > " + pidFile.string() +
                     "; wait"},
                {{0, 0, {}}}, dir.path() / "logs", 0);
    ::pause();
    ::_exit(0);
  }
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while ((stretch::test::readFileIfAny(pidFile).empty() ||
          stretch::test::readFileIfAny(childFile).empty()) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  const pid_t worker = std::stoi(stretch::test::readFileIfAny(pidFile));
  const pid_t child = std::stoi(stretch::test::readFileIfAny(childFile));
  ASSERT_TRUE(stretch::test::processAlive(worker));
  ASSERT_TRUE(stretch::test::processAlive(child));
  ::kill(agent, SIGKILL);
  int status = 0;
  ::waitpid(agent, &status, 0);
  for (int i = 0;
       i < 400 && (stretch::test::processAlive(worker) || stretch::test::processAlive(child)); ++i)
    std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(stretch::test::processAlive(worker)) << "worker " << worker << " outlived its agent";
  EXPECT_FALSE(stretch::test::processAlive(child))
      << "the worker's child " << child << " outlived the agent";
}

// A rank log that stops taking writes (here /dev/full, as a full disk: ENOSPC) is reported, the
// worker is not blocked or killed by its output, and the other rank's log is whole.
// A log that refuses writes (/dev/full) loses the output, counted, and the worker never blocks
// on it: 256 KiB is more than a pipe holds.
TEST(LocalWorkers, ARankLogOnAFullDiskIsReportedAndTheWorkerGoesOn) {
  LogPump pump;
  const LogPump::Sink sink = pump.add("/dev/full");
  EXPECT_TRUE(sink.problem.empty()) << sink.problem;
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", "head -c 262144 /dev/zero | tr '\\0' x; echo; echo done"};
  options.outputFd = sink.writeFd;
  ChildProcess child = spawnProcess(options);
  ::close(sink.writeFd);
  ASSERT_TRUE(waitForAll({&child}, 20s)) << "the worker blocked on its output";
  EXPECT_TRUE(child.exit()->ok()) << child.exit()->describe();
  ASSERT_TRUE(pump.settle(sink.id, 5s));
  const auto lost = pump.lost();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_NE(lost[0].find("/dev/full: cannot write: No space left on device"), std::string::npos)
      << lost[0];
  EXPECT_NE(lost[0].find("262150 bytes lost"), std::string::npos) << lost[0];
}

// A link planted at a rank log (it used to get the rank's output appended to its target) is
// removed and the log created afresh, never written through; the group reports it.
TEST(LocalWorkers, ALinkPlantedAtARankLogIsNeverWrittenThrough) {
  stretch::test::TempDir dir("stretch-workers");
  const fs::path victim = dir.path() / "victim.txt";
  std::ofstream(victim) << "precious\n";
  fs::create_directories(dir.path() / "attempt_0");
  fs::create_symlink(victim, dir.path() / "attempt_0" / "rank_1.log");
  WorkerProcesses group;
  group.start({"/bin/sh", "-c", "echo done $RANK"},
              {{0, 0, {{"RANK", "0"}}}, {1, 1, {{"RANK", "1"}}}}, dir.path(), 0);
  const auto exits = waitAll(group);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(stretch::test::readFileIfAny(victim), "precious\n");
  EXPECT_FALSE(fs::is_symlink(dir.path() / "attempt_0" / "rank_1.log"));
  EXPECT_EQ(stretch::test::readFileIfAny(dir.path() / "attempt_0" / "rank_1.log"), "done 1\n");
  const auto problems = group.takeProblems();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("rank_1.log: it was a symbolic link; removed it"), std::string::npos)
      << problems[0];
  EXPECT_TRUE(group.takeProblems().empty());
  EXPECT_TRUE(group.lostOutput().empty());
}

TEST(LocalWorkers, AWorkerWhoseHeartbeatStopsIsKilledAsHungAndTheOthersAreLeftAlone) {
  stretch::test::TempDir beats("stretch-beats");
  WorkerProcesses group;
  agent::HangPolicy policy;
  policy.floor = 1s;
  group.detectHangs(beats.path(), policy);
  // Rank 0 beats once (step 5), then freezes. Rank 1 beats every 0.2 s for 2.5 s. Rank 2 never
  // beats and sleeps 2.5 s: programs without heartbeats keep the exit-based behaviour.
  group.start({"/bin/sh", "-c", "echo 5 > \"$STRETCH_HEARTBEAT_FILE\"; kill -STOP $$"},
              {{0, 0, {}, {}}}, {}, 1);
  group.start({"/bin/sh", "-c",
               "i=0; while [ $i -lt 12 ]; do echo $i > \"$STRETCH_HEARTBEAT_FILE\"; sleep 0.2; "
               "i=$((i+1)); done"},
              {{1, 1, {}, {}}}, {}, 1);
  group.start({"/bin/sh", "-c", "sleep 2.5"}, {{2, 2, {}, {}}}, {}, 1);
  const auto start = std::chrono::steady_clock::now();
  auto exits = waitAll(group);
  ASSERT_EQ(exits.size(), 3u);
  for (const auto& e : exits) {
    if (e.globalRank == 0) {
      EXPECT_TRUE(e.exit.signaled);
      EXPECT_EQ(e.exit.signal(), SIGKILL);
      EXPECT_NE(e.hung.find("no heartbeat for"), std::string::npos) << e.hung;
      EXPECT_NE(e.hung.find("last step 5"), std::string::npos) << e.hung;
      EXPECT_EQ(e.describe().rfind("hung (no heartbeat for ", 0), 0u) << e.describe();
    } else {
      EXPECT_FALSE(e.exit.signaled) << e.globalRank << ": " << e.describe();
      EXPECT_EQ(e.exit.code, 0) << e.globalRank;
      EXPECT_TRUE(e.hung.empty()) << e.globalRank << ": " << e.hung;
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

// A failure before the first completed step is early: at once without heartbeats, or with a
// heartbeat that says no step completed; a failure after one is not, nor is any failure of a
// group in which some worker completed a step (live recovery's survivors train on).
TEST(LocalWorkers, AFailureBeforeTheFirstStepIsEarly) {
  const auto earlyOf = [](const std::vector<std::string>& scripts) {
    stretch::test::TempDir beats("stretch-beats");
    WorkerProcesses group;
    agent::HangPolicy policy;
    policy.floor = 30s;
    group.detectHangs(beats.path(), policy);
    for (std::size_t r = 0; r < scripts.size(); ++r) {
      const int rank = static_cast<int>(r);
      group.start({"/bin/sh", "-c", scripts[r]}, {{rank, rank, {}, {}}}, {}, 1);
    }
    std::vector<bool> early(scripts.size());
    for (const auto& e : waitAll(group))
      early[static_cast<std::size_t>(e.globalRank)] = e.early;
    return early;
  };
  const std::string beat = "echo \"$1\" > \"$STRETCH_HEARTBEAT_FILE\"";
  const auto script = [&](const std::string& body) { return "b() { " + beat + "; }; " + body; };
  EXPECT_EQ(earlyOf({"exit 3"}), std::vector<bool>{true});
  EXPECT_EQ(earlyOf({script("b '200 0'; sleep 0.3; exit 3")}), std::vector<bool>{true});
  EXPECT_EQ(earlyOf({script("b '200 0'; b '201 1'; sleep 0.3; exit 3")}), std::vector<bool>{false});
  // A script that writes only its step: it completed one when the step changed.
  EXPECT_EQ(earlyOf({script("b 200; sleep 0.3; b 201; sleep 0.3; exit 3")}),
            std::vector<bool>{false});
  // Rank 1 trained a step: rank 0's failure is no crash loop.
  EXPECT_EQ(earlyOf({"sleep 0.5; exit 3", script("b '7 1'; sleep 1")}),
            (std::vector<bool>{false, false}));
}

}  // namespace
}  // namespace stretch::launcher
