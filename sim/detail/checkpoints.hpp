#pragma once
// The checkpoints of one job simulation: when the next save is due, how long saves and loads
// take, and the latest completed checkpoint, which a stopped generation rolls back to.
//
// The cadence is the example jobs' (examples/common/job_support.cpp saveIfDue, the Python
// examples' --checkpoint-every): a save after every global step that is a multiple of k, with
// k = every_steps, or k = round(interval / step time) at the step time of the world that trains
// (the --save-every a job runs with to save every interval). The count is the job's step, which a
// restart from a checkpoint resumes at the loaded step and a live recovery keeps: neither resets
// it.
//
// Internal to sim/job_sim.cpp and sim/detail/. Not thread-safe: one per run.

#include <cstdint>

#include "sim/detail/job_events.hpp"
#include "sim/scenario.hpp"

namespace stretch::sim::detail {

class Checkpoints {
 public:
  explicit Checkpoints(const CheckpointSpec& spec);

  SimTime saveNs() const noexcept { return saveNs_; }
  // The load time a start pays: 0 until a checkpoint exists.
  SimTime loadNs() const noexcept { return any_ ? loadNs_ : 0; }

  // Whether a save has completed.
  bool any() const noexcept { return any_; }
  // The latest completed checkpoint (meaningful when any()).
  const Progress& latest() const noexcept { return latest_; }
  // Where training stands after a stop: the latest checkpoint, or the start.
  Progress rollback() const noexcept { return any_ ? latest_ : Progress{}; }

  // The first checkpoint step after step `after` at a step time of stepNs (the multiple of k
  // above); kNever without a cadence.
  std::int64_t nextStep(std::int64_t after, SimTime stepNs) const;

  // A save begins at `now`; it completes with `saved` as the latest checkpoint.
  void beginSave(SimTime now) noexcept { saveStart_ = now; }
  SimTime saveStart() const noexcept { return saveStart_; }
  void completeSave(const Progress& saved) noexcept {
    latest_ = saved;
    any_ = true;
  }

 private:
  const CheckpointSpec& spec_;
  SimTime saveNs_ = 0;
  SimTime loadNs_ = 0;
  Progress latest_;
  bool any_ = false;
  SimTime saveStart_ = 0;
};

}  // namespace stretch::sim::detail
