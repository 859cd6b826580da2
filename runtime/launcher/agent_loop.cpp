#include "runtime/launcher/agent_loop.hpp"

#include <cstring>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runtime/agent/event_log.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/launcher/process.hpp"

namespace stretch::launcher {

using namespace agent;

std::optional<std::int64_t> latestCheckpointStep(const std::filesystem::path& dir) {
  std::string tag;
  try {
    tag = readFile((dir / "latest").string(), "checkpoint tag", 4096);
  } catch (const IoError&) {
    return std::nullopt;  // missing, or not a file the engine would load either
  }
  tag.erase(0, tag.find_first_not_of(" \t\r\n"));
  tag.erase(tag.find_last_not_of(" \t\r\n") + 1);
  const std::string prefix = "global_step";
  if (tag.rfind(prefix, 0) != 0)
    return std::nullopt;
  try {
    return std::stoll(tag.substr(prefix.size()));
  } catch (...) {
    return std::nullopt;
  }
}

namespace {

std::unique_ptr<EventLog> openEventLog(const std::optional<std::filesystem::path>& path) {
  if (!path)
    return nullptr;
  std::error_code ec;
  if (path->has_parent_path())
    std::filesystem::create_directories(path->parent_path(), ec);
  auto log = std::make_unique<EventLog>(*path);
  // A launcher killed by SIGKILL writes nothing more: its orphan guard records the end.
  guardEventLog(path->string());
  return log;
}

// One run of the loop: the machine, the group, the event log and what the result collects.
class AgentLoop {
 public:
  AgentLoop(const AgentLoopOptions& options, WorkerGroup& workers)
      : options_(options),
        workers_(workers),
        log_(openEventLog(options.eventLog)),
        clock_(options.clock),
        machine_(options.config, clock_()) {}

  AgentResult run() {
    for (const Event& event : options_.initialEvents) {
      apply(event);
      if (done_)
        break;
    }
    const auto step = std::chrono::milliseconds(10);
    Time nextTick = clock_() + options_.monitorInterval;
    while (!done_) {
      if (options_.stopSignal != nullptr && options_.stopSignal->load() != 0) {
        interrupt(options_.stopSignal->load());
        break;
      }
      std::this_thread::sleep_for(step);
      // Exits are reaped every 10 ms (waitpid is cheap); the machine ticks every monitor
      // interval.
      for (const auto& exit : workers_.poll()) {
        apply(exit);
        if (done_)
          break;
      }
      if (!done_ && options_.nodeEvents) {
        for (const auto& event : options_.nodeEvents(clock_())) {
          apply(event);
          if (done_)
            break;
        }
      }
      if (!done_ && clock_() >= nextTick) {
        nextTick = clock_() + options_.monitorInterval;
        execute(machine_.tick(clock_()));
      }
    }
    workers_.stop();
    result_.restarts = machine_.restartCount();
    if (log_ && log_->lost() > 0) {
      result_.lostOutput.push_back(fmt::format("event log {}: cannot write: {}; {} record(s) lost",
                                               log_->path(), log_->error(), log_->lost()));
    }
    for (std::string& line : workers_.lostOutput())
      result_.lostOutput.push_back(std::move(line));
    return result_;
  }

 private:
  void apply(const Event& event) {
    if (const auto* exit = std::get_if<WorkerExited>(&event)) {
      if (exit->exitCode != 0 && exit->generation == machine_.generation() && !failureSeen_)
        failureSeen_ = clock_();
    } else if (std::holds_alternative<NodeLeft>(event) ||
               std::holds_alternative<HeartbeatLost>(event)) {
      if (!failureSeen_)
        failureSeen_ = clock_();
    }
    execute(machine_.handle(clock_(), event));
  }

  void execute(const std::vector<Action>& actions) {
    for (std::size_t index = 0; index < actions.size(); ++index) {
      const Action& action = actions[index];
      const Time now = clock_();
      if (const auto* start = std::get_if<StartWorkers>(&action)) {
        startWorkers(*start, now);
      } else if (const auto* stop = std::get_if<StopWorkers>(&action)) {
        const auto* next =
            index + 1 < actions.size() ? std::get_if<StartWorkers>(&actions[index + 1]) : nullptr;
        stopWorkers(*stop, next, now);
      } else {
        writeEvent(recordOf(action, now));
        if (const auto* wait = std::get_if<Wait>(&action)) {
          spdlog::info("agent: waiting: {}", wait->reason);
        } else if (std::get_if<Finish>(&action) != nullptr) {
          result_.exitCode = 0;
          done_ = true;
        } else if (const auto* fail = std::get_if<Fail>(&action)) {
          result_.exitCode = fail->exitCode == 0 ? 1 : fail->exitCode;
          result_.message = fail->message;
          done_ = true;
        } else if (const auto* event = std::get_if<LogEvent>(&action)) {
          if (event->event == "node_left" || event->event == "heartbeat_lost" ||
              event->event == "node_joined")
            spdlog::info("agent: {}: {}", event->event, event->reason);
        }
      }
    }
  }

  // A start carries out the live plan made at the stop before it, or starts every worker.
  void startWorkers(const StartWorkers& start, Time now) {
    const bool continued = livePlan_.has_value();
    if (continued)
      workers_.continueLive(start, *livePlan_);
    livePlan_.reset();
    std::optional<std::int64_t> step;
    if (!continued && start.resumeFromLatest && options_.checkpointDir)
      step = latestCheckpointStep(*options_.checkpointDir);
    if (log_) {
      auto record = recordOf(start, now, step);
      if (options_.liveRecovery && start.generation > 1)
        record.recovery = continued ? "live" : "checkpoint";
      writeEvent(record);
    }
    if (!continued)
      workers_.start(start);
    else
      ++result_.liveRecoveries;
    spdlog::info(
        "agent: generation {}: world size {} on {} node(s), batch {} = micro {} x "
        "accumulation {} x {}{} ({}{})",
        start.generation, start.worldSize, start.nodes.size(), start.batch.trainBatchSize,
        start.batch.microBatchPerGpu, start.batch.gradientAccumulation, start.dataParallelSize,
        step ? fmt::format(", resuming from step {}", *step) : std::string(), start.reason,
        continued ? "; live: the running workers continue" : "");
    if (failureSeen_) {
      result_.recoveryTimes.push_back(clock_() - *failureSeen_);
      failureSeen_.reset();
    }
    result_.generations = start.generation;
  }

  // A stop followed by a start (`next`) keeps the running workers when live recovery is on and
  // agent::planLiveRecovery says they hold the state.
  void stopWorkers(const StopWorkers& stop, const StartWorkers* next, Time now) {
    livePlan_.reset();
    std::optional<LivePlan> plan;
    if (options_.liveRecovery && next != nullptr) {
      if (const auto situation = workers_.liveSituation(*next)) {
        plan = planLiveRecovery(*situation, *next, machine_.rules());
        spdlog::info("agent: live recovery: {}", plan->reason);
        if (plan->live)
          livePlan_ = plan;
      }
    }
    const bool liveNext = livePlan_.has_value();
    if (log_) {
      auto record = recordOf(stop, now);
      if (options_.liveRecovery)
        record.recovery = liveNext ? "live" : "checkpoint";
      writeEvent(record);
      if (plan)
        writeEvent(recordOf(*plan, *next, now));  // the decision itself
    }
    spdlog::info("agent: {} generation {}: {}",
                 liveNext ? "leaving the running workers of" : "stopping", stop.generation,
                 stop.reason);
    if (!liveNext)
      workers_.stop();
  }

  // An event-log record; a failed write is reported once, and the job goes on.
  void writeEvent(const EventRecord& record) {
    if (!log_ || log_->write(record) || log_->lost() > 1)
      return;
    spdlog::error(
        "agent: event log {}: cannot write: {}; the job goes on, and its records are "
        "lost until the file takes writes again",
        log_->path(), log_->error());
  }

  void interrupt(int sig) {
    workers_.stop();
    result_.exitCode = 128 + sig;
    result_.message =
        fmt::format("stopped by signal {} ({}); every worker was stopped", sig, strsignal(sig));
    if (log_) {
      EventRecord record;
      record.time = clock_();
      record.event = "interrupted";
      record.generation = machine_.generation();
      record.exitCode = result_.exitCode;
      record.reason = result_.message;
      writeEvent(record);
    }
  }

  const AgentLoopOptions& options_;
  WorkerGroup& workers_;
  std::unique_ptr<EventLog> log_;
  const Clock& clock_;
  AgentStateMachine machine_;
  AgentResult result_;
  std::optional<Time> failureSeen_;  // when the exit that caused the pending restart was reaped
  bool done_ = false;
  // The live plan for the StartWorkers that follows a StopWorkers, when the running workers carry
  // the state on.
  std::optional<LivePlan> livePlan_;
};

}  // namespace

AgentResult runAgentLoop(const AgentLoopOptions& options, WorkerGroup& workers) {
  validate(options.config);
  return AgentLoop(options, workers).run();
}

}  // namespace stretch::launcher
