#pragma once
// A simulation scenario: the cluster, the job (its DeepSpeed config, compute and checkpoint
// costs, how long it runs), the agent's settings, failures, spot preemptions, scheduled scale
// events and a deterministic fault script. Read from JSON (docs/simulator.md has the schema;
// fixtures/scenarios/ has examples):
//
//   { "cluster":  {"preset": "dgx-h100", "nodes": 4} | {"nodes": N, "gpus_per_node": G, ...},
//     "job":      {"config": {...} | "config_file": "ds_config.json",
//                  "seconds_per_sample_per_gpu": x, "gradient_bytes": b,
//                  "total_samples": n | "total_steps": s | "horizon_hours": h,
//                  "checkpoint": {"interval_minutes": t | "every_steps": k,
//                                 "save_seconds": c, "load_seconds": l},
//                  "restart_overhead_seconds": r | {"fixed_seconds", "per_node_seconds",
//                                                    "points": [{"nodes", "seconds"}]},
//                  "failure_detection_seconds": d | {the same form}},
//     "agent":    {"min_nodes", "max_nodes", "max_restarts", "last_call_seconds",
//                  "monitor_interval_seconds", "wait_timeout_seconds", "node_selection"},
//     "failures": {"model": "none" | "exponential" | "weibull" | "trace",
//                  "node_mtbf_hours": m, "shape": k, "events": [...] | "trace_file": "...",
//                  "causes": "../failures/llama3_causes.json" | [...],
//                  "replacement": "immediate" | "spares:K" | "none", "repair_hours": h},
//     "spot":     {"node_mean_hours_between_preemptions": m, "return_hours": h},
//     "scale_events": [{"at_hours": t, "kind": "join" | "leave", "nodes": k}],
//     "script":   [{"at_step": k, "kind": "kill_worker" | "leave" | "join", ...}],
//     "node_names": ["n0", ...],
//     "seed": s }
//
// Errors: every bad value is a ConfigError naming the JSON path, the value and what was expected
// ("job.checkpoint.interval_minutes = -3: expected a positive number of minutes, at most
// 6e+07"); every number has a range (the limits below), so that no time the simulator derives
// from a scenario leaves its integer nanoseconds or becomes infinite or NaN; files that
// cannot be read are IoError naming the path. Keys the simulator does not know are warnings
// (Scenario::warnings), never errors. Paths inside a scenario (config_file, causes, trace_file)
// are relative to the scenario file's directory.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/agent/world_plan.hpp"
#include "runtime/config/ds_config.hpp"
#include "sim/cluster.hpp"
#include "sim/node_cost.hpp"

namespace stretch::sim {

// The ranges of a scenario's numbers (docs/simulator.md, "Limits"): far beyond any real job,
// and narrow enough that every time derived from them stays finite in int64 nanoseconds.
inline constexpr double kMaxScenarioHours = 1e6;      // times and durations in hours (114 years)
inline constexpr double kMaxScenarioMinutes = 6e7;    // the same, in minutes
inline constexpr double kMaxScenarioSeconds = 3.6e9;  // the same, in seconds
inline constexpr double kMaxMeanHours = 1e9;          // MTBFs, mean hours between preemptions
// A node's MTBF: below 36 s failures alone fill a run to the simulator's event cap (1e-300 took
// 2.6 s a replica to say nothing useful); no real node fails that often.
inline constexpr double kMinNodeMtbfHours = 0.01;
inline constexpr double kMinWeibullShape = 0.1;  // below, nearly every draw is 0 ns
inline constexpr double kMaxWeibullShape = 100.0;
inline constexpr double kMaxScenarioBytes = 1e15;   // gradient and state bytes (1 PB)
inline constexpr double kMaxComputeSpread = 100.0;  // job.compute_spread
inline constexpr double kMaxCauseWeight = 1e15;     // a cause's count or weight
inline constexpr std::int64_t kMaxBucketCount = 1'000'000;
inline constexpr std::int64_t kMaxScenarioSteps = std::int64_t{1} << 50;    // total_steps, at_step
inline constexpr std::int64_t kMaxScenarioSamples = std::int64_t{1} << 53;  // total_samples

struct CheckpointSpec {
  // Exactly one cadence (or none: the job never saves): a save after every global step that is a
  // multiple of k (as the example job's --save-every), never after the final step; k =
  // everySteps, or round(interval / step time) at the step time of the world that trains.
  // Restarts and live recoveries do not reset the count (sim/detail/checkpoints.hpp).
  std::optional<double> intervalMinutes;
  std::optional<std::int64_t> everySteps;
  double saveSeconds = 0.0;  // training stalls this long per save
  double loadSeconds = 0.0;  // added to a start that resumes from a checkpoint
};

// How the job recovers when workers fail (docs/simulator.md, "Live recovery").
//  checkpoint: every stop loses the work since the latest completed checkpoint and every start
//              costs restart_overhead_seconds plus the load (DeepSpeed's elastic agent, and
//              `stretch launch` today);
//  live:       survivors keep their state: a new generation that keeps at least one worker of
//              the stopped one resumes from the last completed step (the step in flight is lost)
//              and its start costs reconfigure_seconds, plus sending the state to workers that
//              join (state_bytes at transfer_GBps). A failure that leaves its node takes the
//              struck worker (the node's other workers survive); a node lost or replaced takes
//              all of them. It falls back to the checkpoint when no worker survives, or, with
//              ZeRO 1 or 2 (rank r owns a partition of the optimizer state, with a copy on rank
//              r + d: d the workers per node, so the next node, or 1 on a single node), when a
//              rank and the one holding its copy are lost together.
struct RecoverySpec {
  bool live = false;
  // A number, or a function of the generation's node count (sim/node_cost.hpp); the simulator
  // charges its value at the nodes of each live start.
  SecondsByNodes reconfigureSeconds;
  double transferGBps = 0.0;     // default: the cluster's inter-node bandwidth per GPU
  std::uint64_t stateBytes = 0;  // default: 3 x gradient_bytes (7 x with fp16/bf16)
};

struct JobSpec {
  config::DsConfig config;
  std::optional<std::filesystem::path> configFile;  // where the config came from, if a file
  // Seconds one data-parallel rank needs per sample, forward and backward (with model
  // parallelism: its model-parallel group, together). Given directly or as
  // flops_per_sample / (peak_tflops * 1e12 * mfu * model_parallel_size).
  double secondsPerSample = 0.0;
  // Gradient bytes each data-parallel rank all-reduces per step (0: no communication).
  std::uint64_t gradientBytes = 0;
  // All-reduce buckets per step; default ceil(gradient_bytes / (reduce_bucket_size * bytes per
  // gradient element)), with 2-byte elements when fp16 or bf16 is enabled, else 4.
  std::int64_t bucketCount = 1;
  // Share of a micro step spent in backward (gradients become ready during it).
  double backwardFraction = 2.0 / 3.0;
  // Standard deviation of one data-parallel rank's compute time per step (all its micro steps)
  // as a fraction of that time. The ranks meet at the reduction, so a step waits for the slowest
  // of D ranks: E[max] = C (1 + spread * e(D)), e the expected maximum of D standard normals
  // (e(2) = 0.564). 0: ranks in lockstep. Measured by `stretch sim --calibrate`.
  double computeSpread = 0.0;
  // Time per step outside forward, backward and the reduction, seconds: the optimizer update,
  // data loading, logging (the engine's period_ms minus the rest).
  double stepOverheadSeconds = 0.0;
  // Whether the all-reduce overlaps the last micro step's backward; default: the config's
  // zero_optimization.overlap_comm (DeepSpeed's default: only with stage 3).
  bool overlapComm = false;
  // GPUs per data-parallel rank when the config has no elasticity section.
  std::int64_t modelParallelSize = 1;
  // When the job ends: whichever comes first (at least one is set).
  std::optional<std::int64_t> totalSamples;
  std::optional<std::int64_t> totalSteps;
  std::optional<double> horizonHours;
  CheckpointSpec checkpoint;
  // Cost of every start of the workers (rendezvous, process start, initialisation), seconds: a
  // number, or a function of the generation's node count (sim/node_cost.hpp) that the simulator
  // evaluates at the nodes of each start.
  SecondsByNodes restartOverheadSeconds;
  // Time from a failure that takes a node silently (it stops answering; its processes report no
  // exit) to the agent's reaction, seconds: the control plane's keep-alive timeout and its
  // polling (bench/control_plane.sh's stop_noticed_s). A number, or a function of the job's node
  // count at the failure (sim/node_cost.hpp). Default 0: noticed at once. Which events pay it:
  // docs/simulator.md, "Failure detection".
  SecondsByNodes failureDetectionSeconds;
  RecoverySpec recovery;
};

// DeepSpeed's launcher allows 100 restarts by default; the simulator's default is a million
// (in effect unlimited) so that goodput studies are not cut short: set agent.max_restarts to
// model a budget.
inline constexpr std::int64_t kUnlimitedRestarts = 1'000'000;

struct AgentSpec {
  std::optional<std::int64_t> minNodes;  // default 1
  std::optional<std::int64_t> maxNodes;  // default: every node that can ever join
  std::int64_t maxRestarts = kUnlimitedRestarts;
  double lastCallSeconds = 30.0;
  double monitorIntervalSeconds = 1.0;
  double waitTimeoutSeconds = 600.0;
  agent::NodeSelection selection = agent::NodeSelection::WholeNodes;
};

enum class FailureModelKind { None, Exponential, Weibull, Trace };
std::string_view toString(FailureModelKind kind) noexcept;

// What a failure cause does to its node.
struct FailureCause {
  std::string name;
  double weight = 0.0;  // relative frequency (counts or shares)
  // Hardware causes take the node away for repair (it leaves the job unless replaced at once);
  // software causes only kill the workers (the node stays).
  bool nodeLost = true;
  std::optional<double> repairHours;  // overrides failures.repair_hours for this cause
};

// One failure of a replayed trace.
struct TraceFailure {
  double atHours = 0.0;
  std::string node;  // a node id, or its index in decimal
  std::string cause;
  std::optional<double> repairHours;
};

enum class ReplacementKind { Immediate, Spares, None };

struct FailureSpec {
  FailureModelKind model = FailureModelKind::None;
  double nodeMtbfHours = 0.0;  // exponential, weibull: mean time between failures of one node
  double shape = 1.0;          // weibull
  std::vector<TraceFailure> trace;
  std::vector<FailureCause> causes;  // empty: every failure loses its node
  ReplacementKind replacement = ReplacementKind::Immediate;
  std::int64_t spares = 0;
  std::optional<double> repairHours;  // none: lost nodes never come back
};

struct SpotSpec {
  double nodeMeanHoursBetweenPreemptions = 0.0;
  std::optional<double> returnHours;  // none: a preempted node never comes back
};

enum class ScaleKind { Join, Leave };

struct ScaleEvent {
  double atHours = 0.0;
  ScaleKind kind = ScaleKind::Join;
  std::int64_t nodes = 1;
};

enum class ScriptKind { KillWorker, Leave, Join };

// A fault that happens right after the job completes step atStep (after that step's
// checkpoint, when it has one), the first time it does. Scripts make a run reproducible with the
// real launcher (the sim-to-real test).
struct ScriptEvent {
  std::int64_t atStep = 0;
  ScriptKind kind = ScriptKind::KillWorker;
  std::int64_t rank = 0;   // kill_worker: global rank of the running generation
  int exitCode = -9;       // kill_worker: the worker's exit (negative: killed by that signal)
  std::string node;        // leave, join
  std::int64_t slots = 0;  // join (default: the cluster's GPUs per node)
};

struct Scenario {
  std::string name;  // the file's stem, or "scenario"
  ClusterSpec cluster;
  JobSpec job;
  AgentSpec agent;
  FailureSpec failures;
  std::optional<SpotSpec> spot;
  std::vector<ScaleEvent> scaleEvents;  // sorted by time
  std::vector<ScriptEvent> script;      // sorted by step
  std::vector<std::string> nodeNames;   // cluster.nodes names (default n0, n1, ...)
  std::uint64_t seed = 0;
  std::vector<std::string> warnings;
};

struct ScenarioOptions {
  // Where cluster presets live; empty: defaultPresetDir(scenario directory).
  std::filesystem::path presetDir;
};

// Parses a scenario. baseDir resolves the relative paths inside it.
Scenario parseScenario(const nlohmann::json& json, const std::filesystem::path& baseDir,
                       const ScenarioOptions& options = {});
// Parses JSON text (comments are not allowed).
Scenario parseScenarioText(std::string_view text, const std::filesystem::path& baseDir,
                           const ScenarioOptions& options = {});
// Reads and parses a file; the scenario is named after its stem.
Scenario loadScenario(const std::filesystem::path& path, const ScenarioOptions& options = {});

// Live recovery's state transfer to a node that joins: job.recovery.state_bytes at
// transfer_GBps (default: the cluster's inter-node bandwidth per GPU), in seconds; 0 without a
// bandwidth.
double stateTransferSeconds(const Scenario& scenario) noexcept;

// The cluster preset directory: $STRETCH_CLUSTER_PRESETS when set, else <scenarioDir>/../clusters
// when it exists (scenarios in fixtures/scenarios), else the source tree's fixtures/clusters.
std::filesystem::path defaultPresetDir(const std::filesystem::path& scenarioDir);

// Loads a failure-cause table: {"causes": [{"name", "count" | "weight", "node_lost",
// "repair_hours"}, ...]}. Throws IoError / ConfigError.
std::vector<FailureCause> loadCauseTable(const std::filesystem::path& path);

// Loads a failure trace: CSV with a header "time_hours,node,cause,repair_hours" (cause and
// repair_hours may be empty), or JSON {"events": [{"at_hours", "node", "cause",
// "repair_hours"}]} / a bare array of such objects.
std::vector<TraceFailure> loadFailureTrace(const std::filesystem::path& path);

}  // namespace stretch::sim
