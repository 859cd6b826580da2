#include "runtime/launcher/job_controller.hpp"

#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/common/error.hpp"
#include "runtime/launcher/job_protocol.hpp"
#include "runtime/launcher/node_tracker.hpp"
#include "runtime/launcher/process.hpp"
#include "runtime/launcher/remote_workers.hpp"

namespace stretch::launcher {

using namespace agent;

AgentResult runJobController(const JobControllerOptions& options) {
  if (!options.store)
    throw InternalError("runJobController: no store");
  comm::Store& store = *options.store;
  // A command left from an earlier job on the same store would confuse the agents.
  if (auto old = tryGet(store, "cmd"))
    throw ConfigError(fmt::format(
        "the job's store already holds a command ('{}'): another job uses this rendezvous port",
        old->substr(0, old->find('\n'))));
  NodeTracker tracker(store, options.keepAliveTimeout, options.launchHosts,
                      options.registrationWindow, options.keepAliveCheck);
  RemoteWorkers workers(options, tracker);

  AgentLoopOptions loop;
  loop.config = options.config;
  loop.eventLog = options.eventLog;
  loop.checkpointDir = options.checkpointDir;
  loop.monitorInterval = options.monitorInterval;
  loop.clock = options.clock;
  loop.liveRecovery = options.liveStore != nullptr;
  loop.batchContract = options.batchContract;
  Time lastNodePoll{0};
  // The loop asks for node events every 10 ms; the store is asked only when something changed:
  // a thread per record list waits for its next record (RecordWatch), and any of them waking
  // makes this turn read all three lists (exits first, then registrations and departures,
  // job_protocol.hpp "Order": a departure is never read after the exits it explains). The
  // keep-alives, one request per group of nodes, at the tracker's check interval.
  const auto watchPeriod = std::chrono::seconds(10);
  const auto& watchStore = options.watchStore ? options.watchStore : options.store;
  RecordWatch exitWatch(watchStore, "exits", 0, watchPeriod);
  RecordWatch nodeWatch(watchStore, "nodes", 0, watchPeriod);
  RecordWatch leaveWatch(watchStore, "leaves", 0, watchPeriod);
  bool registered = false;  // an agent has registered at some point
  loop.nodeEvents = [&](Time now) -> std::vector<Event> {
    const LaunchersStatus launchers =
        options.pollLaunchers ? options.pollLaunchers() : LaunchersStatus{};
    const bool exitsMoved = exitWatch.take();
    const bool nodesMoved = nodeWatch.take();
    const bool leavesMoved = leaveWatch.take();
    const bool changed = exitsMoved || nodesMoved || leavesMoved;
    const std::vector<WorkerExited> exits =
        changed ? workers.readExits() : std::vector<WorkerExited>();
    if (options.liveStore)
      workers.pollLive();
    const bool keepAlives = now - lastNodePoll >= tracker.checkInterval();
    if (keepAlives)
      lastNodePoll = now;
    std::vector<Event> events = tracker.poll(now, keepAlives, changed);
    if (changed) {
      exitWatch.readUpTo(workers.nextExit());
      nodeWatch.readUpTo(tracker.nextRegistration());
      leaveWatch.readUpTo(tracker.nextDeparture());
    }
    registered = registered || tracker.nextRegistration() > 0;
    if (launchers.allEnded && tracker.alive().empty()) {
      // Nobody is left to run the job (the launcher's processes ended, no agent answers): none
      // of these events is applied (a start would name agents that are gone), the loop writes
      // its `fail` record and the launcher exits 1 at once instead of waiting for nodes.
      throw Error(
          registered
              ? "every node agent has ended and none is left to run the job (an agent stops its "
                "workers and exits when the job's store has not answered for its "
                "--controller_timeout, as when the launcher was stopped (SIGSTOP) that long):" +
                    launchers.ended
              : "every process started to bring up the node agents ended before any agent "
                "registered:" +
                    launchers.ended);
    }
    events.insert(events.end(), exits.begin(), exits.end());
    return events;
  };
  loop.stopSignal = options.stopSignal;
  // The loop wrote the job's final record (or its `fail` record on an error): a launcher killed
  // while the agents exit must not add an `interrupted` one after it.
  AgentResult result;
  try {
    result = runAgentLoop(loop, workers);
  } catch (...) {
    forgetEventLog();
    throw;
  }
  forgetEventLog();
  workers.exit(result.exitCode, result.message);
  return result;
}

}  // namespace stretch::launcher
