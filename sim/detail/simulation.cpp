// The event loop, the dispatch of every event, and the agent (sim/detail/simulation.hpp).

#include "sim/detail/simulation.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "runtime/common/overloaded.hpp"

namespace stretch::sim::detail {

Simulation::Simulation(const Scenario& scenario, const RunOptions& options)
    : s_(scenario),
      opt_(options),
      driver_(makeAgentConfig(scenario), agent::Time(0), scenario.job.recovery.live),
      metrics_(options.timeline),
      nodes_(scenario),
      group_(SimWorkerGroup::Directory{
                 [this](const std::string& id) { return nodes_.indexOf(id); },
                 [this](std::int64_t node) -> const std::string& { return nodes_[node].id; },
                 [this](std::int64_t node) { return driver_.machine().nodeKey(nodes_[node].id); }},
             scenario.job.recovery.live,
             scenario.job.config.zero.stage == 1 || scenario.job.config.zero.stage == 2),
      strikes_(scenario, options.replica, nodes_, metrics_),
      checkpoints_(scenario.job.checkpoint) {
  monitorNs_ = std::max<SimTime>(1, secondsToNanos(s_.agent.monitorIntervalSeconds));
  lastCallNs_ = secondsToNanos(s_.agent.lastCallSeconds);
  waitTimeoutNs_ = secondsToNanos(s_.agent.waitTimeoutSeconds);
  // startupNs_ and reconfigureNs_ are set at each start, for its node count (execute).
  if (s_.job.recovery.live) {
    transferNs_ = secondsToNanos(stateTransferSeconds(s_));
  }
  horizonNs_ = s_.job.horizonHours ? hoursToNanos(*s_.job.horizonHours) : kNever;
  limitNs_ = std::min(horizonNs_, hoursToNanos(kMaxSimulatedHours));
}

RunResult Simulation::run() {
  const auto wallStart = std::chrono::steady_clock::now();
  if (horizonNs_ != kNever) {
    sched_.schedule(horizonNs_, Payload{Ev::Horizon, 0, 0});
  }
  for (std::size_t i = 0; i < s_.scaleEvents.size(); ++i) {
    sched_.schedule(hoursToNanos(s_.scaleEvents[i].atHours),
                    Payload{Ev::Scale, 0, static_cast<std::int64_t>(i)});
  }
  idleSince_ = 0;
  // The cluster's nodes join at t = 0 (spares wait in the scheduler's pool).
  for (std::int64_t i = 0; i < s_.cluster.nodes && !done_; ++i) {
    addToJob(i);
  }
  strikes_.sync(sched_, now_);

  std::uint64_t sinceProgress = 0;
  while (!done_) {
    if (sched_.empty()) {
      finishRun(Outcome::Stalled,
                fmt::format("nothing left to happen: {}", driver_.machine().describe()));
      break;
    }
    if (sched_.nextTime() > limitNs_) {
      now_ = limitNs_;
      finishRun(Outcome::TimeLimit,
                fmt::format("stopped at the simulator's limit of {} hours", kMaxSimulatedHours));
      break;
    }
    const auto event = sched_.pop();
    now_ = event.time;
    dispatch(event.payload);
    if (!done_) {
      strikes_.sync(sched_, now_);
    }
    if (opt_.progress && ++sinceProgress >= (1u << 16)) {
      sinceProgress = 0;
      opt_.progress(fractionDone());
    }
  }
  RunResult& r = metrics_.result();
  r.events = sched_.popped();
  r.restarts = driver_.machine().restartCount();
  r.generations = driver_.machine().generation();
  r.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wallStart).count();
  r.agentWallSeconds = std::chrono::duration<double>(agentWall_).count();
  return metrics_.finish(now_, progress_);
}

agent::AgentConfig Simulation::makeAgentConfig(const Scenario& s) {
  agent::AgentConfig c;
  std::int64_t joinable = s.cluster.nodes;
  for (const ScaleEvent& e : s.scaleEvents) {
    if (e.kind == ScaleKind::Join) {
      joinable += e.nodes;
    }
  }
  std::set<std::string> known(s.nodeNames.begin(), s.nodeNames.end());
  for (std::int64_t i = 0; s.nodeNames.empty() && i < s.cluster.nodes; ++i) {
    known.insert(fmt::format("n{}", i));
  }
  for (const ScriptEvent& e : s.script) {
    if (e.kind == ScriptKind::Join && known.insert(e.node).second) {
      ++joinable;
    }
  }
  c.minNodes = s.agent.minNodes.value_or(1);
  c.maxNodes = s.agent.maxNodes.value_or(std::max(joinable, c.minNodes));
  c.maxRestarts = s.agent.maxRestarts;
  c.training = s.job.config;
  c.modelParallelSize = s.job.modelParallelSize;
  c.selection = s.agent.selection;
  c.lastCall = agent::Duration(secondsToNanos(s.agent.lastCallSeconds));
  c.waitTimeout = agent::Duration(secondsToNanos(s.agent.waitTimeoutSeconds));
  return c;
}

void Simulation::dispatch(const Payload& p) {
  switch (p.kind) {
    case Ev::Failure:
    case Ev::Preemption: {
      const bool preemption = p.kind == Ev::Preemption;
      ProcessSlot& slot = preemption ? strikes_.preemptions() : strikes_.failures();
      if (p.token == slot.token) {
        slot.scheduled = false;
        onStrike(slot, preemption);
      }
      break;
    }
    case Ev::NodeBack:
      onNodeBack(p.arg, p.token);
      break;
    case Ev::Detected:
      onDetected(p.arg);
      break;
    case Ev::Scale:
      onScale(s_.scaleEvents[static_cast<std::size_t>(p.arg)]);
      break;
    case Ev::Tick:
      ticks_.erase(now_);
      feed(agent::Tick{}, /*tick=*/true);
      break;
    case Ev::Productive:
    case Ev::Boundary:
    case Ev::SaveDone:
    case Ev::Micro:
    case Ev::Bucket:
    case Ev::JoinersReady:
      // The work of a stopped generation never happens.
      if (p.token == workEpoch_) {
        dispatchWork(p);
      }
      break;
    case Ev::Horizon:
      finishRun(Outcome::Horizon, "");
      break;
  }
}

void Simulation::dispatchWork(const Payload& p) {
  switch (p.kind) {
    case Ev::Productive:
      onProductive();
      break;
    case Ev::Boundary:
      settleTo(boundaryStep_);
      boundaryReached();
      break;
    case Ev::SaveDone:
      completeSave();
      break;
    case Ev::Micro:
      onMicro(p.arg);
      break;
    case Ev::Bucket:
      onBucket(p.arg);
      break;
    case Ev::JoinersReady:
      onJoinersReady();
      break;
    default:
      break;
  }
}

double Simulation::fractionDone() const {
  if (horizonNs_ != kNever) {
    return std::min(1.0, static_cast<double>(now_) / static_cast<double>(horizonNs_));
  }
  if (s_.job.totalSamples) {
    return std::min(
        1.0, static_cast<double>(progress_.samples) / static_cast<double>(*s_.job.totalSamples));
  }
  if (s_.job.totalSteps) {
    return std::min(1.0,
                    static_cast<double>(progress_.step) / static_cast<double>(*s_.job.totalSteps));
  }
  return 0.0;
}

void Simulation::feed(const agent::Event& event, bool tick) {
  if (done_) {
    return;
  }
  // The driver asks the group who holds the state: a step completed by now counts.
  settleRing();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<agent::DriverStep> steps = driver_.handle(agent::Time(now_), event, group_);
  agentWall_ += std::chrono::steady_clock::now() - t0;
  ++metrics_.result().agentEvents;
  for (agent::DriverStep& step : steps) {
    execute(step);
    if (done_) {
      return;
    }
  }
  if (!tick) {
    // The machine acts on deadlines only when an event comes; the real agent ticks every
    // monitor interval. Ticks are scheduled at the first monitor tick at or after each
    // deadline this event may have started (last call, wait timeout).
    if (driver_.machine().phase() == agent::Phase::Rendezvous) {
      addTick(now_ + lastCallNs_);
      addTick(now_ + waitTimeoutNs_);
    } else if (std::holds_alternative<agent::NodeJoined>(event)) {
      addTick(now_ + lastCallNs_);
    }
  }
}

void Simulation::addTick(SimTime t) {
  const SimTime at = ceilDiv(t, monitorNs_) * monitorNs_;
  if (at > limitNs_ || !ticks_.insert(at).second) {
    return;
  }
  sched_.schedule(at, Payload{Ev::Tick, 0, 0});
}

void Simulation::deliverExits() {
  for (const agent::WorkerExited& e : group_.poll()) {
    feed(e);
    if (done_) {
      return;
    }
  }
}

void Simulation::execute(agent::DriverStep& step) {
  const agent::Action& action = step.action;
  if (opt_.eventLog != nullptr || metrics_.tracing()) {
    if (std::holds_alternative<agent::StartWorkers>(action)) {
      // The survivors' last completed step (survivors_ was taken at the stop), or the latest
      // checkpoint's.
      if (step.live && survivors_) {
        step.records.front().resumeStep = survivors_->step;
      } else if (checkpoints_.any()) {
        step.records.front().resumeStep = checkpoints_.latest().step;
      }
    }
    for (const agent::EventRecord& r : step.records) {
      if (opt_.eventLog != nullptr) {
        opt_.eventLog->write(r);
      }
      if (metrics_.tracing()) {
        emit(TimelineKind::Agent, now_, 0, r.event, r.reason);
      }
    }
  }
  std::visit(Overloaded{
                 [&](const agent::StartWorkers& a) {
                   // The start's costs at the node count of the generation it starts
                   // (job.restart_overhead_seconds and recovery.reconfigure_seconds may grow
                   // with the nodes; sim/node_cost.hpp).
                   const auto nodes = static_cast<std::int64_t>(a.nodes.size());
                   startupNs_ = secondsToNanos(s_.job.restartOverheadSeconds.at(nodes));
                   if (s_.job.recovery.live) {
                     reconfigureNs_ = secondsToNanos(s_.job.recovery.reconfigureSeconds.at(nodes));
                   }
                   startGeneration(a, step.live.get());
                 },
                 [&](const agent::StopWorkers&) { stopGeneration(step.live != nullptr); },
                 [&](const agent::Wait&) {},
                 [&](const agent::Finish&) { finishRun(Outcome::Finished, ""); },
                 [&](const agent::Fail& f) { finishRun(Outcome::Failed, f.message); },
                 [&](const agent::LogEvent&) {},
             },
             action);
}

void Simulation::emit(TimelineKind kind, SimTime time, SimTime duration, std::string name,
                      std::string detail) {
  if (!metrics_.tracing()) {
    return;
  }
  TimelineRecord r;
  r.time = time;
  r.duration = duration;
  r.kind = kind;
  r.generation = group_.running() ? group_.generation() : driver_.machine().generation();
  r.worldSize = worldSizeNow();
  r.step = progress_.step;
  r.name = std::move(name);
  r.detail = std::move(detail);
  metrics_.record(r);
}

}  // namespace stretch::sim::detail
