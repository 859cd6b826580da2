#include "runtime/agent/local_agent.hpp"

#include <cstring>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runtime/common/error.hpp"

namespace stretch::agent {

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

NodeWorkers::NodeWorkers(std::string nodeId, std::vector<std::string> command,
                         EnvironmentFor environment, std::filesystem::path logDir,
                         Duration stopGrace)
    : nodeId_(std::move(nodeId)),
      command_(std::move(command)),
      environment_(std::move(environment)),
      logDir_(std::move(logDir)),
      stopGrace_(stopGrace) {
  if (command_.empty())
    throw ConfigError("launch: no program to run (expected PROGRAM [ARGS...])");
  if (!environment_)
    throw InternalError("NodeWorkers: no environment function");
}

void NodeWorkers::start(const StartWorkers& action) {
  generation_ = action.generation;
  for (const auto& node : action.nodes) {
    if (node.nodeId != nodeId_)
      continue;
    std::vector<WorkerProcessSpec> specs;
    for (std::int64_t local = 0; local < node.localWorldSize; ++local) {
      WorkerProcessSpec spec;
      spec.localRank = static_cast<int>(local);
      spec.globalRank = static_cast<int>(node.firstRank + local);
      spec.env = environment_(action, node, local);
      specs.push_back(std::move(spec));
    }
    workers_.start(command_, specs, logDir_, static_cast<int>(action.generation));
  }
}

void NodeWorkers::stop() {
  workers_.stop(std::chrono::duration_cast<std::chrono::milliseconds>(stopGrace_));
}

std::vector<WorkerExited> NodeWorkers::poll() {
  std::vector<WorkerExited> out;
  for (const auto& exit : workers_.poll()) {
    const int code = exit.signaled ? -(exit.exitCode - 128) : exit.exitCode;
    if (code != 0) {
      spdlog::warn("agent: worker {} (local rank {}) of generation {} on {} ended: {}",
                   exit.globalRank, exit.localRank, generation_, nodeId_, exit.describe());
    }
    out.push_back(WorkerExited{generation_, nodeId_, exit.localRank, code});
  }
  return out;
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

  auto execute = [&](const std::vector<Action>& actions) {
    for (const Action& action : actions) {
      const Time now = clock();
      if (const auto* start = std::get_if<StartWorkers>(&action)) {
        const auto step = start->resumeFromLatest && options.checkpointDir
                              ? latestCheckpointStep(*options.checkpointDir)
                              : std::nullopt;
        if (log)
          log->write(action, now, step);
        workers.start(*start);
        spdlog::info(
            "agent: generation {}: world size {} on {} node(s), batch {} = micro {} x "
            "accumulation {} x {}{} ({})",
            start->generation, start->worldSize, start->nodes.size(), start->batch.trainBatchSize,
            start->batch.microBatchPerGpu, start->batch.gradientAccumulation,
            start->dataParallelSize,
            step ? fmt::format(", resuming from step {}", *step) : std::string(), start->reason);
        if (failureSeen) {
          result.recoveryTimes.push_back(clock() - *failureSeen);
          failureSeen.reset();
        }
        result.generations = start->generation;
      } else if (const auto* stop = std::get_if<StopWorkers>(&action)) {
        if (log)
          log->write(action, now);
        spdlog::info("agent: stopping generation {}: {}", stop->generation, stop->reason);
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

AgentResult runLocalAgent(const LocalAgentOptions& options) {
  NodeWorkers workers(options.nodeId, options.command, options.environment, options.logDir,
                      options.stopGrace);
  AgentLoopOptions loop;
  loop.config = options.config;
  loop.initialEvents = {NodeJoined{options.nodeId, options.slots}};
  loop.eventLog = options.eventLog;
  loop.checkpointDir = options.checkpointDir;
  loop.monitorInterval = options.monitorInterval;
  loop.stopSignal = options.stopSignal;
  loop.clock = options.clock;
  return runAgentLoop(loop, workers);
}

}  // namespace stretch::agent
