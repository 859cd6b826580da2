#pragma once
// The figures one job simulation reports (sim::RunResult): where the simulated time goes (every
// nanosecond to exactly one of useful, lost, checkpoint, startup and idle), the time spent at each
// world size, the counters, the notes, and the timeline records.
//
// Internal to sim/job_sim.cpp and sim/detail/. Not thread-safe: one per run.

#include <cstdint>
#include <string>

#include "sim/detail/job_events.hpp"
#include "sim/job_sim.hpp"
#include "sim/timeline.hpp"

namespace stretch::sim::detail {

class RunMetrics {
 public:
  // `timeline` (not owned, may be null) receives the records.
  explicit RunMetrics(TimelineSink* timeline) : timeline_(timeline) {}

  // The counters and the outcome, filled by the simulation as the run goes.
  RunResult& result() noexcept { return result_; }

  Phase phase() const noexcept { return phase_; }
  // Charges [start of the current phase, now) to its account and enters `next` at `now`.
  void setPhase(Phase next, SimTime now);
  // Charges [start of the current span, now) to `worldSize` (0: no workers) and starts a new span.
  void closeWorldSpan(SimTime now, std::int64_t worldSize);

  // A thing the run skipped and why; the first kMaxNotes are kept.
  void note(std::string text);

  bool tracing() const noexcept { return timeline_ != nullptr; }
  // Hands the record to the timeline, if any.
  void record(const TimelineRecord& r);

  // The result of a run that ended at `now` with `kept` the progress that stands. Throws
  // InternalError when the accounting does not add up to the simulated time.
  RunResult finish(SimTime now, const Progress& kept);

  static constexpr std::size_t kMaxNotes = 20;

 private:
  TimelineSink* timeline_;
  RunResult result_;
  Phase phase_ = Phase::Idle;
  SimTime phaseSince_ = 0;
  SimTime computeNs_ = 0;  // computing and finishing: useful + lost
  SimTime worldSince_ = 0;
};

}  // namespace stretch::sim::detail
