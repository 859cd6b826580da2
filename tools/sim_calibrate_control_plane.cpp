// `stretch sim --calibrate --control-plane FILE`: the control plane's cost as a function of the
// job's node count, from a benchmark of the control plane alone (bench/control_plane.sh: node
// agents with `sleep` workers, so that only launching, noticing a loss and restarting is timed),
// added to the per-job costs the calibration measures on this machine's CPU (docs/simulator.md,
// "Costs that grow with the nodes").
//
// What each field of the benchmark becomes:
//   kill_to_running_s  SIGKILL of one agent -> every worker of the next generation running: the
//                      controller noticing a lost node (its runner ends), stopping the
//                      generation and starting the next one. The restart part.
//   stop_noticed_s     SIGSTOP of one agent -> its loss noticed: a node that hangs is noticed only
//                      when its keep-alive stops moving for --keepalive_timeout. The detection
//                      part (the simulator's detection is instantaneous, so it is charged here).
//   their sum          the cost per node count of noticing a failure and restarting, charged at
//                      every start (restart_overhead_seconds) and every live start
//                      (reconfigure_seconds). A SIGKILLed agent is noticed at once, so the sum
//                      charges a crash as if it had hung: the slower of the two detections.
//   launch_s, idle_requests_per_node_s, agent_rss_mib
//                      kept in "calibration"."control_plane" only: the simulator charges the
//                      first start as any other, and idle traffic and memory are not costs in time.

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
  const auto kill =
      p.readNumber("kill_to_running_s", NumberRule{0.0, false, kSeconds, sim::kMaxScenarioSeconds});
  if (!kill) {
    p.fail("kill_to_running_s", kSeconds);
  }
  point.killToRunningSeconds = *kill;
  point.launchSeconds = numberOrNull(p, "launch_s", kSecondsOrNull, sim::kMaxScenarioSeconds);
  point.stopNoticedSeconds =
      numberOrNull(p, "stop_noticed_s", kSecondsOrNull, sim::kMaxScenarioSeconds);
  point.idleRequestsPerNodeSecond =
      numberOrNull(p, "idle_requests_per_node_s", kNumberOrNull, 1e300);
  point.agentRssMib = numberOrNull(p, "agent_rss_mib", kNumberOrNull, 1e300);
  return point;
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
  std::vector<std::int64_t> unnoticed;
  for (const ControlPlanePoint& p : bench.points) {
    bench.cost.push_back({p.nodes, p.killToRunningSeconds + p.stopNoticedSeconds.value_or(0.0)});
    if (!p.stopNoticedSeconds) {
      unnoticed.push_back(p.nodes);
    }
  }
  if (!unnoticed.empty()) {
    bench.notes.push_back(fmt::format(
        "stop_noticed_s not measured at {} node(s): the cost there is kill_to_running_s alone "
        "(a hung node's detection, --keepalive_timeout, is not in it)",
        fmt::join(unnoticed, ", ")));
  }
  if (bench.cost.size() == 1) {
    bench.notes.push_back(
        fmt::format("one node count ({}): no slope is measured; the cost is taken to grow in "
                    "proportion to the nodes beyond it (the pessimistic reading)",
                    bench.cost.front().nodes));
  }
  bench.fit = sim::fitLine(bench.cost);
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

// The cost object at `at`, with the benchmark's points added to what it was. J: nlohmann::json,
// or ordered_json for a file whose key order is kept.
template <typename J>
J withPoints(const J& before, const ControlPlaneBench& bench, const std::string& source) {
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
  J points = J::array();
  for (const sim::NodeCostPoint& p : bench.cost) {
    points.push_back({{"nodes", p.nodes}, {"seconds", p.seconds}});
  }
  cost["points"] = points;
  cost["source"] = source;
  return cost;
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
      withPoints(job.value("restart_overhead_seconds", J(0.0)), bench, source);
  changed.push_back("job.restart_overhead_seconds");
  if (job.contains("recovery") && job["recovery"].is_object() &&
      job["recovery"].value("mode", "") == "live") {
    J& recovery = job["recovery"];
    recovery["reconfigure_seconds"] =
        withPoints(recovery.value("reconfigure_seconds", J(0.0)), bench, source);
    changed.push_back("job.recovery.reconfigure_seconds");
  }
  J points = J::array();
  for (const ControlPlanePoint& p : bench.points) {
    const auto orNull = [](const std::optional<double>& v) { return v ? J(*v) : J(nullptr); };
    points.push_back({{"nodes", p.nodes},
                      {"launch_s", orNull(p.launchSeconds)},
                      {"kill_to_running_s", p.killToRunningSeconds},
                      {"stop_noticed_s", orNull(p.stopNoticedSeconds)},
                      {"idle_requests_per_node_s", orNull(p.idleRequestsPerNodeSecond)},
                      {"agent_rss_mib", orNull(p.agentRssMib)}});
  }
  if (!scenario.contains("calibration") || !scenario["calibration"].is_object()) {
    scenario["calibration"] = J::object();
  }
  scenario["calibration"]["control_plane"] = {
      {"file", file},
      {"machine", bench.machine},
      {"date", bench.date},
      {"points", points},
      {"cost", "kill_to_running_s + stop_noticed_s, seconds, per node count"},
      {"fit",
       {{"fixed_seconds", bench.fit.fixedSeconds}, {"per_node_seconds", bench.fit.perNodeSeconds}}},
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
