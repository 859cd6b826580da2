#pragma once
// What the Simulate button runs, without Qt: a Monte Carlo over the scenario (the same replicas,
// seeds and results as sim::runMonteCarlo), the timeline of replica 0 reduced to what the chart
// draws, and the planner's plan of the job (planner/plan.hpp: recommendation, checkpoint
// interval sweep with Young's and Daly's intervals, scale table). The window's controller
// (gui/sim_controller.hpp) runs it on a worker thread.
//
// Cancellation: a flag the caller sets from any thread. Replicas check it between runs and,
// through the simulation's progress hook and the timeline sink, during a run; the planner checks
// it the same way. A cancelled runSimulation throws SimulationCancelled once every worker thread
// has stopped.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "planner/plan.hpp"
#include "planner/plan_input.hpp"
#include "sim/monte_carlo.hpp"
#include "sim/scenario.hpp"
#include "sim/timeline.hpp"

namespace stretch::gui {

using SimulationCancelled = sim::SimulationCancelled;

// Called (from worker threads, serialised) after each finished replica: (done, total).
using ProgressFn = std::function<void(std::int64_t, std::int64_t)>;

// sim::runMonteCarlo over replicas 0..seeds-1 on `threads` threads (0: the machine's cores),
// aggregate mode, cancelled by `cancel`.
// timeline (may be null) receives replica 0's records. Throws SimulationCancelled, or the first
// (lowest replica) simulation error.
sim::MonteCarloResult runReplicas(const sim::Scenario& scenario, std::int64_t seeds, int threads,
                                  const std::atomic<bool>& cancel, sim::TimelineSink* timeline,
                                  const ProgressFn& replicaDone);

// The timeline of one run as the chart draws it, in hours.
struct TimelinePoint {
  double hours = 0.0;
  double worldSize = 0.0;  // GPUs
  std::string label;       // what happened ("faulty gpu on n3", "save step 1200")
};

struct TimelineData {
  std::vector<TimelinePoint> worldSize;     // step function: the size from each point on
  std::vector<TimelinePoint> failures;      // failures and preemptions
  std::vector<TimelinePoint> checkpoints;   // completed and aborted saves (start time)
  std::vector<TimelinePoint> restarts;      // every start of the workers after the first
  std::vector<sim::TimelineRecord> events;  // the records above plus scale and node returns
  double endHours = 0.0;
  std::uint64_t dropped = 0;  // records past the cap, not kept
};

// A TimelineSink that keeps the records the chart needs (not compute spans), at most maxRecords,
// and throws SimulationCancelled from record() once cancel is set.
class TimelineCollector final : public sim::TimelineSink {
 public:
  TimelineCollector(const std::atomic<bool>& cancel, std::size_t maxRecords);
  void record(const sim::TimelineRecord& record) override;
  // The chart's series; endHours is the run's simulated length.
  TimelineData data(double endHours) const;

 private:
  const std::atomic<bool>& cancel_;
  std::size_t maxRecords_;
  std::vector<sim::TimelineRecord> records_;
  std::uint64_t dropped_ = 0;
};

struct SimulationRequest {
  planner::PlanInput input;  // the job (its scenario and the planner's settings)
  std::int64_t seeds = 1;    // Monte Carlo replicas of the scenario (the plan's are its own)
  int threads = 0;           // 0: every hardware thread
  bool plan = true;          // also run the planner (recommendation, interval sweep, scale)
  std::size_t timelineRecords = 200'000;
};

struct SimulationResult {
  sim::MonteCarloResult monteCarlo;
  TimelineData timeline;
  std::optional<planner::Plan> plan;
  std::string planError;  // why there is no plan (the planner rejected the job); "" otherwise
  double wallSeconds = 0.0;
};

// Overall fraction done in [0, 1] and the stage ("simulate", then the planner's stages: "batch",
// "scale", "checkpoint", "recommendation"); from worker threads, serialised.
using StageProgressFn = std::function<void(double, const std::string&)>;

// The whole Simulate action: the Monte Carlo of the scenario (the first 30 % of the progress),
// then the plan. A planner error on a job the simulator runs (no valid world size in the
// expected range, ...) is kept in planError, not thrown. Throws SimulationCancelled, the
// simulator's errors.
SimulationResult runSimulation(const SimulationRequest& request, const std::atomic<bool>& cancel,
                               const StageProgressFn& progress);

}  // namespace stretch::gui
