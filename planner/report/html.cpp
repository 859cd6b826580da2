// The "html" format: one self-contained page (inline CSS and SVG charts, no network), the
// recommendation first.

#include <string_view>

#include <fmt/format.h>

#include "planner/report/charts.hpp"
#include "planner/report/formats.hpp"
#include "planner/report/sections.hpp"

namespace stretch::planner::report {

namespace {

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

}  // namespace

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
  if (p.recovery.compared) {
    out += fmt::format(
        "<section id=\"recovery\"><h2>6. Recovery: live vs checkpoint-restart</h2><p>{}.</p>\n",
        escapeHtml(recoveryHeader(p)));
    out += escaped(recoveryTable(p)).html("recovery");
    out += fmt::format("<p>{}.</p></section>\n", escapeHtml(recoveryGainText(p)));
  }
  out += "<p class=\"meta\">Formulas and sources: docs/planner.md in the Stretch repository.</p>\n";
  out += "</body></html>\n";
  return out;
}

}  // namespace stretch::planner::report
