#include "sim/detail/checkpoints.hpp"

#include <algorithm>
#include <cmath>

namespace stretch::sim::detail {

Checkpoints::Checkpoints(const CheckpointSpec& spec)
    : spec_(spec),
      saveNs_(secondsToNanos(spec.saveSeconds)),
      loadNs_(secondsToNanos(spec.loadSeconds)) {}

std::int64_t Checkpoints::nextStep(std::int64_t after, SimTime stepNs) const {
  if (spec_.everySteps) {
    return (after / *spec_.everySteps + 1) * *spec_.everySteps;
  }
  if (spec_.intervalMinutes) {
    const double steps = *spec_.intervalMinutes * 60.0 / nanosToSeconds(stepNs);
    const auto k =
        std::max<std::int64_t>(1, static_cast<std::int64_t>(std::llround(std::min(steps, 1e15))));
    return cadenceBase_ + k;
  }
  return kNever;
}

}  // namespace stretch::sim::detail
