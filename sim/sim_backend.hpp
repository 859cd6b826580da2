#pragma once
// SimBackend: a comm::Backend ("sim") whose ranks carry simulated clocks advanced by the
// collective cost model (sim/collective_cost.hpp), so that engine and agent code written against
// comm::Backend runs on simulated time.
//
// A SimWorld owns the ranks of one simulated job: `ranks` GPUs placed node by node on a
// ClusterSpec. Two modes:
//
//  - Functional: the ranks are threads of this process, each using its own backend(rank) from its
//    own thread (as with comm::InProcessWorld, which moves and reduces the data: every result is
//    the in-process backend's, bit for bit). Operations are synchronous: they return once every
//    rank has joined and the result is in place. Use it for correctness at small scale (tests run
//    64 ranks in one process).
//  - CostOnly: no data is read or written (buffers may have a null data pointer and only a
//    count; CUDA buffers are accepted, nothing touches them). Operations return at once with a
//    Work that completes when every member of the group has issued the operation, so one thread
//    may drive every rank: issue the collective on all ranks, then wait. Memory is O(1) per
//    operation in flight plus a few words per rank; no threads. For whole-world steps at scale
//    there is also a lockstep API on the world (collective(), advanceAll()) that is O(1) per call
//    whatever the world size.
//
// Simulated time. Each rank has a clock (nanoseconds since the world was created). advance(d)
// adds compute time. A collective of a group starts when every member has issued it (at the
// member's clock when it issued it) and the group's previous collective has finished; it lasts
// collectiveCost(cluster, op, bytes, placement of the group, algorithm). A member's clock is
// raised to the end time when it waits for the Work (CostOnly) or before the call returns
// (Functional): so in CostOnly, compute advanced between issuing an operation and waiting for it
// overlaps the communication, as with asynchronous all_reduce during backward. Send / recv: the
// message leaves at the sender's clock and arrives pointToPointCost later; the sender's clock
// moves to the arrival time, the receiver's to max(its clock, arrival) when it waits.
// Durations are rounded to the nearest nanosecond, so results are bit-identical run to run.
//
// bytes are counted as nccl-tests counts them (runtime/comm/bandwidth.hpp): the buffer for
// all_reduce and broadcast, the gathered output for all_gather, the full input for
// reduce_scatter and all_to_all, the message for send / recv.
//
// Sub-groups (createSubgroup) share their members' clocks and are costed with their real
// placement (how many nodes they span, how many members per node).
//
// Errors: argument checks as every backend (CommError before anything is issued); a missing
// peer fails with CommTimeoutError after the real-time timeout (Functional: inside the call;
// CostOnly: in Work::wait, so a single-threaded driver that waits before issuing every rank
// gets the timeout, not a hang); ranks of a group calling different collectives at the same
// point fail with CommError naming both and poison the group.
//
// Thread safety: each backend from one thread at a time (the comm::Backend contract); different
// ranks' backends from different threads. The lockstep API is for a single caller while no
// backend operation is in flight.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/backend.hpp"
#include "sim/cluster.hpp"
#include "sim/collective_cost.hpp"

namespace stretch::sim {

enum class SimBackendMode { Functional, CostOnly };

std::string_view toString(SimBackendMode mode) noexcept;

using SimDuration = stretch::Duration;  // Stretch's one Duration (runtime/common/duration.hpp)

// Seconds to nanoseconds, rounded to nearest (the one conversion the backend uses).
SimDuration toSimDuration(double seconds) noexcept;

struct SimWorldOptions {
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::Auto;
  // Real time a rank waits for its peers before an operation fails with CommTimeoutError.
  comm::Duration timeout = comm::kDefaultTimeout;
};

class SimBackend;

class SimWorld : public std::enable_shared_from_this<SimWorld> {
 public:
  // Throws stretch::ConfigError naming the cluster field (validateCluster) or "ranks" unless
  // 1 <= ranks <= min(cluster.gpus(), INT_MAX).
  static std::shared_ptr<SimWorld> create(const ClusterSpec& cluster, std::int64_t ranks,
                                          SimBackendMode mode, SimWorldOptions options = {});
  ~SimWorld();
  SimWorld(const SimWorld&) = delete;
  SimWorld& operator=(const SimWorld&) = delete;

  const ClusterSpec& cluster() const noexcept;
  std::int64_t size() const noexcept;
  SimBackendMode mode() const noexcept;
  const SimWorldOptions& options() const noexcept;

  // The backend of `rank` (created once and shared; the world keeps it alive only while someone
  // holds it). Throws comm::CommError for a rank outside [0, size()).
  std::shared_ptr<SimBackend> backend(std::int64_t rank);

  // Clocks. time(rank): the rank's simulated clock; maxTime(): the latest of all clocks.
  SimDuration time(std::int64_t rank) const;
  SimDuration maxTime() const noexcept;
  // Adds `compute` (>= 0) to one rank's clock / to every rank's clock (O(1)).
  void advance(std::int64_t rank, SimDuration compute);
  void advanceAll(SimDuration compute);

  // Lockstep: one collective of `bytes` over the whole world, issued by every rank at its current
  // clock: every clock becomes maxTime() + cost (or, if later, the end of the world group's
  // previous collective + cost). O(1). Returns the cost. Single caller, no backend operation in
  // flight.
  CollectiveCost collective(comm::OpType op, std::uint64_t bytes);

  // Totals over every collective and message of every group (lockstep included), counted once
  // per operation, not per rank.
  std::uint64_t operations() const noexcept;
  SimDuration communicationTime() const noexcept;  // sum of the operations' costs

  struct State;

 private:
  explicit SimWorld(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

class SimBackend final : public comm::Backend {
 public:
  struct Group;
  // Made by SimWorld::backend and createSubgroup; `inner` moves the data in Functional mode.
  SimBackend(std::shared_ptr<Group> group, int rank, std::shared_ptr<comm::Backend> inner);
  ~SimBackend() override;

  std::string_view name() const noexcept override { return "sim"; }
  int rank() const noexcept override;
  int size() const noexcept override;
  comm::Duration defaultTimeout() const noexcept override;
  // Functional: CPU only (the data is really moved). CostOnly: CPU and CUDA (nothing is touched).
  bool supportsDevice(comm::DeviceType type) const noexcept override;

  std::shared_ptr<comm::Work> allReduce(comm::BufferView buffer, comm::ReduceOp op,
                                        const comm::CollectiveOptions& options = {}) override;
  std::shared_ptr<comm::Work> broadcast(comm::BufferView buffer, int root,
                                        const comm::CollectiveOptions& options = {}) override;
  std::shared_ptr<comm::Work> allGather(comm::BufferView input, comm::BufferView output,
                                        const comm::CollectiveOptions& options = {}) override;
  std::shared_ptr<comm::Work> reduceScatter(comm::BufferView input, comm::BufferView output,
                                            comm::ReduceOp op,
                                            const comm::CollectiveOptions& options = {}) override;
  std::shared_ptr<comm::Work> allToAll(comm::BufferView input, comm::BufferView output,
                                       const comm::CollectiveOptions& options = {}) override;
  std::shared_ptr<comm::Work> send(comm::BufferView buffer, int peer, int tag = 0,
                                   const comm::CollectiveOptions& options = {}) override;
  std::shared_ptr<comm::Work> recv(comm::BufferView buffer, int peer, int tag = 0,
                                   const comm::CollectiveOptions& options = {}) override;
  std::shared_ptr<comm::Work> barrier(const comm::CollectiveOptions& options = {}) override;
  std::shared_ptr<comm::Backend> createSubgroup(const std::vector<int>& ranks,
                                                const std::string& groupName) override;

  // This rank's simulated clock (shared by every group the rank is in).
  SimDuration simulatedTime() const;
  // Adds compute time (>= 0) to this rank's clock.
  void advance(SimDuration compute);
  // The rank in the whole SimWorld (rank() is the rank within this group).
  std::int64_t worldRank() const noexcept { return worldRank_; }
  // The cost of this rank's last operation (Functional: completed; CostOnly: issued).
  const CollectiveCost& lastCost() const noexcept { return lastCost_; }
  // Where this group's members sit (used for its costs).
  const Placement& placement() const noexcept;
  SimBackendMode mode() const noexcept;

 private:
  // Registers this rank's arrival at the group's next collective and returns its Work. In
  // Functional mode `moveData` (may be empty) runs once every rank has arrived.
  std::shared_ptr<comm::Work> collective(
      comm::OpType op, const comm::BufferView* described, std::uint64_t bytes,
      const comm::CollectiveOptions& options,
      const std::function<std::shared_ptr<comm::Work>()>& moveData);
  comm::BufferView forChecks(comm::BufferView view) const noexcept;

  std::shared_ptr<Group> group_;
  int rank_;
  std::int64_t worldRank_;
  std::shared_ptr<comm::Backend> inner_;  // Functional: the in-process rank moving the data
  std::uint64_t nextSeq_ = 0;
  CollectiveCost lastCost_;
};

}  // namespace stretch::sim
