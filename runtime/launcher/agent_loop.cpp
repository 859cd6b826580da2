#include "runtime/launcher/agent_loop.hpp"

#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runtime/agent/driver.hpp"
#include "runtime/agent/event_log.hpp"
#include "runtime/checkpoint/layout.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/launcher/process.hpp"

namespace stretch::launcher {

using namespace agent;

std::optional<std::int64_t> latestCheckpointStep(const std::filesystem::path& dir) {
  // The engine's own choice (runtime/checkpoint/layout.hpp): latest's checkpoint when it is
  // complete and intact, else the newest older one that is.
  const auto point = checkpoint::resumePoint(dir.string());
  return point ? point->step : std::nullopt;
}

namespace {

// The event log, or null. One that cannot be opened (a full disk, a directory that cannot be
// made) does not stop the job: `error` says why, for the end's list of lost output.
std::unique_ptr<EventLog> openEventLog(const std::optional<std::filesystem::path>& path,
                                       std::string& error) {
  if (!path)
    return nullptr;
  std::error_code ec;
  if (path->has_parent_path())
    std::filesystem::create_directories(path->parent_path(), ec);
  std::unique_ptr<EventLog> log;
  try {
    log = std::make_unique<EventLog>(*path);
  } catch (const IoError& e) {
    error = fmt::format("event log {}: {}; every record is lost", path->string(), e.what());
    spdlog::error("agent: {}; the job goes on", error);
    return nullptr;
  }
  // A launcher killed by SIGKILL writes nothing more: its orphan guard records the end.
  guardEventLog(path->string());
  return log;
}

// One run of the loop: the driver (the machine and the live decisions), the group, the event log
// and what the result collects.
class AgentLoop {
 public:
  AgentLoop(const AgentLoopOptions& options, WorkerGroup& workers)
      : options_(options),
        workers_(workers),
        log_(openEventLog(options.eventLog, eventLogError_)),
        clock_(options.clock),
        driver_(options.config, clock_(), options.liveRecovery) {}

  AgentResult run() {
    try {
      loop();
    } catch (const std::exception& e) {
      // Every way a job ends leaves its final record: an error that ends the loop (the launcher
      // reports it and exits) stops the workers and says so in the event log.
      try {
        workers_.stop();
      } catch (...) {  // the error below is the one to report
      }
      EventRecord record;
      record.time = clock_();
      record.event = "fail";
      record.generation = driver_.machine().generation();
      // The exit status the launcher gives the error (cli/output.hpp's exitStatusFor).
      record.exitCode = isBadInput(e) ? 2 : 1;
      record.reason = fmt::format("the launcher failed: {}; every worker was stopped", e.what());
      writeEvent(record);
      throw;
    }
    workers_.stop();
    result_.restarts = driver_.machine().restartCount();
    if (!eventLogError_.empty())
      result_.lostOutput.push_back(eventLogError_);
    if (log_ && log_->lost() > 0) {
      result_.lostOutput.push_back(fmt::format("event log {}: cannot write: {}; {} record(s) lost",
                                               log_->path(), log_->error(), log_->lost()));
    }
    for (std::string& line : workers_.lostOutput())
      result_.lostOutput.push_back(std::move(line));
    return result_;
  }

 private:
  void loop() {
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
      // Ticks every monitor interval, and when a backed-off restart is due (announced as 1 s, it
      // once came 2.0 s later with --monitor_interval 1).
      const auto due = driver_.machine().restartDue();
      if (!done_ && (clock_() >= nextTick || (due && clock_() >= *due))) {
        nextTick = clock_() + options_.monitorInterval;
        execute(driver_.tick(clock_(), workers_));
      }
    }
  }

  void apply(const Event& event) {
    // A departure the loop already fed (the group knew it before a start) arrives again with the
    // node events: the machine has forgotten the node, the second one says nothing new.
    if (const auto* joined = std::get_if<NodeJoined>(&event)) {
      departed_.erase(joined->nodeId);
    } else if (const auto* left = std::get_if<NodeLeft>(&event)) {
      if (departed_.erase(left->nodeId) > 0)
        return;
    } else if (const auto* lost = std::get_if<KeepAliveLost>(&event)) {
      KeepAliveLost rest;
      for (const std::string& id : lost->nodeIds) {
        if (departed_.erase(id) == 0)
          rest.nodeIds.push_back(id);
      }
      if (rest.nodeIds.size() != lost->nodeIds.size()) {
        if (!rest.nodeIds.empty())
          apply(Event{std::move(rest)});
        return;
      }
    }
    if (const auto* exit = std::get_if<WorkerExited>(&event)) {
      if (exit->exitCode != 0 && exit->generation == driver_.machine().generation() &&
          !failureSeen_)
        failureSeen_ = clock_();
    } else if (!std::holds_alternative<NodeJoined>(event) && !std::holds_alternative<Tick>(event) &&
               !std::holds_alternative<KeepAlive>(event)) {
      if (!failureSeen_)
        failureSeen_ = clock_();
    }
    execute(driver_.handle(clock_(), event, workers_));
  }

  void execute(std::vector<DriverStep> steps) {
    for (DriverStep& step : steps) {
      if (done_)
        return;
      if (const auto* start = std::get_if<StartWorkers>(&step.action)) {
        startWorkers(*start, step);
      } else if (const auto* stop = std::get_if<StopWorkers>(&step.action)) {
        stopWorkers(*stop, step);
      } else {
        writeEvents(step.records);
        const Action& action = step.action;
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
          if (event->event == "node_left" || event->event == "node_joined")
            spdlog::info("agent: {}: {}", event->event, event->reason);
        }
      }
    }
  }

  // A start carries out the live plan the driver made at the stop before it, or starts every
  // worker. A start naming nodes the group knows are gone (several departures read in one poll:
  // the first one's restart still names the others; nodes lost while the stop before waited for
  // their acknowledgements) is neither carried out nor logged: the machine learns of the
  // departures, all of them in one event (one restart however many), and plans the start again
  // without them.
  void startWorkers(const StartWorkers& start, DriverStep& step) {
    if (std::vector<NodeLeft> gone = workers_.goneNodes(start); !gone.empty()) {
      spdlog::info("agent: generation {} not started: {} of its node(s) already gone",
                   start.generation, gone.size());
      NodesLeft left;
      for (NodeLeft& node : gone) {
        if (left.reason.empty())
          left.reason = std::move(node.reason);
        left.nodeIds.push_back(std::move(node.nodeId));
      }
      const std::vector<std::string> ids = left.nodeIds;
      apply(Event{std::move(left)});
      departed_.insert(ids.begin(), ids.end());
      return;
    }
    const bool continued = step.live != nullptr;
    if (continued)
      workers_.continueLive(start, *step.live);
    std::optional<std::int64_t> resume;
    if (!continued && start.resumeFromLatest && options_.checkpointDir)
      resume = latestCheckpointStep(*options_.checkpointDir);
    step.records.front().resumeStep = resume;
    writeEvents(step.records);
    if (!continued)
      workers_.start(start);
    else
      ++result_.liveRecoveries;
    reportProblems(start.generation);
    spdlog::info("agent: generation {}: world size {} on {} node(s){}{} ({}{})", start.generation,
                 start.worldSize, start.nodes.size(),
                 options_.batchContract
                     ? fmt::format(", batch {} = micro {} x accumulation {} x {}",
                                   start.batch.trainBatchSize, start.batch.microBatchPerGpu,
                                   start.batch.gradientAccumulation, start.dataParallelSize)
                     : std::string(),
                 resume ? fmt::format(", resuming from step {}", *resume) : std::string(),
                 start.reason, continued ? "; live: the running workers continue" : "");
    if (failureSeen_) {
      result_.recoveryTimes.push_back(clock_() - *failureSeen_);
      failureSeen_.reset();
    }
    result_.generations = start.generation;
  }

  // The group's file problems (a log or config copy that could not be written), already on
  // stderr, as "log_problem" records; the job goes on.
  void reportProblems(std::uint64_t generation) {
    for (std::string& problem : workers_.takeProblems()) {
      EventRecord record;
      record.time = clock_();
      record.event = "log_problem";
      record.generation = generation;
      record.reason = std::move(problem);
      writeEvent(record);
    }
  }

  // A stop the driver decided to carry live leaves the running workers alone.
  void stopWorkers(const StopWorkers& stop, DriverStep& step) {
    if (step.decision)
      spdlog::info("agent: live recovery: {}", step.decision->reason);
    writeEvents(step.records);
    const bool liveNext = step.live != nullptr;
    spdlog::info("agent: {} generation {}: {}",
                 liveNext ? "leaving the running workers of" : "stopping", stop.generation,
                 stop.reason);
    if (!liveNext)
      workers_.stop();
  }

  // The records of one step, stamped with the time they are carried out at (a stop takes
  // the workers' grace period before the start that follows it).
  void writeEvents(std::vector<EventRecord>& records) {
    const Time now = clock_();
    for (EventRecord& record : records) {
      record.time = now;
      writeEvent(record);
    }
  }

  // An event-log record; a failed write is reported once, and the job goes on.
  void writeEvent(EventRecord record) {
    if (!options_.batchContract)
      record.batch.reset();
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
      record.generation = driver_.machine().generation();
      record.exitCode = result_.exitCode;
      record.reason = result_.message;
      writeEvent(record);
    }
  }

  const AgentLoopOptions& options_;
  WorkerGroup& workers_;
  std::string eventLogError_;  // why the event log could not be opened (before log_)
  std::unique_ptr<EventLog> log_;
  const Clock& clock_;
  AgentDriver driver_;
  AgentResult result_;
  std::optional<Time> failureSeen_;  // when the exit that caused the pending restart was reaped
  // Nodes whose departure the loop fed before a start (WorkerGroup::goneNodes): their own
  // NodeLeft / KeepAliveLost from the node events is dropped once (per node).
  std::set<std::string> departed_;
  bool done_ = false;
};

}  // namespace

AgentResult runAgentLoop(const AgentLoopOptions& options, WorkerGroup& workers) {
  validate(options.config);
  return AgentLoop(options, workers).run();
}

}  // namespace stretch::launcher
