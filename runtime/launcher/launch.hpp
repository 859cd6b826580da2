#pragma once
// `stretch launch`: DeepSpeed's `deepspeed` launcher with an elastic agent (docs/launch.md).
//
// One host with the local runner: this machine's slots run under one agent (local_agent.hpp).
// Several hosts, or a remote runner: this process serves the job's store on the rendezvous port
// and runs the job controller (job_controller.hpp); one `stretch agent` per host, started through
// the runner (remote.hpp) with spawnProcess, runs that host's workers (node_agent.hpp). Either
// way the agent starts a worker per slot with RANK, LOCAL_RANK, WORLD_SIZE, ... and the batch of
// its generation (worker_env.hpp), restarts them after a failure (up to maxRestarts) with the
// batch the elastic solver gives the world size, and stops them all on a stop signal.

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/common/ports.hpp"
#include "runtime/launcher/agent_loop.hpp"
#include "runtime/launcher/launch_defaults.hpp"
#include "runtime/launcher/worker_command.hpp"

namespace stretch::launcher {

// The launch as the user asked for it (the flags of `stretch launch`, same names; DeepSpeed's
// launcher flags with DeepSpeed's meaning, docs/compatibility.md).
struct LaunchRequest {
  std::string hostfile;  // "": DeepSpeed's /job/hostfile when it exists, else this machine
  std::string include;
  std::string exclude;
  std::optional<int> numNodes;
  std::optional<int> numGpus;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  bool masterAddrGiven = false;  // --master_addr was given (multi-node default differs)
  std::string launcher;          // "": local for one host, pdsh (DeepSpeed's default) for several
  std::string rdzvAddr;
  std::optional<int> rdzvPort;
  double keepAliveTimeout = toSeconds(kDefaultKeepAliveTimeout);
  double lastCall = toSeconds(kDefaultLastCall);
  std::string launcherArgs;
  std::optional<int> sshPort;
  std::string elastic;                          // --elastic MIN:MAX
  bool elasticTraining = false;                 // --elastic_training
  std::optional<std::int64_t> minElasticNodes;  // --min_elastic_nodes (default 1)
  std::optional<std::int64_t> maxElasticNodes;  // --max_elastic_nodes (default: the hosts)
  std::optional<std::int64_t> nodeRank;         // --node_rank (with --no_ssh)
  bool noSsh = false;         // --no_ssh: every node runs `stretch launch --node_rank K` itself
  bool noSshCheck = false;    // --no_ssh_check (Stretch does not probe ssh; accepted)
  bool forceMulti = false;    // --force_multi: a node agent and the store even for one host
  CommandRules commandRules;  // --module, --no_python, --no_local_rank, --bind_cores_to_rank
  bool savePid = false;       // --save_pid: write this pid to $TMPDIR/<pid>.deepspeed
  std::string eachRankLog;    // --enable_each_rank_log DIR: DeepSpeed's name for --log_dir
  std::optional<std::int64_t> maxRestarts;
  // --recovery: "live" (live recovery for workers that speak its protocol, the others restart;
  // "auto" is its old name, still accepted) or "restart" (every failure restarts every worker).
  // The agent serves its workers a store on a free port of the master address.
  std::string recovery = "live";
  double monitorInterval = toSeconds(kDefaultMonitorInterval);
  // --hang_timeout: seconds without a heartbeat before a worker that beats counts as hung and is
  // killed (agent/hang_rule.hpp: the floor of its limit); 0 turns hang detection off.
  double hangTimeout = toSeconds(kDefaultHangTimeout);
  // --hang_timeout was given: it is the limit itself (agent::HangPolicy::fixed), not a floor.
  bool hangTimeoutGiven = false;
  // --crash_loop_limit: generations in a row that fail the same way before their first step
  // before the job fails (restarts back off 1, 2, 4, ... s up to 60 s meanwhile); 0: no limit.
  std::int64_t crashLoopLimit = 3;
  std::string logDir;
  std::string eventLog;
  std::string config;
  std::string checkpointDir;
  std::vector<std::string> command;
  const std::atomic<int>* stopSignal = nullptr;  // non-zero: stop every worker (the signal)
};

// Runs the job to its end. Returns the agent's result: exit code 0 when the job succeeded, the
// failed worker's status (or 1) when it failed, 128 + signal when stopped. Throws ConfigError
// (LaunchError among them) or IoError for bad input, before any worker starts.
AgentResult runLaunch(const LaunchRequest& request);

// "MIN:MAX" node counts of --elastic. Throws LaunchError naming --elastic otherwise.
std::pair<std::int64_t, std::int64_t> parseElastic(const std::string& text);

// The warning for a --master_port inside the kernel's ephemeral port range (runLaunch passes
// ephemeralPortRange(), runtime/common/ports.hpp): rank 0 binds that port anew at every
// (re)start, and in between any outgoing connection on the host may take it as its source port,
// so that every restart fails. Nothing for a port outside the range.
std::optional<std::string> ephemeralPortWarning(int port, const PortRange& range);

// The note for --num_gpus above the devices this machine's accelerator sees (`deviceType`
// "cuda", `visible` devices): its workers share them, so their CUDA buffers go through Gloo
// staged in host memory (docs/comm.md, "Choosing the backend"). Nothing on the CPU or when
// every worker has a device.
std::optional<std::string> sharedDevicesNote(int numGpus, std::string_view deviceType, int visible);

}  // namespace stretch::launcher
