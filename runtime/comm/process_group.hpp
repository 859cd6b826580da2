#pragma once
// ProcessGroup: the group of ranks an engine or agent talks to. It owns one Backend per device
// type (Gloo for CPU buffers, NCCL for CUDA buffers), routes each operation to the backend of
// the buffer's device, records it in the comms logger when one is attached, and makes
// sub-groups (data-parallel, pipeline) with newGroup().

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/comm/backend.hpp"
#include "runtime/comm/comms_logger.hpp"
#include "runtime/comm/store.hpp"

namespace stretch::comm {

class ProcessGroup {
 public:
  // `globalRanks[i]` is the world rank of group rank i (identity for the world group).
  ProcessGroup(int rank, int size, std::vector<int> globalRanks = {});

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  // World rank of group rank `groupRank`.
  int globalRank(int groupRank) const;
  // Group rank of world rank `global`, or -1 when it is not a member.
  int groupRankOf(int global) const noexcept;
  const std::vector<int>& globalRanks() const noexcept { return globalRanks_; }

  // Installs the backend serving buffers on `type`. Its rank and size must match the group's.
  void setBackend(DeviceType type, std::shared_ptr<Backend> backend);
  bool hasBackend(DeviceType type) const noexcept;
  // Throws CommUnsupportedError naming the device and the backends the group has.
  Backend& backend(DeviceType type) const;
  // The backend serving `type`, shared; nullptr when the group has none.
  std::shared_ptr<Backend> sharedBackend(DeviceType type) const;
  // The backend for CPU buffers if any, else the first one (for barriers and metadata).
  Backend& primaryBackend() const;

  // The store the group rendezvoused through (initDistributed sets it; may be null). The
  // elastic agent and checkpoint code keep small shared state in it.
  void setStore(std::shared_ptr<Store> store) { store_ = std::move(store); }
  const std::shared_ptr<Store>& store() const noexcept { return store_; }

  void setCommsLogger(std::shared_ptr<CommsLogger> logger) { logger_ = std::move(logger); }
  const std::shared_ptr<CommsLogger>& commsLogger() const noexcept { return logger_; }

  std::shared_ptr<Work> allReduce(BufferView buffer, ReduceOp op = ReduceOp::Sum,
                                  const CollectiveOptions& options = {});
  std::shared_ptr<Work> broadcast(BufferView buffer, int root,
                                  const CollectiveOptions& options = {});
  std::shared_ptr<Work> allGather(BufferView input, BufferView output,
                                  const CollectiveOptions& options = {});
  std::shared_ptr<Work> reduceScatter(BufferView input, BufferView output,
                                      ReduceOp op = ReduceOp::Sum,
                                      const CollectiveOptions& options = {});
  std::shared_ptr<Work> allToAll(BufferView input, BufferView output,
                                 const CollectiveOptions& options = {});
  std::shared_ptr<Work> send(BufferView buffer, int peer, int tag = 0,
                             const CollectiveOptions& options = {});
  std::shared_ptr<Work> recv(BufferView buffer, int peer, int tag = 0,
                             const CollectiveOptions& options = {});
  std::shared_ptr<Work> barrier(const CollectiveOptions& options = {});
  // Backend::abort on every backend of the group: this rank leaves it without waiting for anyone.
  void abort(std::string_view reason);

  // A sub-group of the group ranks `ranks` (any order, no duplicates). Must be called by every
  // rank of this group with the same list, in the same order relative to other newGroup calls
  // (as torch.distributed.new_group); returns nullptr on ranks that are not members.
  std::shared_ptr<ProcessGroup> newGroup(std::vector<int> ranks);

 private:
  template <typename Issue>
  std::shared_ptr<Work> run(OpType op, const BufferView& buffer, std::size_t loggedBytes,
                            Issue&& issue);

  int rank_;
  int size_;
  std::vector<int> globalRanks_;
  std::map<DeviceType, std::shared_ptr<Backend>> backends_;
  std::shared_ptr<CommsLogger> logger_;
  std::shared_ptr<Store> store_;
  int nextGroupId_ = 0;
};

// The groups of one rank in a data-parallel x pipeline layout over `world`, Megatron's order:
// ranks r and r + dataParallelSize are consecutive pipeline stages; a data-parallel group holds
// the ranks of one stage. world.size() must be divisible by pipelineStages.
struct ParallelGroups {
  std::shared_ptr<ProcessGroup> dataParallel;
  std::shared_ptr<ProcessGroup> pipeline;
  int stage = 0;  // this rank's pipeline stage
  int stages = 1;
};
ParallelGroups makeParallelGroups(ProcessGroup& world, int pipelineStages);

// Megatron's broadcast_from_last_pipeline_stage: the last stage of `pipeline` sends `buffer`
// (e.g. the loss) to every other stage, which receive it in place. Returns the broadcast's Work.
std::shared_ptr<Work> broadcastFromLastPipelineStage(ProcessGroup& pipeline, BufferView buffer,
                                                     const CollectiveOptions& options = {});

}  // namespace stretch::comm
