#include "runtime/common/duration.hpp"

#include <cstdint>

#include <fmt/format.h>

namespace stretch {

std::string formatDuration(Duration d) {
  const std::int64_t ns = d.count();
  const std::int64_t abs = ns < 0 ? -ns : ns;
  const char* sign = ns < 0 ? "-" : "";
  constexpr std::int64_t kMs = 1'000'000;
  constexpr std::int64_t kS = 1'000 * kMs;
  constexpr std::int64_t kMin = 60 * kS;
  if (abs < kMs) {
    return fmt::format("{}{} ns", sign, abs);
  }
  if (abs < kS) {
    return fmt::format("{}{:g} ms", sign, static_cast<double>(abs) / kMs);
  }
  if (abs < kMin) {
    return fmt::format("{}{:g} s", sign, static_cast<double>(abs / kMs) / 1000.0);
  }
  const std::int64_t minutes = abs / kMin;
  const std::int64_t seconds = (abs % kMin) / kS;
  if (seconds == 0) {
    return fmt::format("{}{} min", sign, minutes);
  }
  return fmt::format("{}{} min {} s", sign, minutes, seconds);
}

Duration fromSeconds(double seconds) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
}

}  // namespace stretch
