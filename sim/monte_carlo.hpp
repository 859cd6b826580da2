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
#include "sim/scenario.hpp"

namespace stretch::sim {

struct MonteCarloOptions {
  std::int64_t seeds = 1;  // replicas, >= 1
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
};

// runMonteCarlo was cancelled through MonteCarloOptions::cancel.
class SimulationCancelled : public std::runtime_error {
 public:
  SimulationCancelled() : std::runtime_error("simulation cancelled") {}
};

// Mean and half-width of the 95 % confidence interval (1.96 s / sqrt(n), s the sample standard
// deviation; 0 for one replica), and the extremes.
struct MetricSummary {
  double mean = 0.0;
  double ci95 = 0.0;
  double min = 0.0;
  double max = 0.0;
};

MetricSummary summarize(const std::vector<double>& values);

struct MonteCarloResult {
  std::vector<RunResult> runs;  // by replica
  double wallSeconds = 0.0;     // the whole batch
  int threads = 1;

  // The metrics of every run, by name: simulated_hours, wall_seconds, events, ettr, samples,
  // steps, failures, preemptions, restarts, stops, generations, checkpoints, useful_hours,
  // lost_hours, checkpoint_hours, startup_hours, idle_hours.
  std::map<std::string, std::vector<double>> metricValues() const;
  // world size -> hours per run (0 for runs that never ran at that size).
  std::map<std::int64_t, std::vector<double>> worldSizeHours() const;
  // Outcome name -> number of runs that ended so.
  std::map<std::string, std::int64_t> outcomes() const;
};

// Runs `options.seeds` replicas. Rethrows the first (lowest replica) exception after every
// thread has stopped.
MonteCarloResult runMonteCarlo(const Scenario& scenario, const MonteCarloOptions& options);

// The metrics of one run as JSON: {"simulated_hours": ..., "world_size_hours": {"8": ...}, ...}.
nlohmann::json runToJson(const RunResult& run);
// The summary: with one replica the run's figures; with more, every metric as
// {"mean", "ci95", "min", "max"} plus "seeds" and "outcomes".
nlohmann::json summaryToJson(const MonteCarloResult& result);

}  // namespace stretch::sim
