// runCalibration, part two: reading what the runs wrote (the engine's per-step timings files,
// the launcher's event logs, the benchmark's JSON), the fits (compute, spread, overhead and
// all-reduce per run; latency and bandwidth from the benchmark) and the scenario JSON they give.
// The runs themselves are in sim_calibrate.cpp; the method is described at its top.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/comm/types.hpp"
#include "runtime/common/error.hpp"
#include "sim/cluster.hpp"
#include "sim/collective_cost.hpp"
#include "sim/monte_carlo.hpp"
#include "sim/step_model.hpp"
#include "tools/sim_calibrate_detail.hpp"

namespace stretch::tools::detail {

namespace fs = std::filesystem;

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
RunTimings readTimings(const fs::path& path, std::int64_t workers, bool requireSteps,
                       std::int64_t startNs) {
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

namespace {

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

}  // namespace

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

namespace {

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
  // As the calibrated runs had it: micro batch and accumulation, no train_batch_size, so that
  // every world size is valid, the live runs' interim world of 1 survivor included.
  nlohmann::json scenarioConfig = job.config;
  scenarioConfig["gradient_accumulation_steps"] = heldOutGas;
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
}  // namespace

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

}  // namespace stretch::tools::detail
