#pragma once
// A plan as text: a terminal table, JSON (the schema in docs/planner.md, also read by the GUI),
// CSV, Markdown, or one self-contained HTML page with inline SVG charts (ETTR vs checkpoint
// interval with Young's and Daly's marks, time to train vs world size, valid world sizes) that
// needs no network.
//
// Pure functions of the plan: no I/O, reentrant.

#include <optional>
#include <string>
#include <string_view>

#include "planner/plan.hpp"

namespace stretch::planner {

// The "schema" value of the JSON output; bumped when a field changes meaning or disappears.
inline constexpr std::string_view kPlanSchema = "stretch.plan/1";

enum class ReportFormat { Table, Json, Csv, Markdown, Html };
std::string_view toString(ReportFormat format) noexcept;  // "table", "json", "csv", "md", "html"
std::optional<ReportFormat> parseReportFormat(std::string_view text) noexcept;

std::string renderPlan(const Plan& plan, ReportFormat format);

}  // namespace stretch::planner
