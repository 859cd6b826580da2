// The "table" format: the plan as aligned text for a terminal, wrapped at 100 columns.

#include <algorithm>

#include <fmt/format.h>

#include "planner/report/formats.hpp"
#include "planner/report/sections.hpp"
#include "planner/text_format.hpp"

namespace stretch::planner::report {

std::string renderTerminal(const Plan& p) {
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
  if (p.recovery.compared) {
    out += "\n6. Recovery: live vs checkpoint-restart\n";
    out += wrap(recoveryHeader(p), 100, "  ");
    out += recoveryTable(p).text("  ");
    out += wrap(recoveryGainText(p), 100, "  ");
  }
  return out;
}

}  // namespace stretch::planner::report
