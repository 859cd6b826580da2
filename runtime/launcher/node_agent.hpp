#pragma once
// The node agent of a multi-node job (protocol and keys: job_protocol.hpp; the other half, the
// job controller: job_controller.hpp).
//
// Node agent (runNodeAgent, `stretch agent`): registers the node, sends a keep-alive every
// keepAliveInterval from its own thread and store connection (so a worker stop that takes the
// grace period does not look like a dead node), carries out each new command with its
// NodeWorkers and reports its workers' exits. Idle, it sends no other request than its
// keep-alives and a blocking wait for the next command's key (its own thread and connection):
// a new command, or a worker's exit (pidfd), wakes its loop at once. It ends on the Exit command
// (with the job's exit code), on a stop signal (records its departure, then stops its workers and
// exits 128 + signal) and when the controller's store has not answered for controllerTimeout (stops
// its workers, exits 1). That timeout is what the agent applies: it counts from the store's last
// answer, and every reconnection and request after it waits only for what is left of it. Its
// workers die with it even when it is SIGKILLed (spawnProcess's parent-death signal).

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/agent/hang_rule.hpp"
#include "runtime/comm/store.hpp"
#include "runtime/common/worker_variables.hpp"
#include "runtime/launcher/job_protocol.hpp"
#include "runtime/launcher/launch_defaults.hpp"

namespace stretch::launcher {

// Store connections for the node agent: one for its loop, one for its keep-alive thread. A
// connection is made within `timeout` (else the factory throws), and its requests give up after
// `timeout` too.
using StoreFactory = std::function<std::shared_ptr<comm::Store>(agent::Duration timeout)>;

// What a node agent knows about the job it joins (read from the store by the caller, or given
// on its command line), and what it needs to start its workers.
struct NodeAgentOptions {
  StoreFactory connect;
  NodeRecord node;  // id, slots, address, devices
  WorkerCommand command;
  // The workers' variables for a generation: `start` without its nodes (the Start command's),
  // this node's part, the generation's node count, and masterAddr, the command's (rank 0's host).
  std::function<std::map<std::string, std::string>(
      const agent::StartWorkers& start, const agent::NodeAssignment& node, std::int64_t numNodes,
      std::int64_t localRank, const std::string& masterAddr)>
      environment;
  std::filesystem::path logDir;
  agent::Duration keepAliveInterval = kDefaultKeepAliveInterval;
  agent::Duration controllerTimeout = kDefaultControllerTimeout;
  agent::Duration stopGrace = kDefaultStopGrace;
  agent::HangPolicy hang;  // the job's (JobSettings::hangTimeout)
  const std::atomic<int>* stopSignal = nullptr;
  // Live recovery (job/live): the agent publishes its running workers (workers/<node>) and
  // carries out Live and Signal commands; its workers' environment names the store.
  bool liveRecovery = false;
};

struct NodeAgentResult {
  std::string nodeId;
  int exitCode = 0;
  std::string message;
  std::uint64_t generationsRun = 0;  // generations this node ran workers in
};

NodeAgentResult runNodeAgent(const NodeAgentOptions& options);

// `stretch agent`: what a node agent is started with (by the launcher through a runner, or by
// hand on a machine that joins a running elastic job).
struct JoinRequest {
  std::string rdzv;                      // HOST:PORT of the launcher's store
  std::optional<std::int64_t> nodeRank;  // a host of the launch (set by the launcher) ...
  std::string nodeId;                    // ... or a node that joins: its name
  std::optional<std::int64_t> nproc;     //     and its worker count
  std::string nodeAddr;  // where other nodes reach this one; empty: the route to the store
  std::filesystem::path logDir;
  // The store token: from tokenFile when given, else `token` (the caller read stdin or
  // STRETCH_STORE_TOKEN), which came from `tokenSource` (messages name it: "--token_stdin",
  // "STRETCH_STORE_TOKEN").
  std::string token;
  std::string tokenSource = worker_env::kStoreToken;
  std::filesystem::path tokenFile;
  double keepAliveInterval = toSeconds(kDefaultKeepAliveInterval);  // seconds
  double controllerTimeout = toSeconds(kDefaultControllerTimeout);
  const std::atomic<int>* stopSignal = nullptr;
};

// Connects to the job's store, reads the job, registers this node and runs its agent to the
// job's end. Throws ConfigError for bad input (naming the flag: --rdzv, --node_rank/--node_id,
// --nproc, --token_file with the file, or the token's source for a weak token) and comm errors
// when the store cannot be reached.
NodeAgentResult joinJob(const JoinRequest& request);

}  // namespace stretch::launcher
