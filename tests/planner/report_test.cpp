// The five output formats of a plan: JSON (the documented schema), CSV blocks, Markdown, the
// terminal table and the self-contained HTML page with its three SVG charts.

#include "planner/report.hpp"

#include <regex>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "planner/plan.hpp"
#include "runtime/config/ds_config.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::planner {
namespace {

const Plan& examplePlan() {
  static const Plan plan = [] {
    PlanInput in = bundledExample();
    in.settings.sweepSeeds = 24;
    return makePlan(in);
  }();
  return plan;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) {
    ++n;
  }
  return n;
}

TEST(PlannerReport, FormatNames) {
  for (const auto f : {ReportFormat::Table, ReportFormat::Json, ReportFormat::Csv,
                       ReportFormat::Markdown, ReportFormat::Html}) {
    EXPECT_EQ(parseReportFormat(toString(f)), f);
  }
  EXPECT_FALSE(parseReportFormat("xml"));
}

TEST(PlannerReport, JsonFollowsTheSchema) {
  const Plan& plan = examplePlan();
  const auto j = nlohmann::json::parse(renderPlan(plan, ReportFormat::Json));
  EXPECT_EQ(j.at("schema"), kPlanSchema);
  for (const char* key :
       {"name", "description", "wall_seconds", "threads", "cluster", "failures", "warnings",
        "settings", "batch", "checkpoint", "scale", "recommendation", "portability"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  const auto& batch = j.at("batch");
  EXPECT_EQ(batch.at("versions").size(), plan.batch.versions.size());
  EXPECT_EQ(batch.at("versions")[0].at("rows").size(), plan.batch.versions[0].rows.size());
  EXPECT_EQ(batch.at("versions")[0].at("final_batch"), plan.batch.versions[0].finalBatch);
  const auto& ck = j.at("checkpoint");
  EXPECT_DOUBLE_EQ(ck.at("daly_minutes").get<double>(), plan.checkpoint.dalyMinutes);
  EXPECT_EQ(ck.at("curve").size(), plan.checkpoint.curve.size());
  EXPECT_TRUE(ck.at("curve")[0].at("ettr").contains("ci95"));
  const auto& scale = j.at("scale").at("rows");
  ASSERT_EQ(scale.size(), plan.scale.rows.size());
  EXPECT_EQ(scale[0].at("gpus"), plan.scale.rows[0].gpus);
  EXPECT_TRUE(scale[0].at("ettr").contains("mean"));
  const auto& rec = j.at("recommendation");
  EXPECT_EQ(rec.at("gpus"), plan.recommendation.gpus);
  EXPECT_EQ(rec.at("interval_steps"), plan.recommendation.intervalSteps);
  // The config is embedded as an object that parses as a DeepSpeed config.
  ASSERT_TRUE(rec.at("config").is_object());
  EXPECT_EQ(config::parseConfig(rec.at("config").dump()).config, plan.recommendation.config);
  EXPECT_EQ(j.at("portability").at("rows").size(), plan.portability.rows.size());
}

TEST(PlannerReport, CsvHasOneBlockPerTable) {
  const Plan& plan = examplePlan();
  const std::string csv = renderPlan(plan, ReportFormat::Csv);
  for (const char* block :
       {"# scale\n", "# checkpoint_curve\n", "# checkpoint_intervals\n", "# batch_versions\n",
        "# valid_world_sizes\n", "# recommendation\n", "# portability\n"}) {
    EXPECT_NE(csv.find(block), std::string::npos) << block;
  }
  // Scale block: header plus one line per row, each with the header's number of fields.
  const auto start = csv.find("# scale\n") + 8;
  const auto end = csv.find("\n\n", start);
  const std::string block = csv.substr(start, end - start);
  const auto lines = count(block, "\n") + 1;
  EXPECT_EQ(lines, plan.scale.rows.size() + 1);
  const auto header = block.substr(0, block.find('\n'));
  const auto firstRow =
      block.substr(header.size() + 1, block.find('\n', header.size() + 1) - header.size() - 1);
  EXPECT_EQ(count(header, ","), count(firstRow, ","));
}

TEST(PlannerReport, TableAndMarkdownHaveTheFiveSections) {
  const Plan& plan = examplePlan();
  const std::string table = renderPlan(plan, ReportFormat::Table);
  const std::string md = renderPlan(plan, ReportFormat::Markdown);
  for (const char* section : {"1. Batch plan", "2. Checkpoint interval", "3. Scale table",
                              "4. Recommendation", "5. Checkpoint portability"}) {
    EXPECT_NE(table.find(section), std::string::npos) << section;
    EXPECT_NE(md.find(std::string("## ") + section), std::string::npos) << section;
  }
  EXPECT_NE(table.find("Young"), std::string::npos);
  EXPECT_NE(table.find("Daly"), std::string::npos);
  EXPECT_NE(md.find("```json"), std::string::npos);
  // The recommended row is marked.
  EXPECT_NE(table.find("*  "), std::string::npos);
}

TEST(PlannerReport, HtmlIsOneSelfContainedPageWithThreeCharts) {
  const Plan& plan = examplePlan();
  const std::string html = renderPlan(plan, ReportFormat::Html);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  for (const char* id : {"chart-ettr-interval", "chart-time-world", "chart-valid-sizes"}) {
    EXPECT_EQ(count(html, std::string("id=\"") + id + "\""), 1u) << id;
  }
  EXPECT_EQ(count(html, "<svg"), 3u);
  EXPECT_EQ(count(html, "</svg>"), 3u);
  // Nothing loaded from anywhere: no scripts, links, images or URLs other than the SVG namespace.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  std::string withoutNs = html;
  withoutNs = std::regex_replace(withoutNs, std::regex("xmlns=\"http://www.w3.org/2000/svg\""), "");
  EXPECT_EQ(withoutNs.find("http://"), std::string::npos);
  EXPECT_EQ(withoutNs.find("https://"), std::string::npos);
  // The charts carry their data: a point per simulated interval, the Young and Daly marks, a
  // point per shown world size, a tick per valid size.
  EXPECT_EQ(count(html, "class=\"sim-point"), plan.checkpoint.curve.size());
  EXPECT_EQ(count(html, "mark mark-young"), 1u);
  EXPECT_EQ(count(html, "mark mark-daly"), 1u);
  EXPECT_EQ(count(html, "class=\"world"),
            static_cast<std::size_t>(std::count_if(plan.scale.rows.begin(), plan.scale.rows.end(),
                                                   [](const ScaleRow& r) { return r.shown; })));
  EXPECT_EQ(count(html, "class=\"world recommended\""), 1u);
  std::size_t valid = 0;
  for (const VersionPlan& v : plan.batch.versions) {
    for (const BatchRow& r : v.rows) {
      valid += r.gpus <= 1024 ? 1 : 0;
    }
  }
  EXPECT_EQ(count(html, "class=\"valid-size\""), valid);
}

}  // namespace
}  // namespace stretch::planner
