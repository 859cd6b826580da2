// `stretch sim --calibrate [--job PROGRAM ... --config CFG]`: fits the simulator's step model to
// what training itself measures, and checks the fit on a run it was not fitted to
// (docs/simulator.md, "Calibrating a scenario"). Every worker runs with OMP_NUM_THREADS=1 and
// STRETCH_TIMINGS_FILE set, so the engine writes one line per rank and step (forward, backward,
// all-reduce wait, optimizer, the step's period; runtime/engine/step_timings.hpp).
//
//  1. network: `stretch bench comm` all_reduce over 2 Gloo ranks, 4 KiB to 4 MiB -> the
//     per-collective latency and the bandwidth, least squares on relative error over
//     sim::collectiveCost itself;
//  2. fit runs under `stretch launch`: 1 worker, then 2 workers (two local node agents of one
//     worker, the multi-node path), at the config's micro batch and accumulation a (warm-up
//     steps dropped). Per rank and step, compute c = step_ms - all-reduce
//     wait - optimizer: from the first forward to the reduction.
//       compute per sample   C = median(c) of the lone worker / (micro x a): computing alone,
//                            nothing to wait for
//       compute spread       s = (M / C1 - 1) / e(2), M = median over steps of the slower of the
//                            2 ranks' c, C1 = the lone worker's median c: the straggler term
//                            (C1 s e(D): the slowest of D ranks) of the step model, a fraction of
//                            the compute, so it scales with it; it takes in both random spread
//                            and a rank that is always slower (two unequal cores)
//       step overhead        O = median(optimizer + period - step_ms) at 2 workers: the update
//                            after the reduction and what happens between steps (data, logging)
//       all-reduce           the rest of the measured step S = median(period):
//                            S - C1 (1 + s e(2)) - O; its gap to the benchmark's time for the
//                            same bytes goes into the per-collective latency (inside training a
//                            rank waits on a collective its peer reaches later, and Gloo wakes
//                            it: far slower than the benchmark's back-to-back calls)
//  3. held-out check: 2 workers at accumulation 2a, predicted by sim::planStep with the fitted
//     figures and measured (median period). The runs of 2 and 3 are interleaved (1 worker, 2
//     workers, 2 workers at 2a, and again for each --repeat), so that a machine whose speed
//     drifts over minutes slows the fit and the check alike.
//  4. restart and checkpoint costs, when the job saves checkpoints (the example does; a --job
//     with --checkpoint-args): every run saves into its own directory and the engine writes each
//     save's and load's wall time; one more 2-worker run resumes from the last fit run's
//     checkpoint. save_seconds is the median save (the slowest rank's), load_seconds the
//     resumed run's load, and restart_overhead_seconds the median over the 2-worker runs of
//     (end of the first step) - (the launcher's start_workers) - (load) - (the run's median
//     step): process start, LibTorch, the rendezvous, the model's set-up and the first step's
//     extra time, which is what the simulator charges every start.
//  5. live recovery (`stretch launch --recovery auto`, one host of 2 workers): the fault script
//     (STRETCH_FAULT_DIR, STRETCH_FAULT_KILL_AT_STEP, honoured by jobs built on the examples'
//     job support) kills rank 1 after step K (half the run); reconfigure_seconds is the median
//     over --repeat runs of (the first completion of step K + 1 after the kill) - (rank 1's end
//     of step K) - (the lone worker's median step): detection, the survivors' agreement on the
//     new group, re-slicing and the step redone, which the simulator charges a live start. A run
//     whose kill did not happen or whose job restarted instead (its event log says "recovery":
//     "checkpoint") measures nothing, and the scenario keeps checkpoint-restart.
//  6. with --control-plane FILE, a benchmark of the control plane at many node agents: its
//     restart cost per node count (kill_to_running_s) is added to restart_overhead_seconds and
//     reconfigure_seconds, its detection (stop_noticed_s) to failure_detection_seconds
//     (sim_calibrate_control_plane.cpp).
//
// This file resolves the job and runs it (and the benchmark); reading what the runs wrote and
// the fits are in sim_calibrate_fit.cpp, what both share in sim_calibrate_detail.hpp.

#include "tools/sim_calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/comm/types.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/ports.hpp"
#include "runtime/launcher/process.hpp"
#include "sim/cluster.hpp"
#include "sim/collective_cost.hpp"
#include "sim/monte_carlo.hpp"
#include "sim/step_model.hpp"
#include "tools/rank_launcher.hpp"
#include "tools/sim_calibrate_detail.hpp"

namespace stretch::tools {

namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kExampleMicro = 8;
constexpr std::int64_t kExampleAccumulation = 3;
constexpr int kExampleSteps = 300;

using namespace detail;

// Throws ConfigError unless `args` (when given) name the checkpoint directory as {dir}.
void checkCheckpointArgs(const std::vector<std::string>& args) {
  if (args.empty()) {
    return;
  }
  std::string joined;
  for (const auto& a : args) {
    joined += (joined.empty() ? "" : " ") + a;
  }
  if (joined.find("{dir}") == std::string::npos) {
    throw ConfigError(ErrorDetail{"--checkpoint-args", joined,
                                  "arguments naming the checkpoint directory as {dir} (each "
                                  "run gets its own)"});
  }
}

// A --job's --config (JSON, comments allowed); ConfigError when it is not given, unreadable or
// not JSON.
nlohmann::json readJobConfig(const std::string& path) {
  if (path.empty()) {
    throw ConfigError(ErrorDetail{"--config", "(none)",
                                  "the job's DeepSpeed config (JSON) with --job: the "
                                  "calibration passes it to the job as --config"});
  }
  std::ifstream in(path);
  if (!in) {
    throw ConfigError(ErrorDetail{"--config", path, "a readable JSON file"});
  }
  try {
    return nlohmann::json::parse(in, nullptr, true, /*ignore_comments=*/true);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(ErrorDetail{"--config", path, fmt::format("a JSON object ({})", e.what())});
  }
}

// options.job with options.config or, when options.job is empty, the example next to `self`
// (which then saves checkpoints unless options.checkpointArgs says how). Throws ConfigError.
CalibrationJob resolveJob(const fs::path& self, CalibrationOptions& options) {
  CalibrationJob job;
  job.argv = options.job;
  checkCheckpointArgs(options.checkpointArgs);
  if (job.argv.empty()) {
    const fs::path digits = self.parent_path() / "stretch-train-digits";
    if (!fs::exists(digits)) {
      throw ConfigError(ErrorDetail{"--calibrate", digits.string(),
                                    "the example job next to stretch (built with LibTorch)"});
    }
    job.argv = {digits.string(), "--steps", std::to_string(kExampleSteps)};
    if (options.checkpointArgs.empty()) {
      options.checkpointArgs = {"--checkpoint-dir", "{dir}", "--save-every", "50"};
    }
    job.config = {{"train_micro_batch_size_per_gpu", kExampleMicro},
                  {"gradient_accumulation_steps", kExampleAccumulation},
                  {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 0.005}}}}}};
  } else {
    job.config = readJobConfig(options.config);
  }
  nlohmann::json& config = job.config;
  if (!config.is_object() || !config.contains("train_micro_batch_size_per_gpu")) {
    throw ConfigError(ErrorDetail{"--config train_micro_batch_size_per_gpu",
                                  options.config.empty() ? "(none)" : options.config,
                                  "a config that sets the micro batch (the calibration varies "
                                  "the accumulation around it)"});
  }
  job.micro = config.at("train_micro_batch_size_per_gpu").get<std::int64_t>();
  job.accumulation = config.value("gradient_accumulation_steps", std::int64_t{0});
  if (job.accumulation < 1) {
    job.accumulation =
        config.contains("train_batch_size")
            ? std::max<std::int64_t>(
                  1, config.at("train_batch_size").get<std::int64_t>() / (2 * job.micro))
            : 1;
  }
  config.erase("train_batch_size");
  config.erase("elasticity");
  return job;
}

// One run's timings file and launcher event log.
struct LaunchFiles {
  fs::path timings;
  fs::path events;
};

// The runs of one calibration, in a scratch directory of their own: removed when run()
// succeeds, left (with the logs a failure names) when it throws.
class Calibration {
 public:
  // Creates the scratch directory.
  Calibration(CalibrationOptions options, fs::path self, CalibrationJob job);

  // Steps 1 to 5, then the scenario (runCalibration's contract).
  nlohmann::json run();

 private:
  void progress(const std::string& what) const;
  // options.checkpointArgs with {dir} replaced by `ckpt`.
  std::vector<std::string> checkpointArgs(const fs::path& ckpt) const;
  // One run of the job under `stretch launch`; returns its timings file and event log. `extra`
  // goes after the job's arguments; `env` (NAME=VALUE) is set for it. `oneHost`: the workers
  // run under one agent (--num_gpus), else one node agent per worker.
  LaunchFiles launchJob(std::int64_t workers, std::int64_t gas, const std::string& tag,
                        const std::vector<std::string>& extra, bool oneHost,
                        const std::vector<std::string>& env);
  // One run of the job (one node agent per worker); its timings, `requireSteps` as readTimings.
  RunTimings runOnce(std::int64_t workers, std::int64_t gas, const std::string& tag,
                     const std::vector<std::string>& extra, bool requireSteps);
  // One more run (repeat r) of the job under `stretch launch`, merged into `all`.
  void addRepeat(RunTimings& all, std::int64_t workers, std::int64_t gas, int r);
  NetworkFit measureNetwork() const;
  // The resumed run (step 4): 2 workers loading the last 2-worker fit run's checkpoint. Returns
  // its load seconds (0 when it loaded nothing) and appends its start-up to `startups`.
  double measureResume(std::vector<double>& startups);
  // `repeat` runs of 2 workers on one host, rank 1 killed by the fault script after `killStep`;
  // `aloneStep` is the lone worker's step, which the step redone costs anyway.
  LiveRecovery measureLiveRecovery(std::int64_t killStep, double aloneStep);
  Measurements measure();

  CalibrationOptions options_;
  fs::path self_;
  CalibrationJob job_;
  fs::path dir_;
  fs::path log_;
  std::mt19937 rng_;
  bool measureCosts_ = false;
  fs::path fitCheckpoint_;  // the checkpoint directory of the latest 2-worker fit run
};

// A new directory of its own under the temporary directory.
fs::path makeScratchDir() {
  const fs::path dir =
      fs::temp_directory_path() / fmt::format("stretch-calibrate-{}", std::random_device{}());
  fs::create_directories(dir);
  return dir;
}

Calibration::Calibration(CalibrationOptions options, fs::path self, CalibrationJob job)
    : options_(std::move(options)),
      self_(std::move(self)),
      job_(std::move(job)),
      dir_(makeScratchDir()),
      log_(dir_ / "calibration.log"),
      rng_(std::random_device{}()),
      measureCosts_(!options_.checkpointArgs.empty()) {}

void Calibration::progress(const std::string& what) const {
  if (options_.progress) {
    std::cerr << "calibrate: " << what << "\n";
  }
}

std::vector<std::string> Calibration::checkpointArgs(const fs::path& ckpt) const {
  std::vector<std::string> args;
  for (std::string a : options_.checkpointArgs) {
    for (auto at = a.find("{dir}"); at != std::string::npos; at = a.find("{dir}")) {
      a.replace(at, 5, ckpt.string());
    }
    args.push_back(a);
  }
  return args;
}

LaunchFiles Calibration::launchJob(std::int64_t workers, std::int64_t gas, const std::string& tag,
                                   const std::vector<std::string>& extra, bool oneHost,
                                   const std::vector<std::string>& env) {
  nlohmann::json c = job_.config;
  c["gradient_accumulation_steps"] = gas;
  const fs::path cfg = dir_ / fmt::format("config-{}x{}.json", workers, gas);
  std::ofstream(cfg) << c.dump(2) << "\n";
  const fs::path timings = dir_ / fmt::format("timings-{}.jsonl", tag);
  const fs::path events = dir_ / fmt::format("events-{}.jsonl", tag);
  std::vector<std::string> argv = {"env", "OMP_NUM_THREADS=1",
                                   "STRETCH_TIMINGS_FILE=" + timings.string()};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.insert(argv.end(), {self_.string(), "launch"});
  if (workers == 1 || oneHost) {
    argv.insert(argv.end(), {"--num_gpus", std::to_string(workers)});
    if (oneHost) {
      // the live run's kill is a restart to the agent (continued live or not)
      argv.insert(argv.end(), {"--max_restarts", "3", "--recovery", "auto"});
    }
  } else {
    // One node agent per worker, as a multi-node job runs: the start decision reaches the
    // workers through the controller's store, and that is part of every restart.
    const fs::path hostfile = dir_ / fmt::format("hostfile-{}", workers);
    std::ofstream out(hostfile);
    for (std::int64_t n = 0; n < workers; ++n) {
      out << "n" << n << " slots=1\n";
    }
    out.close();
    argv.insert(argv.end(), {"--hostfile", hostfile.string(), "--launcher", "local", "--log_dir",
                             (dir_ / ("logs-" + tag)).string()});
  }
  // the controller's rendezvous takes the next port; both below the ephemeral range
  // (runtime/common/ports.hpp)
  const int master = freePortOutsideEphemeralRange(1, static_cast<std::uint32_t>(rng_()));
  argv.insert(argv.end(),
              {"--master_port", std::to_string(master), "--event_log", events.string()});
  argv.insert(argv.end(), job_.argv.begin(), job_.argv.end());
  argv.push_back("--config");
  argv.push_back(cfg.string());
  argv.insert(argv.end(), extra.begin(), extra.end());
  const launcher::Captured out = launcher::runCaptured(argv, log_);
  if (!out.exit.ok()) {
    throw Error(
        fmt::format("calibration: the job on {} worker(s) ended with {} (its output: "
                    "{})",
                    workers, out.exit.describe(), log_.string()));
  }
  return LaunchFiles{timings, events};
}

RunTimings Calibration::runOnce(std::int64_t workers, std::int64_t gas, const std::string& tag,
                                const std::vector<std::string>& extra, bool requireSteps) {
  const LaunchFiles files = launchJob(workers, gas, tag, extra, false, {});
  return readTimings(files.timings, workers, requireSteps, firstStartNs(files.events));
}

void Calibration::addRepeat(RunTimings& all, std::int64_t workers, std::int64_t gas, int r) {
  progress(fmt::format("{} worker(s), micro batch {} x accumulation {} (run {} of {})", workers,
                       job_.micro, gas, r + 1, options_.repeat));
  const std::string tag = fmt::format("{}x{}-{}", workers, gas, r);
  const fs::path checkpoint = dir_ / ("ckpt-" + tag);
  if (workers == 2 && gas == job_.accumulation) {
    fitCheckpoint_ = checkpoint;
  }
  RunTimings one =
      runOnce(workers, gas, tag,
              measureCosts_ ? checkpointArgs(checkpoint) : std::vector<std::string>{}, true);
  all.workers = one.workers;
  all.micro = one.micro;
  all.gas = one.gas;
  all.gradientBytes = one.gradientBytes;
  all.repeatSteps.push_back(medianPeriod(one));
  for (auto& [key, ranks] : one.steps) {
    all.steps[{r, key.second}] = std::move(ranks);
  }
  for (auto v : {&RunTimings::saves, &RunTimings::loads, &RunTimings::startups}) {
    (all.*v).insert((all.*v).end(), (one.*v).begin(), (one.*v).end());
  }
}

NetworkFit Calibration::measureNetwork() const {
  progress("network: all_reduce over 2 Gloo ranks, 4 KiB to 4 MiB");
  const auto rows =
      lastJson(launcher::runCaptured({self_.string(), "bench", "comm", "--ranks", "2", "--op",
                                      "all_reduce", "-b", "4K", "-e", "4M", "-n", "50", "--json"},
                                     log_)
                   .out,
               "stretch bench comm", log_);
  return fitNetwork(rows);
}

double Calibration::measureResume(std::vector<double>& startups) {
  progress("2 worker(s), resuming from the last run's checkpoint (restart and load costs)");
  std::vector<std::string> extra = checkpointArgs(fitCheckpoint_);
  extra.push_back("--resume");
  const RunTimings resumed = runOnce(2, job_.accumulation, "resume", extra, false);
  startups.insert(startups.end(), resumed.startups.begin(), resumed.startups.end());
  return resumed.loads.empty() ? 0.0 : resumed.loads.front();
}

LiveRecovery Calibration::measureLiveRecovery(std::int64_t killStep, double aloneStep) {
  LiveRecovery live;
  live.killStep = killStep;
  std::vector<double> reconfigures;
  for (int r = 0; r < options_.repeat; ++r) {
    progress(fmt::format(
        "2 worker(s) on one host, rank 1 killed after step {}: live recovery (run {} of {})",
        killStep, r + 1, options_.repeat));
    const std::string tag = fmt::format("live-{}", r);
    const fs::path faults = dir_ / ("faults-" + tag);
    fs::create_directories(faults);
    const LaunchFiles files = launchJob(
        2, job_.accumulation, tag,
        measureCosts_ ? checkpointArgs(dir_ / ("ckpt-" + tag)) : std::vector<std::string>{}, true,
        {"STRETCH_FAULT_DIR=" + faults.string(),
         fmt::format("STRETCH_FAULT_KILL_AT_STEP={}:1", killStep)});
    const auto seconds = killToNextStep(files.timings, killStep, 1);
    if (!seconds) {
      live.note = fmt::format(
          "not measured: rank 1 was not killed after step {} (the job does not honour "
          "STRETCH_FAULT_KILL_AT_STEP) or nobody trained on",
          killStep);
      break;
    }
    if (!recoveredLive(files.events)) {
      live.note =
          "not measured: the job restarted from its checkpoint instead of recovering live (its "
          "workers do not speak the live protocol)";
      break;
    }
    live.killToNext.push_back(*seconds);
    reconfigures.push_back(std::max(0.0, *seconds - aloneStep));
  }
  live.measured = live.note.empty() && !reconfigures.empty();
  live.reconfigureSeconds = live.measured ? median(reconfigures) : 0.0;
  if (live.measured) {
    live.note = fmt::format(
        "median of {} kills: {:.3f} s from the kill to the next step, less the "
        "lone worker's {:.4f} s step",
        live.killToNext.size(), median(live.killToNext), aloneStep);
  }
  return live;
}

Measurements Calibration::measure() {
  Measurements m;
  m.costsMeasured = measureCosts_;
  // 1. network
  m.network = measureNetwork();
  // 2. and 3. the fit runs and the held-out run, interleaved (1 worker, 2 workers, 2 workers at
  // twice the accumulation, then again), so that the machine's drift reaches each alike
  const std::int64_t heldOutGas = 2 * job_.accumulation;
  for (int r = 0; r < options_.repeat; ++r) {
    addRepeat(m.one, 1, job_.accumulation, r);
    addRepeat(m.two, 2, job_.accumulation, r);
    addRepeat(m.check, 2, heldOutGas, r);
  }
  // 4. (part) the resumed run: loading a checkpoint and starting again; the start-ups of every
  // 2-worker run
  m.startups = m.two.startups;
  m.startups.insert(m.startups.end(), m.check.startups.begin(), m.check.startups.end());
  if (measureCosts_) {
    m.loadSeconds = measureResume(m.startups);
  }
  // 5. live recovery: 2 workers on one host, rank 1 killed after step K by the fault script
  const std::int64_t lastStep = m.two.steps.rbegin()->first.second;
  const std::int64_t killStep = std::max<std::int64_t>(2, lastStep / 2);
  m.live = measureLiveRecovery(killStep, measuredStep(m.one));
  return m;
}

nlohmann::json Calibration::run() {
  const Measurements m = measure();
  nlohmann::json result = scenarioFrom(job_, m);
  std::error_code ec;
  fs::remove_all(dir_, ec);
  return result;
}

}  // namespace

nlohmann::json runCalibration(CalibrationOptions options) {
  const fs::path self = fs::read_symlink("/proc/self/exe");
  // A bad control-plane file is refused before minutes of runs.
  std::optional<ControlPlaneBench> controlPlane;
  if (!options.controlPlane.empty()) {
    controlPlane = readControlPlane(options.controlPlane);
  }
  CalibrationJob job = resolveJob(self, options);
  Calibration calibration(std::move(options), self, std::move(job));
  nlohmann::json result = calibration.run();
  if (controlPlane) {
    addControlPlane(result, *controlPlane);
  }
  return result;
}

}  // namespace stretch::tools
