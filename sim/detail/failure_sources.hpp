#pragma once
// What strikes the nodes of one job simulation: the failure process of the scenario
// (exponential, Weibull or a trace), the spot market's preemptions, the cause of each failure,
// and which worker a failure that spares the node kills. Each process keeps one event on the
// queue at its next strike; a strike that was rescheduled leaves a stale event behind, which its
// token marks.
//
// Internal to sim/job_sim.cpp and sim/detail/. Not thread-safe: one per run.

#include <cstdint>
#include <memory>
#include <optional>

#include "sim/detail/job_events.hpp"
#include "sim/detail/node_pool.hpp"
#include "sim/detail/run_metrics.hpp"
#include "sim/failure_model.hpp"
#include "sim/random.hpp"
#include "sim/scenario.hpp"

namespace stretch::sim::detail {

// A failure-like process and the event that stands for its next strike.
struct ProcessSlot {
  std::unique_ptr<FailureProcess> process;
  Ev kind = Ev::Failure;
  std::uint64_t token = 0;
  bool scheduled = false;
  SimTime time = 0;
};

class FailureSources {
 public:
  // The processes of replica `replica` over every node of `nodes`. Throws ConfigError for a
  // trace naming no node; notes trace causes missing from the cause table.
  FailureSources(const Scenario& scenario, std::uint64_t replica, const NodePool& nodes,
                 RunMetrics& metrics);

  ProcessSlot& failures() noexcept { return failures_; }
  ProcessSlot& preemptions() noexcept { return preemptions_; }

  // Keeps one scheduled event per process at its next strike.
  void sync(EventQueue& queue, SimTime now);
  // The node entered (up) or left the job: its failure clocks run only while it is in.
  void nodeUpOrDown(std::int64_t node, bool up, SimTime now);

  // The cause of a failure the process did not name (nullopt: no cause table).
  std::optional<std::size_t> sampleCause() { return causes_.sample(); }
  // Which of `workers` local workers a failure kills.
  std::int64_t pickWorker(std::int64_t workers);

 private:
  static void syncSlot(ProcessSlot& slot, EventQueue& queue, SimTime now);

  CauseSampler causes_;
  Rng workerRng_;
  ProcessSlot failures_;
  ProcessSlot preemptions_;
};

}  // namespace stretch::sim::detail
