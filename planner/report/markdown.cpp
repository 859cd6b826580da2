// The "md" format: the plan as a Markdown page, the DeepSpeed config in a code block.

#include <fmt/format.h>

#include "planner/report/formats.hpp"
#include "planner/report/sections.hpp"

namespace stretch::planner::report {

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
  if (p.recovery.compared) {
    out += fmt::format("## 6. Recovery: live vs checkpoint-restart\n\n{}.\n\n", recoveryHeader(p));
    out += recoveryTable(p).markdown();
    out += fmt::format("\n{}.\n\n", recoveryGainText(p));
  }
  return out;
}

}  // namespace stretch::planner::report
