#pragma once
// The plan's sections as the human-readable formats (terminal table, Markdown, HTML) show them:
// the same tables and sentences in each, so the three say the same thing.
//
// Internal to planner/report*.cpp. Pure functions of the plan, reentrant.

#include <cstddef>
#include <string>

#include "planner/plan.hpp"
#include "planner/report/table.hpp"

namespace stretch::planner::report {

// The job's own solver version (section 1's first entry).
const VersionPlan& jobVersion(const Plan& p);

// The report's first lines: the cluster and failures; the objective, modes and planning time.
std::string headline(const Plan& p);
std::string modeText(const Plan& p);

// 1. batch
std::string expectedText(const Plan& p);
Table versionsTable(const Plan& p);
Table batchRowsTable(const VersionPlan& v);
std::string suggestionText(const Plan& p);

// 2. checkpoint interval
std::string checkpointHeader(const Plan& p);
Table intervalTable(const Plan& p);
Table curveTable(const Plan& p);
std::string gainText(const Plan& p);
std::string recommendedIntervalText(const Plan& p);

// 3. scale table (only the displayed rows when shownOnly)
Table scaleTable(const Plan& p, bool shownOnly);

// 4. recommendation
std::string recommendationLine(const Plan& p);

// 6. recovery modes side by side (when p.recovery.compared)
std::string recoveryHeader(const Plan& p);
Table recoveryTable(const Plan& p);
std::string recoveryGainText(const Plan& p);

// 5. checkpoint portability (the first `limit` rows)
Table portabilityTable(const Plan& p, std::size_t limit);

}  // namespace stretch::planner::report
