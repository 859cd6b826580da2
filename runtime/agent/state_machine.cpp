#include "runtime/agent/state_machine.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/common/check.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/overloaded.hpp"
#include "runtime/common/worker_variables.hpp"

namespace stretch::agent {

namespace {

void require(bool ok, const char* path, const std::string& value, const char* expected) {
  if (!ok) {
    throw ConfigError(ErrorDetail{path, value, expected});
  }
}

// The agent's exit status for a worker's: its own status, 128 + signal when killed.
int exitStatusOf(int exitCode) {
  if (exitCode > 0) {
    return std::min(exitCode, 255);
  }
  if (exitCode < 0) {
    return std::min(128 - exitCode, 255);
  }
  return 1;
}

std::string describeExit(int exitCode) {
  return exitCode < 0 ? fmt::format("was killed by signal {}", -exitCode)
                      : fmt::format("exited with code {}", exitCode);
}

}  // namespace

void validate(const AgentConfig& c) {
  require(c.minNodes >= 1, "agent.min_nodes", std::to_string(c.minNodes), "a positive integer");
  require(c.maxNodes >= c.minNodes, "agent.max_nodes", std::to_string(c.maxNodes),
          "an integer >= agent.min_nodes");
  require(c.maxRestarts >= 0, "agent.max_restarts", std::to_string(c.maxRestarts),
          "a non-negative integer");
  require(c.modelParallelSize >= 1, "agent.model_parallel_size",
          std::to_string(c.modelParallelSize), "a positive integer");
  require(c.lastCall >= Duration{0}, "agent.last_call", formatDuration(c.lastCall),
          "a non-negative duration");
  require(c.waitTimeout > Duration{0}, "agent.wait_timeout", formatDuration(c.waitTimeout),
          "a positive duration");
  if (c.keepAliveTimeout) {
    require(*c.keepAliveTimeout > Duration{0}, "agent.keepalive_timeout",
            formatDuration(*c.keepAliveTimeout), "a positive duration");
  }
  if (c.exitBarrierTimeout) {
    require(*c.exitBarrierTimeout >= Duration{0}, "agent.exit_barrier_timeout",
            formatDuration(*c.exitBarrierTimeout), "a non-negative duration");
  }
  require(c.crashLoopLimit >= 0, "agent.crash_loop_limit", std::to_string(c.crashLoopLimit),
          "a non-negative integer (0: no limit)");
  require(c.backoffBase >= Duration{0}, "agent.backoff_base", formatDuration(c.backoffBase),
          "a non-negative duration");
  require(c.backoffCap >= c.backoffBase, "agent.backoff_cap", formatDuration(c.backoffCap),
          "a duration >= agent.backoff_base");
}

std::string_view toString(Phase phase) noexcept {
  switch (phase) {
    case Phase::Rendezvous:
      return "rendezvous";
    case Phase::Running:
      return "running";
    case Phase::Succeeded:
      return "succeeded";
    case Phase::Failed:
      return "failed";
  }
  return "?";
}

std::string_view toString(NodeStatus status) noexcept {
  switch (status) {
    case NodeStatus::Member:
      return "member";
    case NodeStatus::Spare:
      return "spare";
    case NodeStatus::Waiting:
      return "waiting";
  }
  return "?";
}

AgentStateMachine::AgentStateMachine(AgentConfig config, Time start)
    : config_((validate(config), std::move(config))),
      rules_(config_.training, config_.modelParallelSize),
      now_(start),
      rendezvousSince_(start) {}

std::vector<Action> AgentStateMachine::handle(Time now, const Event& event) {
  STRETCH_CHECK(now >= now_, "events must come in time order: {} after {}", formatDuration(now),
                formatDuration(now_));
  now_ = now;
  std::vector<Action> out;
  if (finished()) {
    return out;
  }
  // Deadlines that expired by `now` (silent nodes, the exit barrier) come before the event;
  // decisions that start workers (last call, scale up, wait timeout) come after it, so they see
  // the event.
  expireDeadlines(out);
  if (finished()) {
    return out;
  }
  std::visit(Overloaded{
                 [&](const WorkerExited& e) { onWorkerExited(e, out); },
                 [&](const NodeJoined& e) { onNodeJoined(e, out); },
                 [&](const NodeLeft& e) {
                   onNodesGone({e.nodeId}, e.reason.empty() ? "left" : e.reason, out);
                 },
                 [&](const NodesLeft& e) {
                   onNodesGone(e.nodeIds, e.reason.empty() ? "left" : e.reason, out);
                 },
                 [&](const KeepAliveLost& e) { onNodesGone(e.nodeIds, "keep-alive lost", out); },
                 [&](const KeepAlive& e) {
                   if (auto it = nodes_.find(e.nodeId); it != nodes_.end()) {
                     it->second.lastKeepAlive = now_;
                   }
                 },
                 [&](const Tick&) {},
             },
             event);
  if (!finished()) {
    advance(out);
  }
  return out;
}

// ---- events ---------------------------------------------------------------------------------

void AgentStateMachine::onWorkerExited(const WorkerExited& e, std::vector<Action>& out) {
  if (phase_ != Phase::Running || e.generation != generation_) {
    out.push_back(LogEvent{"stale_event",
                           fmt::format("exit of node {} local rank {} (generation {}) ignored: "
                                       "generation {} is {}",
                                       e.nodeId, e.localRank, e.generation, generation_,
                                       phase_ == Phase::Running ? "running" : "not running")});
    return;
  }
  const auto found = memberIndex(e.nodeId);
  const std::optional<NodeAssignment> node =
      found ? std::optional(current_->nodes[*found]) : std::nullopt;
  if (!node || e.localRank < 0 || e.localRank >= node->localWorldSize) {
    out.push_back(LogEvent{"unknown_worker",
                           fmt::format("exit of node {} local rank {} ignored: no such worker in "
                                       "generation {}",
                                       e.nodeId, e.localRank, generation_)});
    return;
  }
  if (succeeded_.contains({e.nodeId, e.localRank})) {
    out.push_back(LogEvent{"stale_event", fmt::format("second exit of node {} local rank {} "
                                                      "ignored",
                                                      e.nodeId, e.localRank)});
    return;
  }
  const std::int64_t rank = node->firstRank + e.localRank;
  if (e.exitCode != 0) {
    // A failed checkpoint save counts toward the crash-loop rule as an early failure does: the
    // restart trains to the same save (worker_env::kExitSaveFailed).
    const bool saveFailed = e.exitCode == worker_env::kExitSaveFailed;
    failGeneration(fmt::format("worker rank {} (node {} local rank {}) {} in generation {}{}", rank,
                               e.nodeId, e.localRank, describeExit(e.exitCode), generation_,
                               e.early      ? " before its first step"
                               : saveFailed ? " at a checkpoint save"
                                            : ""),
                   exitStatusOf(e.exitCode), out, e.early || saveFailed);
    return;
  }
  succeeded_.insert({e.nodeId, e.localRank});
  const auto done = static_cast<std::int64_t>(succeeded_.size());
  if (done == current_->worldSize) {
    out.push_back(Finish{generation_});
    phase_ = Phase::Succeeded;
    current_.reset();
    return;
  }
  if (!firstSuccessAt_) {
    firstSuccessAt_ = now_;
    out.push_back(
        LogEvent{"exit_barrier", fmt::format("worker rank {} exited 0; waiting for the other {} "
                                             "worker(s) of generation {}",
                                             rank, current_->worldSize - done, generation_)});
  }
}

void AgentStateMachine::onNodeJoined(const NodeJoined& e, std::vector<Action>& out) {
  if (e.nodeId.empty() || e.slots < 1) {
    out.push_back(LogEvent{"node_rejected",
                           fmt::format("join of node \"{}\" with {} slot(s) ignored: expected a "
                                       "node id and at least one slot",
                                       e.nodeId, e.slots)});
    return;
  }
  if (nodes_.contains(e.nodeId)) {
    out.push_back(LogEvent{"node_rejected",
                           fmt::format("node {} joined again while known; ignored", e.nodeId)});
    return;
  }
  Node node;
  node.slots = e.slots;
  node.order = nextOrder_++;
  node.joinedAt = now_;
  node.lastKeepAlive = now_;
  node.pooled = phase_ == Phase::Rendezvous && poolSize() < config_.maxNodes;
  addNode(e.nodeId, node);
  scaleUpSettled_ = false;
  out.push_back(LogEvent{"node_joined",
                         fmt::format("node {} joined with {} slot(s){}", e.nodeId, e.slots,
                                     node.pooled ? "" : "; it waits for the next generation")});
}

void AgentStateMachine::onNodesGone(const std::vector<std::string>& ids, const std::string& why,
                                    std::vector<Action>& out) {
  std::vector<std::string> members;
  for (const std::string& id : ids) {
    const auto it = nodes_.find(id);
    if (it == nodes_.end()) {
      out.push_back(LogEvent{"stale_event", fmt::format("node {} ({}) is not known", id, why)});
      continue;
    }
    if (isMember(id)) {
      members.push_back(id);
    } else {
      out.push_back(LogEvent{"node_left",
                             fmt::format("node {} ({}), {}: nothing running changes", id, why,
                                         it->second.pooled ? "a spare node" : "a waiting node")});
    }
    eraseNode(it);
  }
  scaleUpSettled_ = false;
  readyPoolIntact_ = false;
  if (!members.empty()) {
    failGeneration(fmt::format("node{} {} of generation {} {}", members.size() == 1 ? "" : "s",
                               fmt::join(members, ", "), generation_, why),
                   1, out);
  }
}

void AgentStateMachine::expireDeadlines(std::vector<Action>& out) {
  if (config_.keepAliveTimeout) {
    std::vector<std::pair<std::uint64_t, std::string>> dead;
    for (const auto& [id, node] : nodes_) {
      if (now_ - node.lastKeepAlive > *config_.keepAliveTimeout) {
        dead.emplace_back(node.order, id);
      }
    }
    if (!dead.empty()) {
      std::sort(dead.begin(), dead.end());
      std::vector<std::string> ids;
      for (auto& [order, id] : dead) {
        ids.push_back(std::move(id));
      }
      onNodesGone(
          ids, fmt::format("sent no keep-alive for {}", formatDuration(*config_.keepAliveTimeout)),
          out);
      if (finished()) {
        return;
      }
    }
  }
  if (phase_ == Phase::Running && firstSuccessAt_ && config_.exitBarrierTimeout &&
      now_ - *firstSuccessAt_ >= *config_.exitBarrierTimeout) {
    failGeneration(
        fmt::format("exit barrier: {} of {} workers of generation {} exited 0, the others still "
                    "ran {} after the first",
                    succeeded_.size(), current_->worldSize, generation_,
                    formatDuration(now_ - *firstSuccessAt_)),
        1, out);
  }
}

void AgentStateMachine::advance(std::vector<Action>& out) {
  if (phase_ == Phase::Rendezvous) {
    rendezvousStep(out);
  } else if (phase_ == Phase::Running) {
    maybeScaleUp(out);
  }
}

// ---- decisions ------------------------------------------------------------------------------

void AgentStateMachine::maybeScaleUp(std::vector<Action>& out) {
  if (scaleUpSettled_ || !succeeded_.empty()) {
    return;
  }
  if (waiting_.empty()) {
    return;
  }
  const auto waiting = static_cast<std::int64_t>(waiting_.size());
  // Join times grow with the join order: the first waiting node waited longest.
  const std::optional<Time> firstWaiting = byOrder(*waiting_.begin())->second.joinedAt;
  const std::int64_t room = config_.maxNodes - poolSize();
  if (room <= 0) {
    scaleUpSettled_ = true;  // they wait for a place; re-checked when nodes change
    return;
  }
  const bool full = poolSize() + waiting >= config_.maxNodes;
  if (!full && now_ < *firstWaiting + config_.lastCall) {
    return;
  }
  std::optional<MemberPlan> plan =
      planMembers(poolCandidates(/*withWaiting=*/true), rules_, config_.selection);
  const std::vector<std::string> admitted = admitWaiting();
  if (plan && plan->worldSize > current_->worldSize) {
    const std::string reason =
        fmt::format("scale up from {} to {} GPUs: node{} {} joined", current_->worldSize,
                    plan->worldSize, admitted.size() == 1 ? "" : "s", fmt::join(admitted, ", "));
    out.push_back(StopWorkers{generation_, reason});
    start(std::move(*plan), reason, out);
    return;
  }
  out.push_back(LogEvent{
      "node_spare",
      fmt::format("node{} {} joined the pool as spare: the world stays at {} GPUs (no larger "
                  "valid size with them)",
                  admitted.size() == 1 ? "" : "s", fmt::join(admitted, ", "),
                  current_->worldSize)});
  scaleUpSettled_ = true;
}

void AgentStateMachine::failGeneration(const std::string& cause, int exitCode,
                                       std::vector<Action>& out, bool early) {
  STRETCH_CHECK(phase_ == Phase::Running, "failGeneration in phase {}", toString(phase_));
  out.push_back(StopWorkers{generation_, cause});
  current_.reset();
  succeeded_.clear();
  firstSuccessAt_.reset();
  earlyStreak_ =
      !early ? 0 : (earlyStreak_ > 0 && exitCode == earlyExitCode_ ? earlyStreak_ + 1 : 1);
  earlyExitCode_ = exitCode;
  if (exitCode == worker_env::kExitCannotRun) {
    fail(fmt::format("{}: the worker says the job cannot run as launched (exit status {}), so it "
                     "is not restarted; its log says why",
                     cause, worker_env::kExitCannotRun),
         2, out);
    return;
  }
  if (restartCount_ >= config_.maxRestarts) {
    fail(fmt::format("{}; max_restarts ({}) exhausted: the job was restarted {} time(s) already",
                     cause, config_.maxRestarts, restartCount_),
         exitCode, out);
    return;
  }
  if (config_.crashLoopLimit > 0 && earlyStreak_ >= config_.crashLoopLimit) {
    fail(fmt::format("{}; crash loop: {} generations in a row failed the same way {} "
                     "(crash_loop_limit {}): restarting again would fail again",
                     cause, earlyStreak_,
                     exitCode == worker_env::kExitSaveFailed ? "at a checkpoint save"
                                                             : "before their first step",
                     config_.crashLoopLimit),
         exitCode, out);
    return;
  }
  ++restartCount_;
  admitWaiting();
  const std::string reason =
      fmt::format("restart {} of {} after {}", restartCount_, config_.maxRestarts, cause);
  if (earlyStreak_ > 0) {
    // Back off: base x 2^(n-1), at most the cap.
    Duration delay = config_.backoffBase;
    for (std::int64_t i = 1; i < earlyStreak_ && delay < config_.backoffCap; ++i)
      delay *= 2;
    delay = std::min(delay, config_.backoffCap);
    backoffUntil_ = now_ + delay;
    pendingRestart_ = reason;
    out.push_back(
        LogEvent{"restart_backoff",
                 fmt::format("{}: waiting {} first ({} failure(s) in a row before the first step)",
                             reason, formatDuration(delay), earlyStreak_)});
    enterRendezvous(out);
    return;
  }
  std::optional<MemberPlan> plan;
  if (poolSize() >= config_.minNodes) {
    plan = planMembers(poolCandidates(false), rules_, config_.selection);
  }
  if (plan) {
    start(std::move(*plan), reason, out);
  } else {
    out.push_back(LogEvent{"restart_deferred", reason});
    enterRendezvous(out);
  }
}

std::vector<std::string> AgentStateMachine::admitWaiting() {
  std::vector<std::string> admitted;
  while (!waiting_.empty() && poolSize() < config_.maxNodes) {
    const std::string id = byOrder(*waiting_.begin())->first;
    setPooled(id);
    admitted.push_back(id);
  }
  return admitted;
}

NodeSequence AgentStateMachine::poolCandidates(bool withWaiting) const {
  NodeSequence out = pool();
  if (withWaiting) {
    // The first `room` waiting nodes (join order) join the candidates.
    auto room = std::max<std::int64_t>(0, config_.maxNodes - poolSize());
    for (auto it = waiting_.begin(); it != waiting_.end() && room > 0; ++it, --room) {
      const auto node = byOrder(*it);
      out = out.inserted(NodeEntry{node->first, node->second.slots, node->second.slots, *it});
    }
  }
  return out;
}

const NodeSequence& AgentStateMachine::pool() const {
  if (!poolTail_.empty()) {
    pool_ = pool_.concatenated(NodeSequence::fromSorted(std::move(poolTail_)));
    poolTail_.clear();
  }
  return pool_;
}

void AgentStateMachine::addToPool(const std::string& id, const Node& node) {
  NodeEntry entry{id, node.slots, node.slots, node.order};
  const bool last = poolTail_.empty()
                        ? pool_.empty() || pool_.entry(pool_.size() - 1).key < node.order
                        : poolTail_.back().key < node.order;
  if (last) {
    poolTail_.push_back(std::move(entry));
  } else {
    pool_ = pool().inserted(std::move(entry));
  }
  ++pooled_;
}

void AgentStateMachine::addNode(const std::string& id, const Node& node) {
  const auto it = nodes_.emplace(id, node).first;
  STRETCH_CHECK(byOrder_.emplace(node.order, it).second, "node {} joins with order {} twice", id,
                node.order);
  if (node.pooled) {
    addToPool(id, node);
  } else {
    waiting_.insert(node.order);
  }
}

void AgentStateMachine::eraseNode(std::map<std::string, Node>::iterator it) {
  STRETCH_CHECK(byOrder_.erase(it->second.order) == 1, "node {} not indexed", it->first);
  if (it->second.pooled) {
    pool_ = pool().erased(it->second.order);
    --pooled_;
  } else {
    waiting_.erase(it->second.order);
  }
  nodes_.erase(it);
}

std::map<std::string, AgentStateMachine::Node>::iterator AgentStateMachine::byOrder(
    std::uint64_t order) const {
  const auto ref = byOrder_.find(order);
  STRETCH_CHECK(ref != byOrder_.end(), "no node with join order {}", order);
  return ref->second;
}

void AgentStateMachine::setPooled(const std::string& id) {
  Node& node = nodes_.at(id);
  if (!node.pooled) {
    node.pooled = true;
    waiting_.erase(node.order);
    addToPool(id, node);
  }
}

void AgentStateMachine::start(MemberPlan plan, const std::string& reason,
                              std::vector<Action>& out) {
  const std::optional<config::BatchTriple> batch = rules_.batchFor(plan.worldSize);
  STRETCH_CHECK(batch.has_value(), "planned world size {} is not valid", plan.worldSize);
  ++generation_;
  StartWorkers s;
  s.generation = generation_;
  s.worldSize = plan.worldSize;
  s.dataParallelSize = plan.worldSize / rules_.modelParallelSize();
  s.batch = *batch;
  s.restartCount = restartCount_;
  s.resumeFromLatest = true;
  s.reason = reason;
  s.nodes = std::move(plan.used);
  s.spareNodes = std::move(plan.spare);
  phase_ = Phase::Running;
  current_ = s;
  succeeded_.clear();
  firstSuccessAt_.reset();
  readySince_.reset();
  readyPoolIntact_ = false;
  lastWaitReason_.clear();
  scaleUpSettled_ = false;
  out.push_back(std::move(s));
}

void AgentStateMachine::enterRendezvous(std::vector<Action>& out) {
  phase_ = Phase::Rendezvous;
  current_.reset();
  rendezvousSince_ = now_;
  readySince_.reset();
  readyPoolIntact_ = false;
  lastWaitReason_.clear();
  rendezvousStep(out);
}

void AgentStateMachine::rendezvousStep(std::vector<Action>& out) {
  admitWaiting();
  if (pendingRestart_) {
    // A restart that backs off: at its time, the restart failGeneration would have made.
    if (now_ < backoffUntil_) {
      emitWait(fmt::format("backing off {} before the {}",
                           formatDuration(backoffUntil_ - rendezvousSince_), *pendingRestart_),
               out);
      return;
    }
    const std::string reason = *std::exchange(pendingRestart_, std::nullopt);
    if (poolSize() >= config_.minNodes) {
      if (auto plan = planMembers(poolCandidates(false), rules_, config_.selection)) {
        start(std::move(*plan), reason, out);
        return;
      }
    }
    out.push_back(LogEvent{"restart_deferred", reason});
  }
  const std::int64_t pool = poolSize();
  const bool timedOut = now_ - rendezvousSince_ >= config_.waitTimeout;
  if (pool < config_.minNodes) {
    readySince_.reset();
    readyPoolIntact_ = false;
    if (timedOut) {
      fail(fmt::format("rendezvous: {} of min_nodes {} node(s) joined within wait_timeout {} "
                       "(nodes: {})",
                       pool, config_.minNodes, formatDuration(config_.waitTimeout), poolText()),
           1, out);
    } else {
      emitWait(fmt::format("waiting for nodes: {} of min_nodes {} joined", pool, config_.minNodes),
               out);
    }
    return;
  }
  const bool startNow = pool >= config_.maxNodes || timedOut ||
                        (readySince_ && now_ >= *readySince_ + config_.lastCall);
  if (readySince_ && readyPoolIntact_ && !startNow) {
    return;  // still in the last call, with (at least) the world announced by the last Wait
  }
  const NodeSequence candidates = poolCandidates(false);
  const std::int64_t slots = candidates.slotSum();
  std::optional<MemberPlan> plan = planMembers(candidates, rules_, config_.selection);
  if (!plan) {
    readySince_.reset();
    readyPoolIntact_ = false;
    const std::string what = fmt::format(
        "no valid world size: {} slot(s) available on {} node(s) ({}), node selection {}; valid "
        "world sizes: {}",
        slots, pool, poolText(), toString(config_.selection), rules_.describeValid());
    if (timedOut) {
      fail(fmt::format("{}; gave up after wait_timeout {}", what,
                       formatDuration(config_.waitTimeout)),
           1, out);
    } else {
      emitWait(what, out);
    }
    return;
  }
  if (!readySince_) {
    readySince_ = now_;
  }
  readyPoolIntact_ = true;
  const Time deadline = *readySince_ + config_.lastCall;
  if (pool >= config_.maxNodes || now_ >= deadline || timedOut) {
    const std::string reason =
        generation_ == 0
            ? fmt::format("initial start on {} node(s)", plan->used.size())
            : fmt::format("start on {} node(s) after waiting for a valid world", plan->used.size());
    start(std::move(*plan), reason, out);
    return;
  }
  emitWait(fmt::format("last call: {} node(s) can run {} GPUs; waiting up to {} for more nodes "
                       "(max_nodes {})",
                       pool, plan->worldSize, formatDuration(config_.lastCall), config_.maxNodes),
           out);
}

void AgentStateMachine::emitWait(const std::string& reason, std::vector<Action>& out) {
  if (reason != lastWaitReason_) {
    lastWaitReason_ = reason;
    out.push_back(Wait{reason});
  }
}

void AgentStateMachine::fail(const std::string& message, int exitCode, std::vector<Action>& out) {
  phase_ = Phase::Failed;
  current_.reset();
  out.push_back(Fail{message, exitCode});
}

// ---- inspection -----------------------------------------------------------------------------

std::optional<std::size_t> AgentStateMachine::memberIndex(const std::string& nodeId) const {
  if (!current_) {
    return std::nullopt;
  }
  const auto node = nodes_.find(nodeId);
  if (node == nodes_.end()) {
    return std::nullopt;
  }
  return current_->nodes.indexOfKey(node->second.order);
}

std::optional<std::uint64_t> AgentStateMachine::nodeKey(const std::string& nodeId) const {
  const auto node = nodes_.find(nodeId);
  return node == nodes_.end() ? std::nullopt : std::optional(node->second.order);
}

bool AgentStateMachine::isMember(const std::string& nodeId) const {
  return memberIndex(nodeId).has_value();
}

std::int64_t AgentStateMachine::poolSize() const {
  return pooled_;
}

std::string AgentStateMachine::poolText() const {
  std::vector<std::string> parts;
  for (const NodeAssignment& c : pool()) {
    parts.push_back(fmt::format("{}:{}", c.nodeId, c.slots));
  }
  return parts.empty() ? std::string("none") : fmt::format("{}", fmt::join(parts, ", "));
}

std::vector<NodeView> AgentStateMachine::nodes() const {
  std::vector<NodeView> out;
  for (const auto& [order, it] : byOrder_) {
    const std::string& id = it->first;
    const Node& node = it->second;
    const NodeStatus status = !node.pooled   ? NodeStatus::Waiting
                              : isMember(id) ? NodeStatus::Member
                                             : NodeStatus::Spare;
    out.push_back(NodeView{id, node.slots, status, node.joinedAt});
  }
  return out;
}

std::string AgentStateMachine::describe() const {
  std::vector<std::string> parts;
  for (const NodeView& v : nodes()) {
    std::string text = fmt::format("{}:{} {}", v.nodeId, v.slots, toString(v.status));
    if (v.status == NodeStatus::Member) {
      const NodeAssignment a = current_->nodes[*memberIndex(v.nodeId)];
      text += fmt::format(" rank {} ({} worker(s))", a.nodeRank, a.localWorldSize);
    }
    parts.push_back(std::move(text));
  }
  std::string world = "none";
  if (current_) {
    world = fmt::format("{} GPUs (batch {} = micro {} x gas {} x dp {})", current_->worldSize,
                        current_->batch.trainBatchSize, current_->batch.microBatchPerGpu,
                        current_->batch.gradientAccumulation, current_->dataParallelSize);
  }
  return fmt::format("phase={} generation={} world={} restarts={}/{} now={} nodes=[{}]",
                     toString(phase_), generation_, world, restartCount_, config_.maxRestarts,
                     formatDuration(now_), fmt::join(parts, "; "));
}

}  // namespace stretch::agent
