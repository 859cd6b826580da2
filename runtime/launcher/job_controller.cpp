#include "runtime/launcher/job_controller.hpp"

#include <atomic>
#include <chrono>
#include <csignal>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/common/error.hpp"
#include "runtime/launcher/job_protocol.hpp"
#include "runtime/launcher/node_tracker.hpp"
#include "runtime/launcher/remote_workers.hpp"

namespace stretch::launcher {

using namespace agent;

using std::chrono::milliseconds;

AgentResult runJobController(const JobControllerOptions& options) {
  if (!options.store)
    throw InternalError("runJobController: no store");
  comm::Store& store = *options.store;
  // A command left from an earlier job on the same store would confuse the agents.
  if (auto old = tryGet(store, "cmd"))
    throw ConfigError(fmt::format(
        "the job's store already holds a command ('{}'): another job uses this rendezvous port",
        old->substr(0, old->find('\n'))));
  NodeTracker tracker(store, options.heartbeatTimeout, options.launchHosts,
                      options.registrationWindow);
  RemoteWorkers workers(options, tracker);

  AgentLoopOptions loop;
  loop.config = options.config;
  loop.eventLog = options.eventLog;
  loop.checkpointDir = options.checkpointDir;
  loop.monitorInterval = options.monitorInterval;
  loop.clock = options.clock;
  loop.liveRecovery = options.liveStore != nullptr;
  std::string abandonedWhy;
  // The agent loop stops on a signal; an abandoned job stops it the same way, with SIGTERM's
  // number, and the result is rewritten below.
  std::atomic<int> combined{0};
  loop.stopSignal = &combined;
  Time lastNodePoll{0};
  loop.nodeEvents = [&](Time now) -> std::vector<Event> {
    if (options.stopSignal != nullptr && options.stopSignal->load() != 0)
      combined.store(options.stopSignal->load());
    if (options.pollLaunchers && abandonedWhy.empty()) {
      abandonedWhy = options.pollLaunchers();
      if (!abandonedWhy.empty())
        combined.store(SIGTERM);
    }
    // Exits first, then departures (job_protocol.hpp, "Order"); keep-alives, a store round trip
    // per node, every 50 ms (plenty next to second-scale timeouts).
    const std::vector<WorkerExited> exits = workers.readExits();
    if (options.liveStore)
      workers.pollLive();
    const bool heartbeats = now - lastNodePoll >= milliseconds(50);
    if (heartbeats)
      lastNodePoll = now;
    std::vector<Event> events = tracker.poll(now, heartbeats);
    events.insert(events.end(), exits.begin(), exits.end());
    return events;
  };
  AgentResult result = runAgentLoop(loop, workers);
  if (!abandonedWhy.empty()) {
    result.exitCode = 1;
    result.message = abandonedWhy;
  }
  workers.exit(result.exitCode, result.message);
  return result;
}

}  // namespace stretch::launcher
