// `stretch sim --calibrate`: measures this machine's compute and Gloo all-reduce with the example
// job, fits the simulator's models to them, and checks the fit by predicting the step time of a
// 2-worker run and measuring it (docs/simulator.md, "Calibration").
//
//  (each measurement: the best of 3 runs, OMP_NUM_THREADS=1 per worker)
//  1. compute: stretch-train-digits alone, micro batch 8 x accumulation 3, median step time ->
//     seconds per sample per GPU (the step model's compute is linear in the samples);
//  2. network: `stretch bench comm` all_reduce over 2 Gloo ranks, 4 KiB to 4 MiB -> the cluster's
//     per-collective latency (op_latency_us) and intra-node bandwidth, least squares on relative
//     error over sim::collectiveCost itself, so the fitted figures mean what the model means;
//  3. check: sim::planStep at 2 ranks (micro 8 x accumulation 3, the model's gradient bytes) vs
//     the median step of `stretch launch --num_gpus 2` running the same job.

#include "tools/sim_calibrate.hpp"

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/comm/types.hpp"
#include "runtime/common/error.hpp"
#include "runtime/launcher/process.hpp"
#include "sim/cluster.hpp"
#include "sim/collective_cost.hpp"
#include "sim/step_model.hpp"

namespace stretch::tools {

namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kMicro = 8;
constexpr std::int64_t kAccumulation = 3;
constexpr int kSteps = 300;
constexpr int kRepeats = 3;

// Runs argv and returns its stdout; stderr is appended to `log`.
std::string capture(const std::vector<std::string>& argv, const fs::path& log) {
  return launcher::runCaptured(argv, log).out;
}

// The last line of `out` that is a JSON object.
nlohmann::json lastJson(const std::string& out, const std::string& what, const fs::path& log) {
  std::string line, last;
  for (std::size_t pos = 0; pos < out.size();) {
    const auto end = std::min(out.find('\n', pos), out.size());
    line = out.substr(pos, end - pos);
    if (!line.empty() && (line.front() == '{' || line.front() == '['))
      last = line;
    pos = end + 1;
  }
  if (last.empty())
    throw Error(
        fmt::format("calibration: {} printed no JSON result (its errors: {})", what, log.string()));
  return nlohmann::json::parse(last);
}

void writeConfig(const fs::path& path, std::int64_t ranks) {
  nlohmann::json config = {{"train_batch_size", kMicro * kAccumulation * ranks},
                           {"train_micro_batch_size_per_gpu", kMicro},
                           {"gradient_accumulation_steps", kAccumulation},
                           {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 0.005}}}}}};
  std::ofstream(path) << config.dump(2) << "\n";
}

}  // namespace

nlohmann::json runCalibration(const CalibrationOptions& options) {
  const fs::path self = fs::read_symlink("/proc/self/exe");
  const fs::path digits = self.parent_path() / "stretch-train-digits";
  if (!fs::exists(digits)) {
    throw ConfigError(ErrorDetail{"--calibrate", digits.string(),
                                  "the example job next to stretch (built with LibTorch)"});
  }
  const fs::path dir =
      fs::temp_directory_path() / fmt::format("stretch-calibrate-{}", std::random_device{}());
  fs::create_directories(dir);
  const fs::path log = dir / "calibration.log";
  auto progress = [&](const std::string& what) {
    if (options.progress)
      std::cerr << "calibrate: " << what << "\n";
  };

  // 1. compute
  progress(fmt::format("compute: the example job alone, micro {} x accumulation {}, {} steps",
                       kMicro, kAccumulation, kSteps));
  writeConfig(dir / "one.json", 1);
  // One intra-op thread per worker in both runs (two workers share this machine's cores), and
  // the best of kRepeats medians: other load only ever makes steps slower.
  double oneStep = 0;
  std::int64_t parameters = 0;
  for (int r = 0; r < kRepeats; ++r) {
    const auto one =
        lastJson(capture({"env", "OMP_NUM_THREADS=1", digits.string(), "--config",
                          (dir / "one.json").string(), "--steps", std::to_string(kSteps), "--json"},
                         log),
                 "stretch-train-digits", log);
    const double step = one.at("step_seconds_median");
    oneStep = r == 0 ? step : std::min(oneStep, step);
    parameters = one.at("parameters").get<std::int64_t>();
  }
  const double secondsPerSample = oneStep / static_cast<double>(kMicro * kAccumulation);

  // 2. network
  progress("network: all_reduce over 2 Gloo ranks, 4 KiB to 4 MiB");
  const auto rows = lastJson(capture({self.string(), "bench", "comm", "--ranks", "2", "--op",
                                      "all_reduce", "-b", "4K", "-e", "4M", "-n", "50", "--json"},
                                     log),
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
    // Relative error: weight each row by 1 / t^2.
    const double w = 1.0 / (t * t);
    s11 += w;
    s12 += w * g;
    s22 += w * g * g;
    b1 += w * t;
    b2 += w * g * t;
    measured.push_back({{"bytes", bytes}, {"seconds", t}});
  }
  const double det = s11 * s22 - s12 * s12;
  if (rows.size() < 2 || det <= 0)
    throw Error("calibration: the all-reduce timings do not determine a latency and a bandwidth");
  const double latency = std::max(0.0, (b1 * s22 - b2 * s12) / det);
  const double inverseBandwidth = std::max(1e-6, (s11 * b2 - s12 * b1) / det);
  cluster.opLatencyUs = latency * 1e6;
  cluster.intraNodeGBps = 1.0 / inverseBandwidth;
  cluster.interNodeGBps = cluster.intraNodeGBps;

  // 3. prediction vs measurement
  sim::JobSpec job;
  job.secondsPerSample = secondsPerSample;
  job.gradientBytes = static_cast<std::uint64_t>(parameters) * 4;
  job.bucketCount = 1;
  job.overlapComm = false;
  const config::BatchTriple batch{kMicro * kAccumulation * 2, kMicro, kAccumulation};
  const sim::StepPlan plan = sim::planStep(job, cluster, batch, 2, 1);
  const double predicted = static_cast<double>(plan.stepNs) * 1e-9;

  progress("check: the same job on 2 workers under `stretch launch`");
  writeConfig(dir / "two.json", 2);
  std::mt19937 rng(std::random_device{}());
  const int port = 30000 + static_cast<int>(rng() % 20000);
  double measuredStep = 0;
  for (int r = 0; r < kRepeats; ++r) {
    const auto two =
        lastJson(capture({"env", "OMP_NUM_THREADS=1", self.string(), "launch", "--num_gpus", "2",
                          "--master_port", std::to_string(port + r), digits.string(), "--config",
                          (dir / "two.json").string(), "--steps", std::to_string(kSteps), "--json"},
                         log),
                 "stretch launch (2 workers)", log);
    const double step = two.at("step_seconds_median");
    measuredStep = r == 0 ? step : std::min(measuredStep, step);
  }

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
       {{"config",
         {{"train_batch_size", batch.trainBatchSize},
          {"train_micro_batch_size_per_gpu", kMicro},
          {"gradient_accumulation_steps", kAccumulation}}},
        {"seconds_per_sample_per_gpu", secondsPerSample},
        {"gradient_bytes", job.gradientBytes},
        {"total_steps", kSteps},
        {"checkpoint", {{"every_steps", kSteps}, {"save_seconds", 0.0}, {"load_seconds", 0.0}}},
        {"restart_overhead_seconds", 0.0}}},
      {"failures", {{"model", "none"}}},
      {"calibration",
       {{"single_worker_step_seconds", oneStep},
        {"all_reduce", measured},
        {"predicted_step_seconds", predicted},
        {"measured_step_seconds", measuredStep},
        {"relative_error", (predicted - measuredStep) / measuredStep},
        {"compute_seconds", static_cast<double>(plan.gas * plan.microNs) * 1e-9},
        {"all_reduce_seconds", static_cast<double>(plan.bucketNs) * 1e-9}}}};
  std::error_code ec;
  fs::remove_all(dir, ec);
  return result;
}

}  // namespace stretch::tools
