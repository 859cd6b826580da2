#include "runtime/launcher/node_workers.hpp"

#include <spdlog/spdlog.h>

#include "runtime/common/error.hpp"

namespace stretch::launcher {

using agent::Duration;
using agent::NodeAssignment;
using agent::StartWorkers;
using agent::WorkerExited;

NodeWorkers::NodeWorkers(std::string nodeId, WorkerCommand command, EnvironmentFor environment,
                         std::filesystem::path logDir, Duration stopGrace)
    : nodeId_(std::move(nodeId)),
      command_(std::move(command)),
      environment_(std::move(environment)),
      logDir_(std::move(logDir)),
      stopGrace_(stopGrace) {
  if (command_.argv.empty())
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
      auto invocation = workerInvocation(command_, local, node.localWorldSize);
      for (auto& [name, value] : invocation.env)
        spec.env[name] = std::move(value);
      spec.argv = expandWorkerVariables(invocation.argv, invocation.programAt, spec.env);
      specs.push_back(std::move(spec));
    }
    workers_.start(command_.argv, specs, logDir_, static_cast<int>(action.generation));
  }
}

void NodeWorkers::stop() {
  workers_.stop(std::chrono::duration_cast<std::chrono::milliseconds>(stopGrace_));
}

std::vector<WorkerExited> NodeWorkers::poll() {
  std::vector<WorkerExited> out;
  for (const auto& worker : workers_.poll()) {
    const int code = worker.exit.signaled ? -worker.exit.signal() : worker.exit.code;
    if (code != 0) {
      spdlog::warn("agent: worker {} (local rank {}) of generation {} on {} ended: {}",
                   worker.globalRank, worker.localRank, generation_, nodeId_,
                   worker.exit.describe());
    }
    out.push_back(WorkerExited{generation_, nodeId_, worker.localRank, code});
  }
  return out;
}

}  // namespace stretch::launcher
