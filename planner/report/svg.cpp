#include "planner/report/svg.hpp"

#include <cmath>

#include <fmt/format.h>

#include "planner/report/table.hpp"

namespace stretch::planner::report {

std::vector<double> ticks(const Axis& a, int count) {
  std::vector<double> out;
  if (a.log) {
    const double lo = std::log10(a.lo);
    const double hi = std::log10(a.hi);
    for (double e = std::floor(lo); e <= std::ceil(hi); e += 1.0) {
      for (const double m : {1.0, 2.0, 5.0}) {
        const double v = m * std::pow(10.0, e);
        if (v >= a.lo * 0.999 && v <= a.hi * 1.001) {
          out.push_back(v);
        }
      }
    }
    return out;
  }
  const double span = a.hi - a.lo;
  const double raw = span / count;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  for (double v = std::ceil(a.lo / step) * step; v <= a.hi + 1e-9 * span; v += step) {
    out.push_back(v);
  }
  return out;
}

std::string axesSvg(const Axis& x, const Axis& y, const std::string& xLabel,
                    const std::string& yLabel, const std::function<std::string(double)>& xFormat,
                    const std::function<std::string(double)>& yFormat) {
  std::string out;
  out +=
      fmt::format("<line class=\"axis\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>",
                  kLeft, kHeight - kBottom, kWidth - kRight, kHeight - kBottom);
  out +=
      fmt::format("<line class=\"axis\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>",
                  kLeft, kTop, kLeft, kHeight - kBottom);
  for (const double t : ticks(x, 8)) {
    const double px = x.map(t);
    out += fmt::format(
        "<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\"/>"
        "<text class=\"tick\" x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4}</text>",
        px, kTop, kHeight - kBottom, kHeight - kBottom + 16, xFormat(t));
  }
  for (const double t : ticks(y, 5)) {
    const double py = y.map(t);
    out += fmt::format(
        "<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\"/>"
        "<text class=\"tick\" x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>",
        kLeft, py, kWidth - kRight, kLeft - 6, py + 4, yFormat(t));
  }
  out += fmt::format(
      "<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>",
      (kLeft + kWidth - kRight) / 2, kHeight - 10, escapeHtml(xLabel));
  out += fmt::format(
      "<text class=\"label\" transform=\"translate(16,{:.1f}) rotate(-90)\" "
      "text-anchor=\"middle\">{}</text>",
      (kTop + kHeight - kBottom) / 2, escapeHtml(yLabel));
  return out;
}

std::string svgOpen(const std::string& id, const std::string& title, std::size_t points) {
  return fmt::format(
      "<svg id=\"{}\" class=\"chart\" data-points=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" "
      "viewBox=\"0 0 {:.0f} {:.0f}\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "role=\"img\"><title>{}</title>",
      id, points, kWidth, kHeight, kWidth, kHeight, escapeHtml(title));
}

std::string markLine(const Axis& x, double value, const std::string& cls, const std::string& label,
                     int row) {
  if (!std::isfinite(value) || value < x.lo || value > x.hi) {
    return "";
  }
  const double px = x.map(value);
  // Labels go near the bottom of the plot (the ETTR curve peaks at the top, where the marks are)
  // on rows of their own, to the left of lines in the right quarter.
  const bool left = px > x.pixelLo + 0.75 * (x.pixelHi - x.pixelLo);
  return fmt::format(
      "<g class=\"mark {0}\"><line x1=\"{1:.1f}\" y1=\"{2:.1f}\" x2=\"{1:.1f}\" y2=\"{3:.1f}\"/>"
      "<text x=\"{4:.1f}\" y=\"{5:.1f}\" text-anchor=\"{6}\">{7}</text></g>",
      cls, px, kTop, kHeight - kBottom, left ? px - 4 : px + 4, kHeight - kBottom - 8 - 14 * row,
      left ? "end" : "start", escapeHtml(label));
}

}  // namespace stretch::planner::report
