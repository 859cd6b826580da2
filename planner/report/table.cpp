#include "planner/report/table.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace stretch::planner::report {

std::string pct(double x, int digits) {
  return std::isfinite(x) ? fmt::format("{:.{}f} %", 100.0 * x, digits) : "-";
}

std::string compact(double x) {
  if (!std::isfinite(x)) {
    return "-";
  }
  const double a = std::abs(x);
  if (a >= 1e9) {
    return fmt::format("{:.2f}G", x / 1e9);
  }
  if (a >= 1e6) {
    return fmt::format("{:.2f}M", x / 1e6);
  }
  if (a >= 1e4) {
    return fmt::format("{:.1f}k", x / 1e3);
  }
  if (a >= 100) {
    return fmt::format("{:.0f}", x);
  }
  return fmt::format("{:.3g}", x);
}

std::string withCi(const sim::MetricSummary& m, bool simulated,
                   const std::function<std::string(double)>& format) {
  if (!simulated) {
    return format(m.mean);
  }
  return fmt::format("{} ± {}", format(m.mean), format(m.ci95));
}

std::string ettrText(const sim::MetricSummary& m, bool simulated) {
  if (!simulated) {
    return pct(m.mean);
  }
  return fmt::format("{:.2f} ± {:.2f} %", 100.0 * m.mean, 100.0 * m.ci95);
}

std::string listText(const std::vector<std::int64_t>& v) {
  return fmt::format("[{}]", fmt::join(v, ", "));
}

std::string wrap(const std::string& text, std::size_t width, const std::string& indent) {
  std::istringstream words(text);
  std::string word;
  std::string out;
  std::string line = indent;
  while (words >> word) {
    if (line.size() > indent.size() && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = indent;
    }
    if (line.size() > indent.size()) {
      line += ' ';
    }
    line += word;
  }
  if (line.size() > indent.size()) {
    out += line + "\n";
  }
  return out;
}

std::string escapeHtml(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Table::text(const std::string& indent) const {
  std::vector<std::size_t> widths(header.size(), 0);
  auto measure = [](const std::string& s) {
    // Display width: count UTF-8 code points, not bytes (the ± sign).
    std::size_t n = 0;
    for (const char c : s) {
      if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) {
        ++n;
      }
    }
    return n;
  };
  for (std::size_t i = 0; i < header.size(); ++i) {
    widths[i] = measure(header[i]);
  }
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], measure(row[i]));
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out = indent;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const std::size_t pad = widths[i] - std::min(widths[i], measure(cells[i]));
      if (i > 0) {
        out += "  ";
      }
      if (right[i]) {
        out += std::string(pad, ' ') + cells[i];
      } else {
        out += cells[i] + (i + 1 < cells.size() ? std::string(pad, ' ') : "");
      }
    }
    return out + "\n";
  };
  std::string out = line(header);
  for (const auto& row : rows) {
    out += line(row);
  }
  return out;
}

std::string Table::markdown() const {
  std::string out = "| " + fmt::format("{}", fmt::join(header, " | ")) + " |\n|";
  for (std::size_t i = 0; i < header.size(); ++i) {
    out += right[i] ? " ---: |" : " --- |";
  }
  out += "\n";
  for (const auto& row : rows) {
    out += "| " + fmt::format("{}", fmt::join(row, " | ")) + " |\n";
  }
  return out;
}

std::string Table::html(const std::string& cls) const {
  std::string out = fmt::format("<table class=\"{}\"><thead><tr>", cls);
  for (std::size_t i = 0; i < header.size(); ++i) {
    out += fmt::format("<th{}>{}</th>", right[i] ? " class=\"num\"" : "", header[i]);
  }
  out += "</tr></thead><tbody>\n";
  for (const auto& row : rows) {
    out += "<tr>";
    for (std::size_t i = 0; i < row.size(); ++i) {
      out += fmt::format("<td{}>{}</td>", right[i] ? " class=\"num\"" : "", row[i]);
    }
    out += "</tr>\n";
  }
  return out + "</tbody></table>\n";
}

Table escaped(Table t) {
  for (auto& h : t.header) {
    h = escapeHtml(h);
  }
  for (auto& row : t.rows) {
    for (auto& c : row) {
      c = escapeHtml(c);
    }
  }
  return t;
}

}  // namespace stretch::planner::report
