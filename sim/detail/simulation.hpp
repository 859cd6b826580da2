#pragma once
// One run of sim::simulate (sim/job_sim.hpp describes the timeline and the accounting): the real
// agent::AgentStateMachine fed events on simulated time, and what carries out its actions.
//
// The run is one event loop over a queue of (time, sequence)-ordered events. Its parts:
//  - simulation.cpp: the loop, the dispatch of every event, and the agent: the launcher's own
//    driver (agent::AgentDriver: the state machine and the live-recovery decision), events in,
//    steps out, monitor ticks at its deadlines;
//  - simulation_nodes.cpp: what happens to nodes: failures, preemptions, returns from repair,
//    scale events and the fault script (NodePool holds the nodes, FailureSources what strikes
//    them); a node failure reaches the agent job.failure_detection_seconds after it strikes,
//    and meanwhile the generation that runs on the node blocks (hang);
//  - simulation_workers.cpp: the worker group: generations started and stopped as the agent
//    says, their training step by step (step-level mode) or boundary to boundary (aggregate
//    mode), checkpoint saves (Checkpoints holds the cadence and the latest checkpoint) and the
//    end of the job;
//  - RunMetrics: the time accounting, counters, notes and timeline records.
//
// Handlers call each other re-entrantly (a script kill at a step boundary feeds the agent, whose
// StopWorkers stops the generation the boundary belongs to): after anything that may feed the
// agent, a handler checks done_ and the work epoch before it goes on.
//
// Internal to sim/job_sim.cpp. Not thread-safe: one object per run.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "runtime/agent/driver.hpp"
#include "runtime/agent/live_plan.hpp"
#include "runtime/agent/state_machine.hpp"
#include "sim/detail/checkpoints.hpp"
#include "sim/detail/failure_sources.hpp"
#include "sim/detail/job_events.hpp"
#include "sim/detail/node_pool.hpp"
#include "sim/detail/run_metrics.hpp"
#include "sim/job_sim.hpp"
#include "sim/sim_workers.hpp"
#include "sim/step_model.hpp"

namespace stretch::sim::detail {

class Simulation {
 public:
  // Throws ConfigError for a scenario the run cannot start (see sim::simulate).
  Simulation(const Scenario& scenario, const RunOptions& options);

  RunResult run();

  // sim::agentConfigFor.
  static agent::AgentConfig makeAgentConfig(const Scenario& s);

 private:
  // ---- simulation.cpp: the event loop and the agent ---------------------------------------
  void dispatch(const Payload& p);
  // The events of the current generation (token: its work epoch).
  void dispatchWork(const Payload& p);
  double fractionDone() const;
  void feed(const agent::Event& event, bool tick = false);
  void addTick(SimTime t);
  void deliverExits();
  // Carries out one of the driver's steps (records, then what the workers do).
  void execute(agent::DriverStep& step);
  void emit(TimelineKind kind, SimTime time, SimTime duration, std::string name,
            std::string detail);

  // ---- simulation_nodes.cpp: nodes -------------------------------------------------------
  void setStatus(std::int64_t node, NodeStatus status);
  void addToJob(std::int64_t node);
  void removeFromJob(std::int64_t node, NodeStatus status, const std::string& reason);
  void loseNode(std::int64_t node, std::optional<double> backHours, NodeStatus status,
                const std::string& reason);
  void onNodeBack(std::int64_t node, std::uint64_t token);
  void onStrike(ProcessSlot& slot, bool preemption);
  // What the agent hears of a failure of `node`: its workers exit (a software cause, or a node
  // swapped at once), or the node leaves for repair.
  void nodeFailed(std::int64_t node, bool nodeLost, std::optional<double> repairHours,
                  const std::string& causeName);
  // A silent failure's detection time is over (Ev::Detected).
  void onDetected(std::int64_t node);
  // Whether the running generation has workers on a node that failed silently.
  bool runsOnSilentNode() const;
  void onScale(const ScaleEvent& e);
  void fireScript();

  // ---- simulation_workers.cpp: the worker group, training and checkpoints ----------------
  void setPhase(Phase phase);
  // The world size the timeline shows now: while a start's joiners start, the world that trains
  // meanwhile (interimWorld_); else the running generation's, or 0 without workers.
  std::int64_t worldSizeNow() const;
  void closeWorldSpan();
  const StepPlan& planFor(const agent::StartWorkers& a);
  const StepPlan& planFor(std::int64_t worldSize, const config::BatchTriple& batch,
                          std::int64_t dataParallelSize);
  // `live`: the driver's plan when the start resumes from the survivors (recovery.mode live).
  // With joiners, the workers that run train meanwhile as `stretch launch`'s do (the group that
  // lost nobody in its own generation, else the plan's interim world once it has formed, else
  // nobody) until the joiners have started (restart_overhead_seconds); then the next generation
  // forms and sends them the state (onJoinersReady).
  void startGeneration(const agent::StartWorkers& a, const agent::LivePlan* live);
  void onJoinersReady();
  // Worker `localRank` of the node dies (its process and host memory: the node's other workers
  // survive), or with kWholeNode the node goes or every worker of it dies.
  static constexpr std::int64_t kWholeNode = SimWorkerGroup::kWholeNode;
  void markAffected(std::int64_t node, std::int64_t localRank = kWholeNode);
  // Once the current generation has completed a step, its workers hold the state
  // (SimWorkerGroup::stepCompleted).
  void settleRing();
  // The work under way ends now: in aggregate mode the segment's completed steps count; the
  // timeline shows the compute so far, or the save or start-up cut short.
  void abortWorkInFlight();
  // The running generation blocks from now on (a node it runs on failed silently): the work
  // under way ends as at a stop, its pending work never happens, and it makes no progress until
  // the agent stops it. endHang (at the stop or the end of the run) records the blocked span.
  void hang();
  void endHang();
  // `keepRunning`: the driver keeps the running workers for a live start.
  void stopGeneration(bool keepRunning);
  std::int64_t finalStep() const;
  std::int64_t nextCheckpointStep(std::int64_t after) const;
  void onProductive();
  void continueAfterBoundary();
  void boundaryReached();
  void beginSave();
  void completeSave();
  void finishJob();
  void finishRun(Outcome outcome, const std::string& message);
  // Aggregate mode: jump from boundary to boundary.
  void scheduleBoundary();
  void advanceSteps(std::int64_t n);
  void settleAt(SimTime t);
  void settleTo(std::int64_t step);
  void emitCompute(SimTime end);
  // Step-level mode: every micro step and bucket.
  void startStep();
  void onMicro(std::int64_t index);
  void beginLastMicro();
  void onBucket(std::int64_t j);

  const Scenario& s_;
  const RunOptions& opt_;
  agent::AgentDriver driver_;
  RunMetrics metrics_;
  NodePool nodes_;
  SimWorkerGroup group_;
  FailureSources strikes_;
  Checkpoints checkpoints_;
  EventQueue sched_;
  std::set<SimTime> ticks_;

  SimTime monitorNs_ = 1;
  SimTime lastCallNs_ = 0;
  SimTime waitTimeoutNs_ = 0;
  SimTime startupNs_ = 0;
  SimTime horizonNs_ = kNever;
  SimTime limitNs_ = kNever;

  SimTime now_ = 0;
  bool done_ = false;
  std::chrono::steady_clock::duration agentWall_{};
  SimTime idleSince_ = 0;
  SimTime startedAt_ = 0;

  std::map<std::pair<std::int64_t, std::int64_t>, StepPlan> plans_;
  const StepPlan* plan_ = nullptr;
  std::uint64_t workEpoch_ = 0;
  Progress progress_;
  std::int64_t finalStep_ = kNever;
  std::size_t scriptNext_ = 0;

  // Aggregate mode: the current segment (from segStart_ at segStep_ to boundaryStep_).
  SimTime segStart_ = 0;
  std::int64_t segStep_ = 0;
  std::int64_t boundaryStep_ = 0;
  SimTime computeFrom_ = 0;
  std::int64_t computeFromStep_ = 0;
  // Step-level mode.
  SimTime stepStart_ = 0;
  SimTime lastMicroStart_ = 0;
  // Live recovery (recovery.mode live).
  SimTime reconfigureNs_ = 0;
  SimTime transferNs_ = 0;
  // While a start's joiners start: the plan of the generation they complete (plan_ is the one
  // that trains meanwhile). Its steps do not make the joiners holders of the state.
  const StepPlan* joinersPlan_ = nullptr;
  // Meanwhile, the size of the world that trains (its own generation's when the group trains on,
  // else the interim world's); 0 when no start's joiners are starting.
  std::int64_t interimWorld_ = 0;
  // Silent node failures the agent has not heard of yet: the node, its repair time and cause.
  struct SilentFailure {
    std::optional<double> repairHours;
    std::string cause;
  };
  std::map<std::int64_t, SilentFailure> silent_;
  bool hung_ = false;  // the running generation blocks on a silent failure (hang)
  SimTime hungSince_ = 0;
  // Who holds the state lives in group_ (SimWorkerGroup::liveSituation).
  std::int64_t generationStep_ = 0;    // the step the current generation started from
  std::optional<Progress> survivors_;  // the last completed step at the stop, live mode
};

}  // namespace stretch::sim::detail
