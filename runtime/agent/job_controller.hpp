#pragma once
// The two halves of a multi-node job (protocol and keys: job_protocol.hpp).
//
// Job controller (runJobController, in `stretch launch`): runs the job's one AgentStateMachine
// with the job-wide view. Node agents that register become NodeJoined events; a departure record
// becomes NodeLeft; a keep-alive counter that has not moved for heartbeatTimeout (on the
// controller's own clock) becomes HeartbeatLost; exit records become WorkerExited. The
// machine's StartWorkers / StopWorkers become commands every live agent carries out and
// acknowledges; the controller waits for the acknowledgements (at most commandTimeout; an agent
// that does not answer is treated as lost). When the job ends (Finish, Fail, a stop signal) it
// sends the Exit command and waits, at most commandTimeout, for the agents to acknowledge it.
//
// Node agent (runNodeAgent, `stretch agent`): registers the node, sends a keep-alive every
// heartbeatInterval from its own thread and store connection (so a worker stop that takes the
// grace period does not look like a dead node), carries out each new command with its
// NodeWorkers and reports its workers' exits. It ends on the Exit command (with the job's exit
// code), on a stop signal (records its departure, then stops its
// workers and exits 128 + signal) and when
// the controller's store has been unreachable for controllerTimeout (stops its workers, exits 1).
// Its workers die with it even when it is SIGKILLed (LocalWorkerGroup's PR_SET_PDEATHSIG).

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/agent/job_protocol.hpp"
#include "runtime/agent/local_agent.hpp"
#include "runtime/comm/store.hpp"

namespace stretch::agent {

struct JobControllerOptions {
  AgentConfig config;
  std::shared_ptr<comm::Store> store;  // the job's keys (prefix applied by the caller)
  std::optional<std::filesystem::path> eventLog;
  std::optional<std::filesystem::path> checkpointDir;
  Duration monitorInterval = std::chrono::seconds(1);
  Duration heartbeatTimeout = std::chrono::seconds(10);
  Duration commandTimeout = std::chrono::seconds(30);
  // MASTER_ADDR for the workers; empty: the address node rank 0 registered with.
  std::string masterAddr;
  // The hosts the launcher started agents on, in hostfile order: their registrations are
  // announced to the state machine in this order (node rank = hostfile order, as DeepSpeed)
  // once all registered or are gone, or registrationWindow after the first one.
  std::vector<std::string> launchHosts;
  Duration registrationWindow = std::chrono::seconds(30);
  const std::atomic<int>* stopSignal = nullptr;
  // Called every poll. The launcher reaps the processes it started to bring up node agents
  // here, recording the departure of a node whose agent process ended; it returns a non-empty
  // message, which ends the job with exit code 1, when all of them are gone and no agent ever
  // registered.
  std::function<std::string()> pollLaunchers;
  Clock clock = systemClock();
};

AgentResult runJobController(const JobControllerOptions& options);

// Store connections for the node agent: one for its loop, one for its keep-alive thread.
using StoreFactory = std::function<std::shared_ptr<comm::Store>()>;

// What a node agent knows about the job it joins (read from the store by the caller, or given
// on its command line), and what it needs to start its workers.
struct NodeAgentOptions {
  StoreFactory connect;
  NodeRecord node;  // id, slots, address, devices
  std::vector<std::string> command;
  // The workers' variables for a generation; masterAddr is the command's (rank 0's host).
  std::function<std::map<std::string, std::string>(
      const StartWorkers& start, const NodeAssignment& node, std::int64_t localRank,
      const std::string& masterAddr)>
      environment;
  std::filesystem::path logDir;
  Duration heartbeatInterval = std::chrono::milliseconds(500);
  Duration controllerTimeout = std::chrono::seconds(30);
  Duration stopGrace = std::chrono::seconds(5);
  const std::atomic<int>* stopSignal = nullptr;
};

struct NodeAgentResult {
  int exitCode = 0;
  std::string message;
  std::uint64_t generationsRun = 0;  // generations this node ran workers in
};

NodeAgentResult runNodeAgent(const NodeAgentOptions& options);

}  // namespace stretch::agent
