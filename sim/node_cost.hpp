#pragma once
// A cost in seconds that depends on the job's node count: the scenario's
// job.restart_overhead_seconds, job.failure_detection_seconds and
// job.recovery.reconfigure_seconds (docs/simulator.md, "Costs that grow with the nodes"). Three
// forms, one value at every node count n:
//
//   5                                          5 s at every n (the plain number: a constant)
//   {"fixed_seconds": F, "per_node_seconds": P,
//    "points": [{"nodes": N1, "seconds": s1}, ...],
//    "source": "...", "note": "..."}           F + P n + table(n), any of the three parts
//
// table(n) is the measured points: between two points, linear interpolation; beyond the last
// point and below the first, the straight line through that point with the table's slope b, the
// least-squares slope of seconds on nodes over the points (fitLine), 0 when the fit's slope is
// negative (a cost does not fall with more nodes beyond what was measured); below the first point
// never under 0 s. One point (or points at one node count only) determines no slope: the line
// then goes through the origin (b = s1 / N1), i.e. all of the measured cost is assumed to grow
// with the nodes, the pessimistic reading. The value is at most kMaxScenarioSeconds at any n.
//
// Value type, copyable, immutable after construction; at() is O(log points) and does not throw.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace stretch::config::json {
class ObjectReader;
}

namespace stretch::sim {

// A cost measured at one node count.
struct NodeCostPoint {
  std::int64_t nodes = 0;
  double seconds = 0.0;
  bool operator==(const NodeCostPoint&) const = default;
};

// seconds = fixedSeconds + perNodeSeconds x nodes.
struct NodeCostLine {
  double fixedSeconds = 0.0;
  double perNodeSeconds = 0.0;
  bool operator==(const NodeCostLine&) const = default;
};

// Least squares of seconds on nodes over the points. With fewer than two distinct node counts
// the line goes through the origin and the mean point (fixed 0, per node = mean s / mean N); no
// points: 0. The slope is not clamped here (SecondsByNodes clamps it for extrapolation).
NodeCostLine fitLine(std::span<const NodeCostPoint> points) noexcept;

class SecondsByNodes {
 public:
  SecondsByNodes() = default;
  // The plain number: the same cost at every node count.
  SecondsByNodes(double constantSeconds) : fixed_(constantSeconds) {}  // NOLINT: implicit
  // points: sorted by node count, distinct, nodes >= 1 (parseSecondsByNodes checks; here a
  // precondition). source: where the figures come from, for reports ("" when not said).
  SecondsByNodes(double fixedSeconds, double perNodeSeconds, std::vector<NodeCostPoint> points,
                 std::string source = {});

  // The cost at `nodes` nodes (0 and below: as at 0 nodes).
  double at(std::int64_t nodes) const noexcept;
  // No per-node part and no points.
  bool constant() const noexcept { return perNode_ == 0.0 && points_.empty(); }

  double fixedSeconds() const noexcept { return fixed_; }
  double perNodeSeconds() const noexcept { return perNode_; }
  const std::vector<NodeCostPoint>& points() const noexcept { return points_; }
  // The slope table(n) is extrapolated with, seconds per node (0 without points).
  double tableSlope() const noexcept { return slope_; }
  const std::string& source() const noexcept { return source_; }

  // Where the value at `nodes` comes from, one phrase for reports: "given as a constant",
  // "measured at 64 to 256 nodes (SOURCE), interpolated", "... extrapolated beyond 256 nodes at
  // 0.0026 s per node", "given as 60 s + 0.01 s per node".
  std::string describe(std::int64_t nodes) const;

 private:
  double fixed_ = 0.0;
  double perNode_ = 0.0;
  std::vector<NodeCostPoint> points_;
  double slope_ = 0.0;
  std::string source_;
};

// The largest per_node_seconds a scenario may give: kMaxScenarioSeconds over the largest cluster.
double maxPerNodeSeconds() noexcept;

// Reads r's `key` in either form (above); nullopt when absent. Throws ConfigError naming the path,
// the value and what was expected ("job.restart_overhead_seconds.points[1].nodes = 0: expected a
// positive number of nodes, at most 10000000"); the object's unknown keys go to `warnings`.
std::optional<SecondsByNodes> readSecondsByNodes(const config::json::ObjectReader& r,
                                                 std::string_view key,
                                                 std::vector<std::string>& warnings);

}  // namespace stretch::sim
