#include "runtime/launcher/local_agent.hpp"

namespace stretch::launcher {

AgentResult runLocalAgent(const LocalAgentOptions& options) {
  NodeWorkers workers(options.nodeId, options.command, options.environment, options.logDir,
                      options.stopGrace);
  AgentLoopOptions loop;
  loop.config = options.config;
  loop.initialEvents = {agent::NodeJoined{options.nodeId, options.slots}};
  loop.eventLog = options.eventLog;
  loop.checkpointDir = options.checkpointDir;
  loop.monitorInterval = options.monitorInterval;
  loop.stopSignal = options.stopSignal;
  loop.clock = options.clock;
  return runAgentLoop(loop, workers);
}

}  // namespace stretch::launcher
