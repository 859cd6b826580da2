#include "sim/detail/checkpoints.hpp"

#include <algorithm>
#include <cmath>

namespace stretch::sim::detail {

Checkpoints::Checkpoints(const CheckpointSpec& spec)
    : spec_(spec),
      saveNs_(secondsToNanos(spec.saveSeconds)),
      loadNs_(secondsToNanos(spec.loadSeconds)) {}

std::int64_t Checkpoints::nextStep(std::int64_t after, SimTime stepNs) const {
  std::int64_t k = 0;
  if (spec_.everySteps) {
    k = *spec_.everySteps;
  } else if (spec_.intervalMinutes) {
    const double steps = *spec_.intervalMinutes * 60.0 / nanosToSeconds(stepNs);
    k = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::llround(std::min(steps, 1e15))));
  } else {
    return kNever;
  }
  const std::int64_t multiple = after / k + 1;
  return multiple > kNever / k ? kNever : multiple * k;
}

}  // namespace stretch::sim::detail
