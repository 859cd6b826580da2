#pragma once
// Monte Carlo over independent replicas of a scenario, in parallel, with results that do not
// depend on the number of threads: replica i is seeded with deriveSeed(scenario.seed, i, stream)
// whichever thread runs it, and the statistics are computed in replica order once every replica
// is done. (wall_seconds is the only figure that varies from run to run.)
//
// Thread safety: runMonteCarlo is reentrant. The optional outputs (event log, timeline) receive
// replica 0's records only, from whichever thread runs it.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sim/job_sim.hpp"
#include "sim/replica_group.hpp"
#include "sim/scenario.hpp"

namespace stretch::sim {

// The most replicas one Monte Carlo runs (`stretch sim --seeds`, stretch.simulate's seeds; also
// the planner's plan.seeds and sweep_seeds as planner::kMaxSeeds, and the GUI's seeds): the
// summary's percentiles need every replica's figures, so its memory grows with the replicas
// (about 0.6 kB each: 0.6 GB at the maximum) and this bound keeps it well inside a machine;
// runMonteCarlo refuses more, before allocating anything, with a ConfigError.
inline constexpr std::int64_t kMaxSeeds = 1'000'000;

struct MonteCarloOptions {
  std::int64_t seeds = 1;  // replicas, in [1, kMaxSeeds]
  int threads = 0;         // 0: std::thread::hardware_concurrency(); never more than seeds
  SimMode mode = SimMode::Aggregate;
  agent::EventLog* eventLog = nullptr;  // replica 0 only
  TimelineSink* timeline = nullptr;     // replica 0 only
  // Called (from any thread, serialised) after each replica with (done, total), and with
  // replica 0's fraction done while it runs alone (seeds == 1).
  std::function<void(std::int64_t, std::int64_t)> replicaDone;
  std::function<void(double)> progress;
  // When set and it becomes true (from any thread), no further replica starts, running ones
  // stop at their next progress check, and runMonteCarlo throws SimulationCancelled.
  const std::atomic<bool>* cancel = nullptr;
  // Several processes (sim/replica_group.hpp): this process runs its block of the replicas
  // (replica 0, hence the event log and timeline, is rank 0's) and every rank returns every
  // replica's result, in replica order. replicaDone counts this rank's block. Null: all here.
  ReplicaGroup* group = nullptr;
};

// runMonteCarlo was cancelled through MonteCarloOptions::cancel.
class SimulationCancelled : public std::runtime_error {
 public:
  SimulationCancelled() : std::runtime_error("simulation cancelled") {}
};

// A metric over the replicas: the mean and the half-width of its 95 % confidence interval,
// t(0.975, n-1) s / sqrt(n) with Student's t quantile for the replica count and s the sample
// standard deviation (0 for one replica); the extremes; and the 1st, 10th, 50th, 90th and 99th
// percentiles (linear interpolation between order statistics, Hyndman and Fan's type 7, numpy's
// default): both tails, since a bad time to train is a high one and a bad ETTR a low one.
struct MetricSummary {
  double mean = 0.0;
  double ci95 = 0.0;
  double min = 0.0;
  double max = 0.0;
  double p1 = 0.0;
  double p10 = 0.0;
  double p50 = 0.0;
  double p90 = 0.0;
  double p99 = 0.0;
};

// How ci95 is computed, for outputs to say so.
inline constexpr const char* kCi95Method =
    "95 % confidence interval of the mean: t(0.975, n-1) s / sqrt(n), Student's t for n replicas";

// The 0.975 quantile of Student's t with `df` (>= 1) degrees of freedom: the factor of a
// two-sided 95 % interval (12.706 at 1, 2.093 at 19, 1.962 at 999, 1.960 in the limit). Hill's
// algorithm 396 (CACM 13(10), 1970), exact at 1 and 2 degrees of freedom, within 1e-6 beyond.
double studentT975(double df);

// The q-quantile (0 <= q <= 1) of `values`, type 7; 0 when empty.
double percentile(std::vector<double> values, double q);

MetricSummary summarize(const std::vector<double>& values);
// A figure known exactly (an analytic one): every field `value`, an interval of 0.
MetricSummary exactSummary(double value);

struct MonteCarloResult {
  std::vector<RunResult> runs;  // by replica
  double wallSeconds = 0.0;     // the whole batch
  int threads = 1;              // on this process
  int processes = 1;            // ranks of the ReplicaGroup, 1 without one

  // The metrics of every run, by name: simulated_hours, wall_seconds, events, ettr, samples,
  // steps, failures, preemptions, restarts, stops, generations, checkpoints, useful_hours,
  // lost_hours, checkpoint_hours, startup_hours, idle_hours.
  std::map<std::string, std::vector<double>> metricValues() const;
  // world size -> hours per run (0 for runs that never ran at that size).
  std::map<std::int64_t, std::vector<double>> worldSizeHours() const;
  // Outcome name -> number of runs that ended so.
  std::map<std::string, std::int64_t> outcomes() const;
};

// Runs `options.seeds` replicas. Throws ConfigError naming --seeds when seeds is outside
// [1, kMaxSeeds]. Rethrows the first (lowest replica) exception after every thread has stopped.
MonteCarloResult runMonteCarlo(const Scenario& scenario, const MonteCarloOptions& options);

// One run, exactly (integers as integers, doubles bit for bit), as bytes for another process;
// and back. Throws IoError for bytes that are not such a run.
std::string encodeRun(const RunResult& run);
RunResult decodeRun(const std::string& bytes);

// The metrics of one run as JSON: {"simulated_hours": ..., "world_size_hours": {"8": ...}, ...}.
nlohmann::json runToJson(const RunResult& run);
// The summary: with one replica the run's figures; with more, every metric as
// {"mean", "ci95", "min", "max"} plus "seeds" and "outcomes".
nlohmann::json summaryToJson(const MonteCarloResult& result);
// One metric's summary: {"mean", "ci95", "min", "max", "p1", "p10", "p50", "p90", "p99"}
// (non-finite figures are written as null).
nlohmann::json metricSummaryToJson(const MetricSummary& summary);

}  // namespace stretch::sim
