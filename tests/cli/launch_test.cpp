// `stretch launch` end to end with the example job as workers: runs, restarts after a worker is
// SIGKILLed at a random moment and still ends with bitwise the weights of an uninterrupted run,
// gives up after --max_restarts with the worker's status, stops every worker on SIGTERM, and
// rejects bad input with exit status 2. Every run is bounded in time.
//
// STRETCH_LAUNCH_FAULT_TRIALS sets the number of kill trials (default 3; the `slow` test runs 20).

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <signal.h>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "runtime/common/worker_variables.hpp"
#include "tests/cli/launch_support.hpp"
#include "tests/support/test_support.hpp"

namespace {

using namespace stretch::test::launch;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

int faultTrials() {
  return stretch::test::positiveFromEnvironment("STRETCH_LAUNCH_FAULT_TRIALS", 3);
}

// 1, 2 and 4 workers: the same global batch (48) split differently, so the same training up to
// floating-point summation order.
TEST(Launch, OneTwoAndFourWorkersTrainTheExampleJobAlike) {
  std::vector<double> losses;
  for (const int workers : {1, 2, 4}) {
    stretch::test::TempDir dir("stretch-launch");
    Launch launch(dir.path(), digitsJob(dir.path(), workers, 200));
    ASSERT_EQ(launch.wait(), 0) << launch.err();
    const auto summary = jobSummary(dir.path());
    ASSERT_FALSE(summary.is_null());
    EXPECT_EQ(summary["world_size"], workers);
    EXPECT_EQ(summary["steps"], 200);
    EXPECT_EQ(summary["samples"], 200 * 48);
    EXPECT_TRUE(fs::exists(dir.path() / "logs" / "attempt_1" /
                           ("rank_" + std::to_string(workers - 1) + ".log")));
    const auto events = eventsOf(dir.path() / "events.jsonl");
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back()["event"], "finish");
    losses.push_back(summary["final_loss"]);
  }
  std::printf("final loss with 1, 2, 4 workers: %.9f %.9f %.9f\n", losses[0], losses[1], losses[2]);
  EXPECT_NEAR(losses[1], losses[0], 1e-6);
  EXPECT_NEAR(losses[2], losses[0], 1e-6);
}

TEST(Launch, AWorkerKilledAtARandomMomentIsRestartedAndTheResultIsBitwiseTheSame) {
  stretch::test::TempDir reference("stretch-launch");
  Launch straight(reference.path(), digitsJob(reference.path(), 2, 600));
  ASSERT_EQ(straight.wait(), 0) << straight.err();
  const auto expected = jobSummary(reference.path());
  ASSERT_TRUE(expected.contains("weights_sha256")) << expected.dump();

  std::mt19937 rng(std::random_device{}());
  const int trials = faultTrials();
  std::printf("launch fault trials: %d (seed %u)\n", trials, static_cast<unsigned>(rng()));
  for (int trial = 0; trial < trials; ++trial) {
    stretch::test::TempDir dir("stretch-launch");
    Launch launch(dir.path(), digitsJob(dir.path(), 2, 600));
    // Wait for the workers, then kill one of them at a random moment of the run.
    std::vector<pid_t> workers;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (workers.size() < 2 && std::chrono::steady_clock::now() < deadline) {
      workers = launch.workers();
      std::this_thread::sleep_for(5ms);
    }
    ASSERT_EQ(workers.size(), 2u) << launch.err();
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 700));
    const pid_t victim = workers[rng() % 2];
    const auto killedAt = std::chrono::steady_clock::now();
    const double killedWall = wallNow();
    ::kill(victim, SIGKILL);
    ASSERT_EQ(launch.wait(), 0) << "trial " << trial << ": " << launch.err();
    const auto summary = jobSummary(dir.path());
    ASSERT_FALSE(summary.is_null()) << "trial " << trial;
    EXPECT_EQ(summary["weights_sha256"], expected["weights_sha256"]) << "trial " << trial;
    EXPECT_EQ(summary["samples"], expected["samples"]);
    const auto events = eventsOf(dir.path() / "events.jsonl");
    int starts = 0;
    for (const auto& e : events)
      starts += e["event"] == "start_workers" ? 1 : 0;
    // The kill may land after the worker finished its part; otherwise exactly one restart.
    EXPECT_LE(starts, 2) << "trial " << trial;
    if (starts > 2) {
      // Why the agent kept restarting: the first events, and the first failed attempt's logs.
      for (std::size_t i = 0; i < events.size() && i < 12; ++i) {
        std::printf("  event %zu: %s\n", i, events[i].dump().c_str());
      }
      for (int attempt = 2; attempt <= 3; ++attempt) {
        for (int rank = 0; rank < 2; ++rank) {
          const fs::path log = dir.path() / "logs" / ("attempt_" + std::to_string(attempt)) /
                               ("rank_" + std::to_string(rank) + ".log");
          std::printf("  %s:\n%s\n", log.string().c_str(),
                      stretch::test::readFileIfAny(log).substr(0, 3000).c_str());
        }
      }
    }
    if (starts == 2) {
      std::size_t last = 0;
      for (std::size_t i = 0; i < events.size(); ++i) {
        if (events[i]["event"] == "start_workers")
          last = i;
      }
      const auto& restart = events[last];
      EXPECT_EQ(restart["restart_count"], 1);
      EXPECT_EQ(restart["world_size"], 2);
      const double done =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - killedAt).count();
      // Training resumed: the restarted rank 0 logged its checkpoint load (or that there was
      // none) right before its first step.
      const fs::path log = dir.path() / "logs" / "attempt_2" / "rank_0.log";
      auto resumed = logTime(log, "resumed from");
      if (!resumed)
        resumed = logTime(log, "nothing loaded");
      ASSERT_TRUE(resumed.has_value()) << stretch::test::readFileIfAny(log);
      const double recovery = *resumed - killedWall;
      EXPECT_LT(recovery, 5.0) << "trial " << trial;
      std::printf(
          "trial %d: killed worker %d; recovery (kill -> training resumed) %.3f s; "
          "resume step %s; job done %.2f s after the kill\n",
          trial, static_cast<int>(victim), recovery,
          restart.contains("resume_step") ? restart["resume_step"].dump().c_str() : "none", done);
    }
  }
}

// Two jobs, one checkpoint directory (issue 42, item 1). Job B, launched while job A trains and
// saves into the same --checkpoint_dir, once trained on with its saves refused, restarted 18
// times, and overwrote A's `latest` when A ended; with --resume it silently loaded A's checkpoint.
// Now B ends before its first step, exit status 2, naming A's job, with no restart, and nothing
// of A's is read or written by it.
TEST(Launch, ASecondJobOnAnotherJobsCheckpointDirectoryEndsAtOnceNamingIt) {
  stretch::test::TempDir dirA("stretch-launch");
  stretch::test::TempDir dirB("stretch-launch");
  Launch a(dirA.path(), digitsJob(dirA.path(), 1, 200000), "launch", "a_");
  const fs::path latest = dirA.path() / "ckpt" / "latest";
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!fs::exists(latest) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(fs::exists(latest)) << a.err();
  // B: its own logs, A's checkpoint directory (the launcher's option and the program's).
  auto args = digitsJob(dirB.path(), 1, 300);
  for (auto& arg : args) {
    if (arg == (dirB.path() / "ckpt").string())
      arg = (dirA.path() / "ckpt").string();
  }
  const auto began = std::chrono::steady_clock::now();
  Launch b(dirB.path(), args, "launch", "b_");
  const int status = b.wait(60s);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  EXPECT_EQ(status, 2) << b.err();
  EXPECT_NE(b.err().find("in use by another job (job "), std::string::npos) << b.err();
  EXPECT_NE(b.err().find("cannot run as launched"), std::string::npos) << b.err();
  const auto events = eventsOf(dirB.path() / "events.jsonl");
  int starts = 0;
  bool failed = false;
  for (const auto& e : events) {
    starts += e.value("event", "") == "start_workers" ? 1 : 0;
    failed = failed || (e.value("event", "") == "fail" && e.value("exit_code", 0) == 2);
  }
  EXPECT_EQ(starts, 1) << "B was restarted";
  EXPECT_TRUE(failed);
  EXPECT_FALSE(fs::exists(dirB.path() / "logs" / "attempt_2"));
  // B loaded nothing (its --resume once loaded A's checkpoint) and trained no step, so it saved
  // nothing either: every checkpoint there is A's, and A trains on.
  const std::string rankLog =
      stretch::test::readFileIfAny(dirB.path() / "logs" / "attempt_1" / "rank_0.log");
  EXPECT_EQ(rankLog.find("resumed from"), std::string::npos) << rankLog;
  EXPECT_NE(rankLog.find("in use by another job"), std::string::npos) << rankLog;
  EXPECT_EQ(a.wait(std::chrono::seconds(0)), -1) << "A ended: " << a.err();
  std::printf("second job on a held checkpoint directory: exit %d after %.2f s, %d start(s)\n",
              status, seconds, starts);
  ::kill(a.pid(), SIGTERM);
  EXPECT_NE(a.wait(60s), -1);
}

TEST(Launch, AWorkerKilledWhileSavingLeavesThePreviousCheckpointCurrent) {
  stretch::test::TempDir reference("stretch-launch");
  Launch straight(reference.path(), digitsJob(reference.path(), 2, 300));
  ASSERT_EQ(straight.wait(), 0) << straight.err();
  const auto expected = jobSummary(reference.path());

  stretch::test::TempDir dir("stretch-launch");
  // The last rank dies after writing its files of global_step120, before manifest and latest.
  ::setenv("STRETCH_FAULT_KILL_DURING_SAVE", "120", 1);
  Launch launch(dir.path(), digitsJob(dir.path(), 2, 300));
  ::unsetenv("STRETCH_FAULT_KILL_DURING_SAVE");
  // The fault fires on the first attempt only (STRETCH_RESTART_COUNT=0).
  ASSERT_EQ(launch.wait(), 0) << launch.err();
  const auto events = eventsOf(dir.path() / "events.jsonl");
  std::vector<nlohmann::json> starts;
  for (const auto& e : events) {
    if (e["event"] == "start_workers")
      starts.push_back(e);
  }
  ASSERT_GE(starts.size(), 2u);
  // The restart resumed from the checkpoint before the interrupted one.
  EXPECT_EQ(starts[1]["resume_step"], 80);
  EXPECT_EQ(jobSummary(dir.path())["weights_sha256"], expected["weights_sha256"]);
}

// The newest checkpoint of a finished run is corrupted (one byte of its model states): the next
// start resumes from the one before it, and the launcher's event log says so (its resume step is
// the checkpoint the engine loads, not `latest`'s).
TEST(Launch, ACorruptNewestCheckpointIsSkippedAndTheEventLogSaysSo) {
  stretch::test::TempDir first("stretch-launch");
  // Checkpoints at steps 40, 80 and 120; latest names global_step120.
  Launch run(first.path(), digitsJob(first.path(), 1, 130));
  ASSERT_EQ(run.wait(), 0) << run.err();
  ASSERT_EQ(stretch::test::readFileIfAny(first.path() / "ckpt" / "latest"), "global_step120");

  stretch::test::TempDir dir("stretch-launch");
  fs::copy(first.path() / "ckpt", dir.path() / "ckpt", fs::copy_options::recursive);
  const fs::path model = dir.path() / "ckpt" / "global_step120" / "mp_rank_00_model_states.pt";
  {
    std::fstream f(model, std::ios::in | std::ios::out | std::ios::binary);
    const auto at = static_cast<std::streamoff>(fs::file_size(model) / 2);
    f.seekg(at);
    const char c = static_cast<char>(f.get());
    f.seekp(at);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  Launch resumed(dir.path(), digitsJob(dir.path(), 1, 130));
  ASSERT_EQ(resumed.wait(), 0) << resumed.err();
  const auto starts = startsOf(dir.path() / "events.jsonl");
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0]["resume_step"], 80) << starts[0].dump();
  const std::string log =
      stretch::test::readFileIfAny(dir.path() / "logs" / "attempt_1" / "rank_0.log");
  EXPECT_NE(log.find("global_step80 at step 80"), std::string::npos) << log;
  EXPECT_NE(log.find("cannot use"), std::string::npos) << log;
  EXPECT_EQ(jobSummary(dir.path())["steps"], 130);
}

TEST(Launch, MaxRestartsExhaustedStopsWithTheWorkersStatus) {
  stretch::test::TempDir dir("stretch-launch");
  Launch launch(dir.path(), {"--num_gpus", "2", "--max_restarts", "2", "--monitor_interval", "0.2",
                             "--event_log", (dir.path() / "events.jsonl").string(), "/bin/sh", "-c",
                             "sleep 0.1; exit 7"});
  EXPECT_EQ(launch.wait(60s), 7) << launch.err();
  EXPECT_NE(launch.err().find("max_restarts"), std::string::npos) << launch.err();
  int starts = 0;
  for (const auto& e : eventsOf(dir.path() / "events.jsonl"))
    starts += e["event"] == "start_workers" ? 1 : 0;
  EXPECT_EQ(starts, 3);  // the first start and 2 restarts
}

// A program that fails at once in every generation (a missing module, a corrupted checkpoint):
// the restarts back off 1 s, then 2 s, and the third failure in a row ends the job with the
// program's status, and the launcher's stderr shows the program's own error text and its log.
TEST(Launch, ACrashLoopEndsTheJobWithTheProgramsOwnErrorTextAndItsLog) {
  stretch::test::TempDir dir("stretch-launch");
  const auto start = std::chrono::steady_clock::now();
  Launch launch(dir.path(), {"--num_gpus", "1", "--max_restarts", "100", "--monitor_interval",
                             "0.2", "--log_dir", (dir.path() / "logs").string(), "--event_log",
                             (dir.path() / "events.jsonl").string(), "/bin/sh", "-c",
                             "echo 'fatal: no module named corpus' >&2; exit 3"});
  EXPECT_EQ(launch.wait(60s), 3) << launch.err();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 3s);   // the two backoffs
  EXPECT_LT(took, 30s);  // not 100 restarts
  const std::string err = launch.err();
  EXPECT_NE(err.find("crash loop: 3 generations in a row failed the same way"), std::string::npos)
      << err;
  EXPECT_NE(err.find("fatal: no module named corpus"), std::string::npos) << err;
  EXPECT_NE(err.find((dir.path() / "logs" / "attempt_3" / "rank_0.log").string()),
            std::string::npos)
      << err;
  int starts = 0;
  int backoffs = 0;
  for (const auto& e : eventsOf(dir.path() / "events.jsonl")) {
    starts += e["event"] == "start_workers" ? 1 : 0;
    backoffs += e["event"] == "restart_backoff" ? 1 : 0;
  }
  EXPECT_EQ(starts, 3);
  EXPECT_EQ(backoffs, 2);
}

// The backoffs take what they announce at the default monitor interval (1 s and 2 s once took
// 2.0 s and 2.0-3.0 s: the restart waited for the next tick), and with two workers failing alike
// the final error quotes the log of the worker it names.
TEST(Launch, ACrashLoopsBackoffsLastWhatTheyAnnounceAndTheErrorQuotesTheNamedWorker) {
  stretch::test::TempDir dir("stretch-launch");
  Launch launch(dir.path(), {"--num_gpus", "2", "--max_restarts", "100", "--log_dir",
                             (dir.path() / "logs").string(), "--event_log",
                             (dir.path() / "events.jsonl").string(), "/bin/sh", "-c",
                             "echo \"fatal in local rank $LOCAL_RANK\" >&2; exit 3"});
  EXPECT_EQ(launch.wait(60s), 3) << launch.err();
  std::vector<std::pair<std::string, std::int64_t>> records;
  for (const auto& e : eventsOf(dir.path() / "events.jsonl"))
    records.emplace_back(e.value("event", ""), e.value("time_ns", std::int64_t{0}));
  std::vector<double> waited;  // from each restart_backoff record to the next start
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (records[i].first != "restart_backoff")
      continue;
    for (std::size_t j = i + 1; j < records.size(); ++j) {
      if (records[j].first == "start_workers") {
        waited.push_back(static_cast<double>(records[j].second - records[i].second) / 1e9);
        break;
      }
    }
  }
  ASSERT_EQ(waited.size(), 2u);
  // The records' wall-clock stamps come a few microseconds after the moments the agent decided
  // at (1.000 s measured as 0.999995 s once): the lower bounds allow for that; the upper ones are
  // the point (a restart at the next tick came 1 s late).
  EXPECT_GT(waited[0], 0.95);
  EXPECT_LT(waited[0], 1.3);
  EXPECT_GT(waited[1], 1.95);
  EXPECT_LT(waited[1], 2.3);
  std::printf("backoffs announced 1 s and 2 s took %.3f s and %.3f s\n", waited[0], waited[1]);
  // The error names a worker and quotes that worker's own log.
  const std::string err = launch.err();
  const auto named = err.find("error: worker rank ");
  ASSERT_NE(named, std::string::npos) << err;
  const char rank = err[named + std::string("error: worker rank ").size()];
  EXPECT_NE(err.find(std::string("fatal in local rank ") + rank), std::string::npos) << err;
  EXPECT_NE(err.find("rank_" + std::string(1, rank) + ".log"), std::string::npos) << err;
}

// A job whose every save fails (here a file where its first checkpoint's directory must go) once
// trained to the save, failed, restarted and trained to it again until max_restarts (100 for an
// elastic job). A failed save now counts toward the crash-loop rule: the third in a row ends the
// job with the workers' status and the save's error.
TEST(Launch, CheckpointSavesThatKeepFailingEndTheJobAsACrashLoop) {
  stretch::test::TempDir dir("stretch-launch");
  fs::create_directories(dir.path() / "ckpt");
  std::ofstream(dir.path() / "ckpt" / "global_step40") << "not a directory\n";
  auto args = digitsJob(dir.path(), 1, 300);
  args.insert(args.begin(), {"--max_restarts", "100"});
  const auto began = std::chrono::steady_clock::now();
  Launch launch(dir.path(), args);
  const int status = launch.wait(120s);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  EXPECT_EQ(status, stretch::worker_env::kExitSaveFailed) << launch.err();
  const std::string err = launch.err();
  EXPECT_NE(err.find("crash loop: 3 generations in a row failed the same way at a checkpoint save"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("checkpoint save failed"), std::string::npos) << err;
  int starts = 0;
  for (const auto& e : eventsOf(dir.path() / "events.jsonl"))
    starts += e["event"] == "start_workers" ? 1 : 0;
  EXPECT_EQ(starts, 3);
  std::printf("saves that keep failing: exit %d after %.2f s, %d start(s)\n", status, seconds,
              starts);
}

TEST(Launch, SigtermStopsEveryWorkerAndExitsNonZero) {
  stretch::test::TempDir dir("stretch-launch");
  Launch launch(dir.path(), {"--num_gpus", "3", "/bin/sh", "-c", "trap '' TERM; sleep 60"});
  std::vector<pid_t> workers;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (workers.size() < 3 && std::chrono::steady_clock::now() < deadline) {
    workers = launch.workers();
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(workers.size(), 3u);
  ::kill(launch.pid(), SIGTERM);
  EXPECT_EQ(launch.wait(30s), 128 + SIGTERM) << launch.err();
  for (const pid_t w : workers)
    EXPECT_FALSE(stretch::test::processAlive(w)) << "worker " << w << " outlived the launcher";
}

// Input files are bounded: --config /dev/zero grew memory for a minute until std::bad_alloc and
// a FIFO as hostfile blocked forever; both are refused before a byte is read.
TEST(Launch, ADeviceOrAFifoGivenAsAnInputFileIsRefusedAtOnce) {
  stretch::test::TempDir dir("stretch-launch");
  const auto start = std::chrono::steady_clock::now();
  Launch zero(dir.path(), {"--config", "/dev/zero", "/bin/true"});
  EXPECT_EQ(zero.wait(20s), 2) << zero.err();
  EXPECT_NE(zero.err().find("cannot read --config /dev/zero: it is a character device"),
            std::string::npos)
      << zero.err();
  const std::string fifo = (dir.path() / "hosts").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Launch pipe(dir.path(), {"--hostfile", fifo, "/bin/true"});
  EXPECT_EQ(pipe.wait(20s), 2) << pipe.err();
  EXPECT_NE(pipe.err().find("it is a FIFO, not a regular file"), std::string::npos) << pipe.err();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

// Logging never kills the job or loses output silently: an event log on a full disk
// (/dev/full) is reported once, the job runs to its end, and the exit status (74) says that
// output was lost. (The event log used to end the job at once with status 2.) A rank log on a
// full disk: launch_safety_test's ALogDirectoryThatFillsUpNeverEndsTheJob (a link planted at a
// rank log, as this test once used, is no longer written through).
TEST(Launch, OutputLostToAFullDiskIsReportedOnceAndTheJobStillRuns) {
  stretch::test::TempDir dir("stretch-launch");
  const fs::path done = dir.path() / "done";
  Launch launch(dir.path(), {"--num_gpus", "2", "--event_log", "/dev/full", "--log_dir",
                             (dir.path() / "logs").string(), "/bin/sh", "-c",
                             "echo hello from $RANK; touch " + done.string() + ".$RANK"});
  EXPECT_EQ(launch.wait(60s), 74) << launch.err();
  EXPECT_TRUE(fs::exists(done.string() + ".0"));
  EXPECT_TRUE(fs::exists(done.string() + ".1"));
  EXPECT_EQ(stretch::test::readFileIfAny(dir.path() / "logs" / "attempt_1" / "rank_0.log"),
            "hello from 0\n");
  const std::string err = launch.err();
  const std::string log = launch.out() + err;  // the agent's log lines, and the final errors
  const auto count = [&](const std::string& needle) {
    std::size_t n = 0;
    for (auto at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count("agent: event log /dev/full: cannot write: No space left on device"), 1u) << log;
  EXPECT_NE(err.find("output lost: event log /dev/full: cannot write: No space left on device; "),
            std::string::npos)
      << err;
}

// SIGHUP (the ssh session that ran the launcher dropped) and SIGQUIT stop the job as SIGTERM
// does: every worker and what it started, and an `interrupted` record. They used to kill the
// launcher alone and leave the workers' children running.
TEST(Launch, SighupAndSigquitStopTheWholeJobAndSaySo) {
  for (const int sig : {SIGHUP, SIGQUIT}) {
    SCOPED_TRACE(strsignal(sig));
    stretch::test::TempDir dir("stretch-launch");
    const fs::path events = dir.path() / "events.jsonl";
    const std::string children = (dir.path() / "child.").string();
    Launch launch(dir.path(), {"--num_gpus", "2", "--event_log", events.string(), "/bin/sh", "-c",
                               "sleep 60 & echo $! > " + children + "$RANK; wait"});
    ASSERT_TRUE(waitUntil([&] {
      return !stretch::test::readFileIfAny(children + "0").empty() &&
             !stretch::test::readFileIfAny(children + "1").empty();
    }));
    const pid_t child0 = std::stoi(stretch::test::readFileIfAny(children + "0"));
    const pid_t child1 = std::stoi(stretch::test::readFileIfAny(children + "1"));
    ::kill(launch.pid(), sig);
    EXPECT_EQ(launch.wait(30s), 128 + sig) << launch.err();
    EXPECT_TRUE(waitUntil([&] {
      return !stretch::test::processAlive(child0) && !stretch::test::processAlive(child1);
    }));
    const auto records = eventsOf(events);
    ASSERT_FALSE(records.empty());
    EXPECT_EQ(records.back()["event"], "interrupted");
    EXPECT_EQ(records.back()["exit_code"], 128 + sig);
  }
}

// A launcher killed with SIGKILL (no handler runs) leaves no process behind: the parent-death
// signal ends its workers and the orphan guard their children.
TEST(Launch, ASigkilledLauncherLeavesNoProcessBehind) {
  stretch::test::TempDir dir("stretch-launch");
  const std::string children = (dir.path() / "child.").string();
  const fs::path events = dir.path() / "events.jsonl";
  Launch launch(dir.path(), {"--num_gpus", "2", "--event_log", events.string(), "/bin/sh", "-c",
                             "sleep 60 & echo $! > " + children + "$RANK; wait"});
  ASSERT_TRUE(waitUntil([&] {
    return !stretch::test::readFileIfAny(children + "0").empty() &&
           !stretch::test::readFileIfAny(children + "1").empty();
  }));
  const std::vector<pid_t> workers = launch.workers();
  ASSERT_EQ(workers.size(), 2u);  // the guard is nobody's child
  const pid_t child0 = std::stoi(stretch::test::readFileIfAny(children + "0"));
  const pid_t child1 = std::stoi(stretch::test::readFileIfAny(children + "1"));
  ::kill(launch.pid(), SIGKILL);
  launch.wait(10s);
  EXPECT_TRUE(waitUntil([&] {
    for (const pid_t p : {workers[0], workers[1], child0, child1}) {
      if (stretch::test::processAlive(p))
        return false;
    }
    return true;
  })) << "a worker or a worker's child outlived the launcher";
  // The guard recorded how the job ended.
  ASSERT_TRUE(waitUntil([&] {
    const auto records = eventsOf(events);
    return !records.empty() && records.back()["event"] == "interrupted";
  }));
  EXPECT_NE(eventsOf(events).back()["reason"].get<std::string>().find(
                "orphan guard killed 2 worker process group(s)"),
            std::string::npos);
}

TEST(Launch, WorkersAreToldTheirGenerationAndItsBatch) {
  stretch::test::TempDir dir("stretch-launch");
  const std::string report =
      "echo $STRETCH_GENERATION $WORLD_SIZE ${STRETCH_TRAIN_BATCH_SIZE:-none} "
      "${STRETCH_MICRO_BATCH_SIZE:-none} ${STRETCH_GRADIENT_ACCUMULATION_STEPS:-none}";
  const auto config = stretch::test::sourceDir() / "fixtures/jobs/digits/ds_config_elastic.json";
  Launch elastic(dir.path(),
                 {"--num_gpus", "2", "--elastic", "1:1", "--config", config.string(), "--log_dir",
                  (dir.path() / "a/logs").string(), "/bin/sh", "-c", report},
                 "launch", "a-");
  ASSERT_EQ(elastic.wait(60s), 0) << elastic.err();
  std::istringstream words(
      stretch::test::readFileIfAny(dir.path() / "a/logs/attempt_1/rank_1.log"));
  std::int64_t generation = 0, world = 0, train = 0, micro = 0, gas = 0;
  ASSERT_TRUE(words >> generation >> world >> train >> micro >> gas) << words.str();
  EXPECT_EQ(generation, 1);
  EXPECT_EQ(world, 2);
  EXPECT_EQ(train, micro * gas * world);
  EXPECT_GE(micro, 1);
  EXPECT_EQ(train, 48);  // the solver's global batch for this config (docs/launch.md)

  // STRETCH_DS_CONFIG: this generation's config, in the log directory, with the same batch and
  // no elasticity block; '$STRETCH_DS_CONFIG' in PROGRAM's arguments becomes the path.
  const fs::path copy = dir.path() / "c" / "seen.json";
  fs::create_directories(copy.parent_path());
  Launch withConfig(dir.path(),
                    {"--num_gpus", "2", "--elastic", "1:1", "--config", config.string(),
                     "--log_dir", (dir.path() / "c/logs").string(), "/bin/sh", "-c",
                     "[ \"$1\" = \"$STRETCH_DS_CONFIG\" ] && cp \"$1\" " + copy.string(), "sh",
                     "$STRETCH_DS_CONFIG"},
                    "launch", "c-");
  ASSERT_EQ(withConfig.wait(60s), 0) << withConfig.err();
  const auto written = nlohmann::json::parse(stretch::test::readFileIfAny(copy));
  EXPECT_EQ(written, nlohmann::json::parse(stretch::test::readFileIfAny(
                         dir.path() / "c/logs/ds_config.generation_1.json")));
  EXPECT_FALSE(written.contains("elasticity"));
  EXPECT_EQ(written["train_batch_size"], 48);
  EXPECT_EQ(written["train_micro_batch_size_per_gpu"].get<int>() *
                written["gradient_accumulation_steps"].get<int>() * 2,
            48);
  auto original = nlohmann::json::parse(stretch::test::readFileIfAny(config), nullptr, true, true);
  for (const auto& [key, value] : original.items()) {
    if (key != "elasticity" && key != "train_batch_size" &&
        key != "train_micro_batch_size_per_gpu" && key != "gradient_accumulation_steps") {
      EXPECT_EQ(written[key], value) << key;
    }
  }

  // Without a config there is no batch to promise: not to the workers, not in the event log's
  // records, not in the agent's log (the machine's one-sample-per-rank world is nobody's batch).
  Launch bare(dir.path(),
              {"--num_gpus", "1", "--log_dir", (dir.path() / "b/logs").string(), "--event_log",
               (dir.path() / "b/events.jsonl").string(), "/bin/sh", "-c", report},
              "launch", "b-");
  ASSERT_EQ(bare.wait(60s), 0) << bare.err();
  EXPECT_EQ(stretch::test::readFileIfAny(dir.path() / "b/logs/attempt_1/rank_0.log"),
            "1 1 none none none\n");
  int starts = 0;
  for (const auto& e : eventsOf(dir.path() / "b/events.jsonl")) {
    EXPECT_FALSE(e.contains("batch")) << e.dump();
    starts += e["event"] == "start_workers" ? 1 : 0;
  }
  EXPECT_EQ(starts, 1);
  EXPECT_EQ(bare.out().find("batch"), std::string::npos) << bare.out();
  // With a config the records carry the batch the workers were told.
  Launch told(dir.path(),
              {"--num_gpus", "2", "--elastic", "1:1", "--config", config.string(), "--log_dir",
               (dir.path() / "d/logs").string(), "--event_log",
               (dir.path() / "d/events.jsonl").string(), "/bin/sh", "-c", "exit 0"},
              "launch", "d-");
  ASSERT_EQ(told.wait(60s), 0) << told.err();
  for (const auto& e : eventsOf(dir.path() / "d/events.jsonl")) {
    if (e["event"] == "start_workers") {
      EXPECT_EQ(e["batch"]["train_batch_size"], 48) << e.dump();
    }
  }
  EXPECT_NE(told.out().find("batch 48"), std::string::npos) << told.out();
}

TEST(Launch, BadInputIsExitStatusTwoWithTheFlagNamed) {
  stretch::test::TempDir dir("stretch-launch");
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const fs::path hostfile = dir.path() / "hostfile";
  std::ofstream(hostfile) << "worker-1 slots=2\nworker-1 slots=4\n";
  const fs::path aFile = dir.path() / "a-file";
  std::ofstream(aFile) << "x\n";
  const fs::path elasticBad = dir.path() / "elastic_bad.json";
  std::ofstream(elasticBad) << R"({"elasticity": {"enabled": true, "max_train_batch_size": 4,
      "micro_batch_sizes": [8], "min_gpus": 1, "max_gpus": 2, "version": 0.1}})";
  for (const auto& c : std::vector<Case>{
           // DeepSpeed's launcher flags.
           {{"--elastic_training", "--min_elastic_nodes", "3", "--max_elastic_nodes", "2",
             "/bin/true"},
            "--min_elastic_nodes = 3"},
           {{"--min_elastic_nodes", "2", "/bin/true"}, "--elastic_training"},
           {{"--elastic", "1:2", "--elastic_training", "/bin/true"}, "--elastic"},
           {{"--no_ssh", "/bin/true"}, "--no_ssh"},
           {{"--node_rank", "1", "/bin/true"}, "--node_rank"},
           {{"--autotuning", "tune", "/bin/true"}, "--autotuning"},
           {{"--venv_script", "/x/activate", "/bin/true"}, "--venv_script"},
           {{"--module", "--no_python", "pkg"}, "--no_python"},
           {{"--bind_core_list", "0-3", "/bin/true"}, "--bind_cores_to_rank"},
           {{"--enable_each_rank_log", aFile.string(), "/bin/true"}, "--enable_each_rank_log"},
           {{"--log_level", "loud", "/bin/true"}, "--log_level"},
           // A PROGRAM that cannot run is named before any worker starts.
           {{"no-such-program-here"}, "no-such-program-here"},
           {{aFile.string()}, aFile.string()},
           {{(dir.path() / "missing.py").string()}, "missing.py"},
           {{"--elastic", "3:1", "/bin/true"}, "--elastic"},
           {{"--hostfile", hostfile.string(), "/bin/true"}, "worker-1"},
           {{"--include", "localhost:7", "--num_gpus", "2", "/bin/true"}, "--include"},
           {{"--launcher", "mvapich", "/bin/true"}, "--launcher"},
           // --recovery live|restart ('auto', live's old name, is accepted: LiveLaunch tests).
           {{"--recovery", "checkpoint", "/bin/true"}, "--recovery"},
           {{"--config", (dir.path() / "missing.json").string(), "/bin/true"}, "missing.json"},
           {{"--bogus_flag", "3", "/bin/true"}, "unknown flag --bogus_flag"},
           // An empty filter used to mean every host.
           {{"-i", "", "/bin/true"}, "an empty filter would mean every host"},
           {{"--exclude", "", "/bin/true"}, "an empty filter would mean every host"},
           // An elasticity section without a plan (it used to be status 1).
           {{"--config", elasticBad.string(), "/bin/true"},
            "elasticity.micro_batch_sizes[0] = 8: expected at most max_train_batch_size (4)"},
           {{"--num_gpus", "1", "-x", "/bin/true"}, "unknown flag -x"},
           {{}, "PROGRAM"}}) {
    Launch launch(dir.path(), c.args);
    EXPECT_EQ(launch.wait(30s), 2) << c.expected << ": " << launch.err();
    EXPECT_NE(launch.err().find(c.expected), std::string::npos) << launch.err();
  }
}

// A short shared token can be guessed: --no_ssh refuses one under 16 characters, naming the
// variable and the length, never the token.
TEST(Launch, AShortSharedTokenIsRefused) {
  stretch::test::TempDir dir("stretch-launch");
  ::setenv("STRETCH_STORE_TOKEN", "x", 1);
  Launch launch(dir.path(), {"--no_ssh", "--node_rank", "0", "--master_addr", "127.0.0.1",
                             "--master_port", std::to_string(freePort()), "/bin/true"});
  ::unsetenv("STRETCH_STORE_TOKEN");
  EXPECT_EQ(launch.wait(30s), 2) << launch.err();
  EXPECT_NE(launch.err().find("STRETCH_STORE_TOKEN = a token of 1 character(s): expected at "
                              "least 16 characters"),
            std::string::npos)
      << launch.err();
}

// A blank token is no secret (issue 42, item 10: 16 spaces were accepted): `stretch launch
// --no_ssh` and `stretch agent` refuse one, naming where it came from and what they expected.
TEST(Launch, ABlankTokenIsRefusedNamingItsSource) {
  stretch::test::TempDir dir("stretch-launch");
  const std::string expected =
      "STRETCH_STORE_TOKEN = a token of 16 character(s), all whitespace: expected at least 16 "
      "characters other than whitespace";
  ::setenv("STRETCH_STORE_TOKEN", std::string(16, ' ').c_str(), 1);
  Launch launch(dir.path(), {"--no_ssh", "--node_rank", "0", "--master_addr", "127.0.0.1",
                             "--master_port", std::to_string(freePort()), "/bin/true"});
  Launch agent(
      dir.path(),
      {"--rdzv", "127.0.0.1:" + std::to_string(freePort()), "--node_id", "n1", "--nproc", "1"},
      "agent", "agent-");
  ::unsetenv("STRETCH_STORE_TOKEN");
  EXPECT_EQ(launch.wait(30s), 2) << launch.err();
  EXPECT_NE(launch.err().find(expected), std::string::npos) << launch.err();
  EXPECT_EQ(agent.wait(30s), 2) << agent.err();
  EXPECT_NE(agent.err().find(expected), std::string::npos) << agent.err();
}

// --save_pid writes $TMPDIR/<pid>.deepspeed, a path anyone can predict: a link planted there is
// replaced, never followed (it used to overwrite the link's target).
TEST(Launch, SavePidNeverWritesThroughAPlantedLink) {
  stretch::test::TempDir dir("stretch-launch");
  const fs::path victim = dir.path() / "victim";
  std::ofstream(victim) << "precious\n";
  // The shell plants the link at its own pid, then becomes the launcher (exec keeps the pid).
  Child launch(dir.path(),
               {"/bin/sh", "-c",
                "export TMPDIR=\"$1\"; ln -s \"$2\" \"$1/$$.deepspeed\" && exec \"$3\" launch "
                "--save_pid --num_gpus 1 /bin/sh -c 'cat \"$TMPDIR/$PPID.deepspeed\" > /dev/null'",
                "sh", dir.path().string(), victim.string(), STRETCH_CLI});
  EXPECT_EQ(launch.wait(30s), 0) << launch.err();
  EXPECT_EQ(stretch::test::readFileIfAny(victim), "precious\n");
  EXPECT_FALSE(fs::exists(dir.path() / (std::to_string(launch.pid()) + ".deepspeed")));
}

}  // namespace
