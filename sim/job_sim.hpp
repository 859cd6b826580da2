#pragma once
// One simulated run of a scenario: the real elastic agent (agent::AgentStateMachine, with the
// real elasticity solver behind its WorldSizeRules) driven on simulated time through a simulated
// worker group, with the engine's step schedule as a cost model (sim/step_model.hpp), checkpoint
// cadence, failures, spot preemptions, scheduled scale events and a fault script.
//
// The timeline:
//  - t = 0: the cluster's nodes join (NodeJoined); the agent decides when to start and with which
//    world and batch (StartWorkers). Every start costs restart_overhead_seconds at the node
//    count of the generation it starts (a constant, or a function of the nodes:
//    sim/node_cost.hpp), plus load_seconds when a checkpoint exists; then the workers train
//    from the latest checkpoint.
//  - Training advances step by step at the plan's step time. Aggregate mode jumps from one
//    boundary (checkpoint, scripted fault, end of the job) to the next analytically: a few events
//    per checkpoint interval. Step-level mode schedules every micro step and every bucket's
//    all-reduce as an event; both give the same times to the nanosecond.
//  - Checkpoints: after every global step that is a multiple of k (every_steps, or
//    round(interval / step time)), whatever restarts came between; each save stalls training for
//    save_seconds and becomes the latest checkpoint when it ends.
//  - A failure kills the workers on its node (WorkerExited, non-zero) or takes the node away
//    (NodeLeft) per the cause and the replacement policy; one that takes the node reaches the
//    agent job.failure_detection_seconds later, while the generation on it blocks (no step
//    completes: docs/simulator.md, "Failure detection"); the agent decides (restart, shrink,
//    wait, fail). A stop of the workers loses everything since the latest completed checkpoint:
//    the next start resumes from it (the event log's resume_step). Failures strike at any time:
//    during saves and starts too.
//  - The run ends when the job finishes (every worker exits 0 after the last step), fails
//    (the agent gives up), reaches horizon_hours, or nothing more can happen (stalled).
//
// Accounting (nanoseconds, exact): simulated = useful + lost + checkpoint + startup + idle, where
// useful is the compute time of the steps the run kept, lost the compute time rolled back or
// cut off (partial steps), checkpoint the time spent saving, startup the time spent starting
// workers and idle the time with no workers. ETTR = useful / simulated.
//
// Thread safety: simulate() is reentrant; concurrent runs share nothing (the Monte Carlo driver
// runs one per thread).

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/agent/event_log.hpp"
#include "sim/scenario.hpp"
#include "sim/scheduler.hpp"
#include "sim/timeline.hpp"

namespace stretch::sim {

enum class SimMode { Aggregate, StepLevel };

struct RunOptions {
  SimMode mode = SimMode::Aggregate;
  // The replica index: every random stream is seeded with deriveSeed(scenario.seed, replica, ..).
  std::uint64_t replica = 0;
  // Optional outputs (not owned; may be null).
  agent::EventLog* eventLog = nullptr;  // the agent's actions, as `stretch launch --event_log`
  TimelineSink* timeline = nullptr;
  // Called now and then (every 2^16 events) with the fraction done (by time or by samples); for
  // progress bars. Must be cheap.
  std::function<void(double)> progress;
};

enum class Outcome {
  Finished,   // the job trained its samples / steps and every worker exited 0
  Failed,     // the agent gave up (max_restarts, wait_timeout)
  Horizon,    // horizon_hours reached while running
  Stalled,    // nothing left that could happen (no workers, no event to come)
  TimeLimit,  // kMaxSimulatedHours reached without a horizon
};
std::string_view toString(Outcome outcome) noexcept;

// A run stops here when the scenario sets no horizon and the job never finishes.
inline constexpr double kMaxSimulatedHours = 100.0 * 365.25 * 24.0;

struct RunResult {
  Outcome outcome = Outcome::Stalled;
  std::string message;  // the agent's Fail message, or why the run stalled

  SimTime simulatedNs = 0;
  double wallSeconds = 0.0;
  // Of wallSeconds, the time spent inside AgentStateMachine::handle (its cost grows with the
  // number of nodes; the simulator's own work does not).
  double agentWallSeconds = 0.0;
  std::uint64_t events = 0;       // events the scheduler processed
  std::uint64_t agentEvents = 0;  // events fed to the agent state machine

  SimTime usefulNs = 0;
  SimTime lostNs = 0;
  SimTime checkpointNs = 0;
  SimTime startupNs = 0;
  SimTime idleNs = 0;

  std::int64_t steps = 0;            // steps kept at the end
  std::int64_t samples = 0;          // samples kept at the end
  std::int64_t failures = 0;         // failures that struck a node of the job
  std::int64_t ignoredFailures = 0;  // trace failures on nodes not in the job at that moment
  std::int64_t preemptions = 0;
  std::int64_t restarts = 0;  // the agent's counted restarts
  std::int64_t stops = 0;     // generations stopped (restarts, scale ups, departures)
  // Starts after a stop (recovery.mode live): from the survivors' last completed step, and
  // those that fell back to the latest checkpoint (no survivor, or ZeRO 1/2 partitions lost).
  std::int64_t liveRecoveries = 0;
  std::int64_t checkpointFallbacks = 0;
  std::uint64_t generations = 0;
  std::int64_t checkpoints = 0;  // completed saves
  std::int64_t scriptFired = 0;
  // Time with workers at each world size (0: none). While a live start's joiners start, the
  // world that trains meanwhile counts (docs/simulator.md, live recovery).
  std::map<std::int64_t, SimTime> worldSizeNs;
  // Things the run skipped and why (a scripted kill of a rank that did not run, a trace cause
  // missing from the cause table, ...); at most 20.
  std::vector<std::string> notes;

  double ettr() const noexcept {
    return simulatedNs > 0 ? static_cast<double>(usefulNs) / static_cast<double>(simulatedNs) : 0.0;
  }
};

// Runs the scenario once. Throws ConfigError for a scenario the run cannot start (an agent
// config the state machine rejects, a trace naming no node of the cluster, a script naming a
// rank or node that cannot exist), and the elasticity solver's errors.
RunResult simulate(const Scenario& scenario, const RunOptions& options = {});

// The agent configuration the scenario's job runs with, in the simulator as under `stretch
// launch`: its nodes (min_nodes, max_nodes: default every node that can ever join), restarts,
// training config, node selection and the last-call and wait timeouts.
agent::AgentConfig agentConfigFor(const Scenario& scenario);

}  // namespace stretch::sim
