#pragma once
// LiveExecutor: carries out live recovery's plans (agent::LivePlan, decided by the agent driver,
// runtime/agent/driver.hpp) for one host and for many alike. What differs is only the transport:
// NodeWorkers stops, starts and signals its own processes; RemoteWorkers sends the same request
// as one command through the job's store to every node agent (which calls NodeWorkers::adoptLive
// and signalLive). Everything else is here, once: the live group the state was trained by, the
// live generations published in the live store (runtime/live/generation.hpp), the donors kept
// until they gave their partition copies (or kDonorReleaseWait passed, on the injected clock),
// the generation the state machine asked for published once every joiner is ready, and the
// LiveSituation the driver decides from.
//
// Not thread-safe: called from the agent loop's thread only (the group that owns it).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/agent/clock.hpp"
#include "runtime/agent/live_plan.hpp"
#include "runtime/agent/state_machine.hpp"
#include "runtime/comm/store.hpp"
#include "runtime/config/batch.hpp"

namespace stretch::launcher {

// Local ranks by node id, ascending.
using LocalsByNode = std::map<std::string, std::vector<int>>;

// A worker process that runs now.
struct RunningWorkerInfo {
  agent::WorkerPlace place;
  std::int64_t pid = 0;
  bool joiner = false;  // started into the running job, not ready yet
};

// How a live plan reaches the workers.
class LiveTransport {
 public:
  virtual ~LiveTransport() = default;
  // The worker processes that run now, on every node the group owns.
  virtual std::vector<RunningWorkerInfo> liveWorkers() const = 0;
  // `target` becomes the workers' generation: every running worker not in `keep` stops, the
  // places in `join` start as joiners of live generation `liveGeneration` (STRETCH_LIVE_JOIN=1);
  // with `signal`, the kept workers are then told (SIGUSR1) of the live generation just
  // published. Returns once the workers were told (every node acknowledged, across hosts).
  virtual void adopt(const agent::StartWorkers& target, const LocalsByNode& keep,
                     const LocalsByNode& join, std::uint64_t liveGeneration, bool signal) = 0;
  // Tells `workers` (SIGUSR1) of the live generation just published.
  virtual void signal(const LocalsByNode& workers) = 0;
};

class LiveExecutor {
 public:
  // `store`: the live store the workers read (outlives this object); `who` prefixes the log
  // lines ("agent", "controller"). `batchContract`: the launcher tells the workers their batch
  // (its --config), so the live generations carry it for the workers to check; false: they
  // carry none (the agent's batch is a stand-in) and each worker's config decides.
  LiveExecutor(comm::Store& store, LiveTransport& transport, agent::Clock clock, std::string who,
               bool batchContract);

  // Every worker of `action` started afresh: they are the live group. A stop forgets what was
  // pending.
  void started(const agent::StartWorkers& action);
  void stopped();

  // The live group, what runs and what the workers said they can do (their live/capable keys).
  agent::LiveSituation situation() const;
  // Carries `plan` out for `action`: publishes the live generation the plan publishes at once,
  // keeps its workers (and its donors), starts the joiners; the generation `action` follows once
  // every joiner is ready (poll()).
  void carryOut(const agent::StartWorkers& action, const agent::LivePlan& plan);
  // Releases the donors left out once they gave their copies (or after kDonorReleaseWait), and
  // publishes the pending generation once every joiner is ready, telling the survivors.
  void poll();

  // Whether a generation waits for joiners; abandonJoiners forgets it (the job finished first).
  bool awaitingJoiners() const noexcept { return pending_.has_value(); }
  void abandonJoiners() { pending_.reset(); }
  // The last live generation published or reserved (the one a fresh start joins).
  std::uint64_t liveGeneration() const noexcept { return liveGeneration_; }

 private:
  void publish(std::uint64_t generation, const agent::StartWorkers& target,
               const std::vector<agent::WorkerPlace>& members, const config::BatchTriple& batch,
               const std::vector<agent::WorkerPlace>& donors = {});

  comm::Store& store_;
  LiveTransport& transport_;
  agent::Clock clock_;
  std::string who_;
  bool batchContract_ = true;
  std::vector<agent::WorkerPlace> members_;  // the live group, in rank order
  // The workers' LOCAL_WORLD_SIZE at their start: the distance of their partition copies.
  std::int64_t copyDistance_ = 1;
  std::uint64_t liveGeneration_ = 0;
  struct Pending {
    agent::StartWorkers target;  // published once every joiner is ready
    std::uint64_t generation = 0;
    std::int64_t joiners = 0;
    LocalsByNode keep;  // the survivors told of it
  };
  std::optional<Pending> pending_;
  // Donors left out of the generation they give their copies to: stopped (`target` adopted with
  // `keep`) once `donors` said so (live/donated) or kDonorReleaseWait passed.
  struct DonorRelease {
    std::uint64_t generation = 0;
    std::int64_t donors = 0;
    agent::StartWorkers target;
    LocalsByNode keep;
    std::uint64_t liveGeneration = 0;
    agent::Time since{0};
  };
  std::optional<DonorRelease> donorRelease_;
};

}  // namespace stretch::launcher
