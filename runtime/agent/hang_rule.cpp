#include "runtime/agent/hang_rule.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace stretch::agent {

void HeartbeatTracker::observe(std::optional<std::int64_t> stamp, std::optional<std::int64_t> step,
                               Time now, std::optional<std::int64_t> completed) {
  if (!stamp) {
    // Never written, or removed: the program stopped beating on purpose (the engine removes
    // the file when it is destroyed) and is watched no more.
    *this = HeartbeatTracker();
    return;
  }
  if (stamp == stamp_)
    return;
  if (lastChange_)
    longestGap_ = std::max(longestGap_, now - *lastChange_);
  stamp_ = stamp;
  lastChange_ = now;
  if (completed && *completed > 0)
    completedAny_ = true;
  if (step) {
    step_ = step;
    if (!firstStep_)
      firstStep_ = step;
  }
}

Duration HeartbeatTracker::limit(const HangPolicy& policy) const {
  if (policy.fixed)
    return policy.floor;
  const auto scaled = std::chrono::duration_cast<Duration>(std::chrono::duration<double, std::nano>(
      std::ceil(policy.factor * static_cast<double>(longestGap_.count()))));
  return std::max(policy.floor, scaled);
}

std::optional<std::string> HeartbeatTracker::hung(const HangPolicy& policy, Time now) const {
  if (!policy.enabled() || !lastChange_)
    return std::nullopt;
  const Duration silent = now - *lastChange_;
  const Duration allowed = limit(policy);
  if (silent <= allowed)
    return std::nullopt;
  return fmt::format("no heartbeat for {} (limit {}){}", formatDuration(silent),
                     formatDuration(allowed),
                     step_ ? fmt::format(", last step {}", *step_) : std::string());
}

}  // namespace stretch::agent
