#pragma once
// LiveRecovery: a worker's side of live recovery under `stretch launch --recovery live|auto`
// (docs/launch.md "Live recovery"; the store protocol is runtime/live/generation.hpp).
//
// When a peer dies, the survivors' collectives fail (CommPeerError within milliseconds over
// Gloo). recover() then abandons the step in flight (Engine::abandonStep), waits for the agent's
// next generation record, joins that generation's group through the agent's store (which
// outlives every worker) and calls Engine::rejoin: the survivors keep their processes and their
// state, the replacement workers and new nodes receive it over the backend, and training goes on
// from the last completed step: no process restarts, no checkpoint is read. A generation that
// grows the job (a node joins) reaches running workers as SIGUSR1: they finish the step and
// call recover() at the boundary (announced()).
//
// The loop a job writes (examples/common/job_support.hpp wraps it):
//   auto live = LiveRecovery::fromEnvironment();        // null outside a live-capable launcher
//   options.processGroup = live && live->joining() ? live->joinGroup() : initDistributed();
//   options.liveJoin = live && live->joining();
//   auto [engine, ...] = initialize(model, config, options);
//   if (!options.liveJoin) { /* load a checkpoint */ }
//   if (live) live->start(*engine);
//   while (engine->globalSteps() < steps) {
//     try { /* forward, backward, step */ if (boundary && live && live->announced())
//     live->recover(*engine); } catch (const comm::CommError&) { if (!live ||
//     !live->canRecover(*engine)) throw; live->recover(*engine); }
//   }
//
// Variables (set by `stretch launch`): STRETCH_AGENT_STORE (HOST:PORT of the agent's store),
// STRETCH_STORE_TOKEN, STRETCH_NODE_ID, LOCAL_RANK, STRETCH_LIVE_GENERATION (the live generation
// the worker starts in, or for a joiner the one it waits for), STRETCH_LIVE_JOIN=1 for a worker
// started into a running job; STRETCH_LIVE_TIMEOUT (seconds, default 300) bounds the wait
// for a new generation. Not thread-safe; one per process (it owns the SIGUSR1 handler).

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/comm/communicator.hpp"
#include "runtime/comm/init_distributed.hpp"
#include "runtime/comm/process_group.hpp"
#include "runtime/comm/store.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/live/device_generations.hpp"
#include "runtime/live/generation.hpp"

namespace stretch {
class PeriodicTask;
}

namespace stretch::engine {

// Thrown to a worker waiting for a generation when the job finished without it (the others
// trained the last step first). Not an error: the worker should end with status 0.
class JobFinishedElsewhere : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class LiveRecovery {
 public:
  // Null when STRETCH_AGENT_STORE is unset (no live-capable agent) or empty. Throws ConfigError
  // naming the variable when one is malformed; connects to the agent's store.
  static std::unique_ptr<LiveRecovery> fromEnvironment();

  LiveRecovery(std::shared_ptr<comm::Store> store, std::string storeHost, std::string nodeId,
               std::int64_t localRank, std::uint64_t generation, bool joining,
               std::chrono::milliseconds timeout,
               std::chrono::milliseconds rendezvousTimeout = kRendezvousTimeout);
  ~LiveRecovery();
  LiveRecovery(const LiveRecovery&) = delete;
  LiveRecovery& operator=(const LiveRecovery&) = delete;

  // How long the members of a generation's group, once all are there, may take to connect
  // (each member first waits for all the others, until the generation is superseded, the job
  // finishes or the live timeout ends).
  static constexpr std::chrono::milliseconds kRendezvousTimeout{20'000};

  // This worker was started into a running job (a replacement or a new node's worker).
  bool joining() const noexcept { return joining_; }
  // A joiner's group: says it is ready, then joins the first generation from
  // STRETCH_LIVE_GENERATION on that includes it. Build the engine over it with
  // InitOptions::liveJoin, then call start().
  std::shared_ptr<comm::ProcessGroup> joinGroup();

  // After the engine is built (and, for a worker that is not joining, a checkpoint loaded):
  // turns on a ZeRO 1/2 engine's partition copies (Engine::copyPartitions: collective, every
  // worker of the generation calls start()), a joiner takes the job's state (Engine::rejoin);
  // then the worker sets its live/capable key, so that the agent keeps it running through the
  // next failure. Throws PartitionsLostError (after withdrawing the key) when a joiner's
  // generation lost a partition with all its copies.
  void start(Engine& engine);

  // True at most once per announcement: the agent published a newer generation (SIGUSR1 came
  // and the store says so). Cheap unless a signal came; call it at step boundaries.
  bool announced();
  // What the generations' groups use for device buffers besides Gloo (engine::jobCommunication's
  // DeviceComm): call before joinGroup() and start(). Without it they serve CPU buffers only.
  // When device.backend has a communicator library (comm::communicatorLibrary: "nccl" once
  // registerNcclBackend ran; `library` overrides it, for tests), each generation's device
  // buffers go over a communicator of its own, shrunk from the last generation's or grown or
  // built anew (live::DeviceGenerations), unless two of its ranks share a device (several local
  // "nodes" on one machine), where they stay staged through host memory.
  void setDeviceComm(comm::DeviceComm device,
                     std::shared_ptr<comm::CommunicatorLibrary> library = nullptr);
  // Whether recover() can take over after a failed collective (the engine supports it, and its
  // buffers are on the CPU, staged through host memory, or on a backend with a communicator
  // library that generations shrink and grow).
  bool canRecover(const Engine& engine) const noexcept {
    return liveCapable_ && engine.supportsLiveRecovery();
  }
  // Abandons the step in flight, waits for the next generation (newer than this worker's), joins
  // its group and continues there (Engine::rejoin); a worker left out of a generation waits for
  // the next, after giving the members its ZeRO 1/2 copies when the record names it a donor. Throws
  // CommTimeoutError when no generation comes within the timeout, JobFinishedElsewhere when the job
  // finished meanwhile and PartitionsLostError (after withdrawing its live/capable key, as every
  // member of the group does) when a ZeRO 1/2 partition died with all its copies: the worker exits
  // and the agent restarts the job from its checkpoint.
  void recover(Engine& engine);

  std::uint64_t generation() const noexcept { return generation_; }
  // After the job's last step: workers still waiting for a generation end
  // (JobFinishedElsewhere).
  void finish();

 private:
  // Waits for a record newer than `after`.
  live::LiveGeneration waitForGeneration(std::uint64_t after);
  // A ZeRO 1/2 partition died with its copies: withdraws this worker's live/capable key, waits
  // for the group's other members to do the same (a barrier), logs why.
  void partitionsLost(Engine& engine, const PartitionsLostError& e);
  // The groups a worker joins for a generation: its group (null for a donor or a worker
  // without a place), and the transfer group when the record has donors.
  struct Joined {
    std::shared_ptr<comm::ProcessGroup> group;
    std::shared_ptr<comm::ProcessGroup> transfer;
  };
  // Joins `record`'s groups (this worker's ranks in them); nothing when the worker has no place
  // in it, or a group did not form (a member died, the generation was superseded), so that the
  // caller waits for the next generation. Each group forms in two phases: every member marks
  // itself present and waits for the others (no time limit of its own: a member may still be
  // leaving a generation that broke, which takes up to kRendezvousTimeout), then they connect
  // within rendezvousTimeout_, all having arrived. Without the first phase, members that came
  // early gave up before the late ones arrived, and nobody published another generation.
  Joined joinRecord(const live::LiveGeneration& record);
  // One group of generation `generation` (its store under `prefix`): this worker's rank in it.
  // Throws CommError when it does not form or the generation is superseded meanwhile,
  // JobFinishedElsewhere when the job finished.
  // `device`: the generation's own group (not its transfer group), whose device buffers go over
  // the generation's communicator when DeviceGenerations serve this worker.
  std::shared_ptr<comm::ProcessGroup> connect(const live::LiveGeneration& record,
                                              const std::string& prefix, std::int64_t rank,
                                              std::int64_t size, bool device);
  // While the worker trains over a generation's communicator: when the agent's signal comes and
  // its newest generation leaves out some of this worker's group (a peer failed: this worker may
  // be blocked in a collective with it), revokes the communicator, which fails what waits on the
  // dead peer at once. It asks the store nothing between signals.
  // `world`: the size of the group the worker trains in now.
  void watchTraining(std::int64_t world);
  // A donor of `record`: gives its partition copies over `transfer`; failures are logged (the
  // members' side decides what follows).
  void donate(Engine& engine, comm::ProcessGroup& transfer, const live::LiveGeneration& record);

  std::shared_ptr<comm::Store> store_;
  std::string storeHost_;
  std::string nodeId_;
  std::int64_t localRank_ = 0;
  std::uint64_t generation_ = 0;
  bool joining_ = false;
  // The live generations' groups are Gloo (CPU buffers): an engine on a GPU keeps the restart
  // path (start() says so).
  bool liveCapable_ = true;
  comm::DeviceComm deviceComm_;
  // Set when the generations' device buffers go over communicators (setDeviceComm).
  std::unique_ptr<live::DeviceGenerations> deviceGenerations_;
  std::unique_ptr<PeriodicTask> trainingWatch_;  // watchTraining()'s, between recoveries
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds rendezvousTimeout_;
  live::LiveGeneration pending_;  // a joiner's record, between joinGroup() and start()
  std::shared_ptr<comm::ProcessGroup> pendingTransfer_;  // and its transfer group, if any
};

}  // namespace stretch::engine
