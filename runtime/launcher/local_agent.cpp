#include "runtime/launcher/local_agent.hpp"

namespace stretch::launcher {

AgentResult runLocalAgent(const LocalAgentOptions& options) {
  std::optional<LiveRecoveryOptions> live;
  if (options.liveStore)
    live = LiveRecoveryOptions{options.liveStore, options.clock, options.batchContract};
  NodeWorkers workers(options.nodeId, options.command, options.environment, options.logDir,
                      options.stopGrace, live);
  workers.detectHangs(options.hang);
  if (options.configs)
    workers.reportConfigs(options.configs);
  AgentLoopOptions loop;
  loop.config = options.config;
  loop.initialEvents = {agent::NodeJoined{options.nodeId, options.slots}};
  loop.eventLog = options.eventLog;
  loop.checkpointDir = options.checkpointDir;
  loop.monitorInterval = options.monitorInterval;
  loop.stopSignal = options.stopSignal;
  loop.clock = options.clock;
  loop.liveRecovery = options.liveStore != nullptr;
  loop.batchContract = options.batchContract;
  AgentResult result = runAgentLoop(loop, workers);
  // The program's own error where the user looks: under the launcher's last line.
  if (result.exitCode != 0 && !workers.lastFailure().empty())
    result.message += "\n" + workers.lastFailure();
  return result;
}

}  // namespace stretch::launcher
