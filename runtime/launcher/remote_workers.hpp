#pragma once
// RemoteWorkers: the workers of every node of a multi-node job, as the agent::WorkerGroup the job
// controller's agent loop drives. start(), stop() and exit() become commands (job_protocol.hpp)
// that every live node agent carries out and acknowledges; readExits() turns the agents' exit
// records into WorkerExited events. With live recovery (JobControllerOptions::liveStore) it tells
// the loop what the nodes run (liveSituation) and carries out its agent::LivePlan across hosts
// through Live and Signal commands (continueLive, pollLive). Used only by runJobController
// (job_controller.hpp), with its NodeTracker (node_tracker.hpp). Not thread-safe.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/agent/clock.hpp"
#include "runtime/agent/live_plan.hpp"
#include "runtime/agent/state_machine.hpp"
#include "runtime/agent/worker_group.hpp"
#include "runtime/comm/store.hpp"
#include "runtime/config/batch.hpp"
#include "runtime/launcher/job_controller.hpp"
#include "runtime/launcher/job_protocol.hpp"
#include "runtime/launcher/live_executor.hpp"
#include "runtime/launcher/node_tracker.hpp"

namespace stretch::launcher {

// The workers of every node, run by their agents through commands.
class RemoteWorkers final : public agent::WorkerGroup, private LiveTransport {
 public:
  RemoteWorkers(const JobControllerOptions& options, NodeTracker& tracker);

  void start(const agent::StartWorkers& action) override;

  void stop() override;

  // The nodes of `action` the tracker no longer counts alive: their departure was read with
  // another one's (one poll), or they did not answer the stop before this start.
  std::vector<agent::NodeLeft> goneNodes(const agent::StartWorkers& action) const override;

  // Exits are delivered with the node events (runJobController), so that a departure read in the
  // same poll comes first.
  std::vector<agent::WorkerExited> poll() override;

  std::vector<agent::WorkerExited> readExits();
  // Where the reads of the exit records stand (for RecordWatch).
  std::int64_t nextExit() const noexcept { return nextExit_; }

  // ---- Live recovery (options.liveStore set) -------------------------------------------------

  // What the live nodes run (their workers/<node> records) and what the workers said
  // (live/capable), for agent::planLiveRecovery.
  std::optional<agent::LiveSituation> liveSituation(const agent::StartWorkers& next) const override;

  // Carries out `plan` through one Live command: keeps its workers (and the donors until they
  // gave their copies), starts the joiners, publishes the generation the plan publishes at once;
  // the generation `action` follows once every joiner is ready (pollLive). Donors left out of
  // `action` are stopped, by the same command without them, once they gave their copies.
  void continueLive(const agent::StartWorkers& action, const agent::LivePlan& plan) override;

  // LiveExecutor::poll: publishes the pending generation once every joiner is ready, and signals
  // the survivors; stops the donors left out of the generation once they gave their copies (or
  // after kDonorReleaseWait, should one never say so).
  void pollLive();

  // Tells every agent the job ended, and waits (bounded) for them to stop.
  void exit(int code, const std::string& reason);

 private:
  // Publishes the command and waits until every live agent acknowledged it, at most
  // commandTimeout; agents that fall silent meanwhile are marked lost instead of waited for.
  void send(Command c);

  std::string masterAddrFor(const agent::StartWorkers& action) const;

  // What every live node runs (its workers/<node> record), by node id.
  std::map<std::string, NodeWorkersRecord> runningWorkers() const;

  // LiveTransport: the node agents, through Live and Signal commands, for the LiveExecutor.
  std::vector<RunningWorkerInfo> liveWorkers() const override;
  void adopt(const agent::StartWorkers& target, const LocalsByNode& keep, const LocalsByNode& join,
             std::uint64_t liveGeneration, bool signal) override;
  void signal(const LocalsByNode& workers) override;

  const JobControllerOptions& options_;
  comm::Store& store_;
  NodeTracker& tracker_;
  std::uint64_t sequence_ = 0;
  std::int64_t nextExit_ = 0;
  std::optional<std::uint64_t> running_;
  std::optional<LiveExecutor> executor_;  // with options.liveStore: carries the plans out
};

}  // namespace stretch::launcher
