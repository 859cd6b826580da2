#pragma once
// AgentStateMachine: every decision of the elastic agent (DeepSpeed's DSElasticAgent on
// torchelastic), as a pure state machine. The agent loop (real processes) and the
// discrete-event simulator drive the very same code: they feed it events with the time they
// happened at and carry out the actions it returns. It does no I/O, reads no clock and starts
// no thread; handle() is deterministic in (state, now, event).
//
// The job: nodes join with a number of slots (GPUs); a generation is one start of the workers
// on some of them; the machine decides when to start, stop, restart, finish and give up.
//
// Not thread-safe: one driver owns a machine.
//
// Rules:
//  1. Rendezvous. Joined nodes form the pool. Workers start once the pool has at least
//     min_nodes nodes and a valid world fits (planWorld), after the last-call window counted
//     from the moment both first held (at once when the pool reaches max_nodes). The pool is
//     capped at max_nodes; later nodes wait for a place.
//  2. A world size the config does not allow is never started (WorldSizeRules): the world is
//     the largest valid size the pool can run, laid out by NodeSelection (whole nodes by
//     default; nodes left out are spare). When none fits, the machine waits (Wait) and fails
//     after wait_timeout (Fail listing the available slots and the valid sizes).
//  3. Worker failure (an exit code != 0 of the running generation): stop all workers and restart
//     with the same pool. Counts against max_restarts. Nodes waiting to join are admitted by
//     this restart (it happens anyway). A worker that exits with worker_env::kExitCannotRun
//     (78: the job cannot run as launched, e.g. another job holds its checkpoint directory)
//     stops the workers and fails the job at once with exit code 2: no restart would help.
//  4. A node of the running world leaving (NodeLeft, NodesLeft, KeepAliveLost, or a keep-alive
//     older than keepalive_timeout): stop and restart without it. Counts against max_restarts
//     (DSElasticAgent's rule). A spare or waiting node leaving changes nothing running. Nodes
//     that leave in one event (NodesLeft, KeepAliveLost: lost in the same check) cost one
//     restart together.
//  5. Nodes waiting to join while the world runs: once the last-call window has passed since
//     the first of them joined (at once when the pool would reach max_nodes), if the larger
//     pool allows a larger world, stop and restart with it; this does NOT count as a restart.
//     If it would not grow the world, the nodes join the pool as spares without a restart.
//     No scale-up once some worker has exited 0 (the job is finishing).
//  6. Exit barrier: the job succeeds (Finish) when every worker of the generation has exited 0.
//     While some have and others still run, the machine keeps waiting; a failure then is a
//     failure (rule 3). With exit_barrier_timeout set, workers still running that long after
//     the first clean exit count as a failure too.
//  7. max_restarts exhausted: a failure that would need restart number max_restarts + 1 stops
//     the workers and fails (Fail names the cause, the count and max_restarts; its exit code is
//     the failed worker's, 1 otherwise).
//  8. Every StartWorkers carries the batch triple of its world size; with elasticity it is
//     always the solver's final batch, so the global batch never changes.
//  9. A counted restart whose pool has fewer than min_nodes nodes or fits no valid world goes
//     back to rendezvous (rule 1, wait_timeout counting anew); the start that follows does not
//     count again.
//  Within handle(now, event): deadlines that end a generation (silent nodes, exit barrier) act
//  first, then the event, then the decisions that start workers (last call, scale up) or give
//  up waiting. Events for an old generation (late exits of stopped workers) are ignored
//  (LogEvent). After Finish or Fail every event is ignored.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "runtime/agent/clock.hpp"
#include "runtime/agent/world_plan.hpp"
#include "runtime/config/batch.hpp"
#include "runtime/config/ds_config.hpp"

namespace stretch::agent {

struct AgentConfig {
  std::int64_t minNodes = 1;
  std::int64_t maxNodes = 1;
  // Restarts allowed after worker failures and node departures (DeepSpeed's launcher: 100).
  std::int64_t maxRestarts = 3;
  // The job's DeepSpeed config: elasticity section and batch keys decide the valid sizes.
  config::DsConfig training;
  // GPUs per data-parallel rank when elasticity is disabled.
  std::int64_t modelParallelSize = 1;
  NodeSelection selection = NodeSelection::WholeNodes;
  // How long to wait for more nodes once a world could start (torchelastic's last call).
  Duration lastCall = std::chrono::seconds(30);
  // Longest time without running workers before the job fails (torchelastic's join timeout).
  Duration waitTimeout = std::chrono::seconds(600);
  // When set, a node whose last KeepAlive event is older than this is treated as lost. Leave
  // unset when the caller detects dead nodes itself (the launcher's job controller does).
  std::optional<Duration> keepAliveTimeout;
  // When set, workers still running this long after the first clean exit of their generation
  // count as a failure (torchelastic's exit_barrier_timeout is 300 s). Unset: wait forever.
  std::optional<Duration> exitBarrierTimeout;
  // Crash loops (as Kubernetes's CrashLoopBackOff): a generation that fails early
  // (WorkerExited::early: before its first completed step) the same way (exit code) as the
  // generation before starts again only after a backoff of backoffBase x 2^(n-1) for the n-th
  // such failure in a row, at most backoffCap; the crashLoopLimit-th in a row fails the job,
  // whatever max_restarts allows. 0: no limit.
  std::int64_t crashLoopLimit = 3;
  Duration backoffBase = std::chrono::seconds(1);
  Duration backoffCap = std::chrono::seconds(60);
};

// Throws ConfigError naming the field ("agent.max_nodes = 0: expected ...").
void validate(const AgentConfig& config);

// ---- Events (inputs) ----------------------------------------------------------------------

// A worker process ended. exitCode: 0 success, > 0 its exit status, < 0 killed by signal -code.
struct WorkerExited {
  std::uint64_t generation = 0;
  std::string nodeId;
  std::int64_t localRank = 0;
  int exitCode = 0;
  // It failed before completing a step (its heartbeat never advanced; for a program without
  // heartbeats, within seconds of its start): a crash loop if it keeps happening.
  bool early = false;
};
// A node offers `slots` GPUs to the job (a new node, or one that left and came back).
struct NodeJoined {
  std::string nodeId;
  std::int64_t slots = 0;
};
// A node left the job (its agent said goodbye, or the scheduler took it away).
struct NodeLeft {
  std::string nodeId;
  std::string reason;
};
// Several nodes left at once (the launcher found them gone before it could carry out a start):
// one restart for all of them.
struct NodesLeft {
  std::vector<std::string> nodeIds;
  std::string reason;
};
// The keep-alives of these nodes stopped, seen in one check (detected by the caller, e.g. the
// launcher's job controller): one restart for all of them, however many went silent together.
struct KeepAliveLost {
  std::vector<std::string> nodeIds;
};
// A node's keep-alive arrived (only needed when AgentConfig::keepAliveTimeout is set).
struct KeepAlive {
  std::string nodeId;
};
// Time passed; the machine checks its deadlines (last call, wait, keep-alive, exit barrier).
struct Tick {};

using Event =
    std::variant<WorkerExited, NodeJoined, NodeLeft, NodesLeft, KeepAliveLost, KeepAlive, Tick>;

// ---- Actions (outputs), carried out in order by the caller ---------------------------------

struct StartWorkers {
  std::uint64_t generation = 0;  // 1 for the first start
  std::int64_t worldSize = 0;    // GPUs = worker processes
  std::int64_t dataParallelSize = 0;
  // By node rank; nodes[i] is the NodeAssignment of node rank i. Shared with the previous
  // generation's where they agree: copying a StartWorkers costs no work per node.
  NodeSequence nodes;
  NodeSequence spareNodes;        // pool nodes that run nothing (spareNodes.ids())
  config::BatchTriple batch;      // train_batch_size = micro * gas * dataParallelSize
  std::int64_t restartCount = 0;  // TORCHELASTIC_RESTART_COUNT: counted restarts so far
  bool resumeFromLatest = true;   // workers load the latest checkpoint when there is one
  std::string reason;             // "initial start", "restart after ...", "scale up ..."
  bool operator==(const StartWorkers&) const = default;
};
// Stop every worker of the generation (and wait for them) before the next action.
struct StopWorkers {
  std::uint64_t generation = 0;
  std::string reason;
  bool operator==(const StopWorkers&) const = default;
};
// No workers run; the machine waits for nodes or for a valid world size.
struct Wait {
  std::string reason;
  bool operator==(const Wait&) const = default;
};
// Every worker of the generation exited 0: the job succeeded.
struct Finish {
  std::uint64_t generation = 0;
  bool operator==(const Finish&) const = default;
};
// The job failed; the agent exits with exitCode.
struct Fail {
  std::string message;
  int exitCode = 1;
  bool operator==(const Fail&) const = default;
};
// Something worth a line in the event log that changes nothing running ("node_joined",
// "worker_exited", "stale_event", ...).
struct LogEvent {
  std::string event;
  std::string reason;
  bool operator==(const LogEvent&) const = default;
};

using Action = std::variant<StartWorkers, StopWorkers, Wait, Finish, Fail, LogEvent>;

// ---- The machine ----------------------------------------------------------------------------

enum class Phase {
  Rendezvous,  // no workers: waiting for nodes, a valid world or the last call
  Running,     // a generation runs
  Succeeded,   // terminal: Finish was returned
  Failed,      // terminal: Fail was returned
};
std::string_view toString(Phase phase) noexcept;  // "rendezvous", "running", ...

enum class NodeStatus {
  Member,   // runs workers of the current generation
  Spare,    // in the pool, runs nothing (its slots would make no valid size)
  Waiting,  // joined while a world runs (or beyond max_nodes); not in the pool yet
};
std::string_view toString(NodeStatus status) noexcept;

struct NodeView {
  std::string nodeId;
  std::int64_t slots = 0;
  NodeStatus status = NodeStatus::Spare;
  Time joinedAt{0};
};

class AgentStateMachine {
 public:
  // `start`: the time the machine is created at (the wait timeout counts from it). Throws
  // ConfigError for a bad config and the solver's errors when the elasticity section has no
  // plan.
  explicit AgentStateMachine(AgentConfig config, Time start = Time{0});

  // Applies one event that happened at `now` (never earlier than the previous call) and returns
  // the actions to carry out, in order.
  std::vector<Action> handle(Time now, const Event& event);
  std::vector<Action> tick(Time now) { return handle(now, Tick{}); }

  // ---- Inspection ----
  Phase phase() const noexcept { return phase_; }
  bool finished() const noexcept { return phase_ == Phase::Succeeded || phase_ == Phase::Failed; }
  // The last generation started (0 before the first start).
  std::uint64_t generation() const noexcept { return generation_; }
  std::int64_t restartCount() const noexcept { return restartCount_; }
  std::int64_t remainingRestarts() const noexcept { return config_.maxRestarts - restartCount_; }
  // The running generation's StartWorkers (nullopt unless Running).
  const std::optional<StartWorkers>& current() const noexcept { return current_; }
  // Every known node, in join order.
  std::vector<NodeView> nodes() const;
  // The key the node's entries carry in StartWorkers' sequences (its join order), so a caller
  // can find it with NodeSequence::indexOfKey in O(log n); nullopt for an unknown node.
  std::optional<std::uint64_t> nodeKey(const std::string& nodeId) const;
  // Workers of the running generation that exited 0 so far.
  std::int64_t succeededWorkers() const noexcept {
    return static_cast<std::int64_t>(succeeded_.size());
  }
  Time now() const noexcept { return now_; }
  // When a restart that backs off (the crash-loop rule) may start: a caller that ticks the
  // machine at intervals ticks it then too, so the delay is the one announced, not rounded up
  // to the next interval. nullopt when no restart waits.
  std::optional<Time> restartDue() const noexcept {
    return pendingRestart_ ? std::optional<Time>(backoffUntil_) : std::nullopt;
  }
  const AgentConfig& config() const noexcept { return config_; }
  const WorldSizeRules& rules() const noexcept { return rules_; }
  // One line: phase, generation, world, restarts, nodes with their status.
  std::string describe() const;

 private:
  struct Node {
    std::int64_t slots = 0;
    std::uint64_t order = 0;  // join order; earlier nodes are preferred and ranked first
    Time joinedAt{0};
    Time lastKeepAlive{0};
    bool pooled = false;  // in the pool (member or spare) rather than waiting
  };

  void onWorkerExited(const WorkerExited& e, std::vector<Action>& out);
  void onNodeJoined(const NodeJoined& e, std::vector<Action>& out);
  // Removes the nodes; a counted restart when one of them runs workers (rule 4).
  void onNodesGone(const std::vector<std::string>& ids, const std::string& why,
                   std::vector<Action>& out);
  // Deadlines that end a generation: silent nodes, the exit barrier. Checked before the event.
  void expireDeadlines(std::vector<Action>& out);
  // Decisions that start workers: last call, wait timeout, scale up. Checked after the event.
  void advance(std::vector<Action>& out);
  void maybeScaleUp(std::vector<Action>& out);
  // Counted restart (rules 3, 4, 7): stop, then start again, wait or fail.
  // `early`: the failure came before the generation's first step (crash-loop rule).
  void failGeneration(const std::string& cause, int exitCode, std::vector<Action>& out,
                      bool early = false);
  // Moves waiting nodes into the pool (join order) while it has room; returns their ids.
  std::vector<std::string> admitWaiting();
  // Pool nodes in join order; withWaiting adds the waiting nodes the pool has room for.
  NodeSequence poolCandidates(bool withWaiting) const;
  void start(MemberPlan plan, const std::string& reason, std::vector<Action>& out);
  void enterRendezvous(std::vector<Action>& out);
  void rendezvousStep(std::vector<Action>& out);
  void emitWait(const std::string& reason, std::vector<Action>& out);
  void fail(const std::string& message, int exitCode, std::vector<Action>& out);
  bool isMember(const std::string& nodeId) const;
  std::int64_t poolSize() const;
  std::string poolText() const;

  // Bookkeeping of nodes_ kept in step, so that no event costs more than O(log nodes), restarts
  // included, unless the layout needs subset sums (whole nodes of mixed sizes): a 16,384-node job
  // is simulated for a month in well under a second.
  void addNode(const std::string& id, const Node& node);
  void eraseNode(std::map<std::string, Node>::iterator it);
  void setPooled(const std::string& id);
  void addToPool(const std::string& id, const Node& node);
  // The pool as a sequence (entries: id, slots, used = slots, key = join order).
  const NodeSequence& pool() const;

  AgentConfig config_;
  WorldSizeRules rules_;
  Time now_{0};
  Phase phase_ = Phase::Rendezvous;
  std::uint64_t generation_ = 0;
  std::int64_t restartCount_ = 0;
  // The crash-loop rule: early failures in a row with the same exit code, and the restart that
  // waits for its backoff (its reason) until backoffUntil_.
  std::int64_t earlyStreak_ = 0;
  int earlyExitCode_ = 0;
  std::optional<std::string> pendingRestart_;
  Time backoffUntil_{};
  std::uint64_t nextOrder_ = 0;
  std::map<std::string, Node> nodes_;
  // Every node by join order (map iterators stay valid until their node is erased).
  std::map<std::uint64_t, std::map<std::string, Node>::iterator> byOrder_;
  std::map<std::string, Node>::iterator byOrder(std::uint64_t order) const;
  std::set<std::uint64_t> waiting_;  // join orders of the nodes not in the pool
  std::int64_t pooled_ = 0;          // nodes in the pool
  // The pool, persistent: a restart splits it into members and spares in O(log n). Nodes that
  // join in order (the start of a job: thousands at once) collect in poolTail_ and enter pool_
  // in one O(m) build when the pool is next read.
  mutable NodeSequence pool_;
  mutable std::vector<NodeEntry> poolTail_;
  // current_->nodes index of the node, or nullopt when it runs no worker of the generation.
  std::optional<std::size_t> memberIndex(const std::string& nodeId) const;
  std::optional<StartWorkers> current_;
  std::set<std::pair<std::string, std::int64_t>> succeeded_;  // (node, local rank)
  std::optional<Time> firstSuccessAt_;
  // Rendezvous phase: since when no workers run, since when a world could start.
  Time rendezvousSince_{0};
  std::optional<Time> readySince_;
  // A valid world fitted the pool at readySince_ and no node has left since: the pool only grew,
  // so one still fits (planWorld is monotone in the candidates) and need not be planned again
  // until the workers start.
  bool readyPoolIntact_ = false;
  std::string lastWaitReason_;
  // Running phase: waiting nodes were considered for a scale up and did not grow the world
  // (re-checked when the nodes change).
  bool scaleUpSettled_ = false;
};

}  // namespace stretch::agent
