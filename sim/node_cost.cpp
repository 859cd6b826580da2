#include "sim/node_cost.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "runtime/config/json_reader.hpp"
#include "sim/cluster.hpp"
#include "sim/scenario.hpp"

namespace stretch::sim {

namespace {

using namespace config::json;  // the JSON reader's rules and errors (json_reader.hpp)

// A number of seconds in [0, max], as the scenario's other durations.
std::string secondsExpected() {
  return fmt::format("a non-negative number of seconds, at most {:g}", kMaxScenarioSeconds);
}

}  // namespace

NodeCostLine fitLine(std::span<const NodeCostPoint> points) noexcept {
  if (points.empty()) {
    return {};
  }
  const auto n = static_cast<double>(points.size());
  double meanN = 0.0;
  double meanS = 0.0;
  for (const NodeCostPoint& p : points) {
    meanN += static_cast<double>(p.nodes);
    meanS += p.seconds;
  }
  meanN /= n;
  meanS /= n;
  double sxx = 0.0;
  double sxy = 0.0;
  for (const NodeCostPoint& p : points) {
    const double dx = static_cast<double>(p.nodes) - meanN;
    sxx += dx * dx;
    sxy += dx * (p.seconds - meanS);
  }
  if (!(sxx > 0.0)) {
    // One node count: no slope is determined; all of the cost is taken to grow with the nodes.
    return NodeCostLine{0.0, meanN > 0.0 ? meanS / meanN : 0.0};
  }
  const double slope = sxy / sxx;
  return NodeCostLine{meanS - slope * meanN, slope};
}

SecondsByNodes::SecondsByNodes(double fixedSeconds, double perNodeSeconds,
                               std::vector<NodeCostPoint> points, std::string source)
    : fixed_(fixedSeconds),
      perNode_(perNodeSeconds),
      points_(std::move(points)),
      slope_(std::max(0.0, fitLine(points_).perNodeSeconds)),
      source_(std::move(source)) {}

double SecondsByNodes::at(std::int64_t nodes) const noexcept {
  const double n = static_cast<double>(std::max<std::int64_t>(0, nodes));
  double table = 0.0;
  if (!points_.empty()) {
    const auto upper =
        std::lower_bound(points_.begin(), points_.end(), nodes,
                         [](const NodeCostPoint& p, std::int64_t k) { return p.nodes < k; });
    if (upper == points_.end()) {
      const NodeCostPoint& last = points_.back();
      table = last.seconds + slope_ * (n - static_cast<double>(last.nodes));
    } else if (upper->nodes == nodes) {
      table = upper->seconds;
    } else if (upper == points_.begin()) {
      table = std::max(0.0, upper->seconds - slope_ * (static_cast<double>(upper->nodes) - n));
    } else {
      const NodeCostPoint& lo = *(upper - 1);
      const double f =
          (n - static_cast<double>(lo.nodes)) / static_cast<double>(upper->nodes - lo.nodes);
      table = lo.seconds + f * (upper->seconds - lo.seconds);
    }
  }
  return std::min(kMaxScenarioSeconds, fixed_ + perNode_ * n + table);
}

std::string SecondsByNodes::describe(std::int64_t nodes) const {
  if (constant()) {
    return "given as a constant";
  }
  std::string text;
  if (perNode_ > 0.0) {
    text = fmt::format("given as {:g} s + {:g} s per node", fixed_, perNode_);
  }
  if (points_.empty()) {
    return text;
  }
  if (!text.empty()) {
    text += ", plus ";
  } else if (fixed_ > 0.0) {
    text = fmt::format("{:g} s given, plus ", fixed_);
  }
  const NodeCostPoint& first = points_.front();
  const NodeCostPoint& last = points_.back();
  text += points_.size() == 1 ? fmt::format("measured at {} nodes", first.nodes)
                              : fmt::format("measured at {} to {} nodes ({} points)", first.nodes,
                                            last.nodes, points_.size());
  if (!source_.empty()) {
    text += fmt::format(" ({})", source_);
  }
  const bool exact = std::any_of(points_.begin(), points_.end(),
                                 [&](const NodeCostPoint& p) { return p.nodes == nodes; });
  if (exact) {
    return text;
  }
  if (nodes > last.nodes) {
    return text +
           fmt::format(", extrapolated beyond {} nodes at {:.3g} s per node", last.nodes, slope_);
  }
  if (nodes < first.nodes) {
    return text +
           fmt::format(", extrapolated below {} nodes at {:.3g} s per node", first.nodes, slope_);
  }
  return text + ", interpolated";
}

double maxPerNodeSeconds() noexcept {
  return kMaxScenarioSeconds / static_cast<double>(kMaxClusterNodes);
}

std::optional<SecondsByNodes> readSecondsByNodes(const ObjectReader& r, std::string_view key,
                                                 std::vector<std::string>& warnings) {
  const Json* value = r.find(key);
  if (value == nullptr) {
    return std::nullopt;
  }
  const std::string plain = secondsExpected();
  if (value->is_number()) {
    return SecondsByNodes(*r.readNumber(key, NumberRule{0.0, false, plain, kMaxScenarioSeconds}));
  }
  if (!value->is_object()) {
    r.fail(key, fmt::format("{}, or an object {{\"fixed_seconds\", \"per_node_seconds\", "
                            "\"points\": [{{\"nodes\", \"seconds\"}}, ...]}}",
                            plain));
  }
  const auto o = *r.readObject(key, "a JSON object");
  const double fixed =
      o.readNumber("fixed_seconds", NumberRule{0.0, false, plain, kMaxScenarioSeconds})
          .value_or(0.0);
  const std::string perNodeExpected =
      fmt::format("a non-negative number of seconds per node, at most {:g} ({:g} s over {} nodes)",
                  maxPerNodeSeconds(), kMaxScenarioSeconds, kMaxClusterNodes);
  const auto perNode = o.readNumber("per_node_seconds",
                                    NumberRule{0.0, false, perNodeExpected, maxPerNodeSeconds()});
  std::vector<NodeCostPoint> points;
  const Json* list = o.find("points");
  if (list != nullptr) {
    const std::string listPath = o.childPath("points");
    constexpr std::string_view kListExpected =
        "a non-empty array of measured points {\"nodes\": N, \"seconds\": s}";
    if (!list->is_array() || list->empty()) {
      o.fail("points", kListExpected);
    }
    std::set<std::int64_t> seen;
    const std::string nodesExpected =
        fmt::format("a positive number of nodes, at most {}", kMaxClusterNodes);
    for (std::size_t i = 0; i < list->size(); ++i) {
      const ObjectReader p((*list)[i], indexPath(listPath, i), kListExpected);
      NodeCostPoint point;
      const auto nodes = p.readInt("nodes", IntRule{1, kMaxClusterNodes, nodesExpected, true});
      if (!nodes) {
        p.fail("nodes", nodesExpected);
      }
      if (!seen.insert(*nodes).second) {
        p.fail("nodes", "a node count no other point of the table has");
      }
      const auto seconds =
          p.readNumber("seconds", NumberRule{0.0, false, plain, kMaxScenarioSeconds});
      if (!seconds) {
        p.fail("seconds", plain);
      }
      point.nodes = *nodes;
      point.seconds = *seconds;
      p.accept("note");
      p.warnUnread(warnings);
      points.push_back(point);
    }
    std::sort(points.begin(), points.end(),
              [](const NodeCostPoint& a, const NodeCostPoint& b) { return a.nodes < b.nodes; });
  }
  if (!o.has("fixed_seconds") && !perNode && points.empty()) {
    r.fail(key,
           "a number of seconds, or at least one of fixed_seconds, per_node_seconds and "
           "points");
  }
  const std::string source = o.readString("source").value_or("");
  o.accept("note");
  o.warnUnread(warnings);
  return SecondsByNodes(fixed, perNode.value_or(0.0), std::move(points), source);
}

}  // namespace stretch::sim
