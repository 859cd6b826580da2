#pragma once
// One renderer per report format; planner/report.hpp's renderPlan picks one. Each lives in a
// file of its own (planner/report/<format>.cpp).
//
// Internal to planner/report*.cpp. Pure functions of the plan, reentrant.

#include <string>

#include "planner/plan.hpp"

namespace stretch::planner::report {

std::string renderTerminal(const Plan& p);  // "table": aligned text for a terminal, 100 columns
std::string renderJson(const Plan& p);      // "json": schema kPlanSchema, docs/planner.md
std::string renderCsv(const Plan& p);       // "csv": one block per section, "# name" headed
std::string renderMarkdown(const Plan& p);  // "md"
std::string renderHtml(const Plan& p);      // "html": one self-contained page, inline SVG

}  // namespace stretch::planner::report
