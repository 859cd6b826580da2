#include "planner/report/charts.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "planner/report/svg.hpp"
#include "planner/report/table.hpp"
#include "planner/text_format.hpp"

namespace stretch::planner::report {

std::string ettrChart(const Plan& p) {
  const CheckpointSection& c = p.checkpoint;
  if (!c.simulated || c.curve.empty()) {
    return "<p class=\"note\">No ETTR-vs-interval chart: " +
           escapeHtml(c.skipped.empty() ? "no sweep" : c.skipped) + ".</p>\n";
  }
  Axis x{c.curve.front().minutes, c.curve.back().minutes, true, kLeft, kWidth - kRight};
  if (x.hi <= x.lo) {
    x.hi = x.lo * 2;
  }
  double ylo = 1.0;
  double yhi = 0.0;
  for (const IntervalPoint& pt : c.curve) {
    ylo = std::min({ylo, pt.ettr.mean - pt.ettr.ci95, pt.analyticEttr});
    yhi = std::max({yhi, pt.ettr.mean + pt.ettr.ci95, pt.analyticEttr});
  }
  const double pad = std::max(0.002, (yhi - ylo) * 0.08);
  Axis y{std::max(0.0, ylo - pad), std::min(1.0, yhi + pad), false, kHeight - kBottom, kTop};
  if (y.hi <= y.lo) {
    y.hi = y.lo + 0.01;
  }
  std::string out = svgOpen("chart-ettr-interval", "ETTR vs checkpoint interval", c.curve.size());
  out += axesSvg(
      x, y, "checkpoint interval (minutes, log scale)", "ETTR",
      [](double v) { return fmt::format("{:g}", v); },
      [](double v) { return fmt::format("{:.1f}%", 100 * v); });
  // Daly's analytic curve, sampled densely.
  std::string path;
  constexpr int kSamples = 120;
  const double stepMin = c.stepSeconds / 60.0;
  for (int i = 0; i <= kSamples; ++i) {
    const double m = std::exp(std::log(x.lo) + (std::log(x.hi) - std::log(x.lo)) * i / kSamples);
    const double e = [&] {
      const double cMin = c.saveSeconds / 60.0;
      const double rMin = c.restartSeconds / 60.0;
      const double mMin = c.jobMtbfHours * 60.0;
      const double q = std::max(stepMin, m);
      return q / (mMin * std::exp(rMin / mMin) * std::expm1((q + cMin) / mMin));
    }();
    path += fmt::format("{}{:.1f},{:.1f}", i == 0 ? "" : " ", x.map(m),
                        y.map(std::clamp(e, y.lo, y.hi)));
  }
  out += fmt::format("<polyline class=\"analytic\" points=\"{}\"/>", path);
  for (const IntervalPoint& pt : c.curve) {
    const double px = x.map(pt.minutes);
    out += fmt::format(
        "<g class=\"sim-point {}\"><line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>"
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\"><title>{}: ETTR {:.2f} ± {:.2f} "
        "%</title></circle></g>",
        pt.label, px, y.map(std::clamp(pt.ettr.mean - pt.ettr.ci95, y.lo, y.hi)), px,
        y.map(std::clamp(pt.ettr.mean + pt.ettr.ci95, y.lo, y.hi)), px,
        y.map(std::clamp(pt.ettr.mean, y.lo, y.hi)), escapeHtml(minutesText(pt.minutes, 1)),
        100 * pt.ettr.mean, 100 * pt.ettr.ci95);
  }
  out += markLine(x, std::max(c.youngMinutes, stepMin), "mark-young", "Young", 0);
  out += markLine(x, std::max(c.dalyMinutes, stepMin), "mark-daly", "Daly", 1);
  out += markLine(x, c.simulatedOptimumMinutes, "mark-optimum", "simulated optimum", 2);
  out += "</svg>\n";
  out +=
      "<p class=\"legend\"><span class=\"key analytic\"></span> Daly's analytic ETTR "
      "<span class=\"key sim\"></span> simulated mean ± 95 % CI "
      "<span class=\"key young\"></span> Young <span class=\"key daly\"></span> Daly "
      "<span class=\"key optimum\"></span> simulated optimum</p>\n";
  return out;
}

std::string timeChart(const Plan& p) {
  const auto& rows = p.scale.rows;
  const bool time = p.scale.totalSamples.has_value() &&
                    std::all_of(rows.begin(), rows.end(),
                                [](const ScaleRow& r) { return r.timeToTrainHours.has_value(); });
  auto value = [&](const ScaleRow& r) { return time ? r.timeToTrainHours->mean : r.goodput.mean; };
  Axis x{static_cast<double>(rows.front().gpus), static_cast<double>(rows.back().gpus), true, kLeft,
         kWidth - kRight};
  if (x.hi <= x.lo) {
    x.lo = x.lo / 2;
    x.hi = x.hi * 2;
  }
  double ylo = std::numeric_limits<double>::infinity();
  double yhi = 0.0;
  for (const ScaleRow& r : rows) {
    if (std::isfinite(value(r)) && value(r) > 0) {
      ylo = std::min(ylo, value(r));
      yhi = std::max(yhi, value(r));
    }
  }
  if (!std::isfinite(ylo)) {
    return "";
  }
  Axis y{ylo, yhi, true, kHeight - kBottom, kTop};
  if (y.hi <= y.lo * 1.0001) {
    y.lo = y.lo / 1.5;
    y.hi = y.hi * 1.5;
  } else {
    y.lo /= 1.1;
    y.hi *= 1.1;
  }
  std::string out =
      svgOpen("chart-time-world", time ? "Time to train vs world size" : "Goodput vs world size",
              rows.size());
  out += axesSvg(
      x, y, "world size (GPUs, log scale)",
      time ? "time to train (hours, log scale)" : "goodput (samples/s, log scale)",
      [](double v) { return fmt::format("{:g}", v); },
      [](double v) { return fmt::format("{:g}", v); });
  std::string path;
  for (const ScaleRow& r : rows) {
    if (value(r) > 0 && std::isfinite(value(r))) {
      path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "" : " ",
                          x.map(static_cast<double>(r.gpus)), y.map(value(r)));
    }
  }
  out += fmt::format("<polyline class=\"series\" points=\"{}\"/>", path);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const ScaleRow& r = rows[i];
    if (!r.shown || !(value(r) > 0)) {
      continue;
    }
    const bool rec = i == p.recommendation.row;
    out += fmt::format(
        "<circle class=\"world{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\"><title>{} GPUs: "
        "{}</title></circle>",
        rec ? " recommended" : "", x.map(static_cast<double>(r.gpus)), y.map(value(r)),
        rec ? 6 : 3.5, r.gpus,
        time ? hoursText(value(r), "d") : fmt::format("{:.1f} samples/s", value(r)));
  }
  out += "</svg>\n";
  return out;
}

std::string validSizesChart(const Plan& p) {
  const auto& versions = p.batch.versions;
  std::int64_t maxGpus = 1;
  for (const ExpectedSize& e : p.batch.expected) {
    maxGpus = std::max(maxGpus, e.gpus);
  }
  const double rowHeight = 34;
  const double height = kTop + rowHeight * static_cast<double>(versions.size()) + kBottom;
  Axis x{0.0, static_cast<double>(maxGpus), false, kLeft + 40, kWidth - kRight};
  std::size_t count = 0;
  std::string body;
  const std::int64_t expLo = p.batch.expected.empty() ? 0 : p.batch.expected.front().gpus;
  for (std::size_t i = 0; i < versions.size(); ++i) {
    const VersionPlan& v = versions[i];
    const double top = kTop + rowHeight * static_cast<double>(i);
    body +=
        fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>",
                    kLeft + 32, top + rowHeight / 2 + 4, escapeHtml(v.version));
    body += fmt::format(
        "<rect class=\"expected\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\"/>",
        x.map(static_cast<double>(expLo)), top + 4,
        std::max(1.0, x.map(static_cast<double>(maxGpus)) - x.map(static_cast<double>(expLo))),
        rowHeight - 8);
    for (const BatchRow& r : v.rows) {
      if (r.gpus > maxGpus) {
        continue;
      }
      ++count;
      const double px = x.map(static_cast<double>(r.gpus));
      body += fmt::format(
          "<line class=\"valid-size\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\">"
          "<title>{3} GPUs: micro {4} x {5}</title></line>",
          px, top + 6, top + rowHeight - 6, r.gpus, r.microBatch, r.gradientAccumulation);
    }
  }
  std::string out = fmt::format(
      "<svg id=\"chart-valid-sizes\" class=\"chart\" data-points=\"{}\" "
      "xmlns=\"http://www.w3.org/2000/svg\" "
      "viewBox=\"0 0 {:.0f} {:.0f}\" width=\"{:.0f}\" height=\"{:.0f}\" role=\"img\"><title>Valid "
      "world sizes</title>",
      count, kWidth, height, kWidth, height);
  out += body;
  const double base = height - kBottom;
  out +=
      fmt::format("<line class=\"axis\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>",
                  x.pixelLo, base, x.pixelHi, base);
  for (const double t : ticks(x, 8)) {
    out += fmt::format(
        "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{:g}</text>",
        x.map(t), base + 16, t);
  }
  out += fmt::format(
      "<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">GPUs (shaded: "
      "expected "
      "cluster sizes)</text>",
      (x.pixelLo + x.pixelHi) / 2, height - 10);
  out += "</svg>\n";
  return out;
}

}  // namespace stretch::planner::report
