#pragma once
// The HTML report's charts (inline SVG, planner/report/svg.hpp): ETTR vs checkpoint interval
// with Young's and Daly's marks, time to train (or goodput) vs world size, and the valid world
// sizes of every solver version over the expected cluster sizes.
//
// Internal to planner/report*.cpp. Pure functions of the plan, reentrant.

#include <string>

#include "planner/plan.hpp"

namespace stretch::planner::report {

// A note instead of the chart when the sweep did not run.
std::string ettrChart(const Plan& p);
// Empty when no row has a positive figure.
std::string timeChart(const Plan& p);
std::string validSizesChart(const Plan& p);

}  // namespace stretch::planner::report
