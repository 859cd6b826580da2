#pragma once
// The job controller of a multi-node job (protocol and keys: job_protocol.hpp; the other half,
// the node agent: node_agent.hpp).
//
// Job controller (runJobController, in `stretch launch`): runs the job's one AgentStateMachine
// with the job-wide view. Node agents that register become NodeJoined events; a departure record
// becomes NodeLeft; keep-alive counters that have not moved for keepAliveTimeout (on the
// controller's own clock) become one KeepAliveLost per check, however many nodes fell silent
// together (one restart for all of them); exit records become WorkerExited. The
// machine's StartWorkers / StopWorkers become commands every live agent carries out and
// acknowledges; the controller waits for the acknowledgements (at most commandTimeout; an agent
// that does not answer is treated as lost). When the job ends (Finish, Fail, a stop signal) it
// sends the Exit command and waits, at most commandTimeout, for the agents to acknowledge it.
// When every agent has ended and the launcher's processes that ran them too
// (JobControllerOptions::pollLaunchers), the job ends at once: throws Error saying so, after the
// loop's `fail` record.
// Its parts: NodeTracker (node_tracker.hpp), the view of the registered node agents, and
// RemoteWorkers (remote_workers.hpp), the worker group that sends the commands and carries out
// live recovery across hosts.
// Its store traffic is O(what changed): threads wait for the next exit, registration and
// departure record (the loop reads the lists only once one appeared), a command's
// acknowledgements are one counter it waits on, and the keep-alives of every node are one request
// (Store::tryMultiGet of the groups' counters) per keep-alive interval.
//

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/comm/store.hpp"
#include "runtime/config/batch.hpp"
#include "runtime/launcher/agent_loop.hpp"
#include "runtime/launcher/launch_defaults.hpp"

namespace stretch::launcher {

// What the launcher's processes that bring up the node agents (a runner: ssh, pdsh, mpirun,
// the local agents themselves) are doing.
struct LaunchersStatus {
  bool allEnded = false;  // every one of them has ended
  std::string ended;      // once they all have: one line per process, its exit status and command
};

struct JobControllerOptions {
  agent::AgentConfig config;
  std::shared_ptr<comm::Store> store;  // the job's keys (prefix applied by the caller)
  // The same keys for the threads that wait for new records (exits, registrations, departures);
  // unset: `store`. The launcher gives them a client of their own, so that its server is not
  // held by them once the job has ended (a wait in flight ends when the server does).
  std::shared_ptr<comm::Store> watchStore;
  std::optional<std::filesystem::path> eventLog;
  std::optional<std::filesystem::path> checkpointDir;
  Duration monitorInterval = kDefaultMonitorInterval;
  Duration keepAliveTimeout = kDefaultKeepAliveTimeout;
  Duration commandTimeout = std::chrono::seconds(30);
  // How often the controller reads the nodes' keep-alives (one request for all of them, Store::
  // tryMultiGet): the agents' keep-alive interval, at most keepAliveTimeout / 4.
  Duration keepAliveCheck = kDefaultKeepAliveInterval;
  // MASTER_ADDR for the workers; empty: the address node rank 0 registered with.
  std::string masterAddr;
  // The hosts the launcher started agents on, in hostfile order: their registrations are
  // announced to the state machine in this order (node rank = hostfile order, as DeepSpeed)
  // once all registered or are gone, or registrationWindow after the first one.
  std::vector<std::string> launchHosts;
  Duration registrationWindow = std::chrono::seconds(30);
  const std::atomic<int>* stopSignal = nullptr;
  // Called every poll. The launcher reaps the processes it started to bring up node agents
  // here, recording the departure of a node whose agent process ended. Once all of them have
  // ended and no registered agent is alive (none ever registered, or every agent exited: an
  // agent gives up after its --controller_timeout, so a launcher stopped (SIGSTOP) longer than
  // that finds none when it continues), nothing is left to run the job: it ends at once (the
  // loop's `fail` record, the launcher's exit status 1) with a message naming the processes.
  std::function<LaunchersStatus()> pollLaunchers;
  Clock clock = agent::systemClock();
  // Live recovery (job/live): the job's store without the job prefix, where the workers meet
  // (their live/... keys). Unset: every failure restarts every worker.
  std::shared_ptr<comm::Store> liveStore;
  // The launcher tells the workers their batch (its --config): live generations carry it.
  bool batchContract = true;
};

AgentResult runJobController(const JobControllerOptions& options);

}  // namespace stretch::launcher
