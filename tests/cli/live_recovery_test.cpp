// Live recovery under `stretch launch` (the default --recovery live), end to end with real
// processes on loopback: 4 workers of the digits job (ZeRO 0, 1 or 2) or the GPT job, one
// SIGKILLed at a random moment. The survivors must continue without a restart (an interim
// generation of the survivors within 1 s of the kill), every step must be completed exactly once
// (the lost work is at most the step in flight), and the final weights must be bitwise those of a
// run that trains the same schedule of world sizes from checkpoints (`--recovery restart`, one
// launch per segment; a set of more than 2 random trials takes every first segment from one
// uninterrupted run that saved after each step). STRETCH_LIVE_TRIALS sets the number of random
// trials (the `slow` label runs 20); STRETCH_LIVE_LIMIT_S bounds each launch (default 300 s; lower
// finds a hang sooner).

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <climits>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "tests/cli/launch_support.hpp"
#include "tests/support/test_support.hpp"

namespace {

using namespace stretch::test::launch;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A CUDA device this machine's driver lists (the test binary does not link the CUDA runtime).
// The GPUs nvidia-smi -L lists (0 without the tool).
int visibleGpus() {
  FILE* smi = ::popen("nvidia-smi -L 2>/dev/null", "r");
  if (smi == nullptr)
    return 0;
  int gpus = 0;
  char line[256] = {};
  while (std::fgets(line, sizeof(line), smi) != nullptr)
    gpus += std::string(line).starts_with("GPU ") ? 1 : 0;
  ::pclose(smi);
  return gpus;
}

bool cudaDeviceVisible() {
  return visibleGpus() > 0;
}

int liveTrials(int fallback) {
  return stretch::test::positiveFromEnvironment("STRETCH_LIVE_TRIALS", fallback);
}

std::int64_t unixNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A job: its program with its own options (without --steps and checkpoint options), its
// config, and how many steps it trains.
struct Job {
  std::vector<std::string> program;
  std::string config;
  int steps = 0;
  int workers = 4;
  std::chrono::seconds limit{stretch::test::positiveFromEnvironment("STRETCH_LIVE_LIMIT_S", 300)};
  // ZeRO 1/2: a step whose partition copies a dead rank never sent is trained again by the new
  // generation (its optimizer state died with the rank), so each kill may redo one step.
  int zeroStage = 0;
};

// `job` with "zero_optimization.stage" set to `stage`, its config written into `dir`.
Job withZeroStage(Job job, int stage, const fs::path& dir) {
  auto config = nlohmann::json::parse(stretch::test::readFileIfAny(job.config), nullptr, true,
                                      /*ignore_comments=*/true);
  config["zero_optimization"] = {{"stage", stage}};
  const fs::path path = dir / ("zero" + std::to_string(stage) + ".json");
  std::ofstream(path) << config.dump();
  for (auto& arg : job.program) {
    if (arg == job.config)
      arg = path.string();
  }
  job.config = path.string();
  job.zeroStage = stage;
  return job;
}

// 400 steps: a kill after step 2..134 (randomKillTrials) leaves room for the replacement, which
// joins some 150-250 steps after the kill on the 2-core machine.
Job digitsLiveJob() {
  return {{STRETCH_TRAIN_DIGITS, "--config", digitsConfig()}, digitsConfig(), 400};
}

#ifdef STRETCH_TRAIN_GPT
std::string gptConfig() {
  return std::string(STRETCH_SOURCE) + "/fixtures/jobs/gpt/ds_config_elastic.json";
}

Job gptLiveJob() {
  return {{STRETCH_TRAIN_GPT, "--config", gptConfig(), "--layers", "2", "--heads", "2", "--width",
           "32", "--context", "32", "--dropout", "0.1", "--eval-every", "0", "--log-every", "10",
           "--sample-chars", "20"},
          gptConfig(),
          60};
}
#endif

// `stretch launch` of `job` on one host with `workers` slots; the job trains `steps` steps with
// checkpoints in ckpt (--save-at / --resume as given), its output in dir/logs.
std::vector<std::string> launchArgs(const Job& job, const fs::path& dir, int workers,
                                    const std::string& recovery, int steps,
                                    const std::vector<std::string>& checkpointing) {
  std::vector<std::string> args = {"--num_gpus",     std::to_string(workers),
                                   "--master_port",  std::to_string(freePort()),
                                   "--config",       job.config,
                                   "--recovery",     recovery,
                                   "--max_restarts", "5",
                                   "--log_dir",      (dir / "logs").string(),
                                   "--event_log",    (dir / "events.jsonl").string()};
  args.insert(args.end(), job.program.begin(), job.program.end());
  args.insert(args.end(), {"--steps", std::to_string(steps), "--json"});
  args.insert(args.end(), checkpointing.begin(), checkpointing.end());
  return args;
}

// Per step of a run's STRETCH_TIMINGS_FILE: the world sizes that completed it and when the
// first rank did (unix ns).
struct StepInfo {
  std::set<int> worlds;
  std::int64_t firstNs = LLONG_MAX;
  std::int64_t lastNs = 0;
  int lastWorld = 0;  // the world size of the latest completion
};

std::map<int, StepInfo> stepsOf(const fs::path& timings) {
  std::map<int, StepInfo> steps;
  std::ifstream in(timings);
  for (std::string line; std::getline(in, line);) {
    if (line.empty())
      continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("world_size"))
      continue;  // a checkpoint line, or a line cut short by a kill
    auto& s = steps[j["step"].get<int>()];
    const int world = j["world_size"].get<int>();
    const auto ns = j["unix_ns"].get<std::int64_t>();
    s.worlds.insert(world);
    s.firstNs = std::min(s.firstNs, ns);
    if (ns >= s.lastNs) {
      s.lastNs = ns;
      s.lastWorld = world;
    }
  }
  return steps;
}

struct Segment {
  int first = 0;
  int last = 0;
  int world = 0;
};

// Consecutive steps completed by one world size.
std::vector<Segment> scheduleOf(const std::map<int, StepInfo>& steps) {
  std::vector<Segment> out;
  for (const auto& [step, info] : steps) {
    const int world = info.lastWorld;
    if (!out.empty() && out.back().world == world && out.back().last + 1 == step)
      out.back().last = step;
    else
      out.push_back({step, step, world});
  }
  return out;
}

std::string describe(const std::vector<Segment>& schedule) {
  std::string out;
  for (const auto& s : schedule)
    out += std::to_string(s.first) + "-" + std::to_string(s.last) + "@" + std::to_string(s.world) +
           " ";
  return out;
}

// The workers' log files (*.log) under dir/logs; none when the launch never started.
std::vector<fs::path> workerLogs(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code error;
  for (fs::recursive_directory_iterator it(dir / "logs", error), end; !error && it != end;
       it.increment(error)) {
    if (it->path().extension() == ".log")
      out.push_back(it->path());
  }
  return out;
}

// The summary rank 0 of the last generation printed, from any worker log under dir/logs.
nlohmann::json finalSummary(const fs::path& dir, int steps) {
  for (const auto& log : workerLogs(dir)) {
    const auto summary = summaryOf(stretch::test::readFileIfAny(log));
    if (!summary.is_null() && summary.value("steps", 0) == steps)
      return summary;
  }
  return {};
}

// Checkpoints of `job` trained without a failure by all its workers, one after each of its first
// `upTo` steps: the first segment of every reference schedule that starts with the full world.
// One launch serves every trial of a test (a trial set's 20 references skip 20 launches), and
// a checkpoint saved after step b of this run is the one a launch of b steps saves: the jobs
// train the same way whatever their --steps (the live runs rely on it too).
class PrefixCheckpoints {
 public:
  PrefixCheckpoints(const Job& job, int upTo) : upTo_(upTo) {
    Launch launch(dir_.path(),
                  launchArgs(job, dir_.path(), job.workers, "restart", upTo,
                             {"--checkpoint-dir", ckpt().string(), "--save-every", "1"}));
    EXPECT_EQ(launch.wait(job.limit), 0) << launch.err();
  }
  // Makes `ckpt` resume from the checkpoint after `step`; false when there is none.
  bool seed(int step, const fs::path& ckpt) const {
    const std::string tag = "global_step" + std::to_string(step);
    if (step > upTo_ || !fs::is_directory(this->ckpt() / tag))
      return false;
    fs::create_directories(ckpt);
    fs::copy(this->ckpt() / tag, ckpt / tag, fs::copy_options::recursive);
    std::ofstream(ckpt / "latest") << tag;
    return true;
  }

 private:
  fs::path ckpt() const { return dir_.path() / "ckpt"; }
  stretch::test::TempDir dir_{"stretch-live-prefix"};
  int upTo_ = 0;
};

// The latest step after which the random trials kill a worker: a third of the way in, so that
// the replacement joins before the end.
int lastRandomKillStep(const Job& job) {
  return 1 + job.steps / 3;
}

// The prefix checkpoints of `job` (by its program and config), made on first use: up to the
// latest step the random trials kill after plus a few for the step in flight.
const PrefixCheckpoints& prefixOf(const Job& job) {
  static std::map<std::string, std::unique_ptr<PrefixCheckpoints>> prefixes;
  std::string key = std::to_string(job.workers) + " " + std::to_string(job.steps);
  for (const auto& arg : job.program)
    key += " " + arg;
  auto& prefix = prefixes[key];
  if (!prefix)
    prefix = std::make_unique<PrefixCheckpoints>(
        job, std::min(job.steps - 1, lastRandomKillStep(job) + 4));
  return *prefix;
}

// The weights of `schedule` trained from checkpoints: one `--recovery restart` launch per
// segment, each resuming from the previous one's checkpoint. A first segment of the full world
// comes from the job's prefix checkpoints when `sharePrefix` (the random trials).
std::string referenceDigest(const Job& job, std::vector<Segment> schedule,
                            bool sharePrefix = false) {
  stretch::test::TempDir dir("stretch-live-ref");
  const std::string ckpt = (dir.path() / "ckpt").string();
  if (sharePrefix && schedule.size() > 1 && schedule.front().world == job.workers &&
      schedule.front().first == 1 && prefixOf(job).seed(schedule.front().last, ckpt))
    schedule.erase(schedule.begin());
  nlohmann::json summary;
  for (const auto& segment : schedule) {
    std::vector<std::string> checkpointing = {"--checkpoint-dir", ckpt, "--resume"};
    if (segment.last < job.steps)
      checkpointing.insert(checkpointing.end(), {"--save-at", std::to_string(segment.last)});
    Launch launch(dir.path(), launchArgs(job, dir.path(), segment.world, "restart", segment.last,
                                         checkpointing));
    EXPECT_EQ(launch.wait(job.limit), 0) << launch.err();
    summary = finalSummary(dir.path(), segment.last);
    fs::remove_all(dir.path() / "logs");
  }
  return summary.value("weights_sha256", "");
}

struct LiveRun {
  int status = -1;
  std::map<int, StepInfo> steps;
  std::vector<nlohmann::json> events;
  nlohmann::json summary;
  std::vector<std::int64_t> killNs;
  std::string err;
  std::string out;     // the agent's log
  double seconds = 0;  // the launch's wall time
};

using KillFunction = std::function<std::vector<std::int64_t>(Launch&, const fs::path&)>;

// Runs `stretch launch ARGS` (a run of `job`) and calls kill(launch, timings) once it started.
LiveRun runLaunchWithKills(const Job& job, const fs::path& dir,
                           const std::vector<std::string>& args, const KillFunction& kill) {
  const fs::path timings = dir / "timings.jsonl";
  ::setenv("STRETCH_TIMINGS_FILE", timings.c_str(), 1);
  const auto started = std::chrono::steady_clock::now();
  Launch launch(dir, args);
  ::unsetenv("STRETCH_TIMINGS_FILE");
  LiveRun run;
  run.killNs = kill(launch, timings);
  run.status = launch.wait(job.limit);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  run.err = launch.err();
  run.out = launch.out();
  if (run.status != 0) {
    // What the workers said last, for the failure message (their logs go with `dir`).
    for (const auto& log : workerLogs(dir)) {
      const std::string text = stretch::test::readFileIfAny(log);
      run.err += "\n--- " + fs::relative(log, dir).string() + " (last 800 bytes):\n" +
                 text.substr(text.size() > 800 ? text.size() - 800 : 0);
    }
  }
  run.steps = stepsOf(timings);
  run.events = eventsOf(dir / "events.jsonl");
  run.summary = finalSummary(dir, job.steps);
  return run;
}

// Runs `job` on one host with live recovery and calls kill(launch, timings) once training is
// under way.
LiveRun runWithKills(const Job& job, const fs::path& dir, const std::string& recovery,
                     const KillFunction& kill, const std::vector<std::string>& checkpointing = {}) {
  return runLaunchWithKills(
      job, dir, launchArgs(job, dir, job.workers, recovery, job.steps, checkpointing), kill);
}

// Waits until some rank completed step `step` (bounded: 120 s).
bool waitForStep(const fs::path& timings, int step) {
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto steps = stepsOf(timings);
    if (!steps.empty() && steps.rbegin()->first >= step)
      return true;
    std::this_thread::sleep_for(2ms);
  }
  return false;
}

// SIGKILLs (or sends `signal` to) `count` of the launcher's workers, chosen by `rng`, once step
// `atStep` is done; returns the kill times.
std::vector<std::int64_t> killWorkers(Launch& launch, const fs::path& timings, int atStep,
                                      int count, std::mt19937& rng, int signal = SIGKILL) {
  if (!waitForStep(timings, atStep))
    return {};
  auto workers = launch.workers();
  std::shuffle(workers.begin(), workers.end(), rng);
  std::vector<std::int64_t> times;
  for (int i = 0; i < count && i < static_cast<int>(workers.size()); ++i) {
    times.push_back(unixNowNs());
    ::kill(workers[static_cast<std::size_t>(i)], signal);
  }
  return times;
}

int countEvents(const std::vector<nlohmann::json>& events, const std::string& event,
                const std::string& recovery) {
  int n = 0;
  for (const auto& e : events)
    n += e.value("event", "") == event && e.value("recovery", "") == recovery ? 1 : 0;
  return n;
}

// What every live trial must show: a clean end, live recovery only, each step completed once
// by one world size, the survivors' first step within `resumeLimit` seconds of the (first) kill,
// and the weights of the same schedule trained from checkpoints.
void expectLiveRecovery(const Job& job, const LiveRun& run, const std::string& what,
                        bool sharePrefix = false, double resumeLimit = 1.0) {
  ASSERT_EQ(run.status, 0) << what << ": " << run.err;
  ASSERT_FALSE(run.killNs.empty()) << what << ": the run ended before the kill";
  EXPECT_GE(countEvents(run.events, "stop_workers", "live"), 1) << what;
  EXPECT_EQ(countEvents(run.events, "stop_workers", "checkpoint"), 0) << what;
  // The event log records each decision (agent::planLiveRecovery) beside the stop it follows.
  EXPECT_EQ(countEvents(run.events, "live_plan", "live"),
            countEvents(run.events, "stop_workers", "live"))
      << what;
  ASSERT_EQ(static_cast<int>(run.steps.size()), job.steps) << what << ": a step is missing";
  int redone = 0;
  for (const auto& [step, info] : run.steps) {
    redone += info.worlds.size() > 1 ? 1 : 0;
    if (job.zeroStage == 0) {
      EXPECT_EQ(info.worlds.size(), 1u) << what << ": step " << step << " completed twice";
    }
  }
  EXPECT_LE(redone, static_cast<int>(run.killNs.size())) << what << ": steps trained twice";
  const auto schedule = scheduleOf(run.steps);
  // The survivors' first completed step: the first one of a smaller world after the kill.
  std::int64_t resumed = LLONG_MAX;
  for (const auto& [step, info] : run.steps) {
    if (info.lastNs > run.killNs.front() && info.lastWorld < job.workers)
      resumed = std::min(resumed, info.worlds.size() > 1 ? info.lastNs : info.firstNs);
  }
  ASSERT_NE(resumed, LLONG_MAX) << what << ": no interim generation; schedule "
                                << describe(schedule);
  const double seconds = static_cast<double>(resumed - run.killNs.front()) / 1e9;
  std::string copies;
  if (run.summary.contains("partition_copy_bytes")) {
    copies = fmt::format("; rank 0's partition copies {:.3f} ms/step, {} B (optimizer state {} B)",
                         run.summary["partition_copy_ms_per_step"].get<double>(),
                         run.summary["partition_copy_bytes"].get<std::int64_t>(),
                         run.summary.value("optimizer_state_bytes", std::int64_t{0}));
  }
  EXPECT_LE(seconds, resumeLimit) << what;
  ASSERT_TRUE(run.summary.contains("weights_sha256")) << what << ": " << run.err;
  const auto started = std::chrono::steady_clock::now();
  const std::string reference = referenceDigest(job, schedule, sharePrefix);
  const double referenceSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // The run's and its reference's wall times: where a trial's time goes (docs/testing.md).
  std::printf(
      "%s: schedule %s; kill -> survivors' next completed step %.3f s; %d step(s) "
      "redone%s; run %.1f s, reference %.1f s\n",
      what.c_str(), describe(schedule).c_str(), seconds, redone, copies.c_str(), run.seconds,
      referenceSeconds);
  std::fflush(stdout);
  EXPECT_EQ(run.summary["weights_sha256"], reference)
      << what << ": schedule " << describe(schedule);
}

void randomKillTrials(const Job& job, int trials, const std::string& name) {
  // STRETCH_LIVE_SEED replays a printed seed's trials (kill steps and victims; the kills'
  // moments within a step still vary).
  const char* given = std::getenv("STRETCH_LIVE_SEED");
  unsigned seed = std::random_device{}();
  if (given != nullptr && *given != '\0') {
    char* end = nullptr;
    errno = 0;
    const unsigned long value = std::strtoul(given, &end, 10);
    ASSERT_TRUE(*end == '\0' && errno == 0 && value <= 0xffffffffUL &&
                std::isdigit(static_cast<unsigned char>(*given)))
        << "STRETCH_LIVE_SEED = '" << given << "': expected a seed a trial run printed (0 to "
        << 0xffffffffUL << ")";
    seed = static_cast<unsigned>(value);
  }
  std::mt19937 rng(seed);
  std::printf("%s: %d live-recovery trial(s) (seed %u; STRETCH_LIVE_SEED=%u replays them)\n",
              name.c_str(), trials, seed, seed);
  for (int trial = 0; trial < trials; ++trial) {
    stretch::test::TempDir dir("stretch-live");
    const int atStep =
        2 + static_cast<int>(rng() % static_cast<unsigned>(lastRandomKillStep(job) - 1));
    const auto run = runWithKills(
        job, dir.path(), "auto" /* live's old name */,
        [&](Launch& launch, const fs::path& t) { return killWorkers(launch, t, atStep, 1, rng); });
    expectLiveRecovery(job, run,
                       name + " trial " + std::to_string(trial) + " (kill after step " +
                           std::to_string(atStep) + ")",
                       /*sharePrefix=*/trials > 2);
  }
}

TEST(LiveLaunch, AKilledDigitsWorkerCostsAtMostTheStepInFlight) {
  randomKillTrials(digitsLiveJob(), liveTrials(2), "digits");
}

#ifdef STRETCH_TRAIN_GPT
TEST(LiveLaunch, AKilledTransformerWorkerCostsAtMostTheStepInFlight) {
  ::setenv("OMP_NUM_THREADS", "1", 1);
  randomKillTrials(gptLiveJob(), liveTrials(1), "gpt");
}
#endif

// On CUDA (skipped where no GPU is visible; docs/gpu.md's GPU check runs it first): two GPT
// workers share cuda:0, so their gradients go through Gloo staged in host memory, and a kill -9
// costs at most the step in flight; the weights end bitwise where `--recovery restart` runs of
// the same schedule end.
#ifdef STRETCH_TRAIN_GPT
TEST(LiveLaunch, CudaTwoWorkersSharingOneGpuRecoverLive) {
  if (!cudaDeviceVisible())
    GTEST_SKIP() << "no CUDA device visible (nvidia-smi -L lists none)";
  ::setenv("STRETCH_ACCELERATOR", "cuda", 1);
  Job job = gptLiveJob();
  job.program.push_back("--deterministic");  // bitwise repeatable on the GPU as on the CPU
  job.workers = 2;
  randomKillTrials(job, liveTrials(1), "gpt on cuda");
  ::unsetenv("STRETCH_ACCELERATOR");
}
#endif

// On two or more GPUs each worker has a device of its own, so NCCL carries the gradients and the
// generations' device buffers go over NCCL communicators (docs/launch.md, "On GPUs"): the
// survivor shrinks the launch's communicator instead of staging through host memory, and the
// weights still end bitwise where `--recovery restart` runs of the same schedule end. Skipped
// below 2 GPUs: NCCL refuses two ranks of one communicator on one device.
#ifdef STRETCH_TRAIN_GPT
TEST(LiveLaunch, CudaTwoWorkersOnTwoGpusRecoverLiveOverNccl) {
  if (const int gpus = visibleGpus(); gpus < 2) {
    GTEST_SKIP() << "needs 2 GPUs (" << gpus
                 << " visible): NCCL refuses two ranks of one communicator on one device";
  }
  ::setenv("STRETCH_ACCELERATOR", "cuda", 1);
  Job job = gptLiveJob();
  job.program.push_back("--deterministic");
  job.workers = 2;
  std::mt19937 rng(13);
  stretch::test::TempDir dir("stretch-live");
  const auto run = runWithKills(job, dir.path(), "live", [&](Launch& launch, const fs::path& t) {
    return killWorkers(launch, t, lastRandomKillStep(job) / 2 + 1, 1, rng);
  });
  expectLiveRecovery(job, run, "gpt on 2 GPUs over NCCL");
  std::string logs;
  for (const auto& log : workerLogs(dir.path()))
    logs += stretch::test::readFileIfAny(log);
  EXPECT_NE(logs.find("device communicator by shrink"), std::string::npos)
      << "the survivor did not shrink the launch's NCCL communicator:\n"
      << run.err;
  ::unsetenv("STRETCH_ACCELERATOR");
}
#endif

// ZeRO 1 and 2: the dead rank's optimizer partition comes from its buddy's host copy.
TEST(LiveLaunch, AKilledZero1WorkerCostsAtMostTheStepInFlight) {
  stretch::test::TempDir dir("stretch-live-config");
  randomKillTrials(withZeroStage(digitsLiveJob(), 1, dir.path()), liveTrials(1), "digits zero 1");
}

TEST(LiveLaunch, AKilledZero2WorkerCostsAtMostTheStepInFlight) {
  stretch::test::TempDir dir("stretch-live-config");
  randomKillTrials(withZeroStage(digitsLiveJob(), 2, dir.path()), liveTrials(1), "digits zero 2");
}

TEST(LiveLaunch, TwoWorkersKilledInOneStep) {
  const Job job = digitsLiveJob();
  std::mt19937 rng(7);
  stretch::test::TempDir dir("stretch-live");
  const auto run = runWithKills(job, dir.path(), "live", [&](Launch& launch, const fs::path& t) {
    return killWorkers(launch, t, 60, 2, rng);
  });
  expectLiveRecovery(job, run, "two kills");
}

TEST(LiveLaunch, AWorkerKilledDuringTheRecovery) {
  const Job job = digitsLiveJob();
  std::mt19937 rng(11);
  stretch::test::TempDir dir("stretch-live");
  const auto run = runWithKills(job, dir.path(), "live", [&](Launch& launch, const fs::path& t) {
    auto times = killWorkers(launch, t, 40, 1, rng);
    // The next kill while the survivors regroup and the replacement starts.
    std::this_thread::sleep_for(30ms);
    auto more = killWorkers(launch, t, 0, 1, rng);
    times.insert(times.end(), more.begin(), more.end());
    return times;
  });
  expectLiveRecovery(job, run, "kill during recovery");
}

// A worker that freezes (SIGSTOP) keeps its peers waiting in a collective; the agent finds it by
// its heartbeat (the engine beats every second), kills it after --hang_timeout and the job goes
// on live like after any death: from the stop to the survivors' next step takes the timeout and
// little more.
TEST(LiveLaunch, AFrozenWorkerIsFoundByItsHeartbeatKilledAndTheJobTrainsOnLive) {
  const Job job = digitsLiveJob();
  std::mt19937 rng(5);
  stretch::test::TempDir dir("stretch-live");
  auto args = launchArgs(job, dir.path(), job.workers, "live", job.steps, {});
  args.insert(args.begin(), {"--hang_timeout", "2"});
  const auto run =
      runLaunchWithKills(job, dir.path(), args, [&](Launch& launch, const fs::path& t) {
        return killWorkers(launch, t, 40, 1, rng, SIGSTOP);
      });
  EXPECT_NE(run.out.find("is hung: no heartbeat for"), std::string::npos) << run.out;
  expectLiveRecovery(job, run, "frozen worker", false, 2.0 + 3.0);
}

// The same after training has run for a while: the engine's beats are about a second apart then,
// and the limit once grew to 10x that gap (`--hang_timeout 2` meant ~10.6 s). A limit the user
// gives is the limit, and the message names the frozen worker's last steps, not the first one.
TEST(LiveLaunch, AGivenHangTimeoutIsTheLimitAfterTrainingHasRunForSeconds) {
  Job job = digitsLiveJob();
  job.steps = 3000;  // 4-8 ms a step on 4 workers of the 2-core machine: 12 s and more
  std::mt19937 rng(9);
  stretch::test::TempDir dir("stretch-live");
  auto args = launchArgs(job, dir.path(), job.workers, "live", job.steps, {});
  args.insert(args.begin(), {"--hang_timeout", "2"});
  const auto run =
      runLaunchWithKills(job, dir.path(), args, [&](Launch& launch, const fs::path& t) {
        if (!waitForStep(t, 10))
          return std::vector<std::int64_t>{};
        std::this_thread::sleep_for(2500ms);  // training for 2.5 s: beats a second apart
        return killWorkers(launch, t, 0, 1, rng, SIGSTOP);
      });
  EXPECT_NE(run.out.find("(limit 2 s)"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("last step 1;"), std::string::npos) << run.out;
  expectLiveRecovery(job, run, "frozen after seconds", false, 2.0 + 3.0);
}

// The end of the job meets the replacement's arrival: a worker dies early, the survivors pause
// (STRETCH_FAULT_PAUSE_AT_STEPS) after step `pauseAt` until the agent has published the
// generation that takes the replacement back, then go on. Paused after the second-to-last step,
// they grow for the last one; paused after the last one, they finish without it and the
// replacement has nothing left to do. Both end cleanly with the weights of their schedule.
void replacementArrivesAtTheEnd(const Job& job, int pauseAt, const std::string& what) {
  stretch::test::TempDir dir("stretch-live");
  const fs::path faults = dir.path() / "faults";
  fs::create_directories(faults);
  ::setenv("STRETCH_FAULT_DIR", faults.c_str(), 1);
  ::setenv("STRETCH_FAULT_PAUSE_AT_STEPS", std::to_string(pauseAt).c_str(), 1);
  std::mt19937 rng(static_cast<unsigned>(pauseAt));
  bool published = false;
  const auto run = runWithKills(job, dir.path(), "live", [&](Launch& launch, const fs::path& t) {
    auto times = killWorkers(launch, t, 5, 1, rng);
    const fs::path reached = faults / ("pause_" + std::to_string(pauseAt) + ".reached");
    const auto deadline = std::chrono::steady_clock::now() + 90s;
    while (std::chrono::steady_clock::now() < deadline && !published) {
      published = fs::exists(reached) &&
                  launch.out().find(": 4 worker(s) on 1 node(s)") != std::string::npos;
      std::this_thread::sleep_for(5ms);
    }
    std::ofstream(faults / ("pause_" + std::to_string(pauseAt) + ".release")) << "\n";
    return times;
  });
  ::unsetenv("STRETCH_FAULT_DIR");
  ::unsetenv("STRETCH_FAULT_PAUSE_AT_STEPS");
  EXPECT_TRUE(published) << what << ": the replacement's generation never came; " << run.err;
  expectLiveRecovery(job, run, what);
  const auto schedule = scheduleOf(run.steps);
  ASSERT_FALSE(schedule.empty());
  EXPECT_EQ(schedule.back().world, pauseAt < job.steps ? 4 : 3)
      << what << ": schedule " << describe(schedule);
}

TEST(LiveLaunch, TheReplacementArrivesForTheLastStepOrAfterIt) {
  for (const int stage : {0, 1}) {
    stretch::test::TempDir config("stretch-live-config");
    Job job = withZeroStage(digitsLiveJob(), stage, config.path());
    job.steps = 60;
    for (const int pauseAt : {job.steps - 1, job.steps}) {
      replacementArrivesAtTheEnd(
          job, pauseAt,
          "zero " + std::to_string(stage) + ", paused after step " + std::to_string(pauseAt));
    }
  }
}

// SIGKILLs the workers of local ranks `ranks` (of the first generation) once step `atStep` is
// done, `gap` apart; returns the kill times.
std::vector<std::int64_t> killLocalRanks(Launch& launch, const fs::path& timings, int atStep,
                                         const std::vector<int>& ranks,
                                         std::chrono::milliseconds gap = 0ms) {
  if (!waitForStep(timings, atStep))
    return {};
  auto workers = launch.workers();
  std::sort(workers.begin(), workers.end());  // started in local-rank order
  std::vector<std::int64_t> times;
  for (const int rank : ranks) {
    if (rank >= static_cast<int>(workers.size()))
      return {};
    if (!times.empty())
      std::this_thread::sleep_for(gap);
    times.push_back(unixNowNs());
    ::kill(workers[static_cast<std::size_t>(rank)], SIGKILL);
  }
  return times;
}

// ZeRO 1 and 2: two workers that are not each other's buddy die in one step, and a worker dies
// while the survivors of another's death regroup: every partition survives on its buddy.
TEST(LiveLaunch, Zero1And2SurviveTwoKillsInOneStepAndAKillDuringTheRecovery) {
  for (const int stage : {1, 2}) {
    stretch::test::TempDir config("stretch-live-config");
    const Job job = withZeroStage(digitsLiveJob(), stage, config.path());
    const std::string zero = "zero " + std::to_string(stage);
    {
      stretch::test::TempDir dir("stretch-live");
      const auto run = runWithKills(job, dir.path(), "live", [&](Launch& l, const fs::path& t) {
        return killLocalRanks(l, t, 60, {0, 2});
      });
      expectLiveRecovery(job, run, zero + ": two kills");
    }
    {
      stretch::test::TempDir dir("stretch-live");
      const auto run = runWithKills(job, dir.path(), "live", [&](Launch& l, const fs::path& t) {
        return killLocalRanks(l, t, 40, {1, 3}, 30ms);
      });
      expectLiveRecovery(job, run, zero + ": kill during recovery");
    }
  }
}

#ifdef STRETCH_TRAIN_GPT
// The transformer job's valid world sizes are 1, 2 and 4, so after a kill 2 of the 3 survivors
// train until the replacement is ready. The agent keeps the two that hold every ZeRO 1 partition
// between them (comm::interimMembers): the first two survivors would leave out a partition's
// last copy when rank 0, 2 or 3 dies, and the job would fall back to its checkpoint.
TEST(LiveLaunch, AnInterimWorldSmallerThanTheSurvivorsKeepsEveryZero1Partition) {
  ::setenv("OMP_NUM_THREADS", "1", 1);
  stretch::test::TempDir config("stretch-live-config");
  const Job job = withZeroStage(gptLiveJob(), 1, config.path());
  for (const int rank : {0, 3}) {
    const std::string what = "gpt zero 1: local rank " + std::to_string(rank) + " killed";
    stretch::test::TempDir dir("stretch-live");
    const auto run = runWithKills(job, dir.path(), "live", [&](Launch& l, const fs::path& t) {
      return killLocalRanks(l, t, 15, {rank});
    });
    bool interimOfTwo = false;
    for (const auto& [step, info] : run.steps)
      interimOfTwo = interimOfTwo || info.lastWorld == 2;
    EXPECT_TRUE(interimOfTwo) << what << ": schedule " << describe(scheduleOf(run.steps));
    expectLiveRecovery(job, run, what);
  }
}
#endif

// ZeRO 1: rank 1 and its buddy rank 2 die together, so partition 1 and its only copy are gone.
// When the agent reaps both deaths before it decides, its live plan (agent::planLiveRecovery)
// says so and restarts every worker from the checkpoint at once; when it decides after the first
// death, the survivors find the loss while rejoining, withdraw their offer to continue live, and
// the agent restarts every worker then. Either way the event log says "checkpoint".
TEST(LiveLaunch, ARankKilledWithItsBuddyFallsBackToTheCheckpoint) {
  stretch::test::TempDir dir("stretch-live");
  Job job = withZeroStage(digitsLiveJob(), 1, dir.path());
  job.steps = 300;
  const auto run = runWithKills(
      job, dir.path(), "live",
      [&](Launch& launch, const fs::path& t) {
        return killLocalRanks(launch, t, 100, {1, 2});
      },
      {"--checkpoint-dir", (dir.path() / "ckpt").string(), "--save-every", "50", "--resume"});
  ASSERT_EQ(run.status, 0) << run.err;
  ASSERT_FALSE(run.killNs.empty());
  EXPECT_GE(countEvents(run.events, "start_workers", "checkpoint"), 1);
  ASSERT_EQ(static_cast<int>(run.steps.size()), job.steps);
  std::string logs;
  for (const auto& log : workerLogs(dir.path()))
    logs += stretch::test::readFileIfAny(log);
  const bool agentSaw =
      run.out.find("ZeRO partition 1 was lost with its copy (ranks 1 and 2 of 4)") !=
      std::string::npos;
  const bool workersSaw = logs.find("partition 1 (held by old ranks 1 and 2)") != std::string::npos;
  EXPECT_TRUE(agentSaw || workersSaw) << run.out << logs;
  if (agentSaw) {  // the decision is in the event log too
    bool recorded = false;
    for (const auto& e : run.events)
      recorded = recorded ||
                 (e.value("event", "") == "live_plan" && e.value("recovery", "") == "checkpoint" &&
                  e.value("reason", "").find("ZeRO partition 1 was lost") != std::string::npos);
    EXPECT_TRUE(recorded) << "no live_plan record says why";
  }
}

// The figure the live path is for: the same kill with `--recovery restart` costs a restart of
// every worker and the steps since the checkpoint. Prints both (docs/launch.md quotes them).
TEST(LiveLaunch, ComparedWithTheRestartPath) {
  const Job job = digitsLiveJob();
  for (const std::string recovery : {"live", "restart"}) {
    stretch::test::TempDir dir("stretch-live");
    std::mt19937 rng(5);
    int lastBeforeKill = 0;
    const auto run = runWithKills(
        job, dir.path(), recovery,
        [&](Launch& launch, const fs::path& t) {
          auto times = killWorkers(launch, t, 130, 1, rng);
          const auto steps = stepsOf(t);
          lastBeforeKill = steps.empty() ? 0 : steps.rbegin()->first;
          return times;
        },
        {"--checkpoint-dir", (dir.path() / "ckpt").string(), "--save-every", "100", "--resume"});
    ASSERT_EQ(run.status, 0) << run.err;
    ASSERT_FALSE(run.killNs.empty());
    // The first step completed after the kill by a worker of the new generation: the first
    // step record after the kill that is not the step every rank was finishing then.
    std::int64_t next = LLONG_MAX;
    int nextStep = 0;
    for (const auto& [step, info] : run.steps) {
      if (step > lastBeforeKill + 1 && info.firstNs > run.killNs.front() && info.firstNs < next) {
        next = info.firstNs;
        nextStep = step;
      }
    }
    // Restarting from the checkpoint of step 100 completes steps 101.. again.
    std::int64_t redone = 0;
    std::ifstream in(dir.path() / "timings.jsonl");
    std::set<std::pair<int, int>> seen;  // (step, rank) completed
    for (std::string line; std::getline(in, line);) {
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.contains("world_size"))
        continue;
      if (!seen.insert({j["step"].get<int>(), j["rank"].get<int>()}).second && j["rank"] == 0)
        ++redone;
    }
    std::printf(
        "recovery %s: kill after step %d -> step %d completed %.3f s later; %lld step(s) "
        "trained twice\n",
        recovery.c_str(), lastBeforeKill, nextStep,
        static_cast<double>(next - run.killNs.front()) / 1e9, static_cast<long long>(redone));
    if (recovery == "live") {
      EXPECT_EQ(redone, 0);
      EXPECT_LE(static_cast<double>(next - run.killNs.front()) / 1e9, 1.0);
    } else {
      EXPECT_GT(redone, 0);
    }
  }
}

// ---- several hosts: the job controller and one node agent per host ----------------------------

// `stretch launch` of `job` on node agents n0, n1, ... (`nodes` of them) of 2 workers each (the
// local runner), elastic on 1 to 3 nodes; the job's store is on port + 1.
std::vector<std::string> multiNodeArgs(const Job& job, const fs::path& dir, int port,
                                       int nodes = 2) {
  auto args = localNodesOptions(dir, nodes, 2, port, job.config, 3, dir / "events.jsonl");
  args.insert(args.end(), job.program.begin(), job.program.end());
  args.insert(args.end(), {"--steps", std::to_string(job.steps), "--json"});
  return args;
}

// The wall clock (unix ns) at which `rank` completed `step`; 0 when it did not.
std::int64_t stepEndNs(const fs::path& timings, int step, int rank) {
  std::ifstream in(timings);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("world_size") && j["step"] == step && j["rank"] == rank)
      return j["unix_ns"].get<std::int64_t>();
  }
  return 0;
}

// Once the workers paused after step 20 (STRETCH_FAULT_PAUSE_AT_STEPS), stops node n1's agent
// and waits (bounded) for the controller's generation on one node. Returns when n1 was stopped
// (unix ns; 0 when the workers never paused or n1 has no agent) and whether that generation came;
// the caller releases the pause.
std::pair<std::int64_t, bool> loseN1AtStep20(Launch& launch, const fs::path& dir,
                                             const fs::path& faults) {
  if (!waitUntil([&] { return fs::exists(faults / "pause_20.reached"); }))
    return {0, false};
  pid_t n1 = -1;
  std::ifstream(dir / "logs" / "agent_n1.pid") >> n1;
  if (n1 <= 0)
    return {0, false};
  const std::int64_t killed = unixNowNs();
  ::kill(n1, SIGTERM);
  return {killed, waitUntil([&] {
            return launch.out().find("worker(s) on 1 node(s)") != std::string::npos;
          })};
}

// A worker of node n0 dies (the fault script kills rank 1 after step 30): the other three, on
// both nodes, train on in an interim generation of 3 while the replacement starts, and the job
// ends with the weights of its schedule of world sizes. ZeRO 0, 1 and 2.
TEST(LiveLaunchMultiNode, AKilledWorkersPeersOnBothNodesTrainOn) {
  for (const int stage : {0, 1, 2}) {
    stretch::test::TempDir config("stretch-live-config");
    Job job = withZeroStage(digitsLiveJob(), stage, config.path());
    job.steps = 120;
    stretch::test::TempDir dir("stretch-live-mn");
    const fs::path faults = dir.path() / "faults";
    fs::create_directories(faults);
    ::setenv("STRETCH_FAULT_DIR", faults.c_str(), 1);
    ::setenv("STRETCH_FAULT_KILL_AT_STEP", "30:1", 1);
    const auto run =
        runLaunchWithKills(job, dir.path(), multiNodeArgs(job, dir.path(), freePort()),
                           [&](Launch&, const fs::path& timings) -> std::vector<std::int64_t> {
                             if (!waitForStep(timings, 31))
                               return {};
                             return {stepEndNs(timings, 30, 1)};
                           });
    ::unsetenv("STRETCH_FAULT_DIR");
    ::unsetenv("STRETCH_FAULT_KILL_AT_STEP");
    expectLiveRecovery(
        job, run, "two nodes, zero " + std::to_string(stage) + ", rank 1 killed after step 30");
  }
}

// A program started through a shell wrapper that does not exec it (`sh -c 'prog "$@"; exit $?'`,
// as job scripts often are): the agent started the shell, the engine behind it is the shell's
// child with a pid of its own. Its live/capable key names the process group the agent started
// (live::workerProcessId), so the survivors still go on live after rank 1 is killed (before,
// every failure took the restart path).
TEST(LiveLaunch, AWorkerBehindAShellWrapperRecoversLive) {
  Job job = digitsLiveJob();
  job.steps = 120;
  job.program.insert(job.program.begin(), {"/bin/sh", "-c", "\"$0\" \"$@\"; exit $?"});
  stretch::test::TempDir dir("stretch-live-wrapped");
  const fs::path faults = dir.path() / "faults";
  fs::create_directories(faults);
  ::setenv("STRETCH_FAULT_DIR", faults.c_str(), 1);
  ::setenv("STRETCH_FAULT_KILL_AT_STEP", "30:1", 1);
  const auto run = runLaunchWithKills(
      job, dir.path(), launchArgs(job, dir.path(), job.workers, "live", job.steps, {}),
      [&](Launch&, const fs::path& timings) -> std::vector<std::int64_t> {
        if (!waitForStep(timings, 31))
          return {};
        return {stepEndNs(timings, 30, 1)};
      });
  ::unsetenv("STRETCH_FAULT_DIR");
  ::unsetenv("STRETCH_FAULT_KILL_AT_STEP");
  expectLiveRecovery(job, run, "sh -c wrapper, rank 1 killed after step 30");
}

// Node n1 is lost after step 20 (its agent stopped) and node n2 joins after step 40: n0's
// workers train on alone (world 2), then n2's workers receive the state live and the job grows
// back to 4. No worker restarts, nothing is read from a checkpoint, and the weights are those
// of the schedule 1-20@4 21-40@2 41-80@4 (ZeRO 0; with ZeRO 1 and 2 the step in flight may be
// trained again, from the partition copies of the step before). The workers pause at steps 20 and
// 40 (the fault script) until the node is gone or its replacement's generation is published.
TEST(LiveLaunchMultiNode, ANodeLostAndANodeJoiningKeepTheJobTraining) {
  for (const int stage : {0, 1, 2}) {
    const std::string what = "zero " + std::to_string(stage) + ", n1 lost, n2 joins";
    stretch::test::TempDir config("stretch-live-config");
    Job job = withZeroStage(digitsLiveJob(), stage, config.path());
    job.steps = 80;
    stretch::test::TempDir dir("stretch-live-mn");
    const fs::path faults = dir.path() / "faults";
    fs::create_directories(faults);
    ::setenv("STRETCH_FAULT_DIR", faults.c_str(), 1);
    ::setenv("STRETCH_FAULT_PAUSE_AT_STEPS", "20,40", 1);
    const int port = freePort();
    std::optional<Launch> joiner;
    bool lost = false;
    bool grown = false;
    const auto run = runLaunchWithKills(
        job, dir.path(), multiNodeArgs(job, dir.path(), port),
        [&](Launch& launch, const fs::path&) -> std::vector<std::int64_t> {
          const auto [killed, published] = loseN1AtStep20(launch, dir.path(), faults);
          if (killed == 0)
            return {};
          lost = published;
          std::ofstream(faults / "pause_20.release") << "\n";
          if (!waitUntil([&] { return fs::exists(faults / "pause_40.reached"); }))
            return {killed};
          joiner.emplace(dir.path(),
                         std::vector<std::string>{"--rdzv", "127.0.0.1:" + std::to_string(port + 1),
                                                  "--node_id", "n2", "--nproc", "2", "--token_file",
                                                  (dir.path() / "logs" / "job_token").string(),
                                                  "--log_dir", (dir.path() / "logs").string()},
                         "agent", "n2-");
          // Published, and n0's workers told (they then join it before step 41).
          grown = waitUntil([&] {
            const std::string out = launch.out();
            const auto at = out.find("4 worker(s) on 2 node(s)");
            return at != std::string::npos && out.find("agent n0: told", at) != std::string::npos;
          });
          std::ofstream(faults / "pause_40.release") << "\n";
          return {killed};
        });
    ::unsetenv("STRETCH_FAULT_DIR");
    ::unsetenv("STRETCH_FAULT_PAUSE_AT_STEPS");
    ASSERT_EQ(run.status, 0) << what << ": " << run.err;
    ASSERT_TRUE(joiner.has_value()) << what << ": never reached step 40; " << run.err;
    EXPECT_EQ(joiner->wait(60s), 0) << what << ": " << joiner->err();
    EXPECT_TRUE(lost) << what << ": no generation on n0 alone; " << run.err;
    EXPECT_TRUE(grown) << what << ": n2 never took part; " << run.err;
    EXPECT_EQ(countEvents(run.events, "stop_workers", "live"), 2) << what;
    EXPECT_EQ(countEvents(run.events, "start_workers", "checkpoint"), 0) << what;
    ASSERT_EQ(static_cast<int>(run.steps.size()), job.steps) << what << ": a step is missing";
    const auto schedule = scheduleOf(run.steps);
    std::printf("%s: schedule %s\n", what.c_str(), describe(schedule).c_str());
    std::fflush(stdout);
    if (stage == 0) {
      EXPECT_EQ(describe(schedule), "1-20@4 21-40@2 41-80@4 ") << what;
    } else {
      ASSERT_EQ(schedule.size(), 3u) << what << ": " << describe(schedule);
      EXPECT_EQ(schedule[1].world, 2) << what;
      EXPECT_GE(schedule[1].first, 20) << what;
      EXPECT_EQ(schedule[2].first, 41) << what;
    }
    ASSERT_TRUE(run.summary.contains("weights_sha256")) << what << ": " << run.err;
    EXPECT_EQ(run.summary["weights_sha256"], referenceDigest(job, schedule))
        << what << ": schedule " << describe(schedule);
  }
}

// Three nodes of 2 workers whose job's valid world sizes are 1, 2, 3 and 6 (a global batch of 12
// in micro batches of 2). Node n1 is lost after step 20: 4 workers remain but 4 is no valid size,
// so the job goes on with n0's 2 workers and n2 becomes spare. With ZeRO 1/2 the copies of n1's
// partitions are on n2 (a node's worth of ranks on), so n2's workers give them over as donors
// before they are stopped: no checkpoint is read, and the weights are those of the schedule
// 1-20@6 21-60@2. Before donors the job fell back to its checkpoint here. At ZeRO 0 every rank
// holds the whole state: n2's workers stop at once, no donors.
TEST(LiveLaunchMultiNode, ANodeLeftOutOfASmallerWorldGivesItsCopiesFirst) {
  for (const int stage : {0, 1, 2}) {
    const std::string what = "zero " + std::to_string(stage) + ", n1 lost, n2 spare";
    stretch::test::TempDir config("stretch-live-config");
    Job job = withZeroStage(digitsLiveJob(), stage, config.path());
    {
      auto json = nlohmann::json::parse(stretch::test::readFileIfAny(job.config));
      json["elasticity"] = {{"enabled", true},
                            {"max_train_batch_size", 12},
                            {"micro_batch_sizes", {2}},
                            {"min_gpus", 1},
                            {"max_gpus", 6},
                            {"version", 0.1}};
      std::ofstream(job.config) << json.dump();
    }
    job.steps = 60;
    stretch::test::TempDir dir("stretch-live-mn");
    const fs::path faults = dir.path() / "faults";
    fs::create_directories(faults);
    ::setenv("STRETCH_FAULT_DIR", faults.c_str(), 1);
    ::setenv("STRETCH_FAULT_PAUSE_AT_STEPS", "20", 1);
    bool shrunk = false;
    bool donors = false;
    const auto run = runLaunchWithKills(
        job, dir.path(), multiNodeArgs(job, dir.path(), freePort(), 3),
        [&](Launch& launch, const fs::path&) -> std::vector<std::int64_t> {
          const auto [killed, published] = loseN1AtStep20(launch, dir.path(), faults);
          if (killed == 0)
            return {};
          shrunk = published;
          donors = launch.out().find("2 survivor(s) give it their copies") != std::string::npos;
          std::ofstream(faults / "pause_20.release") << "\n";
          return {killed};
        });
    ::unsetenv("STRETCH_FAULT_DIR");
    ::unsetenv("STRETCH_FAULT_PAUSE_AT_STEPS");
    ASSERT_EQ(run.status, 0) << what << ": " << run.err;
    EXPECT_TRUE(shrunk) << what << ": no generation on one node; " << run.err;
    EXPECT_EQ(donors, stage > 0) << what << ": n2's workers were donors or not; " << run.err;
    std::string logs;
    for (const auto& log : workerLogs(dir.path()))
      logs += stretch::test::readFileIfAny(log);
    EXPECT_EQ(logs.find("gives its partition copies to generation") != std::string::npos, stage > 0)
        << what;
    EXPECT_EQ(countEvents(run.events, "start_workers", "checkpoint"), 0) << what;
    ASSERT_EQ(static_cast<int>(run.steps.size()), job.steps) << what << ": a step is missing";
    const auto schedule = scheduleOf(run.steps);
    std::printf("%s: schedule %s\n", what.c_str(), describe(schedule).c_str());
    std::fflush(stdout);
    ASSERT_EQ(schedule.size(), 2u) << what << ": " << describe(schedule);
    EXPECT_EQ(schedule[0].world, 6) << what;
    EXPECT_EQ(schedule[1].world, 2) << what;
    ASSERT_TRUE(run.summary.contains("weights_sha256")) << what << ": " << run.err;
    EXPECT_EQ(run.summary["weights_sha256"], referenceDigest(job, schedule))
        << what << ": schedule " << describe(schedule);
  }
}

}  // namespace
