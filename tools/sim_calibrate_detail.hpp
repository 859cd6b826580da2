#pragma once
// runCalibration's private parts, shared by its two files (private to tools/): sim_calibrate.cpp
// (resolving the job, the runs under `stretch launch` and the benchmark, runCalibration) and
// sim_calibrate_fit.cpp (reading what the runs wrote, the fits and the scenario they give).
// Holds what the runs measured and the functions that read and fit it.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/cluster.hpp"

namespace stretch::tools::detail {

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

// The job to calibrate: its command line, and the config its runs vary (without
// train_batch_size or elasticity, so that the same config runs on 1 and 2 workers).
struct CalibrationJob {
  std::vector<std::string> argv;
  nlohmann::json config;
  std::int64_t micro = 0;
  std::int64_t accumulation = 0;  // the fit runs'; the held-out run uses twice it
};

// The network fit (step 1): this machine as one node of 2 GPUs whose all-reduce takes
// latency + g(bytes) / bandwidth.
struct NetworkFit {
  sim::ClusterSpec cluster;
  double benchLatency = 0;  // seconds per collective
  nlohmann::json measured;  // the benchmark's rows: bytes, seconds
};

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

// The median of `v` (sim::percentile at 0.5).
double median(std::vector<double> v);

// The last line of `out` that is a JSON object or array; throws Error naming `what` and `log`
// when there is none.
nlohmann::json lastJson(const std::string& out, const std::string& what,
                        const std::filesystem::path& log);

// The unix time (ns) of the first start_workers record of a launcher event log, 0 when none.
std::int64_t firstStartNs(const std::filesystem::path& events);

// Seconds from rank `victim`'s end of step `step` to the first completion of step `step` + 1
// after it; nullopt when the timings lack either.
std::optional<double> killToNextStep(const std::filesystem::path& timings, std::int64_t step,
                                     int victim);

// Whether a launcher event log has a start that continued the running workers live.
bool recoveredLive(const std::filesystem::path& events);

// The median over the run's steps of their period (each step's lowest rank's).
double medianPeriod(const RunTimings& t);

// One run's timings. `requireSteps`: at least 3 complete steps after the warm-up, or Error.
// `startNs`: the launcher's start_workers time, for the startup (0: not measured).
RunTimings readTimings(const std::filesystem::path& path, std::int64_t workers,
                       bool requireSteps = true, std::int64_t startNs = 0);

// The run's step: the median of its repeats' medians, else its median period.
double measuredStep(const RunTimings& t);

// Fits the latency and the bandwidth to `rows` of `stretch bench comm --json`. Throws Error
// when they do not determine both.
NetworkFit fitNetwork(const nlohmann::json& rows);

// The scenario and its "calibration" object (runCalibration's contract), from the measurements.
nlohmann::json scenarioFrom(const CalibrationJob& job, const Measurements& m);

}  // namespace stretch::tools::detail
