#include "sim/scheduler.hpp"

#include <cmath>
#include <limits>

namespace stretch::sim {

namespace {

SimTime roundNanos(double ns) {
  STRETCH_CHECK(std::isfinite(ns) && ns >= 0.0, "duration {} ns: expected finite and >= 0", ns);
  // Saturate far beyond any run (292 years) instead of overflowing.
  constexpr double kMax = 9.0e18;
  return static_cast<SimTime>(std::llround(std::min(ns, kMax)));
}

}  // namespace

SimTime secondsToNanos(double seconds) {
  return roundNanos(seconds * 1e9);
}

SimTime hoursToNanos(double hours) {
  return roundNanos(hours * 3600.0 * 1e9);
}

}  // namespace stretch::sim
