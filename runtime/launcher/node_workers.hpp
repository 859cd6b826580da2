#pragma once
// NodeWorkers: the worker processes one node runs for a job, as the agent::WorkerGroup the agent
// loop drives. start() launches this node's part (its NodeAssignment) of a generation through a
// WorkerProcesses, each worker with the variables `environment` gives it; poll() turns process
// exits into WorkerExited events (a signal k as exit code -k). Used by the single-node agent
// (local_agent.hpp) and by each node agent of a multi-node job (node_agent.hpp). Not
// thread-safe.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/agent/worker_group.hpp"
#include "runtime/comm/store.hpp"
#include "runtime/config/batch.hpp"
#include "runtime/launcher/generation_config.hpp"
#include "runtime/launcher/live_executor.hpp"
#include "runtime/launcher/local_workers.hpp"
#include "runtime/launcher/worker_command.hpp"
#include "runtime/live/generation.hpp"

namespace stretch::launcher {

// The variables of one worker (RANK, WORLD_SIZE, ...), from its generation and node.
using EnvironmentFor = std::function<std::map<std::string, std::string>(
    const agent::StartWorkers& start, const agent::NodeAssignment& node, std::int64_t localRank)>;

// Live recovery on a single-node job (runtime/live/generation.hpp; across hosts the job
// controller carries the plan out and calls adoptLive / signalLive through its node agents): the
// store the agent serves its workers.
struct LiveRecoveryOptions {
  std::shared_ptr<comm::Store> store;
  agent::Clock clock = agent::systemClock();  // for the donors' release (LiveExecutor)
  bool batchContract = true;                  // LiveExecutor's: the launcher's --config given
};

// The worker processes one node runs for a job: a WorkerGroup over WorkerProcesses that starts
// this node's part (its NodeAssignment) of every generation.
//
// With LiveRecoveryOptions (one node only), a failure need not restart every worker:
// liveSituation tells the agent loop what the running workers hold, and continueLive carries
// out its agent::LivePlan: the interim live generation the survivors train in (when the plan
// has one), the replacements started with STRETCH_LIVE_JOIN=1, donors left out stopped once they
// gave their copies; once every replacement is ready poll() publishes the generation the state
// machine asked for and signals the survivors (SIGUSR1) to join it at their next step boundary.
class NodeWorkers final : public agent::WorkerGroup, private LiveTransport {
 public:
  NodeWorkers(std::string nodeId, WorkerCommand command, EnvironmentFor environment,
              std::filesystem::path logDir, agent::Duration stopGrace,
              std::optional<LiveRecoveryOptions> live = std::nullopt);

  void start(const agent::StartWorkers& action) override;
  // Starts this node's part `node` of the generation (none: runs nothing in it), as a node agent
  // does with the assignment it read (a Start command carries no node's part).
  void start(const agent::StartWorkers& action, const std::optional<agent::NodeAssignment>& node);
  void stop() override;
  // Hang detection for the workers started from now on (WorkerProcesses::detectHangs): their
  // heartbeat files live in a private temporary directory that goes with this object. Does
  // nothing when the policy is off.
  void detectHangs(const agent::HangPolicy& policy);
  // The last failed worker's log file and its last lines ("worker 0; its log L ends:\n ..."),
  // empty when none failed or the workers write to the agent's own output.
  const std::string& lastFailure() const noexcept { return lastFailure_; }
  ~NodeWorkers() override;
  NodeWorkers(const NodeWorkers&) = delete;
  NodeWorkers& operator=(const NodeWorkers&) = delete;
  std::vector<agent::WorkerExited> poll() override;
  // With live recovery on and `next` on this node only: the live group, the running workers
  // (their live/capable keys, joiners not ready yet) and whether they keep partition copies.
  std::optional<agent::LiveSituation> liveSituation(const agent::StartWorkers& next) const override;
  void continueLive(const agent::StartWorkers& action, const agent::LivePlan& plan) override;
  std::vector<std::string> lostOutput() const override;
  std::vector<std::string> takeProblems() override;
  // The per-generation config copies the workers' environment writes: what they could not
  // write is reported with this group's own problems and lost output.
  void reportConfigs(std::shared_ptr<GenerationConfigs> configs) { configs_ = std::move(configs); }

  // Live recovery across nodes, as the node agent carries out the job controller's Live and
  // Signal commands (job_protocol.hpp; the controller decides, this node does): the running
  // workers as {local rank, pid} and the pids of those started into the running job; adoptLive
  // makes `target` this node's generation, stops every running worker not in `keep` and starts
  // the `join` local ranks as joiners of live generation `liveGeneration` (STRETCH_LIVE_JOIN=1);
  // a command that starts none (it stops donors, say) leaves earlier joiners joiners.
  // signalLive sends SIGUSR1 (worker_env::kLiveSignal) to the process groups of the running
  // workers of `locals` (the program behind a wrapper too).
  std::vector<std::pair<int, pid_t>> runningWorkers() const { return workers_.runningWorkers(); }
  const std::vector<pid_t>& joiners() const { return joiners_; }
  void adoptLive(const agent::StartWorkers& target, const std::vector<int>& keep,
                 const std::vector<int>& join, std::uint64_t liveGeneration);
  void signalLive(const std::vector<int>& locals);
  // The live generation workers started by start() take as their first (multi-node: the job
  // controller's newest; one node: this group's own).
  void setLiveGeneration(std::uint64_t generation) { startLiveGeneration_ = generation; }

  int running() const { return workers_.running(); }
  std::vector<pid_t> pids() const { return workers_.pids(); }

 private:
  std::string nodeId_;
  WorkerCommand command_;
  EnvironmentFor environment_;
  std::filesystem::path logDir_;
  agent::Duration stopGrace_;
  std::uint64_t generation_ = 0;
  std::string heartbeatDir_;  // detectHangs's directory, removed after the workers
  std::string lastFailure_;
  std::uint64_t failureGeneration_ = 0;  // the generation lastFailure_ comes from
  WorkerProcesses workers_;
  std::shared_ptr<GenerationConfigs> configs_;  // reportConfigs

  std::chrono::milliseconds grace() const;
  // Live recovery.
  // The worker has said it can continue live (its live/capable key).
  bool speaksLive(pid_t pid) const;
  // The worker was started into the running job for the pending generation.
  bool isJoiner(pid_t pid) const;
  // LiveTransport: this node's processes, for the LiveExecutor (one host).
  std::vector<RunningWorkerInfo> liveWorkers() const override;
  void adopt(const agent::StartWorkers& target, const LocalsByNode& keep, const LocalsByNode& join,
             std::uint64_t liveGeneration, bool signal) override;
  void signal(const LocalsByNode& workers) override;
  std::vector<WorkerProcessSpec> specsFor(const agent::StartWorkers& action,
                                          const agent::NodeAssignment& node,
                                          const std::vector<int>& localRanks,
                                          const std::map<std::string, std::string>& extra) const;
  std::optional<LiveRecoveryOptions> live_;
  std::optional<LiveExecutor> executor_;              // with live_: carries the plans out
  std::optional<std::uint64_t> startLiveGeneration_;  // setLiveGeneration
  std::vector<pid_t> joiners_;                        // workers started into the running job
};

}  // namespace stretch::launcher
