// What happens to nodes: failures, preemptions, returns from repair, scale events and the fault
// script (sim/detail/simulation.hpp).

#include <algorithm>

#include <fmt/format.h>

#include "runtime/common/check.hpp"
#include "sim/detail/simulation.hpp"

namespace stretch::sim::detail {

void Simulation::setStatus(std::int64_t node, NodeStatus status) {
  if (nodes_.setStatus(node, status)) {
    strikes_.nodeUpOrDown(node, status == NodeStatus::InJob, now_);
  }
}

void Simulation::addToJob(std::int64_t node) {
  setStatus(node, NodeStatus::InJob);
  const Node& n = nodes_[node];
  feed(agent::NodeJoined{n.id, n.slots});
}

void Simulation::removeFromJob(std::int64_t node, NodeStatus status, const std::string& reason) {
  markAffected(node);
  setStatus(node, status);
  feed(agent::NodeLeft{nodes_[node].id, reason});
}

// A node is lost (failure or preemption): a spare takes its place when the policy has one,
// then it leaves; it comes back after `backHours` (never when unset).
void Simulation::loseNode(std::int64_t node, std::optional<double> backHours, NodeStatus status,
                          const std::string& reason) {
  if (s_.failures.replacement == ReplacementKind::Spares) {
    if (const auto spare = nodes_.takeSpare()) {
      addToJob(*spare);
      if (done_) {
        return;
      }
    }
  }
  removeFromJob(node, backHours ? status : NodeStatus::Dead, reason);
  if (backHours) {
    const Node& n = nodes_[node];
    sched_.schedule(now_ + hoursToNanos(*backHours), Payload{Ev::NodeBack, n.epoch, node});
  }
}

void Simulation::onNodeBack(std::int64_t node, std::uint64_t token) {
  const Node& n = nodes_[node];
  if (n.epoch != token || (n.status != NodeStatus::Repair && n.status != NodeStatus::Preempted)) {
    return;
  }
  emit(TimelineKind::NodeReturn, now_, 0, fmt::format("{} back", n.id),
       n.status == NodeStatus::Repair ? "repaired" : "preemption over");
  if (nodes_.jobNodes() < nodes_.targetNodes()) {
    addToJob(node);
  } else if (s_.failures.replacement == ReplacementKind::Spares) {
    setStatus(node, NodeStatus::SparePool);
    nodes_.addSpare(node);
  } else {
    setStatus(node, NodeStatus::Away);
    nodes_.sendAway(node);
  }
}

void Simulation::onStrike(ProcessSlot& slot, bool preemption) {
  const auto strike = slot.process->peek();
  if (!strike) {
    return;
  }
  slot.process->consume(now_);
  const std::int64_t node = strike->node;
  const Node& n = nodes_[node];
  RunResult& counts = metrics_.result();
  if (n.status != NodeStatus::InJob || silent_.contains(node)) {
    ++counts.ignoredFailures;
    return;
  }
  if (preemption) {
    ++counts.preemptions;
    emit(TimelineKind::Preemption, now_, 0, fmt::format("{} preempted", n.id), "");
    loseNode(node, s_.spot->returnHours, NodeStatus::Preempted, "preempted");
    return;
  }
  ++counts.failures;
  const std::optional<std::size_t> cause = strike->cause ? strike->cause : strikes_.sampleCause();
  const FailureCause* c = cause ? &s_.failures.causes[*cause] : nullptr;
  const bool nodeLost = c == nullptr || c->nodeLost;
  std::optional<double> repair = strike->repairHours;
  if (!repair && c != nullptr) {
    repair = c->repairHours;
  }
  if (!repair) {
    repair = s_.failures.repairHours;
  }
  const std::string causeName = c != nullptr ? c->name : "failure";
  emit(TimelineKind::Failure, now_, 0, fmt::format("{} on {}", causeName, n.id),
       nodeLost ? "node lost" : "workers killed");
  // A node that is lost stops answering: the agent hears of it only after the keep-alive
  // timeout (failure_detection_seconds). A software failure's processes exit, which the agent
  // sees at once.
  const SimTime detection =
      nodeLost ? secondsToNanos(s_.job.failureDetectionSeconds.at(nodes_.jobNodes())) : 0;
  if (detection > 0) {
    // Its workers' state is gone now; the generation that runs on it blocks in its collectives.
    markAffected(node);
    silent_.emplace(node, SilentFailure{repair, causeName});
    if (group_.running() && group_.workersOn(node) > 0) {
      hang();
    }
    sched_.schedule(now_ + detection, Payload{Ev::Detected, 0, node});
    return;
  }
  nodeFailed(node, nodeLost, repair, causeName);
}

void Simulation::nodeFailed(std::int64_t node, bool nodeLost, std::optional<double> repairHours,
                            const std::string& causeName) {
  if (!nodeLost || s_.failures.replacement == ReplacementKind::Immediate) {
    // The workers on the node die; the node stays (software) or is swapped at once for an
    // identical one (immediate replacement), whose failure clock starts anew.
    strikes_.failures().process->nodeRenewed(node, now_);
    if (const std::int64_t workers = group_.workersOn(node); workers > 0) {
      const std::int64_t victim = strikes_.pickWorker(workers);
      // A software failure kills one worker (its node's others survive); a node swapped at once
      // takes every worker's state with it.
      markAffected(node, nodeLost ? kWholeNode : victim);
      group_.exitWorker(node, victim, 1);
      deliverExits();
    }
    return;
  }
  loseNode(node, repairHours, NodeStatus::Repair, fmt::format("failed: {}", causeName));
}

void Simulation::onDetected(std::int64_t node) {
  const auto it = silent_.find(node);
  if (it == silent_.end()) {
    return;
  }
  const SilentFailure failure = it->second;
  silent_.erase(it);
  if (nodes_[node].status != NodeStatus::InJob) {
    return;  // it left the job meanwhile (a scale-down, the script)
  }
  nodeFailed(node, /*nodeLost=*/true, failure.repairHours, failure.cause);
  // The agent stops a generation when a node it runs on leaves or a worker of it fails.
  STRETCH_CHECK(done_ || !hung_ || runsOnSilentNode(),
                "generation {} still blocks after the failure of {} reached the agent",
                group_.generation(), nodes_[node].id);
}

bool Simulation::runsOnSilentNode() const {
  if (!group_.running()) {
    return false;
  }
  return std::any_of(silent_.begin(), silent_.end(),
                     [&](const auto& entry) { return group_.workersOn(entry.first) > 0; });
}

void Simulation::onScale(const ScaleEvent& e) {
  if (e.kind == ScaleKind::Join) {
    std::int64_t joined = 0;
    for (std::int64_t i = 0; i < e.nodes && !done_; ++i) {
      const auto node = nodes_.takeJoinable();
      if (!node) {
        break;
      }
      nodes_.raiseTarget();
      ++joined;
      emit(TimelineKind::Scale, now_, 0, fmt::format("{} joins", nodes_[*node].id), "scale event");
      addToJob(*node);
    }
    if (joined < e.nodes) {
      metrics_.note(fmt::format("scale join at {} h: {} of {} node(s) available", e.atHours, joined,
                                e.nodes));
    }
    return;
  }
  for (std::int64_t i = 0; i < e.nodes && !done_ && !nodes_.inJob().empty(); ++i) {
    const std::int64_t node = *nodes_.inJob().rbegin();
    nodes_.lowerTarget();
    emit(TimelineKind::Scale, now_, 0, fmt::format("{} leaves", nodes_[node].id), "scale event");
    nodes_.sendAway(node);
    removeFromJob(node, NodeStatus::Away, "scale down");
  }
}

void Simulation::fireScript() {
  while (scriptNext_ < s_.script.size() && s_.script[scriptNext_].atStep <= progress_.step &&
         !done_) {
    const ScriptEvent& e = s_.script[scriptNext_++];
    ++metrics_.result().scriptFired;
    switch (e.kind) {
      case ScriptKind::KillWorker: {
        emit(TimelineKind::Script, now_, 0, fmt::format("kill rank {}", e.rank),
             fmt::format("at step {}", e.atStep));
        const auto where = group_.locate(e.rank);
        if (!where) {
          metrics_.note(fmt::format("script: rank {} does not run at step {}; kill ignored", e.rank,
                                    e.atStep));
          break;
        }
        markAffected(where->first, where->second);
        group_.exitWorker(where->first, where->second, e.exitCode);
        deliverExits();
        break;
      }
      case ScriptKind::Leave: {
        const std::int64_t node = nodes_.indexOf(e.node);
        emit(TimelineKind::Script, now_, 0, fmt::format("{} leaves", e.node),
             fmt::format("at step {}", e.atStep));
        if (nodes_[node].status != NodeStatus::InJob) {
          metrics_.note(fmt::format("script: node {} is not in the job at step {}; leave ignored",
                                    e.node, e.atStep));
          break;
        }
        nodes_.lowerTarget();
        nodes_.sendAway(node);
        removeFromJob(node, NodeStatus::Away, "left");
        break;
      }
      case ScriptKind::Join: {
        const std::int64_t node = nodes_.indexOf(e.node);
        Node& n = nodes_[node];
        emit(TimelineKind::Script, now_, 0, fmt::format("{} joins", e.node),
             fmt::format("at step {}", e.atStep));
        if (n.status == NodeStatus::InJob) {
          metrics_.note(fmt::format(
              "script: node {} is already in the job at step {}; join ignored", e.node, e.atStep));
          break;
        }
        nodes_.reclaim(node);
        if (e.slots > 0) {
          n.slots = e.slots;
        }
        nodes_.raiseTarget();
        addToJob(node);
        break;
      }
    }
  }
}

}  // namespace stretch::sim::detail
