#pragma once
// `stretch sim --calibrate` (tools/sim_calibrate.cpp): fits the simulator's step model to what a
// real training job measures on this machine (the engine's STRETCH_TIMINGS_FILE) and checks the
// fit on a run it was not fitted to.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/node_cost.hpp"

namespace stretch::tools {

struct CalibrationOptions {
  bool progress = true;  // one line per stage on stderr
  // The job: a program that trains with the Stretch engine, and its arguments. Empty: the
  // example stretch-train-digits (next to stretch), 300 steps.
  std::vector<std::string> job;
  // Its DeepSpeed config (passed as --config); with `job`, required. The runs use its micro
  // batch and accumulation without train_batch_size or elasticity, so that the same config runs
  // on 1 and 2 workers.
  std::string config;
  // Runs per configuration; the measured step is the median of their medians and the fit pools
  // their steps, so one run slowed by something else on the machine does not decide it.
  int repeat = 3;
  // Arguments that make the job save checkpoints (a few in each run) into the directory "{dir}":
  // every run saves, and one more 2-worker run adds --resume, so that the scenario gets the
  // measured save, load and restart costs. Empty: those costs are not measured (0), except for
  // the example, which saves every 50 steps.
  std::vector<std::string> checkpointArgs;
  // A control-plane benchmark result (bench/control_plane.sh, readControlPlane below): read and
  // checked before any run, then its restart cost per node count is added to the measured restart
  // and reconfiguration costs and its detection cost becomes failure_detection_seconds
  // (addControlPlane). Empty: the costs stay constants.
  std::string controlPlane;
};

// One row of a control-plane benchmark: the control plane alone (`stretch launch --launcher
// local`, one slot per host, `sleep` workers) at `nodes` node agents. Seconds; nullopt where the
// benchmark wrote null (a time not reached, or not measured).
struct ControlPlanePoint {
  std::int64_t nodes = 0;
  std::optional<double> launchSeconds;         // launch_s: launch -> every worker running
  std::optional<double> killToRunningSeconds;  // kill_to_running_s: SIGKILL of one agent -> the
                                               // next generation's workers all running
  std::optional<double> stopNoticedSeconds;    // stop_noticed_s: SIGSTOP of one agent -> its loss
                                               // noticed (the keep-alive timeout)
  std::optional<double> stopToRunningSeconds;  // stop_to_running_s (kept, not used; optional key)
  std::optional<double> idleRequestsPerNodeSecond;  // idle_requests_per_node_s (not used)
  std::optional<double> agentRssMib;                // agent_rss_mib (not used)
  bool failed = false;  // "failed": the job ended during the recoveries (absent: false)
};

// One cost the simulator gets from the benchmark: the points where it was measured (a null is
// left out, with a note saying at which node count and why) and their least-squares line.
struct ControlPlaneCost {
  std::string field;                       // the benchmark's key: "kill_to_running_s", ...
  std::vector<sim::NodeCostPoint> points;  // by node count; empty: measured nowhere
  sim::NodeCostLine fit;                   // sim::fitLine over `points` (the simulator uses the
                                           // points; the fit is printed and recorded)
};

// A control-plane benchmark result and the costs the simulator gets from it, per node count:
//   restart    kill_to_running_s: noticing a lost node (a SIGKILLed agent's runner ends at once),
//              stopping the generation and starting the next -> restart_overhead_seconds and,
//              live, reconfigure_seconds
//   detection  stop_noticed_s: a node that hangs is noticed after --keepalive_timeout ->
//              failure_detection_seconds (charged between a silent failure and the reaction)
struct ControlPlaneBench {
  std::string file;  // where it was read ("" when parsed from memory)
  std::string machine;
  std::string date;
  std::vector<ControlPlanePoint> points;  // by node count
  ControlPlaneCost restart;               // at least one point (parseControlPlane checks)
  ControlPlaneCost detection;             // may have no point (then nothing is written)
  std::vector<std::string> notes;         // what was left out and why, what is assumed
};

// Checks and reads the benchmark's JSON: {"machine": str, "date": str, "points": [{"nodes": N,
// "launch_s", "kill_to_running_s", "stop_noticed_s", "idle_requests_per_node_s",
// "agent_rss_mib"}, ...]} (each time a number or null; "stop_to_running_s" (number or null) and
// "failed" (bool) optional; other keys ignored). A null time is left out of its cost's points
// (with a note naming the node count, and "failed" when the job ended there); a failed point's
// measured times are kept. Throws ConfigError naming `source`, the key, the value and what was
// expected ("dev_vm.json: points[0].kill_to_running_s = -1: expected ..."), and when no point has
// a kill_to_running_s.
ControlPlaneBench parseControlPlane(const nlohmann::json& root, const std::string& source);
// The same from a file; IoError when it cannot be read, ConfigError for bad JSON.
ControlPlaneBench readControlPlane(const std::string& path);

// Adds the benchmark's costs to a scenario (JSON): job.restart_overhead_seconds, and
// job.recovery.reconfigure_seconds when the job recovers live, become {"fixed_seconds": the
// value they had (the per-job cost measured on this machine's CPU), "points": the restart
// cost's points, "source": the machine, date and file} (an object keeps its fixed and per-node
// parts; its points are replaced); job.failure_detection_seconds the same with the detection
// cost's points, when it has any (else it is left as it was); "calibration"."control_plane"
// records the benchmark, the fits and the notes. Returns the keys it changed.
std::vector<std::string> addControlPlane(nlohmann::json& scenario, const ControlPlaneBench& bench);

// The scenario (or planner job) file at `path` with addControlPlane applied, as JSON text in the
// file's key order (indent 2), checked as `stretch sim` checks a scenario (presetDir: as
// ScenarioOptions; "" for the default). `changed` gets addControlPlane's keys. Throws IoError /
// ConfigError.
std::string scenarioWithControlPlane(const std::string& path, const ControlPlaneBench& bench,
                                     const std::string& presetDir,
                                     std::vector<std::string>& changed);

// A scenario for the job on this machine ("cluster", "job", "failures") plus a "calibration"
// object: the fitted figures, the restart and checkpoint costs and, per run (1 and 2 workers at the
// config's accumulation, and 2 workers at twice it, the held-out check), the predicted and measured
// median step; with options.controlPlane, the costs grow with the nodes (addControlPlane). Throws
// ConfigError for a missing job, a config without a micro batch or a bad control-plane file,
// Error when a run fails (naming the log with its output).
nlohmann::json runCalibration(CalibrationOptions options);

}  // namespace stretch::tools
