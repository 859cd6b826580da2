#pragma once
// The planner's Monte Carlo driver: replicas of several scenarios at once, in parallel, with
// common random numbers and cancellation.
//
// Replica r of every scenario runs with RunOptions::replica = r, so scenarios that differ only in
// a setting the failure process does not see (the checkpoint interval, for one) face the same
// failures: differences between them are paired, and their confidence intervals narrow
// accordingly (common random numbers; Law & Kelton, "Simulation Modeling and Analysis", ch. 11).
// Results do not depend on the number of threads.
//
// Also here: the reduction of a large stationary scenario to an equivalent small one, which the
// simulator runs in microseconds instead of tenths of a second (see reduceForMonteCarlo).
//
// Thread safety: runReplicas is reentrant. `onDone` is called from worker threads, serialised.

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/common/error.hpp"
#include "sim/job_sim.hpp"
#include "sim/monte_carlo.hpp"
#include "sim/replica_group.hpp"
#include "sim/scenario.hpp"

namespace stretch::planner {

// Thrown by the planner when its cancel flag is set.
class PlanCancelled : public Error {
 public:
  PlanCancelled() : Error("plan cancelled") {}
  const char* kind() const noexcept override { return "PlanCancelled"; }
};

// What the planner keeps of one replica.
struct ReplicaMetrics {
  double ettr = 0.0;  // useful / simulated time
  double simulatedHours = 0.0;
  double samples = 0.0;   // samples kept
  double failures = 0.0;  // failures and preemptions that struck the job
  bool finished = false;  // the job trained all its samples / steps
};

struct ReplicaOptions {
  std::int64_t seeds = 1;
  // Replicas firstReplica .. firstReplica + seeds - 1 (a fresh set for a hold-out check).
  std::int64_t firstReplica = 0;
  int threads = 0;  // 0: hardware threads; never more than the work items
  const std::atomic<bool>* cancel = nullptr;
  // Trace failures: when set (one entry per scenario, hours), every replica replays the trace
  // with each failure moved by an independent uniform jitter in [-j, +j] (clamped at 0). A
  // replayed trace is one history: its ETTR as a function of the checkpoint interval is jagged,
  // because each failure's place inside an interval is fixed by the trace; no one can know that
  // place in advance, so the planner randomises it (j: half an interval) and keeps the structure
  // the trace does tell (bursts, quiet periods) at scales above the interval. The draws depend on
  // the seed and the replica only, so the scenarios of one call stay paired.
  std::vector<double> traceJitterHours;
  // (replicas done, replicas in all), after each replica (this rank's, with a group).
  std::function<void(std::int64_t, std::int64_t)> onDone;
  // Several processes (sim/replica_group.hpp): each runs its block of the (replica, scenario)
  // items and every rank gets every result; collective. Null: all here.
  sim::ReplicaGroup* group = nullptr;
};

// result[i][r]: scenario i, replica r. Throws PlanCancelled when the flag is set (checked between
// replicas and every 2^16 simulator events), else rethrows the first simulator error.
std::vector<std::vector<ReplicaMetrics>> runReplicas(const std::vector<sim::Scenario>& scenarios,
                                                     const ReplicaOptions& options);

// The scenario replica `replica` runs with a trace jitter of `jitterHours` (see ReplicaOptions).
sim::Scenario jitteredTrace(const sim::Scenario& scenario, std::int64_t replica,
                            double jitterHours);

// Mean and 95 % CI of one metric over replicas.
sim::MetricSummary summarizeMetric(const std::vector<ReplicaMetrics>& runs,
                                   double ReplicaMetrics::*metric);
// Paired difference a - b, replica by replica (same seeds).
sim::MetricSummary summarizeDifference(const std::vector<ReplicaMetrics>& a,
                                       const std::vector<ReplicaMetrics>& b,
                                       double ReplicaMetrics::*metric);

// A stationary scenario is one whose job-level failure process is a homogeneous Poisson process
// on a fixed world: exponential failures (or none) with immediate replacement, no spot
// preemptions, no scale events, no fault script, no named nodes, no agent node limits.
bool isStationary(const sim::Scenario& scenario) noexcept;

// For a stationary scenario of n nodes that all run workers (worldSize == n * gpus_per_node),
// the equivalent one with n / k nodes of k times the GPUs and k times the failure rate per node
// (node MTBF / k). The superposition of the nodes' Poisson processes is the same Poisson process
// (rate n / m), the world size is the same, and every failure still costs one restart and a roll
// back, so the ETTR is the same; only the collective cost (more peers share a node), hence the
// step time, differs, and the planner takes throughput from the real cluster instead. k is the
// smallest divisor of n that leaves at most maxNodes nodes with k * gpus_per_node <=
// sim::kMaxGpusPerNode, else the largest divisor within that GPU limit. Costs that grow with the
// nodes (restart_overhead_seconds, reconfigure_seconds, failure_detection_seconds) become
// constants at their value at n, where every start and failure of the real job is. The scenario
// comes back unchanged (k = 1) when it is not stationary or not every node runs workers.
struct ReducedScenario {
  sim::Scenario scenario;
  std::int64_t factor = 1;
};
ReducedScenario reduceForMonteCarlo(const sim::Scenario& scenario, std::int64_t worldSize,
                                    std::int64_t maxNodes = 16);

}  // namespace stretch::planner
