#include "planner/report/sections.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "planner/report.hpp"
#include "planner/text_format.hpp"

namespace stretch::planner::report {

const VersionPlan& jobVersion(const Plan& p) {
  return p.batch.versions.front();
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

// ---- 1. batch ---------------------------------------------------------------------------------

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

// ---- 2. checkpoint interval -------------------------------------------------------------------

std::string checkpointHeader(const Plan& p) {
  const CheckpointSection& c = p.checkpoint;
  return fmt::format(
      "at {} GPUs: job MTBF M = {}, save C = {:g} s, restart R = {:g} s, step {:.3g} s", c.gpus,
      hoursText(c.jobMtbfHours, "d"), c.saveSeconds, c.restartSeconds, c.stepSeconds);
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
    t.rows.push_back(
        {"simulated optimum", fmt::format("Monte Carlo; ETTR on {} fresh replicas", c.seeds),
         minutesText(c.simulatedOptimumMinutes, 1), "-", ettrText(c.simulatedOptimumEttr, true)});
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

std::string recommendedIntervalText(const Plan& p) {
  const CheckpointSection& c = p.checkpoint;
  std::string out = fmt::format("recommended: {}", minutesText(c.recommendedMinutes, 1));
  if (c.recommendedSteps > 0) {
    out += fmt::format(" ({} steps)", c.recommendedSteps);
  }
  return out + " - " + c.reason;
}

// ---- 3. scale table ---------------------------------------------------------------------------

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

// ---- 4. recommendation ------------------------------------------------------------------------

std::string recommendationLine(const Plan& p) {
  const Recommendation& r = p.recommendation;
  return fmt::format(
      "{} GPUs ({} node{}), micro batch {} x {} accumulation = global batch {}, checkpoint every "
      "{}{}",
      r.gpus, r.nodes, r.nodes == 1 ? "" : "s", r.microBatch, r.gradientAccumulation, r.batch,
      minutesText(r.intervalMinutes, 1),
      r.intervalSteps > 0 ? fmt::format(" ({} steps)", r.intervalSteps) : "");
}

// ---- 5. checkpoint portability ----------------------------------------------------------------

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

// ---- 6. recovery modes ------------------------------------------------------------------------

std::string recoveryHeader(const Plan& p) {
  const RecoverySection& r = p.recovery;
  // Where the two costs come from: given, or measured up to some node count and extrapolated
  // (sim::SecondsByNodes::describe).
  std::string sources = r.reconfigureSource == r.restartSource
                            ? fmt::format("both {}", r.reconfigureSource)
                            : fmt::format("reconfiguration {}; restart overhead {}",
                                          r.reconfigureSource, r.restartSource);
  // A node failure's detection (job.failure_detection_seconds), when the job pays one.
  std::string detection;
  if (r.detectionSeconds > 0.0) {
    detection = fmt::format("; either first waits {:g} s for a node failure to be noticed",
                            r.detectionSeconds);
    sources += fmt::format("; failure detection {}", r.detectionSource);
  }
  return fmt::format(
      "at {} GPUs, {} fresh replicas each: live recovery costs {:g} s to reconfigure, plus {:.3g} "
      "s to send the state to nodes that join; checkpoint-restart costs R = {:g} s and the work "
      "since the last save{} (the costs at {} nodes: {})",
      r.gpus, r.seeds, r.reconfigureSeconds, r.transferSeconds, r.restartSeconds, detection,
      r.nodes, sources);
}

Table recoveryTable(const Plan& p) {
  const RecoverySection& r = p.recovery;
  Table t{{"recovery", "checkpoint interval", "steps", "ETTR", "time to train"},
          {false, true, true, true, true},
          {}};
  for (const RecoveryMode* m : {&r.checkpoint, &r.live}) {
    t.rows.push_back(
        {m->mode == "live" ? "live (survivors keep training)" : "checkpoint-restart (Daly)",
         minutesText(m->intervalMinutes, 1), grouped(static_cast<double>(m->intervalSteps)),
         ettrText(m->ettr, true),
         m->timeToTrainHours ? hoursText(*m->timeToTrainHours, "d") : std::string("-")});
  }
  return t;
}

std::string recoveryGainText(const Plan& p) {
  const RecoverySection& r = p.recovery;
  return fmt::format(
      "live recovery vs checkpoint-restart: {:+.2f} ± {:.2f} percentage points of ETTR (paired "
      "over {} replicas); the live row's interval is the plan's (section 2, swept with live "
      "recovery)",
      100.0 * r.gain.mean, 100.0 * r.gain.ci95, r.seeds);
}

}  // namespace stretch::planner::report
