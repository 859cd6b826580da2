#include "runtime/agent/local_agent.hpp"

#include <fstream>
#include <iostream>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runtime/common/error.hpp"

namespace stretch::agent {

namespace {

// "global_step120" -> 120.
std::optional<std::int64_t> resumeStepOf(const std::optional<std::filesystem::path>& dir) {
  if (!dir)
    return std::nullopt;
  std::ifstream in(*dir / "latest");
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

}  // namespace

LocalAgentResult runLocalAgent(const LocalAgentOptions& options) {
  if (options.command.empty())
    throw ConfigError("launch: no program to run (expected PROGRAM [ARGS...])");
  if (!options.environment)
    throw InternalError("runLocalAgent: no environment function");
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
  LocalWorkerGroup workers;
  LocalAgentResult result;
  std::optional<Time> failureSeen;  // when the exit that caused the pending restart was reaped
  bool done = false;

  auto execute = [&](const std::vector<Action>& actions) {
    for (const Action& action : actions) {
      const Time now = clock();
      if (const auto* start = std::get_if<StartWorkers>(&action)) {
        const auto step =
            start->resumeFromLatest ? resumeStepOf(options.checkpointDir) : std::nullopt;
        if (log)
          log->write(action, now, step);
        for (const auto& node : start->nodes) {
          if (node.nodeId != options.nodeId)
            continue;
          std::vector<WorkerProcessSpec> specs;
          for (std::int64_t local = 0; local < node.localWorldSize; ++local) {
            WorkerProcessSpec spec;
            spec.localRank = static_cast<int>(local);
            spec.globalRank = static_cast<int>(node.firstRank + local);
            spec.env = options.environment(*start, node, local);
            specs.push_back(std::move(spec));
          }
          workers.start(options.command, specs, options.logDir,
                        static_cast<int>(start->generation));
        }
        spdlog::info(
            "agent: generation {}: {} worker(s), world size {}, batch {} = micro {} x "
            "accumulation {} x {}{} ({})",
            start->generation, workers.running(), start->worldSize, start->batch.trainBatchSize,
            start->batch.microBatchPerGpu, start->batch.gradientAccumulation,
            start->dataParallelSize,
            step ? fmt::format(", resuming from step {}", *step) : std::string(), start->reason);
        if (failureSeen) {
          result.recoveryTimes.push_back(now - *failureSeen);
          failureSeen.reset();
        }
        result.generations = start->generation;
      } else if (const auto* stop = std::get_if<StopWorkers>(&action)) {
        if (log)
          log->write(action, now);
        spdlog::info("agent: stopping generation {}: {}", stop->generation, stop->reason);
        workers.stop(std::chrono::duration_cast<std::chrono::milliseconds>(options.stopGrace));
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
      } else if (std::get_if<LogEvent>(&action) != nullptr) {
        if (log)
          log->write(action, now);
      }
    }
  };

  execute(machine.handle(clock(), NodeJoined{options.nodeId, options.slots}));
  const auto step = std::chrono::milliseconds(10);
  Time nextTick = clock() + options.monitorInterval;
  while (!done) {
    if (options.stopSignal != nullptr && options.stopSignal->load() != 0) {
      const int sig = options.stopSignal->load();
      workers.stop(std::chrono::duration_cast<std::chrono::milliseconds>(options.stopGrace));
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
      const int code = exit.signaled ? -(exit.exitCode - 128) : exit.exitCode;
      if (code != 0) {
        spdlog::warn("agent: worker {} (local rank {}) of generation {} ended: {}", exit.globalRank,
                     exit.localRank, machine.generation(), exit.describe());
        if (!failureSeen)
          failureSeen = clock();
      }
      execute(machine.handle(
          clock(), WorkerExited{machine.generation(), options.nodeId, exit.localRank, code}));
      if (done)
        break;
    }
    if (!done && clock() >= nextTick) {
      nextTick = clock() + options.monitorInterval;
      execute(machine.tick(clock()));
    }
  }
  workers.stop(std::chrono::duration_cast<std::chrono::milliseconds>(options.stopGrace));
  result.restarts = machine.restartCount();
  return result;
}

}  // namespace stretch::agent
