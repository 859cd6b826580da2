// `stretch sim --calibrate [--job PROGRAM ... --config CFG]`: fits the simulator's step model to
// what training itself measures, and checks the fit on a run it was not fitted to
// (docs/simulator.md, "Calibrating a scenario"). Every worker runs with OMP_NUM_THREADS=1 and
// STRETCH_TIMINGS_FILE set, so the engine writes one line per rank and step (forward, backward,
// all-reduce wait, optimizer, the step's period; runtime/engine/step_timings.hpp).
//
//  1. network: `stretch bench comm` all_reduce over 2 Gloo ranks, 4 KiB to 4 MiB -> the
//     per-collective latency and the bandwidth, least squares on relative error over
//     sim::collectiveCost itself;
//  2. fit runs under `stretch launch`: 1 worker, then 2 workers, at the config's micro batch and
//     accumulation a. From the 2-worker timings (warm-up steps dropped):
//       compute per step     c = step_ms - all-reduce wait - optimizer: from the first forward
//                            to the reduction; per sample: C = median(c) / (micro x a)
//       compute spread       s = sigma / median(c), sigma = median |c_0 - c_1| / (0.6745 sqrt 2)
//                            (the difference of two normals; the median, so that a few slow
//                            steps do not decide it); a fraction: it scales with the compute
//       step overhead        O = median(optimizer + period - step_ms): the update after the
//                            reduction and what happens between steps (data, logging)
//       all-reduce           the rest of the measured step S = median(period):
//                            S - median(c) (1 + s e(2)) - O; its gap to the benchmark's time
//                            for the same bytes goes into the per-collective latency (inside
//                            training a rank waits on a collective its peer reaches later, and
//                            Gloo wakes it: far slower than the benchmark's back-to-back calls)
//  3. held-out check: 2 workers at accumulation 2a, predicted by sim::planStep with the fitted
//     figures and measured (median period).

#include "tools/sim_calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/comm/types.hpp"
#include "runtime/common/error.hpp"
#include "runtime/launcher/process.hpp"
#include "sim/cluster.hpp"
#include "sim/collective_cost.hpp"
#include "sim/monte_carlo.hpp"
#include "sim/step_model.hpp"

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
};

RunTimings readTimings(const fs::path& path, std::int64_t workers) {
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
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
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
  }
  // Warm-up: the first tenth of the steps (at least the first), and steps some rank missed.
  const std::int64_t warmup = std::max<std::int64_t>(1, last / 10);
  std::erase_if(t.steps, [&](const auto& kv) {
    return kv.first.second <= warmup || static_cast<std::int64_t>(kv.second.size()) != workers;
  });
  if (t.steps.size() < 3) {
    throw Error(
        fmt::format("calibration: {} holds {} complete steps after the warm-up; at least "
                    "3 are needed (train longer)",
                    path.string(), t.steps.size()));
  }
  return t;
}

double medianPeriod(const RunTimings& t) {
  std::vector<double> periods;
  for (const auto& [step, ranks] : t.steps) {
    periods.push_back(ranks.begin()->second.period);
  }
  return median(periods);
}

double measuredStep(const RunTimings& t) {
  return t.repeatSteps.empty() ? medianPeriod(t) : median(t.repeatSteps);
}

struct Fit {
  double computePerStep = 0;
  double spread = 0;        // a fraction of computePerStep
  double allreduce = 0;     // the rest of the median step
  double shortestWait = 0;  // median over steps of the smaller all-reduce wait (diagnostics)
  double overhead = 0;
};

Fit fitRun(const RunTimings& t) {
  Fit f;
  std::vector<double> compute, waits, overheads, gaps;
  for (const auto& [step, ranks] : t.steps) {
    double smallest = 1e300;
    for (const auto& [rank, s] : ranks) {
      compute.push_back(s.compute);
      overheads.push_back(s.overhead);
      smallest = std::min(smallest, s.allreduce);
    }
    waits.push_back(smallest);
    if (ranks.size() == 2) {
      gaps.push_back(
          std::abs(ranks.begin()->second.compute - std::next(ranks.begin())->second.compute));
    }
  }
  f.computePerStep = median(compute);
  f.shortestWait = t.workers > 1 ? median(waits) : 0.0;
  f.overhead = median(overheads);
  if (t.workers == 2 && f.computePerStep > 0) {
    constexpr double kNormalMedianAbs = 0.674489750196;  // median |Z|, Z standard normal
    f.spread = median(gaps) / (kNormalMedianAbs * std::sqrt(2.0)) / f.computePerStep;
  }
  if (t.workers > 1) {
    f.allreduce = std::max(
        0.0, measuredStep(t) -
                 f.computePerStep * (1.0 + f.spread * sim::expectedMaxOfNormals(t.workers)) -
                 f.overhead);
  }
  return f;
}

}  // namespace

nlohmann::json runCalibration(const CalibrationOptions& options) {
  const fs::path self = fs::read_symlink("/proc/self/exe");
  std::vector<std::string> job = options.job;
  nlohmann::json config;
  if (job.empty()) {
    const fs::path digits = self.parent_path() / "stretch-train-digits";
    if (!fs::exists(digits)) {
      throw ConfigError(ErrorDetail{"--calibrate", digits.string(),
                                    "the example job next to stretch (built with LibTorch)"});
    }
    job = {digits.string(), "--steps", std::to_string(kExampleSteps)};
    config = {{"train_micro_batch_size_per_gpu", kExampleMicro},
              {"gradient_accumulation_steps", kExampleAccumulation},
              {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 0.005}}}}}};
  } else {
    if (options.config.empty()) {
      throw ConfigError(ErrorDetail{"--config", "(none)",
                                    "the job's DeepSpeed config (JSON) with --job: the "
                                    "calibration passes it to the job as --config"});
    }
    std::ifstream in(options.config);
    if (!in) {
      throw ConfigError(ErrorDetail{"--config", options.config, "a readable JSON file"});
    }
    try {
      config = nlohmann::json::parse(in, nullptr, true, /*ignore_comments=*/true);
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError(
          ErrorDetail{"--config", options.config, fmt::format("a JSON object ({})", e.what())});
    }
  }
  if (!config.is_object() || !config.contains("train_micro_batch_size_per_gpu")) {
    throw ConfigError(ErrorDetail{"--config train_micro_batch_size_per_gpu",
                                  options.config.empty() ? "(none)" : options.config,
                                  "a config that sets the micro batch (the calibration varies "
                                  "the accumulation around it)"});
  }
  const auto micro = config.at("train_micro_batch_size_per_gpu").get<std::int64_t>();
  std::int64_t accumulation = config.value("gradient_accumulation_steps", std::int64_t{0});
  if (accumulation < 1) {
    accumulation = config.contains("train_batch_size")
                       ? std::max<std::int64_t>(
                             1, config.at("train_batch_size").get<std::int64_t>() / (2 * micro))
                       : 1;
  }
  config.erase("train_batch_size");
  config.erase("elasticity");

  const fs::path dir =
      fs::temp_directory_path() / fmt::format("stretch-calibrate-{}", std::random_device{}());
  fs::create_directories(dir);
  const fs::path log = dir / "calibration.log";
  auto progress = [&](const std::string& what) {
    if (options.progress) {
      std::cerr << "calibrate: " << what << "\n";
    }
  };
  std::mt19937 rng(std::random_device{}());
  int port = 30000 + static_cast<int>(rng() % 20000);

  // One run of the job under `stretch launch`; returns its timings.
  auto runOnce = [&](std::int64_t workers, std::int64_t gas, int repeat) {
    nlohmann::json c = config;
    c["gradient_accumulation_steps"] = gas;
    const fs::path cfg = dir / fmt::format("config-{}x{}.json", workers, gas);
    std::ofstream(cfg) << c.dump(2) << "\n";
    const fs::path timings = dir / fmt::format("timings-{}x{}-{}.jsonl", workers, gas, repeat);
    std::vector<std::string> argv = {"env",
                                     "OMP_NUM_THREADS=1",
                                     "STRETCH_TIMINGS_FILE=" + timings.string(),
                                     self.string(),
                                     "launch",
                                     "--num_gpus",
                                     std::to_string(workers),
                                     "--master_port",
                                     std::to_string(port++)};
    argv.insert(argv.end(), job.begin(), job.end());
    argv.push_back("--config");
    argv.push_back(cfg.string());
    progress(fmt::format("{} worker(s), micro batch {} x accumulation {} (run {} of {})", workers,
                         micro, gas, repeat + 1, options.repeat));
    const launcher::Captured out = launcher::runCaptured(argv, log);
    if (!out.exit.ok()) {
      throw Error(
          fmt::format("calibration: the job on {} worker(s) ended with {} (its output: "
                      "{})",
                      workers, out.exit.describe(), log.string()));
    }
    return readTimings(timings, workers);
  };

  // options.repeat runs of the job under `stretch launch`; returns their timings together.
  auto run = [&](std::int64_t workers, std::int64_t gas) {
    RunTimings all;
    for (int r = 0; r < options.repeat; ++r) {
      RunTimings one = runOnce(workers, gas, r);
      all.workers = one.workers;
      all.micro = one.micro;
      all.gas = one.gas;
      all.gradientBytes = one.gradientBytes;
      all.repeatSteps.push_back(medianPeriod(one));
      for (auto& [key, ranks] : one.steps) {
        all.steps[{r, key.second}] = std::move(ranks);
      }
    }
    return all;
  };

  // 1. network
  progress("network: all_reduce over 2 Gloo ranks, 4 KiB to 4 MiB");
  const auto rows =
      lastJson(launcher::runCaptured({self.string(), "bench", "comm", "--ranks", "2", "--op",
                                      "all_reduce", "-b", "4K", "-e", "4M", "-n", "50", "--json"},
                                     log)
                   .out,
               "stretch bench comm", log);
  sim::ClusterSpec cluster;
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
  nlohmann::json measured = nlohmann::json::array();
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
    measured.push_back({{"bytes", bytes}, {"seconds", t}});
  }
  const double det = s11 * s22 - s12 * s12;
  if (rows.size() < 2 || det <= 0) {
    throw Error("calibration: the all-reduce timings do not determine a latency and a bandwidth");
  }
  const double benchLatency = std::max(0.0, (b1 * s22 - b2 * s12) / det);
  const double inverseBandwidth = std::max(1e-6, (s11 * b2 - s12 * b1) / det);
  cluster.opLatencyUs = benchLatency * 1e6;
  cluster.intraNodeGBps = 1.0 / inverseBandwidth;
  cluster.interNodeGBps = cluster.intraNodeGBps;

  // 2. the fit runs
  const RunTimings one = run(1, accumulation);
  const RunTimings two = run(2, accumulation);
  const Fit fit1 = fitRun(one);
  const Fit fit2 = fitRun(two);
  const auto gradientBytes = static_cast<std::uint64_t>(two.gradientBytes);
  const double benchAllReduce =
      sim::collectiveCost(cluster, comm::OpType::AllReduce, gradientBytes, 2).seconds;
  // What the benchmark misses inside training: per collective.
  cluster.opLatencyUs += std::max(0.0, fit2.allreduce - benchAllReduce) * 1e6;

  sim::JobSpec spec;
  spec.secondsPerSample = fit2.computePerStep / static_cast<double>(micro * accumulation);
  spec.gradientBytes = gradientBytes;
  spec.bucketCount = 1;
  spec.overlapComm = false;
  spec.computeSpread = fit2.spread;
  spec.stepOverheadSeconds = fit2.overhead;
  auto predict = [&](std::int64_t workers, std::int64_t gas, const sim::JobSpec& j) {
    const config::BatchTriple batch{micro * gas * workers, micro, gas};
    return sim::nanosToSeconds(sim::planStep(j, cluster, batch, workers, 1).stepNs);
  };
  sim::JobSpec alone = spec;
  alone.secondsPerSample = fit1.computePerStep / static_cast<double>(micro * accumulation);
  alone.stepOverheadSeconds = fit1.overhead;

  // 3. the held-out run
  const std::int64_t heldOutGas = 2 * accumulation;
  const RunTimings check = run(2, heldOutGas);

  nlohmann::json runs = nlohmann::json::array();
  auto addRun = [&](const RunTimings& t, const Fit& f, double predicted, const std::string& role) {
    const double m = measuredStep(t);
    runs.push_back({{"workers", t.workers},
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
                    {"relative_error", (predicted - m) / m}});
  };
  addRun(one, fit1, predict(1, accumulation, alone), "fit (1 worker)");
  addRun(two, fit2, predict(2, accumulation, spec), "fit");
  const double heldOutPredicted = predict(2, heldOutGas, spec);
  addRun(check, fitRun(check), heldOutPredicted, "held out");
  const auto& heldOut = runs.back();

  nlohmann::json scenarioConfig = config;
  scenarioConfig["gradient_accumulation_steps"] = heldOutGas;
  scenarioConfig["train_batch_size"] = micro * heldOutGas * 2;
  const std::int64_t steps = check.steps.rbegin()->first.second;
  nlohmann::json result = {
      {"cluster",
       {{"name", cluster.name},
        {"nodes", 1},
        {"gpus_per_node", 2},
        {"intra_node_GBps", cluster.intraNodeGBps},
        {"inter_node_GBps", cluster.interNodeGBps},
        {"intra_latency_us", 0.0},
        {"inter_latency_us", 0.0},
        {"op_latency_us", cluster.opLatencyUs}}},
      {"job",
       {{"config", scenarioConfig},
        {"seconds_per_sample_per_gpu", spec.secondsPerSample},
        {"gradient_bytes", spec.gradientBytes},
        {"bucket_count", 1},
        {"overlap_comm", false},
        {"compute_spread", spec.computeSpread},
        {"step_overhead_seconds", spec.stepOverheadSeconds},
        {"total_steps", steps},
        {"checkpoint", {{"every_steps", steps}, {"save_seconds", 0.0}, {"load_seconds", 0.0}}},
        {"restart_overhead_seconds", 0.0}}},
      {"failures", {{"model", "none"}}},
      {"calibration",
       {{"job", job},
        {"runs", runs},
        {"single_worker_step_seconds", runs[0]["measured_step_seconds"]},
        {"all_reduce", measured},
        {"bench_all_reduce_seconds", benchAllReduce},
        {"training_all_reduce_seconds", fit2.allreduce},
        {"bench_op_latency_us", benchLatency * 1e6},
        {"compute_seconds_per_step", fit2.computePerStep},
        {"single_worker_compute_seconds_per_step", fit1.computePerStep},
        {"compute_spread", fit2.spread},
        {"step_overhead_seconds", fit2.overhead},
        {"predicted_step_seconds", heldOutPredicted},
        {"measured_step_seconds", heldOut["measured_step_seconds"]},
        {"relative_error", heldOut["relative_error"]},
        {"compute_seconds", fit2.computePerStep * 2.0},
        {"all_reduce_seconds", fit2.allreduce}}}};
  std::error_code ec;
  fs::remove_all(dir, ec);
  return result;
}

}  // namespace stretch::tools
