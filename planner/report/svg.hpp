#pragma once
// A small kit for inline SVG charts (the HTML report's): linear and log axes, ticks at 1-2-5
// steps, axes with grid lines and labels, the <svg> element, and labelled vertical marks.
// Every chart is kWidth x kHeight pixels with the plot inside the margins below.
//
// Pure functions, reentrant. Labels and titles are HTML-escaped here.

#include <cmath>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace stretch::planner::report {

inline constexpr double kWidth = 760;
inline constexpr double kHeight = 320;
inline constexpr double kLeft = 70;
inline constexpr double kRight = 20;
inline constexpr double kTop = 30;
inline constexpr double kBottom = 50;

// Data [lo, hi] to pixels [pixelLo, pixelHi] (pixelLo > pixelHi for a y axis, which grows up).
struct Axis {
  double lo = 0.0;
  double hi = 1.0;
  bool log = false;
  double pixelLo = 0.0;
  double pixelHi = 1.0;
  double map(double x) const {
    double t = 0.0;
    if (log) {
      t = (std::log(x) - std::log(lo)) / (std::log(hi) - std::log(lo));
    } else {
      t = (x - lo) / (hi - lo);
    }
    return pixelLo + t * (pixelHi - pixelLo);
  }
};

// Tick values: 1, 2, 5 x 10^k within the range on a log axis, else about `count` round steps.
std::vector<double> ticks(const Axis& a, int count);

// Both axes, grid lines, tick labels (8 on x, 5 on y) and axis labels.
std::string axesSvg(const Axis& x, const Axis& y, const std::string& xLabel,
                    const std::string& yLabel, const std::function<std::string(double)>& xFormat,
                    const std::function<std::string(double)>& yFormat);

// The opening <svg> tag of a chart and its title; `points` goes to data-points (for tests).
std::string svgOpen(const std::string& id, const std::string& title, std::size_t points);

// A vertical line at x = value with a label on text row `row` (0 lowest); nothing when the
// value is outside the axis.
std::string markLine(const Axis& x, double value, const std::string& cls, const std::string& label,
                     int row);

}  // namespace stretch::planner::report
