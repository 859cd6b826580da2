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
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "tests/support/test_support.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

int freePort() {
  static std::mt19937 rng(static_cast<unsigned>(::getpid()));
  return 20000 + static_cast<int>(rng() % 20000);
}

// A running `stretch launch`; stdout and stderr go to files in `dir`.
class Launch {
 public:
  Launch(const fs::path& dir, std::vector<std::string> args) : dir_(dir) {
    std::vector<std::string> argv = {STRETCH_CLI, "launch"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (auto& a : argv)
      cargv.push_back(a.data());
    cargv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, (dir / "out.txt").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, (dir / "err.txt").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    EXPECT_EQ(posix_spawn(&pid_, argv[0].c_str(), &actions, nullptr, cargv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Launch() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }

  // The exit status, or -1 when it did not end within `limit` (then it is killed).
  int wait(std::chrono::seconds limit = 120s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(10ms);
    }
    return -1;
  }

  // The launcher's child processes (its workers).
  std::vector<pid_t> workers() const {
    std::vector<pid_t> out;
    std::istringstream in(stretch::test::readFileIfAny("/proc/" + std::to_string(pid_) + "/task/" +
                                                       std::to_string(pid_) + "/children"));
    pid_t p = 0;
    while (in >> p)
      out.push_back(p);
    return out;
  }

  pid_t pid() const { return pid_; }
  std::string out() const { return stretch::test::readFileIfAny(dir_ / "out.txt"); }
  std::string err() const { return stretch::test::readFileIfAny(dir_ / "err.txt"); }

 private:
  fs::path dir_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// The last JSON summary line the job printed (rank 0's).
nlohmann::json summaryOf(const std::string& out) {
  std::istringstream in(out);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty() && line.front() == '{')
      last = line;
  }
  return last.empty() ? nlohmann::json() : nlohmann::json::parse(last);
}

// Rank 0's summary from the worker logs of the last attempt that has one.
nlohmann::json jobSummary(const fs::path& dir) {
  nlohmann::json last;
  for (int attempt = 1; attempt < 100; ++attempt) {
    const fs::path log = dir / "logs" / ("attempt_" + std::to_string(attempt)) / "rank_0.log";
    if (!fs::exists(log))
      break;
    const auto summary = summaryOf(stretch::test::readFileIfAny(log));
    if (!summary.is_null())
      last = summary;
  }
  return last;
}

std::vector<nlohmann::json> eventsOf(const fs::path& file) {
  std::vector<nlohmann::json> out;
  std::istringstream in(stretch::test::readFileIfAny(file));
  std::string line;
  while (std::getline(in, line))
    out.push_back(nlohmann::json::parse(line));
  return out;
}

std::vector<std::string> digitsJob(const fs::path& dir, int slots, int steps) {
  const std::string config =
      std::string(STRETCH_SOURCE) + "/fixtures/jobs/digits/ds_config_elastic.json";
  return {"--num_gpus",
          std::to_string(slots),
          "--master_port",
          std::to_string(freePort()),
          "--config",
          config,
          "--elastic",
          "1:1",
          "--monitor_interval",
          "1",
          "--log_dir",
          (dir / "logs").string(),
          "--event_log",
          (dir / "events.jsonl").string(),
          "--checkpoint_dir",
          (dir / "ckpt").string(),
          STRETCH_TRAIN_DIGITS,
          "--config",
          config,
          "--steps",
          std::to_string(steps),
          "--checkpoint-dir",
          (dir / "ckpt").string(),
          "--save-every",
          "40",
          "--resume",
          "--json"};
}

// The wall-clock time of the first log line of `log` containing `needle` ("[2026-11-23
// 02:40:00.617] [info] ..."), as seconds since the epoch; nullopt when absent.
std::optional<double> logTime(const fs::path& log, const std::string& needle) {
  std::istringstream in(stretch::test::readFileIfAny(log));
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(needle) == std::string::npos || line.size() < 25 || line[0] != '[')
      continue;
    std::tm tm{};
    int millis = 0;
    if (std::sscanf(line.c_str(), "[%d-%d-%d %d:%d:%d.%d]", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                    &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &millis) != 7)
      continue;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_isdst = -1;
    return static_cast<double>(std::mktime(&tm)) + millis / 1000.0;
  }
  return std::nullopt;
}

double wallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int faultTrials() {
  const char* v = std::getenv("STRETCH_LAUNCH_FAULT_TRIALS");
  return v != nullptr ? std::max(1, std::atoi(v)) : 3;
}

TEST(Launch, TwoWorkersTrainTheExampleJob) {
  stretch::test::TempDir dir("stretch-launch");
  Launch launch(dir.path(), digitsJob(dir.path(), 2, 200));
  ASSERT_EQ(launch.wait(), 0) << launch.err();
  const auto summary = jobSummary(dir.path());
  ASSERT_FALSE(summary.is_null());
  EXPECT_EQ(summary["world_size"], 2);
  EXPECT_EQ(summary["steps"], 200);
  EXPECT_TRUE(fs::exists(dir.path() / "logs" / "attempt_1" / "rank_1.log"));
  const auto events = eventsOf(dir.path() / "events.jsonl");
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["event"], "finish");
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

TEST(Launch, BadInputIsExitStatusTwoWithTheFlagNamed) {
  stretch::test::TempDir dir("stretch-launch");
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const fs::path hostfile = dir.path() / "hostfile";
  std::ofstream(hostfile) << "worker-1 slots=2\nworker-1 slots=4\n";
  for (const auto& c : std::vector<Case>{
           {{"--elastic", "3:1", "/bin/true"}, "--elastic"},
           {{"--hostfile", hostfile.string(), "/bin/true"}, "worker-1"},
           {{"--include", "localhost:7", "--num_gpus", "2", "/bin/true"}, "--include"},
           {{"--launcher", "pdsh", "/bin/true"}, "--launcher"},
           {{"--config", (dir.path() / "missing.json").string(), "/bin/true"}, "missing.json"},
           {{}, "PROGRAM"}}) {
    Launch launch(dir.path(), c.args);
    EXPECT_EQ(launch.wait(30s), 2) << c.expected << ": " << launch.err();
    EXPECT_NE(launch.err().find(c.expected), std::string::npos) << launch.err();
  }
}

}  // namespace
