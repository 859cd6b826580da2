// `stretch sim --calibrate --control-plane FILE`: the control plane's costs as functions of the
// job's node count, from a benchmark of the control plane alone (bench/control_plane.sh: node
// agents with `sleep` workers, so that only launching, noticing a loss and restarting is timed),
// added to the per-job costs the calibration measures on this machine's CPU (docs/simulator.md,
// "The control plane's cost at many nodes").
//
// What each field of the benchmark becomes:
//   kill_to_running_s  SIGKILL of one agent -> every worker of the next generation running: the
//                      controller noticing a lost node (its runner ends at once), stopping the
//                      generation and starting the next one. The restart part, charged at every
//                      start (restart_overhead_seconds) and every live start
//                      (reconfigure_seconds).
//   stop_noticed_s     SIGSTOP of one agent -> its loss noticed: a node that hangs is noticed only
//                      when its keep-alive stops moving for --keepalive_timeout. The detection
//                      part: job.failure_detection_seconds, charged between a silent failure and
//                      the agent's reaction.
//   launch_s, stop_to_running_s, idle_requests_per_node_s, agent_rss_mib, failed
//                      kept in "calibration"."control_plane" only: the simulator charges the
//                      first start as any other, stop_to_running_s is the two parts above in one
//                      run, and idle traffic and memory are not costs in time.
// A null time (not reached: the job ended, or not measured) is left out of its cost's points, and
// a note says at which node counts and why; the point's other times are kept.

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/config/json_reader.hpp"
#include "sim/cluster.hpp"
#include "sim/scenario.hpp"
#include "tools/sim_calibrate.hpp"

namespace stretch::tools {

namespace {

using namespace config::json;  // the JSON reader's rules and errors (json_reader.hpp)

constexpr std::string_view kSeconds = "a non-negative number of seconds, at most 3.6e+09";
constexpr std::string_view kSecondsOrNull =
    "a non-negative number of seconds, at most 3.6e+09, or null (not measured)";
constexpr std::string_view kNumberOrNull = "a non-negative number, or null (not measured)";

// A number in [0, max] or null; error otherwise (absent: `expected` too, the shape is fixed).
std::optional<double> numberOrNull(const ObjectReader& r, std::string_view key,
                                   std::string_view expected, double max) {
  const Json* value = r.find(key);
  if (value == nullptr) {
    r.fail(key, expected);
  }
  if (value->is_null()) {
    return std::nullopt;
  }
  return r.readNumber(key, NumberRule{0.0, false, expected, max});
}

ControlPlanePoint readPoint(const ObjectReader& p) {
  ControlPlanePoint point;
  const std::string nodesExpected =
      fmt::format("a positive number of node agents, at most {}", sim::kMaxClusterNodes);
  const auto nodes = p.readInt("nodes", IntRule{1, sim::kMaxClusterNodes, nodesExpected});
  if (!nodes) {
    p.fail("nodes", nodesExpected);
  }
  point.nodes = *nodes;
  point.killToRunningSeconds =
      numberOrNull(p, "kill_to_running_s", kSecondsOrNull, sim::kMaxScenarioSeconds);
  point.launchSeconds = numberOrNull(p, "launch_s", kSecondsOrNull, sim::kMaxScenarioSeconds);
  point.stopNoticedSeconds =
      numberOrNull(p, "stop_noticed_s", kSecondsOrNull, sim::kMaxScenarioSeconds);
  if (p.has("stop_to_running_s")) {  // written since bench/control_plane.sh times it
    point.stopToRunningSeconds =
        numberOrNull(p, "stop_to_running_s", kSecondsOrNull, sim::kMaxScenarioSeconds);
  }
  point.idleRequestsPerNodeSecond =
      numberOrNull(p, "idle_requests_per_node_s", kNumberOrNull, 1e300);
  point.agentRssMib = numberOrNull(p, "agent_rss_mib", kNumberOrNull, 1e300);
  if (const Json* failed = p.find("failed"); failed != nullptr && !failed->is_boolean()) {
    p.fail("failed", "true or false (whether the job ended during the recoveries)");
  }
  point.failed = p.readBool("failed").value_or(false);
  return point;
}

std::string nodeList(const std::vector<std::int64_t>& nodes) {
  const bool one = nodes.size() == 1 && nodes.front() == 1;
  return fmt::format("{} node{}", fmt::join(nodes, ", "), one ? "" : "s");
}

// The points of one cost (`field` of every point that has it), with notes on what is left out,
// what failed points keep, a single node count and a fitted line below 0 s at small counts.
ControlPlaneCost costOf(const std::vector<ControlPlanePoint>& points,
                        std::optional<double> ControlPlanePoint::*field, std::string field_name,
                        std::string_view what, std::vector<std::string>& notes) {
  ControlPlaneCost cost;
  cost.field = std::move(field_name);
  std::vector<std::int64_t> failedRun;  // null because the job ended there
  std::vector<std::int64_t> notMeasured;
  std::vector<std::int64_t> keptFromFailed;
  for (const ControlPlanePoint& p : points) {
    if (const std::optional<double>& v = p.*field) {
      cost.points.push_back({p.nodes, *v});
      if (p.failed) {
        keptFromFailed.push_back(p.nodes);
      }
    } else {
      (p.failed ? failedRun : notMeasured).push_back(p.nodes);
    }
  }
  if (!failedRun.empty()) {
    notes.push_back(fmt::format(
        "{} null at {} (\"failed\": the job ended during the recoveries): left out of the {}",
        cost.field, nodeList(failedRun), what));
  }
  if (!notMeasured.empty()) {
    notes.push_back(fmt::format("{} null at {} (not measured): left out of the {}", cost.field,
                                nodeList(notMeasured), what));
  }
  if (!keptFromFailed.empty()) {
    notes.push_back(fmt::format(
        "{} at {} was measured in a run that then failed (\"failed\": true): kept in the {}",
        cost.field, nodeList(keptFromFailed), what));
  }
  cost.fit = sim::fitLine(cost.points);
  if (cost.points.size() == 1) {
    notes.push_back(fmt::format(
        "{}: one node count ({}): no slope is measured; the {} is taken to grow in proportion to "
        "the nodes beyond it (the pessimistic reading)",
        cost.field, cost.points.front().nodes, what));
  } else if (cost.fit.fixedSeconds < 0.0 && cost.fit.perNodeSeconds > 0.0) {
    // The simulator uses the points, not the line: below the first point it goes down from that
    // point with the line's slope and stops at 0 s (sim/node_cost.hpp).
    const sim::NodeCostPoint& first = cost.points.front();
    const double zeroBelow =
        static_cast<double>(first.nodes) - first.seconds / cost.fit.perNodeSeconds;
    notes.push_back(fmt::format(
        "{}: the fitted line {:.3g} s + {:.3g} s per node is under 0 s below {:.0f} nodes; the "
        "simulator takes the measured points instead, and below {} nodes the line down from "
        "that point ({:.3g} s), which reaches 0 s at {:.0f} nodes and stays there",
        cost.field, cost.fit.fixedSeconds, cost.fit.perNodeSeconds,
        -cost.fit.fixedSeconds / cost.fit.perNodeSeconds, first.nodes, first.seconds,
        std::max(0.0, zeroBelow)));
  }
  return cost;
}

ControlPlaneBench parseBench(const Json& root) {
  ControlPlaneBench bench;
  const ObjectReader r(root, "",
                       "a control-plane benchmark result: {\"machine\", \"date\", "
                       "\"points\": [...]}");
  const auto machine = r.readString("machine");
  if (!machine || machine->empty()) {
    r.fail("machine", "the machine the benchmark ran on (a non-empty string)");
  }
  const auto date = r.readString("date");
  if (!date || date->empty()) {
    r.fail("date", "the date of the run (a non-empty string)");
  }
  bench.machine = *machine;
  bench.date = *date;
  const Json* list = r.find("points");
  constexpr std::string_view kListExpected =
      "a non-empty array of {\"nodes\", \"launch_s\", \"kill_to_running_s\", \"stop_noticed_s\", "
      "\"idle_requests_per_node_s\", \"agent_rss_mib\"}";
  if (list == nullptr || !list->is_array() || list->empty()) {
    r.fail("points", kListExpected);
  }
  std::set<std::int64_t> seen;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const ObjectReader p((*list)[i], config::json::indexPath("points", i), kListExpected);
    ControlPlanePoint point = readPoint(p);
    if (!seen.insert(point.nodes).second) {
      p.fail("nodes", "a node count no other point has");
    }
    bench.points.push_back(point);
  }
  std::sort(
      bench.points.begin(), bench.points.end(),
      [](const ControlPlanePoint& a, const ControlPlanePoint& b) { return a.nodes < b.nodes; });
  bench.restart = costOf(bench.points, &ControlPlanePoint::killToRunningSeconds,
                         "kill_to_running_s", "restart cost", bench.notes);
  if (bench.restart.points.empty()) {
    std::vector<std::int64_t> nodes;
    std::vector<std::int64_t> failed;
    for (const ControlPlanePoint& p : bench.points) {
      nodes.push_back(p.nodes);
      if (p.failed) {
        failed.push_back(p.nodes);
      }
    }
    throw ConfigError(ErrorDetail{
        "points[].kill_to_running_s",
        fmt::format("null at every point ({}{})", nodeList(nodes),
                    failed.empty() ? std::string()
                                   : fmt::format("; \"failed\" at {}", fmt::join(failed, ", "))),
        "a number of seconds at one node count at least (the restart cost is fitted from it)"});
  }
  bench.detection = costOf(bench.points, &ControlPlanePoint::stopNoticedSeconds, "stop_noticed_s",
                           "detection cost", bench.notes);
  if (bench.detection.points.empty()) {
    bench.notes.push_back(
        "stop_noticed_s measured at no node count: job.failure_detection_seconds is left as it "
        "was (a hung node's detection, --keepalive_timeout, is not calibrated)");
  }
  return bench;
}

// "FILE: " before the path of every error about the file's content.
template <typename F>
auto namingFile(const std::string& source, F f) {
  try {
    return f();
  } catch (const ConfigError& e) {
    if (!e.detail()) {
      throw;
    }
    const ErrorDetail& d = *e.detail();
    throw ConfigError(ErrorDetail{d.path.empty() ? source : fmt::format("{}: {}", source, d.path),
                                  d.value, d.expected});
  }
}

// The cost object `before` with `points` and `source` in place of what it had. J:
// nlohmann::json, or ordered_json for a file whose key order is kept.
template <typename J>
J withPoints(const J& before, const std::vector<sim::NodeCostPoint>& points,
             const std::string& source) {
  J cost = J::object();
  if (before.is_number()) {
    cost["fixed_seconds"] = before;
  } else if (before.is_object()) {
    for (const char* key : {"fixed_seconds", "per_node_seconds", "note"}) {
      if (before.contains(key)) {
        cost[key] = before.at(key);
      }
    }
  }
  J list = J::array();
  for (const sim::NodeCostPoint& p : points) {
    list.push_back({{"nodes", p.nodes}, {"seconds", p.seconds}});
  }
  cost["points"] = list;
  cost["source"] = source;
  return cost;
}

template <typename J>
J fitJson(const ControlPlaneCost& cost) {
  if (cost.points.empty()) {
    return J(nullptr);
  }
  J nodes = J::array();
  for (const sim::NodeCostPoint& p : cost.points) {
    nodes.push_back(p.nodes);
  }
  return J{{"fixed_seconds", cost.fit.fixedSeconds},
           {"per_node_seconds", cost.fit.perNodeSeconds},
           {"nodes", nodes}};
}

template <typename J>
std::vector<std::string> addTo(J& scenario, const ControlPlaneBench& bench) {
  if (!scenario.is_object() || !scenario.contains("job") || !scenario["job"].is_object()) {
    throw ConfigError(ErrorDetail{"job", "(missing)", "a scenario with a job section"});
  }
  const std::string file =
      bench.file.empty() ? std::string() : std::filesystem::path(bench.file).filename().string();
  const std::string source = fmt::format("control plane on {}, {}{}", bench.machine, bench.date,
                                         file.empty() ? std::string() : fmt::format(", {}", file));
  J& job = scenario["job"];
  std::vector<std::string> changed;
  job["restart_overhead_seconds"] =
      withPoints(job.value("restart_overhead_seconds", J(0.0)), bench.restart.points, source);
  changed.push_back("job.restart_overhead_seconds");
  if (job.contains("recovery") && job["recovery"].is_object() &&
      job["recovery"].value("mode", "") == "live") {
    J& recovery = job["recovery"];
    recovery["reconfigure_seconds"] =
        withPoints(recovery.value("reconfigure_seconds", J(0.0)), bench.restart.points, source);
    changed.push_back("job.recovery.reconfigure_seconds");
  }
  if (!bench.detection.points.empty()) {
    job["failure_detection_seconds"] =
        withPoints(job.value("failure_detection_seconds", J(0.0)), bench.detection.points, source);
    changed.push_back("job.failure_detection_seconds");
  }
  J points = J::array();
  for (const ControlPlanePoint& p : bench.points) {
    const auto orNull = [](const std::optional<double>& v) { return v ? J(*v) : J(nullptr); };
    J point = {{"nodes", p.nodes},
               {"launch_s", orNull(p.launchSeconds)},
               {"kill_to_running_s", orNull(p.killToRunningSeconds)},
               {"stop_noticed_s", orNull(p.stopNoticedSeconds)},
               {"stop_to_running_s", orNull(p.stopToRunningSeconds)},
               {"idle_requests_per_node_s", orNull(p.idleRequestsPerNodeSecond)},
               {"agent_rss_mib", orNull(p.agentRssMib)},
               {"failed", p.failed}};
    points.push_back(std::move(point));
  }
  if (!scenario.contains("calibration") || !scenario["calibration"].is_object()) {
    scenario["calibration"] = J::object();
  }
  scenario["calibration"]["control_plane"] = {{"file", file},
                                              {"machine", bench.machine},
                                              {"date", bench.date},
                                              {"points", points},
                                              {"fit",
                                               {{"kill_to_running_s", fitJson<J>(bench.restart)},
                                                {"stop_noticed_s", fitJson<J>(bench.detection)}}},
                                              {"added_to", changed},
                                              {"notes", bench.notes}};
  return changed;
}

}  // namespace

ControlPlaneBench parseControlPlane(const nlohmann::json& root, const std::string& source) {
  return namingFile(source, [&] { return parseBench(root); });
}

ControlPlaneBench readControlPlane(const std::string& path) {
  const std::string text = readFile(path, "control-plane benchmark result");
  const std::string name = std::filesystem::path(path).filename().string();
  ControlPlaneBench bench = parseControlPlane(config::json::parseJson(text, path), name);
  bench.file = path;
  return bench;
}

std::vector<std::string> addControlPlane(nlohmann::json& scenario, const ControlPlaneBench& bench) {
  return addTo(scenario, bench);
}

std::string scenarioWithControlPlane(const std::string& path, const ControlPlaneBench& bench,
                                     const std::string& presetDir,
                                     std::vector<std::string>& changed) {
  // Checked as JSON by the one reader, then kept in the file's key order.
  const std::string text = readFile(path, "scenario");
  (void)config::json::parseJson(text, path);
  nlohmann::ordered_json scenario = nlohmann::ordered_json::parse(text);
  changed = addTo(scenario, bench);
  const std::string out = scenario.dump(2) + "\n";
  // What is written must run: the checks of `stretch sim` (a planner job's "plan" object is only
  // a warning there).
  const std::filesystem::path file(path);
  sim::ScenarioOptions options;
  options.presetDir = presetDir;
  (void)sim::parseScenarioText(out, file.has_parent_path() ? file.parent_path() : ".", options);
  return out;
}

}  // namespace stretch::tools
