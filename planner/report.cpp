#include "planner/report.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "planner/text_format.hpp"
#include "sim/cluster.hpp"

namespace stretch::planner {

namespace {

using nlohmann::json;

// ---- number formatting ---------------------------------------------------------------------

json number(double x) {
  return std::isfinite(x) ? json(x) : json(nullptr);
}

json summaryJson(const sim::MetricSummary& m) {
  return json{{"mean", number(m.mean)},
              {"ci95", number(m.ci95)},
              {"min", number(m.min)},
              {"max", number(m.max)}};
}

json optionalSummary(const std::optional<sim::MetricSummary>& m) {
  return m ? summaryJson(*m) : json(nullptr);
}

std::string pct(double x, int digits = 1) {
  return std::isfinite(x) ? fmt::format("{:.{}f} %", 100.0 * x, digits) : "-";
}

std::string compact(double x) {
  if (!std::isfinite(x)) {
    return "-";
  }
  const double a = std::abs(x);
  if (a >= 1e9) {
    return fmt::format("{:.2f}G", x / 1e9);
  }
  if (a >= 1e6) {
    return fmt::format("{:.2f}M", x / 1e6);
  }
  if (a >= 1e4) {
    return fmt::format("{:.1f}k", x / 1e3);
  }
  if (a >= 100) {
    return fmt::format("{:.0f}", x);
  }
  return fmt::format("{:.3g}", x);
}

std::string withCi(const sim::MetricSummary& m, bool simulated, const auto& format) {
  if (!simulated) {
    return format(m.mean);
  }
  return fmt::format("{} ± {}", format(m.mean), format(m.ci95));
}

std::string ettrText(const sim::MetricSummary& m, bool simulated) {
  if (!simulated) {
    return pct(m.mean);
  }
  return fmt::format("{:.2f} ± {:.2f} %", 100.0 * m.mean, 100.0 * m.ci95);
}

std::string listText(const std::vector<std::int64_t>& v) {
  return fmt::format("[{}]", fmt::join(v, ", "));
}

// Word-wraps `text` at `width` columns with `indent` before every line.
std::string wrap(const std::string& text, std::size_t width, const std::string& indent) {
  std::istringstream words(text);
  std::string word;
  std::string out;
  std::string line = indent;
  while (words >> word) {
    if (line.size() > indent.size() && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = indent;
    }
    if (line.size() > indent.size()) {
      line += ' ';
    }
    line += word;
  }
  if (line.size() > indent.size()) {
    out += line + "\n";
  }
  return out;
}

// ---- a simple aligned table ----------------------------------------------------------------

struct Table {
  std::vector<std::string> header;
  std::vector<bool> right;  // right-align the column
  std::vector<std::vector<std::string>> rows;

  std::string text(const std::string& indent) const {
    std::vector<std::size_t> widths(header.size(), 0);
    auto measure = [](const std::string& s) {
      // Display width: count UTF-8 code points, not bytes (the ± sign).
      std::size_t n = 0;
      for (const char c : s) {
        if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) {
          ++n;
        }
      }
      return n;
    };
    for (std::size_t i = 0; i < header.size(); ++i) {
      widths[i] = measure(header[i]);
    }
    for (const auto& row : rows) {
      for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) {
        widths[i] = std::max(widths[i], measure(row[i]));
      }
    }
    auto line = [&](const std::vector<std::string>& cells) {
      std::string out = indent;
      for (std::size_t i = 0; i < cells.size(); ++i) {
        const std::size_t pad = widths[i] - std::min(widths[i], measure(cells[i]));
        if (i > 0) {
          out += "  ";
        }
        if (right[i]) {
          out += std::string(pad, ' ') + cells[i];
        } else {
          out += cells[i] + (i + 1 < cells.size() ? std::string(pad, ' ') : "");
        }
      }
      return out + "\n";
    };
    std::string out = line(header);
    for (const auto& row : rows) {
      out += line(row);
    }
    return out;
  }

  std::string markdown() const {
    std::string out = "| " + fmt::format("{}", fmt::join(header, " | ")) + " |\n|";
    for (std::size_t i = 0; i < header.size(); ++i) {
      out += right[i] ? " ---: |" : " --- |";
    }
    out += "\n";
    for (const auto& row : rows) {
      out += "| " + fmt::format("{}", fmt::join(row, " | ")) + " |\n";
    }
    return out;
  }

  std::string html(const std::string& cls) const {
    std::string out = fmt::format("<table class=\"{}\"><thead><tr>", cls);
    for (std::size_t i = 0; i < header.size(); ++i) {
      out += fmt::format("<th{}>{}</th>", right[i] ? " class=\"num\"" : "", header[i]);
    }
    out += "</tr></thead><tbody>\n";
    for (const auto& row : rows) {
      out += "<tr>";
      for (std::size_t i = 0; i < row.size(); ++i) {
        out += fmt::format("<td{}>{}</td>", right[i] ? " class=\"num\"" : "", row[i]);
      }
      out += "</tr>\n";
    }
    return out + "</tbody></table>\n";
  }
};

std::string escapeHtml(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Table escaped(Table t) {
  for (auto& h : t.header) {
    h = escapeHtml(h);
  }
  for (auto& row : t.rows) {
    for (auto& c : row) {
      c = escapeHtml(c);
    }
  }
  return t;
}

std::string csvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) {
    return s;
  }
  std::string out = "\"";
  for (const char c : s) {
    out += c == '"' ? std::string("\"\"") : std::string(1, c);
  }
  return out + "\"";
}

std::string csvNumber(double x) {
  return std::isfinite(x) ? fmt::format("{:.10g}", x) : "";
}

// ---- the sections as tables ----------------------------------------------------------------

const VersionPlan& jobVersion(const Plan& p) {
  return p.batch.versions.front();
}

std::string expectedText(const Plan& p) {
  const auto& e = p.batch.expected;
  if (e.empty()) {
    return "no expected sizes";
  }
  return fmt::format("{} expected size{} from {} to {} GPUs", e.size(), e.size() == 1 ? "" : "s",
                     e.front().gpus, e.back().gpus);
}

Table versionsTable(const Plan& p) {
  Table t{{"version", "final batch", "valid sizes", "expected sizes covered", "GPU use"},
          {false, true, true, true, true},
          {}};
  for (const VersionPlan& v : p.batch.versions) {
    if (!v.error.empty()) {
      t.rows.push_back({v.version, "-", "-", "no plan (below)", "-"});
      continue;
    }
    t.rows.push_back({v.version + (&v == &jobVersion(p) ? " (job)" : ""),
                      v.finalBatch > 0 ? grouped(static_cast<double>(v.finalBatch)) : "varies",
                      std::to_string(v.rows.size()),
                      fmt::format("{} ({}/{})", pct(v.coverage.covered), v.coverage.coveredSizes,
                                  v.coverage.expectedSizes),
                      pct(v.coverage.utilisation)});
  }
  return t;
}

Table batchRowsTable(const VersionPlan& v) {
  Table t{{"GPUs", "data-parallel", "micro batch", "grad accum", "global batch"},
          {true, true, true, true, true},
          {}};
  for (const BatchRow& r : v.rows) {
    t.rows.push_back({std::to_string(r.gpus), std::to_string(r.dataParallel),
                      std::to_string(r.microBatch), std::to_string(r.gradientAccumulation),
                      std::to_string(r.batch)});
  }
  return t;
}

std::string suggestionText(const Plan& p) {
  const BatchSection& b = p.batch;
  if (!b.elastic) {
    return "no suggestion: the job's config has no elasticity section (its batch keys decide "
           "the batch at each size)";
  }
  if (!b.suggestion) {
    return fmt::format(
        "no suggestion: none of {} nearby configurations (micro batches added or dropped, "
        "max_train_batch_size within ±{:g} %, the exact solver) covers more expected sizes with a "
        "batch within ±{:g} % of {}",
        b.alternativesTried, 100.0 * b.tolerance, 100.0 * b.tolerance, jobVersion(p).finalBatch);
  }
  const BatchSuggestion& s = *b.suggestion;
  const Coverage& c = jobVersion(p).coverage;
  return fmt::format(
      "suggestion: {} (version {}, micro batches {}, max batch {}{}): final batch {} -> {}, "
      "expected sizes covered {} -> {} ({} -> {} of {}), GPU use {} -> {}",
      s.change, s.version, listText(s.microBatches), s.maxBatch,
      s.targetBatch ? fmt::format(", target {} ± {:g} %", *s.targetBatch, 100.0 * b.tolerance) : "",
      jobVersion(p).finalBatch, s.finalBatch, pct(c.covered), pct(s.coverage.covered),
      c.coveredSizes, s.coverage.coveredSizes, s.coverage.expectedSizes, pct(c.utilisation),
      pct(s.coverage.utilisation));
}

Table intervalTable(const Plan& p) {
  const CheckpointSection& c = p.checkpoint;
  Table t{{"interval", "formula / source", "minutes", "analytic ETTR", "simulated ETTR"},
          {false, false, true, true, true},
          {}};
  auto simAt = [&](double minutes) -> std::string {
    for (const IntervalPoint& pt : c.curve) {
      if (std::abs(pt.minutes / minutes - 1.0) <= 1e-3) {
        return ettrText(pt.ettr, true);
      }
    }
    return "-";
  };
  const double stepMin = c.stepSeconds / 60.0;
  auto analytic = [&](double minutes) {
    const double m = std::max(minutes, stepMin);
    for (const IntervalPoint& pt : c.curve) {
      if (std::abs(pt.minutes / m - 1.0) <= 1e-3) {
        return pct(pt.analyticEttr);
      }
    }
    return std::string("-");
  };
  t.rows.push_back({"Young", "sqrt(2 C M)", minutesText(c.youngMinutes, 1),
                    analytic(c.youngMinutes), simAt(std::max(c.youngMinutes, stepMin))});
  t.rows.push_back({"Daly", "higher-order, Daly 2006", minutesText(c.dalyMinutes, 1),
                    pct(c.dalyEttr), simAt(std::max(c.dalyMinutes, stepMin))});
  t.rows.push_back(
      {"Daly exact", "max of Daly's ETTR", minutesText(c.exactDalyMinutes, 1), "-", "-"});
  if (c.configuredMinutes) {
    t.rows.push_back({"configured", "the job's cadence", minutesText(*c.configuredMinutes, 1),
                      analytic(*c.configuredMinutes),
                      simAt(std::max(*c.configuredMinutes, stepMin))});
  }
  if (c.simulated) {
    t.rows.push_back({"simulated optimum", fmt::format("Monte Carlo, {} replicas", c.seeds),
                      minutesText(c.simulatedOptimumMinutes, 1), "-",
                      ettrText(c.simulatedOptimumEttr, true)});
  }
  return t;
}

Table curveTable(const Plan& p) {
  const CheckpointSection& c = p.checkpoint;
  Table t{{"interval", "steps", "analytic ETTR", "simulated ETTR", "point"},
          {true, true, true, true, false},
          {}};
  for (const IntervalPoint& pt : c.curve) {
    t.rows.push_back({minutesText(pt.minutes, 1),
                      grouped(pt.effectiveMinutes * 60.0 / c.stepSeconds), pct(pt.analyticEttr, 2),
                      ettrText(pt.ettr, true), pt.label});
  }
  return t;
}

Table scaleTable(const Plan& p, bool shownOnly) {
  const ScaleSection& s = p.scale;
  const bool price = p.settings.pricePerGpuHour.has_value();
  Table t{{"", "GPUs", "nodes", "micro x accum", "step", "samples/s", "job MTBF", "interval",
           "ETTR", "time to train", "GPU-hours"},
          {false, true, true, true, true, true, true, true, true, true, true},
          {}};
  if (price) {
    t.header.push_back("cost");
    t.right.push_back(true);
  }
  for (std::size_t i = 0; i < s.rows.size(); ++i) {
    const ScaleRow& r = s.rows[i];
    if (shownOnly && !r.shown) {
      continue;
    }
    std::vector<std::string> row = {
        i == p.recommendation.row ? "*" : "",
        std::to_string(r.gpus),
        std::to_string(r.nodes),
        fmt::format("{} x {}", r.microBatch, r.gradientAccumulation),
        fmt::format("{:.3g} s", r.stepSeconds),
        compact(r.samplesPerSecond),
        hoursText(r.jobMtbfHours, "d"),
        minutesText(r.intervalMinutes, 1),
        ettrText(r.ettr, r.simulated),
        r.timeToTrainHours
            ? withCi(*r.timeToTrainHours, r.simulated, [](double h) { return hoursText(h, "d"); })
            : "-",
        r.gpuHours ? withCi(*r.gpuHours, r.simulated, compact) : "-"};
    if (price) {
      row.push_back(r.cost ? withCi(*r.cost, r.simulated, compact) : "-");
    }
    t.rows.push_back(row);
  }
  return t;
}

Table portabilityTable(const Plan& p, std::size_t limit) {
  Table t{{"resume at GPUs", "micro batch", "grad accum", "global batch", "same batch"},
          {true, true, true, true, false},
          {}};
  for (std::size_t i = 0; i < p.portability.rows.size() && i < limit; ++i) {
    const PortabilityRow& r = p.portability.rows[i];
    t.rows.push_back({std::to_string(r.gpus), std::to_string(r.microBatch),
                      std::to_string(r.gradientAccumulation), std::to_string(r.batch),
                      r.sameBatch ? "yes" : "no"});
  }
  return t;
}

std::string headline(const Plan& p) {
  return fmt::format("{} GPUs max ({} nodes x {}, cluster {}); failures: {}", p.cluster.gpus(),
                     p.cluster.nodes, p.cluster.gpusPerNode, p.cluster.name, p.failureSummary);
}

std::string modeText(const Plan& p) {
  return fmt::format(
      "objective {}; scale table {}; checkpoint sweep {}; planned in {:.2f} s on {} thread{}",
      toString(p.settings.objective),
      p.scale.monteCarlo ? fmt::format("Monte Carlo, {} replicas per size", p.scale.seeds)
                         : "analytic (Daly)",
      p.checkpoint.simulated ? fmt::format("{} replicas per interval", p.checkpoint.seeds)
                             : "not run",
      p.wallSeconds, p.threads, p.threads == 1 ? "" : "s");
}

std::string recommendationLine(const Plan& p) {
  const Recommendation& r = p.recommendation;
  return fmt::format(
      "{} GPUs ({} node{}), micro batch {} x {} accumulation = global batch {}, checkpoint every "
      "{}{}",
      r.gpus, r.nodes, r.nodes == 1 ? "" : "s", r.microBatch, r.gradientAccumulation, r.batch,
      minutesText(r.intervalMinutes, 1),
      r.intervalSteps > 0 ? fmt::format(" ({} steps)", r.intervalSteps) : "");
}

std::string checkpointHeader(const Plan& p) {
  const CheckpointSection& c = p.checkpoint;
  return fmt::format(
      "at {} GPUs: job MTBF M = {}, save C = {:g} s, restart R = {:g} s, step {:.3g} s", c.gpus,
      hoursText(c.jobMtbfHours, "d"), c.saveSeconds, c.restartSeconds, c.stepSeconds);
}

std::string recommendedIntervalText(const Plan& p) {
  const CheckpointSection& c = p.checkpoint;
  std::string out = fmt::format("recommended: {}", minutesText(c.recommendedMinutes, 1));
  if (c.recommendedSteps > 0) {
    out += fmt::format(" ({} steps)", c.recommendedSteps);
  }
  return out + " - " + c.reason;
}

std::string gainText(const Plan& p) {
  const CheckpointSection& c = p.checkpoint;
  return fmt::format(
      "simulated optimum vs Daly's interval: {:+.3f} ± {:.3f} percentage points of ETTR; vs "
      "Young's: {:+.3f} ± {:.3f} (paired over {} replicas of {} simulated hours{})",
      100.0 * c.gainOverDaly.mean, 100.0 * c.gainOverDaly.ci95, 100.0 * c.gainOverYoung.mean,
      100.0 * c.gainOverYoung.ci95, c.seeds, fmt::format("{:.0f}", c.runHours),
      c.reduction > 1
          ? fmt::format("; nodes merged {}:1, exact for this failure model", c.reduction)
          : "");
}

// ---- table (terminal) -----------------------------------------------------------------------

std::string renderTable(const Plan& p) {
  std::string out;
  out += fmt::format("stretch plan: {} - {}\n", p.name, headline(p));
  out += fmt::format("  {}\n", modeText(p));
  for (const auto& w : p.warnings) {
    out += fmt::format("  warning: {}\n", w);
  }

  const VersionPlan& v = jobVersion(p);
  out += fmt::format("\n1. Batch plan ({})\n", expectedText(p));
  out += versionsTable(p).text("  ");
  for (const VersionPlan& other : p.batch.versions) {
    if (!other.error.empty()) {
      out += wrap(fmt::format("version {}: no plan: {}", other.version, other.error), 100, "  ");
    }
  }
  constexpr std::size_t kListed = 24;
  out += fmt::format(
      "\n  valid world sizes, version {} (GPUs:micro x accumulation){}:\n", v.version,
      v.rows.size() > kListed ? fmt::format(", first {} of {}", kListed, v.rows.size()) : "");
  std::string sizes;
  for (std::size_t i = 0; i < v.rows.size() && i < kListed; ++i) {
    const BatchRow& r = v.rows[i];
    sizes += fmt::format("{}:{}x{}  ", r.gpus, r.microBatch, r.gradientAccumulation);
  }
  out += wrap(sizes, 100, "    ");
  out += wrap(suggestionText(p), 100, "  ");

  const CheckpointSection& c = p.checkpoint;
  out += fmt::format("\n2. Checkpoint interval ({})\n", checkpointHeader(p));
  if (!c.failures) {
    out += wrap(c.skipped + "; " + recommendedIntervalText(p), 100, "  ");
  } else {
    out += intervalTable(p).text("  ");
    if (c.simulated) {
      out += wrap(gainText(p), 100, "  ");
      out += "\n  ETTR vs interval:\n";
      out += curveTable(p).text("    ");
    }
    out += wrap(recommendedIntervalText(p), 100, "  ");
  }

  const std::size_t shown = static_cast<std::size_t>(std::count_if(
      p.scale.rows.begin(), p.scale.rows.end(), [](const ScaleRow& r) { return r.shown; }));
  out += fmt::format(
      "\n3. Scale table ({}; {} of {} candidate sizes{}; * = recommended)\n",
      p.scale.monteCarlo ? fmt::format("Monte Carlo mean ± 95 % CI, {} replicas", p.scale.seeds)
                         : "analytic: Daly's ETTR at Daly's interval",
      shown, p.scale.rows.size(),
      p.scale.totalSamples ? fmt::format("; time to train {} samples",
                                         grouped(static_cast<double>(*p.scale.totalSamples)))
                           : "");
  out += scaleTable(p, true).text("  ");

  const Recommendation& r = p.recommendation;
  out += fmt::format("\n4. Recommendation (objective: {})\n", toString(r.objective));
  out += wrap(recommendationLine(p), 100, "  ");
  out += wrap(r.reasons, 100, "  ");
  out += "  DeepSpeed config: --emit-config FILE writes it (also in --format json)\n";

  out += fmt::format("\n5. Checkpoint portability (written at {} GPUs: resumes at {} sizes)\n",
                     p.portability.writtenAt, p.portability.rows.size());
  std::string resumes;
  for (std::size_t i = 0; i < p.portability.rows.size() && i < kListed; ++i) {
    const PortabilityRow& row = p.portability.rows[i];
    resumes += fmt::format("{}:{}x{}{}  ", row.gpus, row.microBatch, row.gradientAccumulation,
                           row.sameBatch ? "" : "(batch" + std::to_string(row.batch) + ")");
  }
  if (p.portability.rows.size() > kListed) {
    resumes += fmt::format("... ({} more)", p.portability.rows.size() - kListed);
  }
  out += wrap(resumes, 100, "    ");
  for (const auto& note : p.portability.notes) {
    std::string item = wrap(note, 100, "    ");
    item.replace(0, 4, "  - ");
    out += item;
  }
  return out;
}

// ---- JSON --------------------------------------------------------------------------------------

json coverageJson(const Coverage& c) {
  return json{{"covered", c.covered},
              {"utilisation", c.utilisation},
              {"covered_sizes", c.coveredSizes},
              {"expected_sizes", c.expectedSizes}};
}

json renderJsonValue(const Plan& p) {
  json j;
  j["schema"] = std::string(kPlanSchema);
  j["name"] = p.name;
  j["description"] = p.description;
  j["wall_seconds"] = p.wallSeconds;
  j["threads"] = p.threads;
  j["cluster"] = sim::clusterToJson(p.cluster);
  j["failures"] = p.failureSummary;
  j["warnings"] = p.warnings;
  j["settings"] =
      json{{"objective", std::string(toString(p.settings.objective))},
           {"price_per_gpu_hour",
            p.settings.pricePerGpuHour ? json(*p.settings.pricePerGpuHour) : json(nullptr)},
           {"seeds", p.settings.seeds},
           {"sweep_seeds", p.settings.sweepSeeds},
           {"batch_tolerance", p.settings.batchTolerance},
           {"max_rows", p.settings.maxRows}};

  const BatchSection& b = p.batch;
  json batch;
  batch["elastic"] = b.elastic;
  batch["version"] = b.version;
  batch["tolerance"] = b.tolerance;
  batch["elasticity"] =
      json{{"max_train_batch_size", b.elasticity.maxTrainBatchSize},
           {"micro_batch_sizes", b.elasticity.microBatchSizes},
           {"min_gpus", b.elasticity.minGpus},
           {"max_gpus", b.elasticity.maxGpus},
           {"num_gpus_per_node", b.elasticity.numGpusPerNode},
           {"model_parallel_size", b.elasticity.modelParallelSize},
           {"prefer_larger_batch", b.elasticity.preferLargerBatch},
           {"version", std::string(config::toString(b.elasticity.version))},
           {"target_batch_size",
            b.elasticity.targetBatchSize ? json(*b.elasticity.targetBatchSize) : json(nullptr)},
           {"batch_tolerance", b.elasticity.batchTolerance}};
  json expected = json::array();
  for (const ExpectedSize& e : b.expected) {
    expected.push_back(json{{"gpus", e.gpus}, {"weight", e.weight}});
  }
  batch["expected_world_sizes"] = expected;
  json versions = json::array();
  for (const VersionPlan& v : b.versions) {
    json vj{{"version", v.version},
            {"final_batch", v.finalBatch},
            {"valid_world_sizes", v.rows.size()},
            {"coverage", coverageJson(v.coverage)}};
    if (!v.error.empty()) {
      vj["error"] = v.error;
    }
    json rows = json::array();
    for (const BatchRow& r : v.rows) {
      rows.push_back(json{{"gpus", r.gpus},
                          {"data_parallel", r.dataParallel},
                          {"micro_batch", r.microBatch},
                          {"gradient_accumulation", r.gradientAccumulation},
                          {"batch", r.batch}});
    }
    vj["rows"] = rows;
    versions.push_back(vj);
  }
  batch["versions"] = versions;
  batch["alternatives_tried"] = b.alternativesTried;
  if (b.suggestion) {
    const BatchSuggestion& s = *b.suggestion;
    batch["suggestion"] =
        json{{"change", s.change},
             {"version", s.version},
             {"micro_batch_sizes", s.microBatches},
             {"max_train_batch_size", s.maxBatch},
             {"target_batch_size", s.targetBatch ? json(*s.targetBatch) : json(nullptr)},
             {"final_batch", s.finalBatch},
             {"valid_world_sizes", s.validSizes},
             {"coverage", coverageJson(s.coverage)}};
  } else {
    batch["suggestion"] = nullptr;
  }
  j["batch"] = batch;

  const CheckpointSection& c = p.checkpoint;
  json ck{{"gpus", c.gpus},
          {"failure_model", c.failureModel},
          {"failures", c.failures},
          {"job_mtbf_hours", number(c.jobMtbfHours)},
          {"save_seconds", c.saveSeconds},
          {"restart_seconds", c.restartSeconds},
          {"step_seconds", c.stepSeconds},
          {"young_minutes", number(c.youngMinutes)},
          {"daly_minutes", number(c.dalyMinutes)},
          {"exact_daly_minutes", number(c.exactDalyMinutes)},
          {"daly_ettr", number(c.dalyEttr)},
          {"configured_minutes", c.configuredMinutes ? json(*c.configuredMinutes) : json(nullptr)},
          {"simulated", c.simulated},
          {"skipped", c.skipped},
          {"seeds", c.seeds},
          {"run_hours", c.runHours},
          {"reduction", c.reduction}};
  json curve = json::array();
  for (const IntervalPoint& pt : c.curve) {
    curve.push_back(json{{"minutes", pt.minutes},
                         {"effective_minutes", pt.effectiveMinutes},
                         {"analytic_ettr", pt.analyticEttr},
                         {"ettr", summaryJson(pt.ettr)},
                         {"label", pt.label}});
  }
  ck["curve"] = curve;
  if (c.simulated) {
    ck["simulated_optimum_minutes"] = c.simulatedOptimumMinutes;
    ck["simulated_optimum_ettr"] = summaryJson(c.simulatedOptimumEttr);
    ck["daly_simulated_ettr"] = summaryJson(c.dalySimulatedEttr);
    ck["young_simulated_ettr"] = summaryJson(c.youngSimulatedEttr);
    ck["gain_over_daly"] = summaryJson(c.gainOverDaly);
    ck["gain_over_young"] = summaryJson(c.gainOverYoung);
  }
  ck["recommended_minutes"] = number(c.recommendedMinutes);
  ck["recommended_steps"] = c.recommendedSteps;
  ck["recommended_source"] = c.recommendedSource;
  ck["reason"] = c.reason;
  j["checkpoint"] = ck;

  json scale{{"total_samples", p.scale.totalSamples ? json(*p.scale.totalSamples) : json(nullptr)},
             {"monte_carlo", p.scale.monteCarlo},
             {"seeds", p.scale.seeds}};
  json rows = json::array();
  for (const ScaleRow& r : p.scale.rows) {
    rows.push_back(json{{"gpus", r.gpus},
                        {"nodes", r.nodes},
                        {"rented_gpus", r.rentedGpus},
                        {"batch", r.batch},
                        {"micro_batch", r.microBatch},
                        {"gradient_accumulation", r.gradientAccumulation},
                        {"step_seconds", r.stepSeconds},
                        {"exposed_comm_seconds", r.exposedCommSeconds},
                        {"samples_per_second", r.samplesPerSecond},
                        {"job_mtbf_hours", number(r.jobMtbfHours)},
                        {"interval_minutes", number(r.intervalMinutes)},
                        {"ettr", summaryJson(r.ettr)},
                        {"goodput", summaryJson(r.goodput)},
                        {"time_to_train_hours", optionalSummary(r.timeToTrainHours)},
                        {"gpu_hours", optionalSummary(r.gpuHours)},
                        {"cost", optionalSummary(r.cost)},
                        {"simulated", r.simulated},
                        {"reduction", r.reduction},
                        {"shown", r.shown}});
  }
  scale["rows"] = rows;
  j["scale"] = scale;

  const Recommendation& r = p.recommendation;
  auto opt = [](const std::optional<double>& x) { return x ? number(*x) : json(nullptr); };
  j["recommendation"] = json{{"objective", std::string(toString(r.objective))},
                             {"row", r.row},
                             {"gpus", r.gpus},
                             {"nodes", r.nodes},
                             {"batch", r.batch},
                             {"micro_batch", r.microBatch},
                             {"gradient_accumulation", r.gradientAccumulation},
                             {"interval_minutes", number(r.intervalMinutes)},
                             {"interval_steps", r.intervalSteps},
                             {"ettr", r.ettr},
                             {"goodput", r.goodput},
                             {"time_to_train_hours", opt(r.timeToTrainHours)},
                             {"gpu_hours", opt(r.gpuHours)},
                             {"cost", opt(r.cost)},
                             {"reasons", r.reasons},
                             {"config", json::parse(r.configJson)}};

  json port{{"written_at", p.portability.writtenAt},
            {"zero_stage", p.portability.zeroStage},
            {"notes", p.portability.notes}};
  json prow = json::array();
  for (const PortabilityRow& row : p.portability.rows) {
    prow.push_back(json{{"gpus", row.gpus},
                        {"micro_batch", row.microBatch},
                        {"gradient_accumulation", row.gradientAccumulation},
                        {"batch", row.batch},
                        {"same_batch", row.sameBatch}});
  }
  port["rows"] = prow;
  j["portability"] = port;
  return j;
}

// ---- CSV ---------------------------------------------------------------------------------------

std::string renderCsv(const Plan& p) {
  std::string out;
  out += "# scale\n";
  out +=
      "gpus,nodes,rented_gpus,batch,micro_batch,gradient_accumulation,step_seconds,"
      "samples_per_second,job_mtbf_hours,interval_minutes,ettr,ettr_ci95,goodput,goodput_ci95,"
      "time_to_train_hours,time_to_train_ci95,gpu_hours,cost,simulated,recommended\n";
  for (std::size_t i = 0; i < p.scale.rows.size(); ++i) {
    const ScaleRow& r = p.scale.rows[i];
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", r.gpus, r.nodes,
        r.rentedGpus, r.batch, r.microBatch, r.gradientAccumulation, csvNumber(r.stepSeconds),
        csvNumber(r.samplesPerSecond), csvNumber(r.jobMtbfHours), csvNumber(r.intervalMinutes),
        csvNumber(r.ettr.mean), csvNumber(r.ettr.ci95), csvNumber(r.goodput.mean),
        csvNumber(r.goodput.ci95), r.timeToTrainHours ? csvNumber(r.timeToTrainHours->mean) : "",
        r.timeToTrainHours ? csvNumber(r.timeToTrainHours->ci95) : "",
        r.gpuHours ? csvNumber(r.gpuHours->mean) : "", r.cost ? csvNumber(r.cost->mean) : "",
        r.simulated ? 1 : 0, i == p.recommendation.row ? 1 : 0);
  }
  out += "\n# checkpoint_curve\n";
  out += "minutes,effective_minutes,analytic_ettr,ettr,ettr_ci95,label\n";
  for (const IntervalPoint& pt : p.checkpoint.curve) {
    out += fmt::format("{},{},{},{},{},{}\n", csvNumber(pt.minutes), csvNumber(pt.effectiveMinutes),
                       csvNumber(pt.analyticEttr), csvNumber(pt.ettr.mean), csvNumber(pt.ettr.ci95),
                       pt.label);
  }
  out += "\n# checkpoint_intervals\n";
  out += "name,minutes\n";
  const CheckpointSection& c = p.checkpoint;
  out += fmt::format("young,{}\ndaly,{}\nexact_daly,{}\n", csvNumber(c.youngMinutes),
                     csvNumber(c.dalyMinutes), csvNumber(c.exactDalyMinutes));
  if (c.simulated) {
    out += fmt::format("simulated_optimum,{}\n", csvNumber(c.simulatedOptimumMinutes));
  }
  out += fmt::format("recommended,{}\n", csvNumber(c.recommendedMinutes));
  out += "\n# batch_versions\n";
  out += "version,final_batch,valid_world_sizes,covered,utilisation,error\n";
  for (const VersionPlan& v : p.batch.versions) {
    out += fmt::format("{},{},{},{},{},{}\n", v.version, v.finalBatch, v.rows.size(),
                       csvNumber(v.coverage.covered), csvNumber(v.coverage.utilisation),
                       csvField(v.error));
  }
  out += "\n# valid_world_sizes\n";
  out += "version,gpus,data_parallel,micro_batch,gradient_accumulation,batch\n";
  for (const VersionPlan& v : p.batch.versions) {
    for (const BatchRow& r : v.rows) {
      out += fmt::format("{},{},{},{},{},{}\n", v.version, r.gpus, r.dataParallel, r.microBatch,
                         r.gradientAccumulation, r.batch);
    }
  }
  out += "\n# recommendation\n";
  const Recommendation& r = p.recommendation;
  out +=
      "objective,gpus,nodes,batch,micro_batch,gradient_accumulation,interval_minutes,"
      "interval_steps,ettr,goodput,time_to_train_hours,gpu_hours,cost\n";
  out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", toString(r.objective), r.gpus,
                     r.nodes, r.batch, r.microBatch, r.gradientAccumulation,
                     csvNumber(r.intervalMinutes), r.intervalSteps, csvNumber(r.ettr),
                     csvNumber(r.goodput), r.timeToTrainHours ? csvNumber(*r.timeToTrainHours) : "",
                     r.gpuHours ? csvNumber(*r.gpuHours) : "", r.cost ? csvNumber(*r.cost) : "");
  out += "\n# portability\n";
  out += "written_at,resume_gpus,micro_batch,gradient_accumulation,batch,same_batch\n";
  for (const PortabilityRow& row : p.portability.rows) {
    out += fmt::format("{},{},{},{},{},{}\n", p.portability.writtenAt, row.gpus, row.microBatch,
                       row.gradientAccumulation, row.batch, row.sameBatch ? 1 : 0);
  }
  return out;
}

// ---- Markdown ----------------------------------------------------------------------------------

std::string renderMarkdown(const Plan& p) {
  std::string out;
  out += fmt::format("# stretch plan: {}\n\n", p.name);
  if (!p.description.empty()) {
    out += p.description + "\n\n";
  }
  out += fmt::format("{}.  \n{}.\n\n", headline(p), modeText(p));
  for (const auto& w : p.warnings) {
    out += fmt::format("> warning: {}\n", w);
  }
  const VersionPlan& v = jobVersion(p);
  out += fmt::format("## 1. Batch plan\n\n{}.\n\n", expectedText(p));
  out += versionsTable(p).markdown();
  for (const VersionPlan& other : p.batch.versions) {
    if (!other.error.empty()) {
      out += fmt::format("\nVersion {}: no plan: {}\n", other.version, other.error);
    }
  }
  out += fmt::format("\n{}.\n\n", suggestionText(p));
  out += fmt::format("<details><summary>Valid world sizes, version {} ({})</summary>\n\n",
                     v.version, v.rows.size());
  out += batchRowsTable(v).markdown();
  out += "\n</details>\n\n";
  const CheckpointSection& c = p.checkpoint;
  out += fmt::format("## 2. Checkpoint interval\n\n{}.\n\n", checkpointHeader(p));
  if (c.failures) {
    out += intervalTable(p).markdown();
    if (c.simulated) {
      out += fmt::format("\n{}.\n\n", gainText(p));
      out += curveTable(p).markdown();
    }
  } else {
    out += c.skipped + ".\n";
  }
  out += fmt::format("\n**{}**.\n\n", recommendedIntervalText(p));
  out += fmt::format("## 3. Scale table\n\n{}. `*` = recommended.\n\n",
                     p.scale.monteCarlo
                         ? fmt::format("Monte Carlo mean ± 95 % CI over {} replicas", p.scale.seeds)
                         : std::string("Analytic: Daly's ETTR at Daly's interval"));
  out += scaleTable(p, true).markdown();
  out += fmt::format("\n## 4. Recommendation (objective: {})\n\n**{}**.\n\n{}\n\n",
                     toString(p.recommendation.objective), recommendationLine(p),
                     p.recommendation.reasons);
  out += "```json\n" + p.recommendation.configJson + "\n```\n\n";
  out += fmt::format("## 5. Checkpoint portability\n\nWritten at {} GPUs, resumes at {} sizes.\n\n",
                     p.portability.writtenAt, p.portability.rows.size());
  out += portabilityTable(p, 64).markdown();
  out += "\n";
  for (const auto& note : p.portability.notes) {
    out += "- " + note + "\n";
  }
  return out;
}

// ---- HTML with inline SVG
// -------------------------------------------------------------------------

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

constexpr double kWidth = 760;
constexpr double kHeight = 320;
constexpr double kLeft = 70;
constexpr double kRight = 20;
constexpr double kTop = 30;
constexpr double kBottom = 50;

std::string axesSvg(const Axis& x, const Axis& y, const std::string& xLabel,
                    const std::string& yLabel, const auto& xFormat, const auto& yFormat) {
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

constexpr std::string_view kStyle = R"CSS(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:980px;color:#1d232a;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #d0d7de;padding-bottom:.2em}
.meta{color:#57606a}.warning{color:#9a6700}.note{color:#57606a;font-style:italic}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}th,td{padding:3px 10px;border-bottom:1px solid #eaeef2;text-align:left}
th.num,td.num{text-align:right;font-variant-numeric:tabular-nums}thead th{background:#f6f8fa}
.rec{background:#eef6ff;border:1px solid #b6d4fe;border-radius:6px;padding:.6em 1em}
pre{background:#f6f8fa;padding:.8em;overflow:auto;font-size:12px;border-radius:6px}
svg.chart{display:block;margin:.6em 0;max-width:100%;height:auto}
svg .axis{stroke:#57606a;stroke-width:1}svg .grid{stroke:#eaeef2;stroke-width:1}
svg .tick{font-size:11px;fill:#57606a}svg .label{font-size:12px;fill:#1d232a}
svg .analytic{fill:none;stroke:#8c959f;stroke-width:1.5;stroke-dasharray:4 3}
svg .sim-point line{stroke:#0969da;stroke-width:1.2}svg .sim-point circle{fill:#0969da}
svg .mark line{stroke-width:1.5}svg .mark text{font-size:11px}
svg .mark-young line{stroke:#bf8700}svg .mark-young text{fill:#bf8700}
svg .mark-daly line{stroke:#8250df}svg .mark-daly text{fill:#8250df}
svg .mark-optimum line{stroke:#1a7f37;stroke-dasharray:3 2}svg .mark-optimum text{fill:#1a7f37}
svg .series{fill:none;stroke:#0969da;stroke-width:1.5}svg circle.world{fill:#0969da}svg circle.recommended{fill:#cf222e}
svg .valid-size{stroke:#0969da;stroke-width:1.2}svg .expected{fill:#ddf4ff}
.legend .key{display:inline-block;width:14px;height:3px;margin:0 4px 3px 12px;vertical-align:middle}
.key.analytic{background:#8c959f}.key.sim{background:#0969da}.key.young{background:#bf8700}.key.daly{background:#8250df}.key.optimum{background:#1a7f37}
)CSS";

std::string renderHtml(const Plan& p) {
  std::string out;
  out += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  out += fmt::format("<title>stretch plan: {}</title>", escapeHtml(p.name));
  out += "<style>" + std::string(kStyle) + "</style></head><body>\n";
  out += fmt::format("<h1>stretch plan: {}</h1>\n", escapeHtml(p.name));
  if (!p.description.empty()) {
    out += fmt::format("<p>{}</p>\n", escapeHtml(p.description));
  }
  out += fmt::format("<p class=\"meta\">{}<br>{}</p>\n", escapeHtml(headline(p)),
                     escapeHtml(modeText(p)));
  for (const auto& w : p.warnings) {
    out += fmt::format("<p class=\"warning\">warning: {}</p>\n", escapeHtml(w));
  }

  out += fmt::format("<section id=\"recommendation\"><h2>Recommendation (objective: {})</h2>\n",
                     toString(p.recommendation.objective));
  out += fmt::format("<div class=\"rec\"><p><strong>{}</strong></p><p>{}</p></div>\n",
                     escapeHtml(recommendationLine(p)), escapeHtml(p.recommendation.reasons));
  out += "<details><summary>DeepSpeed config</summary><pre>" +
         escapeHtml(p.recommendation.configJson) + "</pre></details></section>\n";

  const VersionPlan& v = jobVersion(p);
  out += fmt::format("<section id=\"batch\"><h2>1. Batch plan</h2><p>{}.</p>\n",
                     escapeHtml(expectedText(p)));
  out += escaped(versionsTable(p)).html("versions");
  for (const VersionPlan& other : p.batch.versions) {
    if (!other.error.empty()) {
      out += fmt::format("<p class=\"note\">Version {}: no plan: {}</p>\n",
                         escapeHtml(other.version), escapeHtml(other.error));
    }
  }
  out += validSizesChart(p);
  out += fmt::format("<p>{}.</p>\n", escapeHtml(suggestionText(p)));
  out += fmt::format("<details><summary>Valid world sizes, version {} ({})</summary>\n",
                     escapeHtml(v.version), v.rows.size());
  out += escaped(batchRowsTable(v)).html("batch-rows");
  out += "</details></section>\n";

  const CheckpointSection& c = p.checkpoint;
  out += fmt::format("<section id=\"checkpoint\"><h2>2. Checkpoint interval</h2><p>{}.</p>\n",
                     escapeHtml(checkpointHeader(p)));
  if (c.failures) {
    out += escaped(intervalTable(p)).html("intervals");
    out += ettrChart(p);
    if (c.simulated) {
      out += fmt::format("<p>{}.</p>\n", escapeHtml(gainText(p)));
      out += "<details><summary>ETTR at every simulated interval</summary>\n";
      out += escaped(curveTable(p)).html("curve");
      out += "</details>\n";
    }
  } else {
    out += fmt::format("<p>{}.</p>\n", escapeHtml(c.skipped));
  }
  out += fmt::format("<p><strong>{}</strong>.</p></section>\n",
                     escapeHtml(recommendedIntervalText(p)));

  out += fmt::format(
      "<section id=\"scale\"><h2>3. Scale table</h2><p>{}; * = recommended.</p>\n",
      escapeHtml(p.scale.monteCarlo
                     ? fmt::format("Monte Carlo mean ± 95 % CI over {} replicas", p.scale.seeds)
                     : std::string("Analytic: Daly's ETTR at Daly's interval")));
  out += timeChart(p);
  out += escaped(scaleTable(p, true)).html("scale");
  out += "</section>\n";

  out += fmt::format(
      "<section id=\"portability\"><h2>5. Checkpoint portability</h2><p>Written at {} GPUs, "
      "resumes at {} sizes.</p>\n",
      p.portability.writtenAt, p.portability.rows.size());
  out += "<ul>";
  for (const auto& note : p.portability.notes) {
    out += "<li>" + escapeHtml(note) + "</li>";
  }
  out += "</ul>\n<details><summary>Every size</summary>\n";
  out += escaped(portabilityTable(p, p.portability.rows.size())).html("portability");
  out += "</details></section>\n";
  out += "<p class=\"meta\">Formulas and sources: docs/planner.md in the Stretch repository.</p>\n";
  out += "</body></html>\n";
  return out;
}

}  // namespace

std::string_view toString(ReportFormat format) noexcept {
  switch (format) {
    case ReportFormat::Table:
      return "table";
    case ReportFormat::Json:
      return "json";
    case ReportFormat::Csv:
      return "csv";
    case ReportFormat::Markdown:
      return "md";
    case ReportFormat::Html:
      return "html";
  }
  return "?";
}

std::optional<ReportFormat> parseReportFormat(std::string_view text) noexcept {
  if (text == "table") {
    return ReportFormat::Table;
  }
  if (text == "json") {
    return ReportFormat::Json;
  }
  if (text == "csv") {
    return ReportFormat::Csv;
  }
  if (text == "md" || text == "markdown") {
    return ReportFormat::Markdown;
  }
  if (text == "html") {
    return ReportFormat::Html;
  }
  return std::nullopt;
}

std::string renderPlan(const Plan& plan, ReportFormat format) {
  switch (format) {
    case ReportFormat::Table:
      return renderTable(plan);
    case ReportFormat::Json:
      return renderJsonValue(plan).dump(2) + "\n";
    case ReportFormat::Csv:
      return renderCsv(plan);
    case ReportFormat::Markdown:
      return renderMarkdown(plan);
    case ReportFormat::Html:
      return renderHtml(plan);
  }
  return {};
}

}  // namespace stretch::planner
