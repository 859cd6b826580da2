#pragma once
// The cells of every report format: numbers as the reports print them, word wrapping, HTML
// escaping, and an aligned table that prints as terminal text, Markdown or HTML.
//
// Internal to planner/report*.cpp. Pure functions, reentrant.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/monte_carlo.hpp"

namespace stretch::planner::report {

// "12.3 %" (x = 0.123), "-" when not finite.
std::string pct(double x, int digits = 1);
// Three significant digits, k / M / G above 10,000; "-" when not finite.
std::string compact(double x);
// The mean, with "± ci95" when the figure was simulated.
std::string withCi(const sim::MetricSummary& m, bool simulated,
                   const std::function<std::string(double)>& format);
std::string ettrText(const sim::MetricSummary& m, bool simulated);
// "[1, 2, 3]".
std::string listText(const std::vector<std::int64_t>& v);
// Word-wraps `text` at `width` columns with `indent` before every line.
std::string wrap(const std::string& text, std::size_t width, const std::string& indent);
// & < > " as entities.
std::string escapeHtml(const std::string& s);

// A simple aligned table; cells are plain text (escape them with escaped() for HTML).
struct Table {
  std::vector<std::string> header;
  std::vector<bool> right;  // right-align the column
  std::vector<std::vector<std::string>> rows;

  // Columns padded to their widest cell (in UTF-8 code points), two spaces apart.
  std::string text(const std::string& indent) const;
  std::string markdown() const;
  std::string html(const std::string& cls) const;
};

// The table with every header and cell HTML-escaped.
Table escaped(Table t);

}  // namespace stretch::planner::report
