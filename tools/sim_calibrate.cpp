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

namespace stretch::tools {

namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kExampleMicro = 8;
constexpr std::int64_t kExampleAccumulation = 3;
constexpr int kExampleSteps = 300;

double median(std::vector<double> v) {
  return sim::percentile(std::move(v), 0.5);
}

// The last line of `out` that is a JSON object or array.
nlohmann::json lastJson(const std::string& out, const std::string& what, const fs::path& log) {
  std::string last;
  for (std::size_t pos = 0; pos < out.size();) {
    const auto end = std::min(out.find('\n', pos), out.size());
    const std::string line = out.substr(pos, end - pos);
    if (!line.empty() && (line.front() == '{' || line.front() == '[')) {
      last = line;
    }
    pos = end + 1;
  }
  if (last.empty()) {
    throw Error(
        fmt::format("calibration: {} printed no JSON result (its errors: {})", what, log.string()));
  }
  return nlohmann::json::parse(last);
}

// The unix time (ns) of the first start_workers record of a launcher event log, 0 when none.
std::int64_t firstStartNs(const fs::path& events) {
  std::ifstream in(events);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("event", "") == "start_workers") {
      return j.value("time_ns", std::int64_t{0});
    }
  }
  return 0;
}

// Seconds from rank `victim`'s end of step `step` (the fault script kills it right after) to
// the first completion of step `step` + 1 after it, by whichever rank; nullopt when the timings
// lack either (the kill did not happen, or nobody trained on).
std::optional<double> killToNextStep(const fs::path& timings, std::int64_t step, int victim) {
  std::ifstream in(timings);
  std::optional<std::int64_t> killNs;
  std::vector<std::int64_t> next;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || j.contains("event") || !j.contains("unix_ns")) {
      continue;  // a checkpoint line, or a line cut short by the kill
    }
    const auto at = j.value("step", std::int64_t{-1});
    const auto ns = j.at("unix_ns").get<std::int64_t>();
    if (at == step && j.value("rank", -1) == victim && !killNs) {
      killNs = ns;
    } else if (at == step + 1) {
      next.push_back(ns);
    }
  }
  if (!killNs) {
    return std::nullopt;
  }
  std::optional<std::int64_t> first;
  for (const std::int64_t ns : next) {
    if (ns > *killNs && (!first || ns < *first)) {
      first = ns;
    }
  }
  if (!first) {
    return std::nullopt;
  }
  return static_cast<double>(*first - *killNs) * 1e-9;
}

// Whether a launcher event log has a start that continued the running workers live.
bool recoveredLive(const fs::path& events) {
  std::ifstream in(events);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("event", "") == "start_workers" &&
        j.value("recovery", "") == "live") {
      return true;
    }
  }
  return false;
}

struct StepLine {
  double compute = 0;    // step_ms - all-reduce wait - optimizer, seconds
  double allreduce = 0;  // seconds waited
  double overhead = 0;   // optimizer + period - step_ms, seconds
  double period = 0;     // seconds
};

// One run's timings, by step then rank, without the warm-up steps.
struct RunTimings {
  std::int64_t workers = 0;
  std::int64_t micro = 0;
  std::int64_t gas = 0;
  std::int64_t gradientBytes = 0;
  // (repeat, step) -> rank -> timings, every repeat's
  std::map<std::pair<int, std::int64_t>, std::map<int, StepLine>> steps;
  std::vector<double> repeatSteps;  // each repeat's median period
  std::vector<double> saves;        // seconds per checkpoint save (the slowest rank's)
  std::vector<double> loads;        // seconds per checkpoint load (the slowest rank's)
  std::vector<double> startups;     // seconds from start_workers to productive training
};

// The median over the run's steps of their period (each step's lowest rank's).
double medianPeriod(const RunTimings& t) {
  std::vector<double> periods;
  for (const auto& [step, ranks] : t.steps) {
    periods.push_back(ranks.begin()->second.period);
  }
  return median(periods);
}

// One run's timings. `requireSteps`: at least 3 complete steps after the warm-up, or Error.
// `startNs`: the launcher's start_workers time, for the startup (0: not measured).
RunTimings readTimings(const fs::path& path, std::int64_t workers, bool requireSteps = true,
                       std::int64_t startNs = 0) {
  std::ifstream in(path);
  if (!in) {
    throw Error(
        fmt::format("calibration: the job wrote no step timings to {} (does it train "
                    "with the Stretch engine?)",
                    path.string()));
  }
  RunTimings t;
  t.workers = workers;
  std::int64_t last = 0;
  std::int64_t first = -1;
  std::int64_t firstEndNs = 0;
  std::map<std::int64_t, double> saves, loads;  // step -> slowest rank's seconds
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("event")) {
      auto& slot = (j.at("event") == "save" ? saves : loads)[j.at("step").get<std::int64_t>()];
      slot = std::max(slot, j.at("seconds").get<double>());
      continue;
    }
    StepLine s;
    s.allreduce = j.at("allreduce_ms").get<double>() * 1e-3;
    const double optimizer = j.at("optimizer_ms").get<double>() * 1e-3;
    const double inStep = j.at("step_ms").get<double>() * 1e-3;
    s.period = j.at("period_ms").get<double>() * 1e-3;
    s.compute = std::max(0.0, inStep - s.allreduce - optimizer);
    s.overhead = std::max(0.0, optimizer + s.period - inStep);
    const auto step = j.at("step").get<std::int64_t>();
    t.steps[{0, step}][j.at("rank").get<int>()] = s;
    t.micro = j.at("micro_batch").get<std::int64_t>();
    t.gas = j.at("gas").get<std::int64_t>();
    t.gradientBytes = j.at("gradient_bytes").get<std::int64_t>();
    last = std::max(last, step);
    if (first < 0 || step < first) {
      first = step;
      firstEndNs = 0;
    }
    if (step == first) {
      firstEndNs = std::max(firstEndNs, j.value("unix_ns", std::int64_t{0}));
    }
  }
  for (const auto& [step, seconds] : saves) {
    t.saves.push_back(seconds);
  }
  for (const auto& [step, seconds] : loads) {
    t.loads.push_back(seconds);
  }
  const double load = t.loads.empty() ? 0.0 : t.loads.front();
  // Warm-up: the first tenth of the steps (at least the first), and steps some rank missed.
  const std::int64_t warmup = std::max<std::int64_t>(1, last / 10);
  std::erase_if(t.steps, [&](const auto& kv) {
    return kv.first.second <= warmup || static_cast<std::int64_t>(kv.second.size()) != workers;
  });
  if (startNs > 0 && firstEndNs > startNs && !t.steps.empty()) {
    t.startups.push_back(
        std::max(0.0, static_cast<double>(firstEndNs - startNs) * 1e-9 - load - medianPeriod(t)));
  }
  if (requireSteps && t.steps.size() < 3) {
    throw Error(
        fmt::format("calibration: {} holds {} complete steps after the warm-up; at least "
                    "3 are needed (train longer)",
                    path.string(), t.steps.size()));
  }
  return t;
}

double measuredStep(const RunTimings& t) {
  return t.repeatSteps.empty() ? medianPeriod(t) : median(t.repeatSteps);
}

struct Fit {
  double computePerStep = 0;  // median over ranks and steps
  double slowestCompute = 0;  // median over steps of the slowest rank's compute
  double spread = 0;          // a fraction of the lone worker's compute
  double allreduce = 0;       // the rest of the median step
  double shortestWait = 0;    // median over steps of the smallest all-reduce wait (diagnostics)
  double overhead = 0;
};

// `alone`: the lone worker's compute per step at this run's accumulation (0 for the 1-worker
// run itself). The slowest of D ranks computes alone x (1 + s e(D)) (the step model's straggler
// term); the all-reduce is what remains of the median step.
Fit fitRun(const RunTimings& t, double alone) {
  Fit f;
  std::vector<double> compute, slowest, waits, overheads;
  for (const auto& [step, ranks] : t.steps) {
    double smallest = 1e300;
    double largest = 0;
    for (const auto& [rank, s] : ranks) {
      compute.push_back(s.compute);
      overheads.push_back(s.overhead);
      smallest = std::min(smallest, s.allreduce);
      largest = std::max(largest, s.compute);
    }
    waits.push_back(smallest);
    slowest.push_back(largest);
  }
  f.computePerStep = median(compute);
  f.slowestCompute = median(slowest);
  f.shortestWait = t.workers > 1 ? median(waits) : 0.0;
  f.overhead = median(overheads);
  if (t.workers > 1 && alone > 0) {
    const double e = sim::expectedMaxOfNormals(t.workers);
    f.spread = std::max(0.0, (f.slowestCompute / alone - 1.0) / e);
    f.allreduce = std::max(0.0, measuredStep(t) - alone * (1.0 + f.spread * e) - f.overhead);
  }
  return f;
}

// The job to calibrate: its command line, and the config its runs vary (without
// train_batch_size or elasticity, so that the same config runs on 1 and 2 workers).
struct CalibrationJob {
  std::vector<std::string> argv;
  nlohmann::json config;
  std::int64_t micro = 0;
  std::int64_t accumulation = 0;  // the fit runs'; the held-out run uses twice it
};

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

// The network fit (step 1): this machine as one node of 2 GPUs whose all-reduce takes
// latency + g(bytes) / bandwidth.
struct NetworkFit {
  sim::ClusterSpec cluster;
  double benchLatency = 0;  // seconds per collective
  nlohmann::json measured;  // the benchmark's rows: bytes, seconds
};

// Fits the latency and the bandwidth to `rows` of `stretch bench comm --json`, least squares on
// relative error over sim::collectiveCost itself. Throws Error when they do not determine both.
NetworkFit fitNetwork(const nlohmann::json& rows) {
  NetworkFit n;
  sim::ClusterSpec& cluster = n.cluster;
  cluster.name = "this-machine";
  cluster.nodes = 1;
  cluster.gpusPerNode = 2;
  cluster.intraLatencyUs = 0;
  cluster.interLatencyUs = 0;
  // time(bytes) = opLatency + g(bytes) / B, with g the model's bandwidth term at 1 GB/s.
  sim::ClusterSpec unit = cluster;
  unit.intraNodeGBps = 1;
  unit.interNodeGBps = 1;
  unit.opLatencyUs = 0;
  double s11 = 0, s12 = 0, s22 = 0, b1 = 0, b2 = 0;
  n.measured = nlohmann::json::array();
  for (const auto& row : rows) {
    const auto bytes = row.at("bytes").get<std::uint64_t>();
    const double t = row.at("time_us").get<double>() * 1e-6;
    const double g = sim::collectiveCost(unit, comm::OpType::AllReduce, bytes, 2).seconds;
    const double w = 1.0 / (t * t);  // relative error
    s11 += w;
    s12 += w * g;
    s22 += w * g * g;
    b1 += w * t;
    b2 += w * g * t;
    n.measured.push_back({{"bytes", bytes}, {"seconds", t}});
  }
  const double det = s11 * s22 - s12 * s12;
  if (rows.size() < 2 || det <= 0) {
    throw Error("calibration: the all-reduce timings do not determine a latency and a bandwidth");
  }
  n.benchLatency = std::max(0.0, (b1 * s22 - b2 * s12) / det);
  const double inverseBandwidth = std::max(1e-6, (s11 * b2 - s12 * b1) / det);
  cluster.opLatencyUs = n.benchLatency * 1e6;
  cluster.intraNodeGBps = 1.0 / inverseBandwidth;
  cluster.interNodeGBps = cluster.intraNodeGBps;
  return n;
}

// Live recovery (step 5): what the runs whose rank 1 was killed measured.
struct LiveRecovery {
  std::int64_t killStep = 0;
  std::vector<double> killToNext;  // seconds, one per kill recovered live
  bool measured = false;
  double reconfigureSeconds = 0;  // 0 unless measured
  std::string note;               // how it was measured, or why not
};

// Everything the runs measured, before the fit.
struct Measurements {
  NetworkFit network;
  RunTimings one;    // 1 worker
  RunTimings two;    // 2 workers
  RunTimings check;  // 2 workers at twice the accumulation (held out)
  bool costsMeasured = false;
  std::vector<double> startups;  // every 2-worker run's, and the resumed run's
  double loadSeconds = 0;
  LiveRecovery live;
};

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

// The step model fitted to the runs.
struct FittedModel {
  Fit one;                   // the lone worker's runs
  Fit two;                   // the 2-worker runs
  sim::ClusterSpec cluster;  // the network fit, plus what training adds per collective
  sim::JobSpec spec;
  double benchAllReduce = 0;  // the benchmark's time for the gradient's bytes, seconds
};

FittedModel fitModel(const CalibrationJob& job, const Measurements& m) {
  FittedModel f;
  f.one = fitRun(m.one, 0.0);
  f.two = fitRun(m.two, f.one.computePerStep);
  f.cluster = m.network.cluster;
  const auto gradientBytes = static_cast<std::uint64_t>(m.two.gradientBytes);
  f.benchAllReduce =
      sim::collectiveCost(f.cluster, comm::OpType::AllReduce, gradientBytes, 2).seconds;
  // What the benchmark misses inside training: per collective.
  f.cluster.opLatencyUs += std::max(0.0, f.two.allreduce - f.benchAllReduce) * 1e6;

  f.spec.secondsPerSample =
      f.one.computePerStep / static_cast<double>(job.micro * job.accumulation);
  f.spec.gradientBytes = gradientBytes;
  f.spec.bucketCount = 1;
  f.spec.overlapComm = false;
  f.spec.computeSpread = f.two.spread;
  f.spec.stepOverheadSeconds = f.two.overhead;
  return f;
}

// The fitted model's step for `workers` ranks at accumulation `gas`, seconds.
double predictStep(const FittedModel& f, std::int64_t micro, std::int64_t workers,
                   std::int64_t gas) {
  const config::BatchTriple batch{micro * gas * workers, micro, gas};
  return sim::nanosToSeconds(sim::planStep(f.spec, f.cluster, batch, workers, 1).stepNs);
}

// One run's entry in calibration.runs: its fit, and its predicted and measured step.
nlohmann::json runReport(const RunTimings& t, const Fit& f, std::int64_t micro, double predicted,
                         const std::string& role) {
  const double m = measuredStep(t);
  return {{"workers", t.workers},
          {"measured_compute_seconds_per_step", f.computePerStep},
          {"measured_compute_spread", f.spread},
          {"measured_all_reduce_seconds", f.allreduce},
          {"measured_shortest_wait_seconds", f.shortestWait},
          {"measured_step_overhead_seconds", f.overhead},
          {"micro_batch", micro},
          {"gradient_accumulation_steps", t.gas},
          {"role", role},
          {"steps_used", t.steps.size()},
          {"repeat_step_seconds", t.repeatSteps},
          {"predicted_step_seconds", predicted},
          {"measured_step_seconds", m},
          {"relative_error", (predicted - m) / m}};
}

// The checkpoint and restart costs the scenario charges (0 when not measured).
struct Costs {
  std::vector<double> saves;  // every 2-worker run's saves, seconds
  double saveSeconds = 0;
  double restartSeconds = 0;
};

Costs costsOf(const Measurements& m) {
  Costs c;
  c.saves = m.two.saves;
  c.saves.insert(c.saves.end(), m.check.saves.begin(), m.check.saves.end());
  c.saveSeconds = c.saves.empty() ? 0.0 : median(c.saves);
  c.restartSeconds = m.costsMeasured && !m.startups.empty() ? median(m.startups) : 0.0;
  return c;
}

nlohmann::json clusterJson(const sim::ClusterSpec& cluster) {
  return {{"name", cluster.name},
          {"nodes", 1},
          {"gpus_per_node", 2},
          {"intra_node_GBps", cluster.intraNodeGBps},
          {"inter_node_GBps", cluster.interNodeGBps},
          {"intra_latency_us", 0.0},
          {"inter_latency_us", 0.0},
          {"op_latency_us", cluster.opLatencyUs}};
}

// The scenario's job: the held-out run's config and length, with the fitted step model.
nlohmann::json jobJson(const CalibrationJob& job, const FittedModel& f, const Measurements& m,
                       const Costs& costs) {
  const std::int64_t heldOutGas = 2 * job.accumulation;
  nlohmann::json scenarioConfig = job.config;
  scenarioConfig["gradient_accumulation_steps"] = heldOutGas;
  scenarioConfig["train_batch_size"] = job.micro * heldOutGas * 2;
  const std::int64_t steps = m.check.steps.rbegin()->first.second;
  return {{"config", scenarioConfig},
          {"seconds_per_sample_per_gpu", f.spec.secondsPerSample},
          {"gradient_bytes", f.spec.gradientBytes},
          {"bucket_count", 1},
          {"overlap_comm", false},
          {"compute_spread", f.spec.computeSpread},
          {"step_overhead_seconds", f.spec.stepOverheadSeconds},
          {"total_steps", steps},
          {"checkpoint",
           {{"every_steps", steps},
            {"save_seconds", costs.saveSeconds},
            {"load_seconds", m.loadSeconds}}},
          {"restart_overhead_seconds", costs.restartSeconds}};
}

// The "calibration" object: `runs` (runReport's, the held-out run last) and the figures behind
// the fit.
nlohmann::json calibrationJson(const CalibrationJob& job, const FittedModel& f,
                               const Measurements& m, const Costs& costs,
                               const nlohmann::json& runs) {
  const auto& heldOut = runs.back();
  return {{"job", job.argv},
          {"runs", runs},
          {"single_worker_step_seconds", runs[0]["measured_step_seconds"]},
          {"all_reduce", m.network.measured},
          {"bench_all_reduce_seconds", f.benchAllReduce},
          {"training_all_reduce_seconds", f.two.allreduce},
          {"bench_op_latency_us", m.network.benchLatency * 1e6},
          {"compute_seconds_per_step", f.two.computePerStep},
          {"slowest_rank_compute_seconds_per_step", f.two.slowestCompute},
          {"single_worker_compute_seconds_per_step", f.one.computePerStep},
          {"compute_spread", f.two.spread},
          {"step_overhead_seconds", f.two.overhead},
          {"predicted_step_seconds", heldOut["predicted_step_seconds"]},
          {"measured_step_seconds", heldOut["measured_step_seconds"]},
          {"relative_error", heldOut["relative_error"]},
          {"compute_seconds", f.one.computePerStep * 2.0},
          {"all_reduce_seconds", f.two.allreduce},
          {"costs_measured", m.costsMeasured},
          {"save_seconds", costs.saves},
          {"load_seconds", m.loadSeconds},
          {"startup_seconds", m.startups},
          {"restart_overhead_seconds", costs.restartSeconds},
          {"live_recovery",
           {{"measured", m.live.measured},
            {"kill_step", m.live.killStep},
            {"kill_to_next_step_seconds", m.live.killToNext},
            {"reconfigure_seconds", m.live.reconfigureSeconds},
            {"note", m.live.note}}}};
}

// The scenario and its "calibration" object (runCalibration's contract), from the measurements.
nlohmann::json scenarioFrom(const CalibrationJob& job, const Measurements& m) {
  const FittedModel f = fitModel(job, m);
  nlohmann::json runs = nlohmann::json::array();
  runs.push_back(runReport(m.one, f.one, job.micro, predictStep(f, job.micro, 1, job.accumulation),
                           "fit (1 worker)"));
  runs.push_back(
      runReport(m.two, f.two, job.micro, predictStep(f, job.micro, 2, job.accumulation), "fit"));
  runs.push_back(runReport(m.check, fitRun(m.check, 2.0 * f.one.computePerStep), job.micro,
                           predictStep(f, job.micro, 2, 2 * job.accumulation), "held out"));
  const Costs costs = costsOf(m);
  nlohmann::json result = {{"cluster", clusterJson(f.cluster)},
                           {"job", jobJson(job, f, m, costs)},
                           {"failures", {{"model", "none"}}},
                           {"calibration", calibrationJson(job, f, m, costs, runs)}};
  if (m.live.measured) {
    // What `stretch launch --recovery auto` does on this host; the state sent to a replacement
    // is the default (3 x the gradient bytes at the measured bandwidth).
    result["job"]["recovery"] = {{"mode", "live"},
                                 {"reconfigure_seconds", m.live.reconfigureSeconds}};
  }
  return result;
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
  CalibrationJob job = resolveJob(self, options);
  Calibration calibration(std::move(options), self, std::move(job));
  return calibration.run();
}

}  // namespace stretch::tools
