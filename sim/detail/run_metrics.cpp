#include "sim/detail/run_metrics.hpp"

#include <utility>

#include "runtime/common/check.hpp"

namespace stretch::sim::detail {

void RunMetrics::setPhase(Phase next, SimTime now) {
  const SimTime spent = now - phaseSince_;
  switch (phase_) {
    case Phase::Idle:
      result_.idleNs += spent;
      break;
    case Phase::Starting:
      result_.startupNs += spent;
      break;
    case Phase::Computing:
    case Phase::Finishing:
      computeNs_ += spent;
      break;
    case Phase::Saving:
      result_.checkpointNs += spent;
      break;
  }
  phase_ = next;
  phaseSince_ = now;
}

void RunMetrics::closeWorldSpan(SimTime now, std::int64_t worldSize) {
  if (now > worldSince_) {
    result_.worldSizeNs[worldSize] += now - worldSince_;
  }
  worldSince_ = now;
}

void RunMetrics::note(std::string text) {
  if (result_.notes.size() < kMaxNotes) {
    result_.notes.push_back(std::move(text));
  }
}

void RunMetrics::record(const TimelineRecord& r) {
  if (timeline_ != nullptr) {
    timeline_->record(r);
  }
}

RunResult RunMetrics::finish(SimTime now, const Progress& kept) {
  result_.simulatedNs = now;
  result_.usefulNs = kept.useful;
  result_.lostNs = computeNs_ - kept.useful;
  result_.steps = kept.step;
  result_.samples = kept.samples;
  STRETCH_CHECK_EQ(
      result_.usefulNs + result_.lostNs + result_.checkpointNs + result_.startupNs + result_.idleNs,
      result_.simulatedNs, "time accounting");
  return std::move(result_);
}

}  // namespace stretch::sim::detail
