#include "sim/job_sim.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <memory>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "runtime/agent/state_machine.hpp"
#include "runtime/common/check.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/overloaded.hpp"
#include "sim/failure_model.hpp"
#include "sim/random.hpp"
#include "sim/sim_workers.hpp"
#include "sim/step_model.hpp"

namespace stretch::sim {

namespace {

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
constexpr std::size_t kMaxNotes = 20;

enum class Ev : std::uint8_t {
  Failure,
  Preemption,
  NodeBack,
  Scale,
  Tick,
  Productive,
  Boundary,
  SaveDone,
  Micro,
  Bucket,
  Horizon,
};

struct Payload {
  Ev kind = Ev::Tick;
  std::uint64_t token = 0;
  std::int64_t arg = 0;
};

enum class NodeStatus : std::uint8_t {
  Unused,     // not joined yet (scale-up capacity, scripted joins)
  InJob,      // joined to the agent (member, spare or waiting there)
  SparePool,  // the scheduler's spare, outside the job
  Repair,     // failed, back after its repair time
  Preempted,  // taken by the spot market, back after the return time
  Away,       // left by a scale event or the script; may join again
  Dead,       // failed for good
};

enum class Phase : std::uint8_t { Idle, Starting, Computing, Saving, Finishing };

struct Progress {
  std::int64_t step = 0;
  std::int64_t samples = 0;
  SimTime useful = 0;
};

struct Node {
  std::string id;
  std::int64_t slots = 0;
  NodeStatus status = NodeStatus::Unused;
  std::uint64_t epoch = 0;  // bumped on every status change: stale NodeBack events are ignored
};

// A failure-like process and the event that stands for its next strike.
struct ProcessSlot {
  std::unique_ptr<FailureProcess> process;
  Ev kind = Ev::Failure;
  std::uint64_t token = 0;
  bool scheduled = false;
  SimTime time = 0;
};

std::int64_t ceilDiv(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

class Simulation {
 public:
  Simulation(const Scenario& scenario, const RunOptions& options)
      : s_(scenario),
        opt_(options),
        machine_(makeAgentConfig(scenario)),
        group_(0, nullptr),
        causes_(scenario.failures.causes,
                deriveSeed(scenario.seed, options.replica,
                           static_cast<std::uint64_t>(RandomStream::Causes))),
        workerRng_(deriveSeed(scenario.seed, options.replica,
                              static_cast<std::uint64_t>(RandomStream::Workers))) {
    buildNodes();
    group_ = SimWorkerGroup(static_cast<std::int64_t>(nodes_.size()),
                            [this](const std::string& id) { return indexOf(id); });
    buildProcesses();
    monitorNs_ = std::max<SimTime>(1, secondsToNanos(s_.agent.monitorIntervalSeconds));
    lastCallNs_ = secondsToNanos(s_.agent.lastCallSeconds);
    waitTimeoutNs_ = secondsToNanos(s_.agent.waitTimeoutSeconds);
    startupNs_ = secondsToNanos(s_.job.restartOverheadSeconds);
    loadNs_ = secondsToNanos(s_.job.checkpoint.loadSeconds);
    saveNs_ = secondsToNanos(s_.job.checkpoint.saveSeconds);
    horizonNs_ = s_.job.horizonHours ? hoursToNanos(*s_.job.horizonHours) : kNever;
    limitNs_ = std::min(horizonNs_, hoursToNanos(kMaxSimulatedHours));
  }

  RunResult run() {
    const auto wallStart = std::chrono::steady_clock::now();
    if (horizonNs_ != kNever) {
      sched_.schedule(horizonNs_, Payload{Ev::Horizon, 0, 0});
    }
    for (std::size_t i = 0; i < s_.scaleEvents.size(); ++i) {
      sched_.schedule(hoursToNanos(s_.scaleEvents[i].atHours),
                      Payload{Ev::Scale, 0, static_cast<std::int64_t>(i)});
    }
    worldSince_ = 0;
    idleSince_ = 0;
    // The cluster's nodes join at t = 0 (spares wait in the scheduler's pool).
    for (std::int64_t i = 0; i < s_.cluster.nodes && !done_; ++i) {
      addToJob(i);
    }
    syncProcesses();

    std::uint64_t sinceProgress = 0;
    while (!done_) {
      if (sched_.empty()) {
        finishRun(Outcome::Stalled, fmt::format("nothing left to happen: {}", machine_.describe()));
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
        syncProcesses();
      }
      if (opt_.progress && ++sinceProgress >= (1u << 16)) {
        sinceProgress = 0;
        opt_.progress(fractionDone());
      }
    }
    result_.events = sched_.popped();
    result_.simulatedNs = now_;
    result_.usefulNs = progress_.useful;
    result_.lostNs = computeNs_ - progress_.useful;
    result_.steps = progress_.step;
    result_.samples = progress_.samples;
    result_.restarts = machine_.restartCount();
    result_.generations = machine_.generation();
    result_.wallSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wallStart).count();
    result_.agentWallSeconds = std::chrono::duration<double>(agentWall_).count();
    STRETCH_CHECK_EQ(result_.usefulNs + result_.lostNs + result_.checkpointNs + result_.startupNs +
                         result_.idleNs,
                     result_.simulatedNs, "time accounting");
    return std::move(result_);
  }

 private:
  // ---- setup ------------------------------------------------------------------------------

  static agent::AgentConfig makeAgentConfig(const Scenario& s) {
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

  std::string freshName(std::int64_t index) {
    std::string name = fmt::format("n{}", index);
    while (indexOf_.contains(name)) {
      name += "_";
    }
    return name;
  }

  std::int64_t addNode(std::string id, std::int64_t slots, NodeStatus status) {
    const auto index = static_cast<std::int64_t>(nodes_.size());
    indexOf_.emplace(id, index);
    nodes_.push_back(Node{std::move(id), slots, status, 0});
    return index;
  }

  void buildNodes() {
    const std::int64_t g = s_.cluster.gpusPerNode;
    for (std::int64_t i = 0; i < s_.cluster.nodes; ++i) {
      addNode(
          s_.nodeNames.empty() ? fmt::format("n{}", i) : s_.nodeNames[static_cast<std::size_t>(i)],
          g, NodeStatus::Unused);
    }
    if (s_.failures.replacement == ReplacementKind::Spares) {
      for (std::int64_t i = 0; i < s_.failures.spares; ++i) {
        const auto n =
            addNode(freshName(static_cast<std::int64_t>(nodes_.size())), g, NodeStatus::SparePool);
        spares_.push_back(n);
      }
    }
    for (const ScaleEvent& e : s_.scaleEvents) {
      if (e.kind != ScaleKind::Join) {
        continue;
      }
      for (std::int64_t i = 0; i < e.nodes; ++i) {
        unused_.push_back(
            addNode(freshName(static_cast<std::int64_t>(nodes_.size())), g, NodeStatus::Unused));
      }
    }
    for (std::size_t i = 0; i < s_.script.size(); ++i) {
      const ScriptEvent& e = s_.script[i];
      if (e.kind == ScriptKind::Join && !indexOf_.contains(e.node)) {
        addNode(e.node, e.slots > 0 ? e.slots : g, NodeStatus::Unused);
      } else if (e.kind == ScriptKind::Leave && !indexOf_.contains(e.node)) {
        throw ConfigError(ErrorDetail{fmt::format("script[{}].node", i), e.node,
                                      "a node of the cluster or one a script join adds"});
      }
    }
    targetNodes_ = s_.cluster.nodes;
  }

  void buildProcesses() {
    const auto count = static_cast<std::int64_t>(nodes_.size());
    const FailureSpec& f = s_.failures;
    const auto failureSeed =
        deriveSeed(s_.seed, opt_.replica, static_cast<std::uint64_t>(RandomStream::Failures));
    switch (f.model) {
      case FailureModelKind::None:
        break;
      case FailureModelKind::Exponential:
        failures_.process = makeExponentialProcess(count, f.nodeMtbfHours, failureSeed);
        break;
      case FailureModelKind::Weibull:
        failures_.process = makeWeibullProcess(count, f.nodeMtbfHours, f.shape, failureSeed);
        break;
      case FailureModelKind::Trace: {
        std::vector<FailureStrike> strikes;
        for (std::size_t i = 0; i < f.trace.size(); ++i) {
          const TraceFailure& t = f.trace[i];
          FailureStrike strike;
          strike.time = hoursToNanos(t.atHours);
          strike.node = resolveTraceNode(t.node, i);
          if (!t.cause.empty()) {
            strike.cause = causes_.find(t.cause);
            if (!strike.cause && !f.causes.empty()) {
              note(
                  fmt::format("trace cause \"{}\" is not in the cause table: treated as a "
                              "hardware failure",
                              t.cause));
            }
          }
          strike.repairHours = t.repairHours;
          strikes.push_back(strike);
        }
        failures_.process = makeTraceProcess(std::move(strikes));
        break;
      }
    }
    failures_.kind = Ev::Failure;
    if (s_.spot) {
      preemptions_.process = makeExponentialProcess(
          count, s_.spot->nodeMeanHoursBetweenPreemptions,
          deriveSeed(s_.seed, opt_.replica, static_cast<std::uint64_t>(RandomStream::Preemptions)));
      preemptions_.kind = Ev::Preemption;
    }
  }

  std::int64_t resolveTraceNode(const std::string& node, std::size_t i) const {
    if (const auto it = indexOf_.find(node); it != indexOf_.end()) {
      return it->second;
    }
    const bool digits =
        !node.empty() && node.size() < 12 &&
        std::all_of(node.begin(), node.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) {
      const auto index = std::stoll(node);
      if (index < static_cast<std::int64_t>(nodes_.size())) {
        return index;
      }
    }
    throw ConfigError(
        ErrorDetail{fmt::format("failures.events[{}].node", i), node,
                    fmt::format("a node id of the run ({} ... {}) or an index below {}",
                                nodes_.front().id, nodes_.back().id, nodes_.size())});
  }

  std::int64_t indexOf(const std::string& id) const {
    const auto it = indexOf_.find(id);
    return it == indexOf_.end() ? -1 : it->second;
  }

  void note(std::string text) {
    if (result_.notes.size() < kMaxNotes) {
      result_.notes.push_back(std::move(text));
    }
  }

  // ---- the event loop ---------------------------------------------------------------------

  void dispatch(const Payload& p) {
    switch (p.kind) {
      case Ev::Failure:
        if (p.token == failures_.token) {
          failures_.scheduled = false;
          onStrike(failures_, /*preemption=*/false);
        }
        break;
      case Ev::Preemption:
        if (p.token == preemptions_.token) {
          preemptions_.scheduled = false;
          onStrike(preemptions_, /*preemption=*/true);
        }
        break;
      case Ev::NodeBack:
        onNodeBack(p.arg, p.token);
        break;
      case Ev::Scale:
        onScale(s_.scaleEvents[static_cast<std::size_t>(p.arg)]);
        break;
      case Ev::Tick:
        ticks_.erase(now_);
        feed(agent::Tick{}, /*tick=*/true);
        break;
      case Ev::Productive:
        if (p.token == workEpoch_) {
          onProductive();
        }
        break;
      case Ev::Boundary:
        if (p.token == workEpoch_) {
          settleTo(boundaryStep_);
          boundaryReached();
        }
        break;
      case Ev::SaveDone:
        if (p.token == workEpoch_) {
          completeSave();
        }
        break;
      case Ev::Micro:
        if (p.token == workEpoch_) {
          onMicro(p.arg);
        }
        break;
      case Ev::Bucket:
        if (p.token == workEpoch_) {
          onBucket(p.arg);
        }
        break;
      case Ev::Horizon:
        finishRun(Outcome::Horizon, "");
        break;
    }
  }

  // Keeps one scheduled event per process at its next strike.
  void syncProcesses() {
    syncProcess(failures_);
    syncProcess(preemptions_);
  }
  void syncProcess(ProcessSlot& slot) {
    if (!slot.process) {
      return;
    }
    const auto next = slot.process->peek();
    if (!next) {
      if (slot.scheduled) {
        ++slot.token;
        slot.scheduled = false;
      }
      return;
    }
    if (slot.scheduled && slot.time == next->time) {
      return;
    }
    ++slot.token;
    slot.scheduled = true;
    slot.time = std::max(next->time, now_);
    sched_.schedule(slot.time, Payload{slot.kind, slot.token, 0});
  }

  double fractionDone() const {
    if (horizonNs_ != kNever) {
      return std::min(1.0, static_cast<double>(now_) / static_cast<double>(horizonNs_));
    }
    if (s_.job.totalSamples) {
      return std::min(
          1.0, static_cast<double>(progress_.samples) / static_cast<double>(*s_.job.totalSamples));
    }
    if (s_.job.totalSteps) {
      return std::min(
          1.0, static_cast<double>(progress_.step) / static_cast<double>(*s_.job.totalSteps));
    }
    return 0.0;
  }

  // ---- the agent --------------------------------------------------------------------------

  void feed(const agent::Event& event, bool tick = false) {
    if (done_) {
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<agent::Action> actions = machine_.handle(agent::Time(now_), event);
    agentWall_ += std::chrono::steady_clock::now() - t0;
    ++result_.agentEvents;
    for (const agent::Action& action : actions) {
      execute(action);
      if (done_) {
        return;
      }
    }
    if (!tick) {
      // The machine acts on deadlines only when an event comes; the real agent ticks every
      // monitor interval. Ticks are scheduled at the first monitor tick at or after each
      // deadline this event may have started (last call, wait timeout).
      if (machine_.phase() == agent::Phase::Rendezvous) {
        addTick(now_ + lastCallNs_);
        addTick(now_ + waitTimeoutNs_);
      } else if (std::holds_alternative<agent::NodeJoined>(event)) {
        addTick(now_ + lastCallNs_);
      }
    }
  }

  void addTick(SimTime t) {
    const SimTime at = ceilDiv(t, monitorNs_) * monitorNs_;
    if (at > limitNs_ || !ticks_.insert(at).second) {
      return;
    }
    sched_.schedule(at, Payload{Ev::Tick, 0, 0});
  }

  void deliverExits() {
    for (const agent::WorkerExited& e : group_.poll()) {
      feed(e);
      if (done_) {
        return;
      }
    }
  }

  void execute(const agent::Action& action) {
    std::optional<std::int64_t> resume;
    if (std::holds_alternative<agent::StartWorkers>(action) && hasCheckpoint_) {
      resume = checkpoint_.step;
    }
    if (opt_.eventLog != nullptr) {
      opt_.eventLog->write(action, agent::Time(now_), resume);
    }
    if (opt_.timeline != nullptr) {
      const agent::EventRecord r = agent::recordOf(action, agent::Time(now_), resume);
      emit(TimelineKind::Agent, now_, 0, r.event, r.reason);
    }
    std::visit(Overloaded{
                   [&](const agent::StartWorkers& a) { startGeneration(a); },
                   [&](const agent::StopWorkers&) { stopGeneration(); },
                   [&](const agent::Wait&) {},
                   [&](const agent::Finish&) { finishRun(Outcome::Finished, ""); },
                   [&](const agent::Fail& f) { finishRun(Outcome::Failed, f.message); },
                   [&](const agent::LogEvent&) {},
               },
               action);
  }

  // ---- nodes ------------------------------------------------------------------------------

  std::int64_t jobNodes() const { return static_cast<std::int64_t>(inJob_.size()); }

  void setStatus(std::int64_t node, NodeStatus status) {
    Node& n = nodes_[static_cast<std::size_t>(node)];
    const bool wasUp = n.status == NodeStatus::InJob;
    const bool up = status == NodeStatus::InJob;
    n.status = status;
    ++n.epoch;
    if (wasUp == up) {
      return;
    }
    for (ProcessSlot* slot : {&failures_, &preemptions_}) {
      if (slot->process) {
        if (up) {
          slot->process->nodeUp(node, now_);
        } else {
          slot->process->nodeDown(node, now_);
        }
      }
    }
    if (up) {
      inJob_.insert(node);
    } else {
      inJob_.erase(node);
    }
  }

  void addToJob(std::int64_t node) {
    setStatus(node, NodeStatus::InJob);
    const Node& n = nodes_[static_cast<std::size_t>(node)];
    feed(agent::NodeJoined{n.id, n.slots});
  }

  void removeFromJob(std::int64_t node, NodeStatus status, const std::string& reason) {
    setStatus(node, status);
    feed(agent::NodeLeft{nodes_[static_cast<std::size_t>(node)].id, reason});
  }

  // A node is lost (failure or preemption): a spare takes its place when the policy has one,
  // then it leaves; it comes back after `backHours` (never when unset).
  void loseNode(std::int64_t node, std::optional<double> backHours, NodeStatus status,
                const std::string& reason) {
    if (s_.failures.replacement == ReplacementKind::Spares && !spares_.empty()) {
      const std::int64_t spare = spares_.front();
      spares_.pop_front();
      addToJob(spare);
      if (done_) {
        return;
      }
    }
    removeFromJob(node, backHours ? status : NodeStatus::Dead, reason);
    if (backHours) {
      const Node& n = nodes_[static_cast<std::size_t>(node)];
      sched_.schedule(now_ + hoursToNanos(*backHours), Payload{Ev::NodeBack, n.epoch, node});
    }
  }

  void onNodeBack(std::int64_t node, std::uint64_t token) {
    const Node& n = nodes_[static_cast<std::size_t>(node)];
    if (n.epoch != token || (n.status != NodeStatus::Repair && n.status != NodeStatus::Preempted)) {
      return;
    }
    emit(TimelineKind::NodeReturn, now_, 0, fmt::format("{} back", n.id),
         n.status == NodeStatus::Repair ? "repaired" : "preemption over");
    if (jobNodes() < targetNodes_) {
      addToJob(node);
    } else if (s_.failures.replacement == ReplacementKind::Spares) {
      setStatus(node, NodeStatus::SparePool);
      spares_.push_back(node);
    } else {
      setStatus(node, NodeStatus::Away);
      away_.insert(node);
    }
  }

  void onStrike(ProcessSlot& slot, bool preemption) {
    const auto strike = slot.process->peek();
    if (!strike) {
      return;
    }
    slot.process->consume(now_);
    const std::int64_t node = strike->node;
    Node& n = nodes_[static_cast<std::size_t>(node)];
    if (n.status != NodeStatus::InJob) {
      ++result_.ignoredFailures;
      return;
    }
    if (preemption) {
      ++result_.preemptions;
      emit(TimelineKind::Preemption, now_, 0, fmt::format("{} preempted", n.id), "");
      loseNode(node, s_.spot->returnHours, NodeStatus::Preempted, "preempted");
      return;
    }
    ++result_.failures;
    const std::optional<std::size_t> cause = strike->cause ? strike->cause : causes_.sample();
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
    if (!nodeLost || s_.failures.replacement == ReplacementKind::Immediate) {
      // The workers on the node die; the node stays (software) or is swapped at once for an
      // identical one (immediate replacement), whose failure clock starts anew.
      slot.process->nodeRenewed(node, now_);
      if (const std::int64_t workers = group_.workersOn(node); workers > 0) {
        const auto local =
            static_cast<std::int64_t>(workerRng_.below(static_cast<std::uint64_t>(workers)));
        group_.exitWorker(node, local, 1);
        deliverExits();
      }
      return;
    }
    loseNode(node, repair, NodeStatus::Repair, fmt::format("failed: {}", causeName));
  }

  void onScale(const ScaleEvent& e) {
    if (e.kind == ScaleKind::Join) {
      std::int64_t joined = 0;
      for (std::int64_t i = 0; i < e.nodes && !done_; ++i) {
        std::int64_t node = -1;
        if (!away_.empty()) {
          node = *away_.begin();
          away_.erase(away_.begin());
        } else if (!unused_.empty()) {
          node = unused_.front();
          unused_.pop_front();
        } else {
          break;
        }
        ++targetNodes_;
        ++joined;
        emit(TimelineKind::Scale, now_, 0,
             fmt::format("{} joins", nodes_[static_cast<std::size_t>(node)].id), "scale event");
        addToJob(node);
      }
      if (joined < e.nodes) {
        note(fmt::format("scale join at {} h: {} of {} node(s) available", e.atHours, joined,
                         e.nodes));
      }
      return;
    }
    for (std::int64_t i = 0; i < e.nodes && !done_ && !inJob_.empty(); ++i) {
      const std::int64_t node = *inJob_.rbegin();
      targetNodes_ = std::max<std::int64_t>(0, targetNodes_ - 1);
      emit(TimelineKind::Scale, now_, 0,
           fmt::format("{} leaves", nodes_[static_cast<std::size_t>(node)].id), "scale event");
      away_.insert(node);
      removeFromJob(node, NodeStatus::Away, "scale down");
    }
  }

  void fireScript() {
    while (scriptNext_ < s_.script.size() && s_.script[scriptNext_].atStep <= progress_.step &&
           !done_) {
      const ScriptEvent& e = s_.script[scriptNext_++];
      ++result_.scriptFired;
      switch (e.kind) {
        case ScriptKind::KillWorker: {
          emit(TimelineKind::Script, now_, 0, fmt::format("kill rank {}", e.rank),
               fmt::format("at step {}", e.atStep));
          const auto where = group_.locate(e.rank);
          if (!where) {
            note(fmt::format("script: rank {} does not run at step {}; kill ignored", e.rank,
                             e.atStep));
            break;
          }
          group_.exitWorker(where->first, where->second, e.exitCode);
          deliverExits();
          break;
        }
        case ScriptKind::Leave: {
          const std::int64_t node = indexOf(e.node);
          emit(TimelineKind::Script, now_, 0, fmt::format("{} leaves", e.node),
               fmt::format("at step {}", e.atStep));
          if (nodes_[static_cast<std::size_t>(node)].status != NodeStatus::InJob) {
            note(fmt::format("script: node {} is not in the job at step {}; leave ignored", e.node,
                             e.atStep));
            break;
          }
          targetNodes_ = std::max<std::int64_t>(0, targetNodes_ - 1);
          away_.insert(node);
          removeFromJob(node, NodeStatus::Away, "left");
          break;
        }
        case ScriptKind::Join: {
          const std::int64_t node = indexOf(e.node);
          Node& n = nodes_[static_cast<std::size_t>(node)];
          emit(TimelineKind::Script, now_, 0, fmt::format("{} joins", e.node),
               fmt::format("at step {}", e.atStep));
          if (n.status == NodeStatus::InJob) {
            note(fmt::format("script: node {} is already in the job at step {}; join ignored",
                             e.node, e.atStep));
            break;
          }
          away_.erase(node);
          if (n.status == NodeStatus::SparePool) {
            spares_.erase(std::find(spares_.begin(), spares_.end(), node));
          }
          if (e.slots > 0) {
            n.slots = e.slots;
          }
          ++targetNodes_;
          addToJob(node);
          break;
        }
      }
    }
  }

  // ---- the job ----------------------------------------------------------------------------

  void setPhase(Phase phase) {
    const SimTime spent = now_ - phaseSince_;
    switch (phase_) {
      case Phase::Idle:
        result_.idleNs += spent;
        break;
      case Phase::Starting:
        result_.startupNs += spent;
        break;
      case Phase::Computing:
      case Phase::Finishing:
        computeNs_ += spent;
        break;
      case Phase::Saving:
        result_.checkpointNs += spent;
        break;
    }
    phase_ = phase;
    phaseSince_ = now_;
  }

  void closeWorldSpan() {
    if (now_ > worldSince_) {
      result_.worldSizeNs[group_.running() ? group_.worldSize() : 0] += now_ - worldSince_;
    }
    worldSince_ = now_;
  }

  const StepPlan& planFor(const agent::StartWorkers& a) {
    const auto key =
        std::make_pair(a.worldSize, a.batch.trainBatchSize * 1'000'003 + a.batch.microBatchPerGpu);
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      it =
          plans_
              .emplace(key, planStep(s_.job, s_.cluster, a.batch, a.dataParallelSize,
                                     a.dataParallelSize > 0 ? a.worldSize / a.dataParallelSize : 1))
              .first;
    }
    return it->second;
  }

  void startGeneration(const agent::StartWorkers& a) {
    if (opt_.timeline != nullptr && phase_ == Phase::Idle && now_ > idleSince_) {
      emit(TimelineKind::Idle, idleSince_, now_ - idleSince_, "no workers", "");
    }
    closeWorldSpan();
    group_.start(a);
    plan_ = &planFor(a);
    ++workEpoch_;
    setPhase(Phase::Starting);
    startedAt_ = now_;
    const SimTime startup = startupNs_ + (hasCheckpoint_ ? loadNs_ : 0);
    emit(TimelineKind::WorldSize, now_, 0, "world_size", "");
    sched_.schedule(now_ + startup, Payload{Ev::Productive, workEpoch_, 0});
  }

  void stopGeneration() {
    if (!group_.running()) {
      return;
    }
    switch (phase_) {
      case Phase::Computing:
        if (opt_.mode == SimMode::Aggregate) {
          settleAt(now_);
        }
        emitCompute(now_);
        break;
      case Phase::Saving:
        emit(TimelineKind::Checkpoint, saveStart_, now_ - saveStart_,
             fmt::format("save step {} (aborted)", progress_.step), "");
        break;
      case Phase::Starting:
        emit(TimelineKind::Startup, startedAt_, now_ - startedAt_, "startup (aborted)", "");
        break;
      default:
        break;
    }
    setPhase(Phase::Idle);
    idleSince_ = now_;
    closeWorldSpan();
    ++workEpoch_;
    ++result_.stops;
    // Everything since the latest completed checkpoint is lost.
    progress_ = hasCheckpoint_ ? checkpoint_ : Progress{};
    group_.stop();
    emit(TimelineKind::WorldSize, now_, 0, "world_size", "");
  }

  std::int64_t finalStep() const {
    std::int64_t last = kNever;
    if (s_.job.totalSteps) {
      last = *s_.job.totalSteps;
    }
    if (s_.job.totalSamples) {
      const std::int64_t remaining =
          std::max<std::int64_t>(0, *s_.job.totalSamples - progress_.samples);
      const std::int64_t per = std::max<std::int64_t>(1, plan_->samplesPerStep);
      last = std::min(last, progress_.step + ceilDiv(remaining, per));
    }
    return last;
  }

  // The first checkpoint step after step `after`.
  std::int64_t nextCheckpointStep(std::int64_t after) const {
    const CheckpointSpec& c = s_.job.checkpoint;
    if (c.everySteps) {
      return (after / *c.everySteps + 1) * *c.everySteps;
    }
    if (c.intervalMinutes) {
      const double steps = *c.intervalMinutes * 60.0 / nanosToSeconds(plan_->stepNs);
      const auto k =
          std::max<std::int64_t>(1, static_cast<std::int64_t>(std::llround(std::min(steps, 1e15))));
      return cadenceBase_ + k;
    }
    return kNever;
  }

  void onProductive() {
    emit(TimelineKind::Startup, startedAt_, now_ - startedAt_,
         hasCheckpoint_ ? fmt::format("startup, load step {}", checkpoint_.step) : "startup", "");
    setPhase(Phase::Computing);
    cadenceBase_ = progress_.step;
    finalStep_ = finalStep();
    if (progress_.step >= finalStep_) {
      finishJob();
      return;
    }
    continueAfterBoundary();
  }

  // Fires the script at this step, then goes on computing (unless the workers were stopped).
  void continueAfterBoundary() {
    const std::uint64_t epoch = workEpoch_;
    fireScript();
    if (done_ || epoch != workEpoch_) {
      return;
    }
    if (opt_.mode == SimMode::Aggregate) {
      scheduleBoundary();
    } else {
      startStep();
    }
  }

  void boundaryReached() {
    if (progress_.step >= finalStep_) {
      emitCompute(now_);
      finishJob();
      return;
    }
    if (progress_.step == nextCheckpointStep(progress_.step - 1)) {
      emitCompute(now_);
      beginSave();
      return;
    }
    if (opt_.mode == SimMode::Aggregate) {
      emitCompute(now_);
    }
    continueAfterBoundary();
  }

  void beginSave() {
    setPhase(Phase::Saving);
    saveStart_ = now_;
    if (saveNs_ == 0) {
      completeSave();
    } else {
      sched_.schedule(now_ + saveNs_, Payload{Ev::SaveDone, workEpoch_, 0});
    }
  }

  void completeSave() {
    emit(TimelineKind::Checkpoint, saveStart_, now_ - saveStart_,
         fmt::format("save step {}", progress_.step), "");
    setPhase(Phase::Computing);
    checkpoint_ = progress_;
    hasCheckpoint_ = true;
    ++result_.checkpoints;
    cadenceBase_ = progress_.step;
    continueAfterBoundary();
  }

  void finishJob() {
    setPhase(Phase::Finishing);
    group_.finishAll();
    deliverExits();
  }

  void finishRun(Outcome outcome, const std::string& message) {
    if (done_) {
      return;
    }
    if (phase_ == Phase::Computing) {
      if (opt_.mode == SimMode::Aggregate) {
        settleAt(now_);
      }
      emitCompute(now_);
    } else if (phase_ == Phase::Saving) {
      emit(TimelineKind::Checkpoint, saveStart_, now_ - saveStart_,
           fmt::format("save step {} (cut off)", progress_.step), "");
    } else if (phase_ == Phase::Starting) {
      emit(TimelineKind::Startup, startedAt_, now_ - startedAt_, "startup (cut off)", "");
    } else if (phase_ == Phase::Idle && now_ > idleSince_) {
      emit(TimelineKind::Idle, idleSince_, now_ - idleSince_, "no workers", "");
    }
    setPhase(Phase::Idle);
    closeWorldSpan();
    done_ = true;
    result_.outcome = outcome;
    result_.message = message;
  }

  // ---- aggregate mode: jump from boundary to boundary -------------------------------------

  void scheduleBoundary() {
    std::int64_t b = std::min(finalStep_, nextCheckpointStep(progress_.step));
    if (scriptNext_ < s_.script.size()) {
      b = std::min(b, s_.script[scriptNext_].atStep);
    }
    b = std::max(b, progress_.step);
    segStart_ = now_;
    segStep_ = progress_.step;
    boundaryStep_ = b;
    computeFrom_ = now_;
    computeFromStep_ = progress_.step;
    const std::int64_t steps = b - progress_.step;
    if (steps > (limitNs_ - now_) / plan_->stepNs) {
      return;  // no boundary before the run ends: the horizon or the limit settles the progress
    }
    sched_.schedule(now_ + steps * plan_->stepNs, Payload{Ev::Boundary, workEpoch_, 0});
  }

  void advanceSteps(std::int64_t n) {
    progress_.step += n;
    progress_.samples += n * plan_->samplesPerStep;
    progress_.useful += n * plan_->stepNs;
  }

  // Steps completed by `t` in the current segment (never past its boundary).
  void settleAt(SimTime t) {
    const std::int64_t done = std::min((t - segStart_) / plan_->stepNs, boundaryStep_ - segStep_);
    advanceSteps(done);
    segStart_ += done * plan_->stepNs;
    segStep_ += done;
  }
  void settleTo(std::int64_t step) {
    advanceSteps(step - segStep_);
    segStep_ = step;
    segStart_ = now_;
  }

  void emitCompute(SimTime end) {
    if (opt_.timeline == nullptr || opt_.mode == SimMode::StepLevel || end <= computeFrom_) {
      computeFrom_ = end;
      computeFromStep_ = progress_.step;
      return;
    }
    emit(TimelineKind::Compute, computeFrom_, end - computeFrom_,
         fmt::format("steps {}-{}", computeFromStep_, progress_.step),
         fmt::format("{:.6f} s/step", nanosToSeconds(plan_->stepNs)));
    computeFrom_ = end;
    computeFromStep_ = progress_.step;
  }

  // ---- step-level mode: every micro step and bucket -----------------------------------------

  void startStep() {
    stepStart_ = now_;
    if (plan_->gas > 1) {
      sched_.schedule(now_ + plan_->microNs, Payload{Ev::Micro, workEpoch_, 1});
    } else {
      beginLastMicro();
    }
  }

  void onMicro(std::int64_t index) {
    emit(TimelineKind::MicroStep, now_ - plan_->microNs, plan_->microNs,
         fmt::format("micro {}", index), "");
    if (index + 1 < plan_->gas) {
      sched_.schedule(now_ + plan_->microNs, Payload{Ev::Micro, workEpoch_, index + 1});
    } else {
      beginLastMicro();
    }
  }

  void beginLastMicro() {
    lastMicroStart_ = now_;
    if (plan_->buckets == 0) {
      sched_.schedule(now_ + plan_->microNs, Payload{Ev::Bucket, workEpoch_, 0});
    } else {
      sched_.schedule(now_ + plan_->bucketEnd(1, 0), Payload{Ev::Bucket, workEpoch_, 1});
    }
  }

  void onBucket(std::int64_t j) {
    if (j > 0) {
      emit(TimelineKind::Collective, now_ - plan_->bucketNs, plan_->bucketNs,
           fmt::format("all_reduce bucket {}/{}", j, plan_->buckets),
           fmt::format("{} bytes, {:.1f} GB/s busbw", plan_->bucketBytes,
                       plan_->bucketCost.busbwGBps));
      const SimTime previous = now_ - lastMicroStart_;
      if (j < plan_->buckets) {
        sched_.schedule(lastMicroStart_ + plan_->bucketEnd(j + 1, previous),
                        Payload{Ev::Bucket, workEpoch_, j + 1});
        return;
      }
      const SimTime end = lastMicroStart_ + std::max(previous, plan_->microNs);
      if (end > now_) {
        sched_.schedule(end, Payload{Ev::Bucket, workEpoch_, 0});
        return;
      }
    }
    emit(TimelineKind::MicroStep, lastMicroStart_, plan_->microNs,
         fmt::format("micro {}", plan_->gas), "");
    STRETCH_CHECK_EQ(now_ - stepStart_, plan_->stepNs, "step-level step time vs the plan");
    advanceSteps(1);
    boundaryReached();
  }

  // ---- timeline ---------------------------------------------------------------------------

  void emit(TimelineKind kind, SimTime time, SimTime duration, std::string name,
            std::string detail) {
    if (opt_.timeline == nullptr) {
      return;
    }
    TimelineRecord r;
    r.time = time;
    r.duration = duration;
    r.kind = kind;
    r.generation = group_.running() ? group_.generation() : machine_.generation();
    r.worldSize = group_.running() ? group_.worldSize() : 0;
    r.step = progress_.step;
    r.name = std::move(name);
    r.detail = std::move(detail);
    opt_.timeline->record(r);
  }

  const Scenario& s_;
  const RunOptions& opt_;
  agent::AgentStateMachine machine_;
  SimWorkerGroup group_;
  CauseSampler causes_;
  Rng workerRng_;
  Scheduler<Payload> sched_;
  RunResult result_;

  std::vector<Node> nodes_;
  std::unordered_map<std::string, std::int64_t> indexOf_;
  std::set<std::int64_t> inJob_;
  std::set<std::int64_t> away_;
  std::deque<std::int64_t> spares_;
  std::deque<std::int64_t> unused_;
  std::int64_t targetNodes_ = 0;
  ProcessSlot failures_;
  ProcessSlot preemptions_;
  std::set<SimTime> ticks_;

  SimTime monitorNs_ = 1;
  SimTime lastCallNs_ = 0;
  SimTime waitTimeoutNs_ = 0;
  SimTime startupNs_ = 0;
  SimTime loadNs_ = 0;
  SimTime saveNs_ = 0;
  SimTime horizonNs_ = kNever;
  SimTime limitNs_ = kNever;

  SimTime now_ = 0;
  bool done_ = false;
  std::chrono::steady_clock::duration agentWall_{};
  Phase phase_ = Phase::Idle;
  SimTime phaseSince_ = 0;
  SimTime computeNs_ = 0;
  SimTime worldSince_ = 0;
  SimTime idleSince_ = 0;
  SimTime startedAt_ = 0;
  SimTime saveStart_ = 0;

  std::map<std::pair<std::int64_t, std::int64_t>, StepPlan> plans_;
  const StepPlan* plan_ = nullptr;
  std::uint64_t workEpoch_ = 0;
  Progress progress_;
  Progress checkpoint_;
  bool hasCheckpoint_ = false;
  std::int64_t cadenceBase_ = 0;
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
};

}  // namespace

std::string_view toString(Outcome outcome) noexcept {
  switch (outcome) {
    case Outcome::Finished:
      return "finished";
    case Outcome::Failed:
      return "failed";
    case Outcome::Horizon:
      return "horizon";
    case Outcome::Stalled:
      return "stalled";
    case Outcome::TimeLimit:
      return "time_limit";
  }
  return "?";
}

RunResult simulate(const Scenario& scenario, const RunOptions& options) {
  Simulation simulation(scenario, options);
  return simulation.run();
}

}  // namespace stretch::sim
