#include "runtime/launcher/agent_loop.hpp"

#include <cstring>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runtime/agent/event_log.hpp"
#include "runtime/common/error.hpp"

namespace stretch::launcher {

using namespace agent;

std::optional<std::int64_t> latestCheckpointStep(const std::filesystem::path& dir) {
  std::ifstream in(dir / "latest");
  std::string tag;
  if (!(in >> tag))
    return std::nullopt;
  const std::string prefix = "global_step";
  if (tag.rfind(prefix, 0) != 0)
    return std::nullopt;
  try {
    return std::stoll(tag.substr(prefix.size()));
  } catch (...) {
    return std::nullopt;
  }
}

AgentResult runAgentLoop(const AgentLoopOptions& options, WorkerGroup& workers) {
  validate(options.config);
  std::unique_ptr<EventLog> log;
  if (options.eventLog) {
    std::error_code ec;
    if (options.eventLog->has_parent_path())
      std::filesystem::create_directories(options.eventLog->parent_path(), ec);
    log = std::make_unique<EventLog>(*options.eventLog);
  }
  const Clock& clock = options.clock;
  AgentStateMachine machine(options.config, clock());
  AgentResult result;
  std::optional<Time> failureSeen;  // when the exit that caused the pending restart was reaped
  bool done = false;

  bool liveNext = false;  // the StartWorkers that follows continues the running workers live
  auto execute = [&](const std::vector<Action>& actions) {
    for (std::size_t index = 0; index < actions.size(); ++index) {
      const Action& action = actions[index];
      const Time now = clock();
      if (const auto* start = std::get_if<StartWorkers>(&action)) {
        const bool live = liveNext;
        liveNext = false;
        const bool continued = live && workers.continueLive(*start);
        if (live && !continued)
          workers.stop();  // the group could not keep its workers after all
        std::optional<std::int64_t> step;
        if (!continued && start->resumeFromLatest && options.checkpointDir)
          step = latestCheckpointStep(*options.checkpointDir);
        if (log) {
          auto record = recordOf(action, now, step);
          if (options.liveRecovery && start->generation > 1)
            record.recovery = continued ? "live" : "checkpoint";
          log->write(record);
        }
        if (!continued)
          workers.start(*start);
        else
          ++result.liveRecoveries;
        spdlog::info(
            "agent: generation {}: world size {} on {} node(s), batch {} = micro {} x "
            "accumulation {} x {}{} ({}{})",
            start->generation, start->worldSize, start->nodes.size(), start->batch.trainBatchSize,
            start->batch.microBatchPerGpu, start->batch.gradientAccumulation,
            start->dataParallelSize,
            step ? fmt::format(", resuming from step {}", *step) : std::string(), start->reason,
            continued ? "; live: the running workers continue" : "");
        if (failureSeen) {
          result.recoveryTimes.push_back(clock() - *failureSeen);
          failureSeen.reset();
        }
        result.generations = start->generation;
      } else if (const auto* stop = std::get_if<StopWorkers>(&action)) {
        liveNext = options.liveRecovery && index + 1 < actions.size() &&
                   std::holds_alternative<StartWorkers>(actions[index + 1]) &&
                   workers.canContinueLive(std::get<StartWorkers>(actions[index + 1]));
        if (log) {
          auto record = recordOf(action, now);
          if (options.liveRecovery)
            record.recovery = liveNext ? "live" : "checkpoint";
          log->write(record);
        }
        spdlog::info("agent: {} generation {}: {}",
                     liveNext ? "leaving the running workers of" : "stopping", stop->generation,
                     stop->reason);
        if (!liveNext)
          workers.stop();
      } else if (const auto* wait = std::get_if<Wait>(&action)) {
        if (log)
          log->write(action, now);
        spdlog::info("agent: waiting: {}", wait->reason);
      } else if (std::get_if<Finish>(&action) != nullptr) {
        if (log)
          log->write(action, now);
        result.exitCode = 0;
        done = true;
      } else if (const auto* fail = std::get_if<Fail>(&action)) {
        if (log)
          log->write(action, now);
        result.exitCode = fail->exitCode == 0 ? 1 : fail->exitCode;
        result.message = fail->message;
        done = true;
      } else if (const auto* event = std::get_if<LogEvent>(&action)) {
        if (log)
          log->write(action, now);
        if (event->event == "node_left" || event->event == "heartbeat_lost" ||
            event->event == "node_joined")
          spdlog::info("agent: {}: {}", event->event, event->reason);
      }
    }
  };
  auto apply = [&](const Event& event) {
    if (const auto* exit = std::get_if<WorkerExited>(&event)) {
      if (exit->exitCode != 0 && exit->generation == machine.generation() && !failureSeen)
        failureSeen = clock();
    } else if (std::holds_alternative<NodeLeft>(event) ||
               std::holds_alternative<HeartbeatLost>(event)) {
      if (!failureSeen)
        failureSeen = clock();
    }
    execute(machine.handle(clock(), event));
  };

  for (const Event& event : options.initialEvents) {
    apply(event);
    if (done)
      break;
  }
  const auto step = std::chrono::milliseconds(10);
  Time nextTick = clock() + options.monitorInterval;
  while (!done) {
    if (options.stopSignal != nullptr && options.stopSignal->load() != 0) {
      const int sig = options.stopSignal->load();
      workers.stop();
      result.exitCode = 128 + sig;
      result.message =
          fmt::format("stopped by signal {} ({}); every worker was stopped", sig, strsignal(sig));
      if (log) {
        EventRecord record;
        record.time = clock();
        record.event = "interrupted";
        record.generation = machine.generation();
        record.exitCode = result.exitCode;
        record.reason = result.message;
        log->write(record);
      }
      break;
    }
    std::this_thread::sleep_for(step);
    // Exits are reaped every 10 ms (waitpid is cheap); the machine ticks every monitor interval.
    for (const auto& exit : workers.poll()) {
      apply(exit);
      if (done)
        break;
    }
    if (!done && options.nodeEvents) {
      for (const auto& event : options.nodeEvents(clock())) {
        apply(event);
        if (done)
          break;
      }
    }
    if (!done && clock() >= nextTick) {
      nextTick = clock() + options.monitorInterval;
      execute(machine.tick(clock()));
    }
  }
  workers.stop();
  result.restarts = machine.restartCount();
  return result;
}

}  // namespace stretch::launcher
