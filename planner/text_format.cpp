#include "planner/text_format.hpp"

#include <cmath>

#include <fmt/format.h>

namespace stretch::planner {

std::string hoursText(double h, std::string_view dayUnit) {
  if (!std::isfinite(h)) {
    return "never";
  }
  if (h >= 48.0) {
    return fmt::format("{:.1f} {}", h / 24.0, dayUnit);
  }
  if (h >= 1.0) {
    return fmt::format("{:.1f} h", h);
  }
  return fmt::format("{:.0f} min", h * 60.0);
}

std::string minutesText(double m, int secondsDecimals) {
  if (!std::isfinite(m)) {
    return "never";
  }
  if (m >= 120.0) {
    return fmt::format("{:.1f} h", m / 60.0);
  }
  if (m >= 1.0) {
    return fmt::format("{:.1f} min", m);
  }
  return fmt::format("{:.{}f} s", m * 60.0, secondsDecimals);
}

std::string grouped(double x) {
  if (!std::isfinite(x)) {
    return "-";
  }
  const auto v = static_cast<long long>(std::llround(x));
  const std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) {
      out += ',';
    }
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

}  // namespace stretch::planner
