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

  // Without a config there is no batch to promise.
  Launch bare(
      dir.path(),
      {"--num_gpus", "1", "--log_dir", (dir.path() / "b/logs").string(), "/bin/sh", "-c", report},
      "launch", "b-");
  ASSERT_EQ(bare.wait(60s), 0) << bare.err();
  EXPECT_EQ(stretch::test::readFileIfAny(dir.path() / "b/logs/attempt_1/rank_0.log"),
            "1 1 none none none\n");
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
           {{"--config", (dir.path() / "missing.json").string(), "/bin/true"}, "missing.json"},
           {{"--bogus_flag", "3", "/bin/true"}, "unknown flag --bogus_flag"},
           {{"--num_gpus", "1", "-x", "/bin/true"}, "unknown flag -x"},
           {{}, "PROGRAM"}}) {
    Launch launch(dir.path(), c.args);
    EXPECT_EQ(launch.wait(30s), 2) << c.expected << ": " << launch.err();
    EXPECT_NE(launch.err().find(c.expected), std::string::npos) << launch.err();
  }
}

}  // namespace
