#include "planner/report.hpp"

#include "planner/report/formats.hpp"

namespace stretch::planner {

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
      return report::renderTerminal(plan);
    case ReportFormat::Json:
      return report::renderJson(plan);
    case ReportFormat::Csv:
      return report::renderCsv(plan);
    case ReportFormat::Markdown:
      return report::renderMarkdown(plan);
    case ReportFormat::Html:
      return report::renderHtml(plan);
  }
  return {};
}

}  // namespace stretch::planner
