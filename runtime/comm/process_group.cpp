#include "runtime/comm/process_group.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/comm/errors.hpp"
#include "runtime/comm/staged_backend.hpp"

namespace stretch::comm {

ProcessGroup::ProcessGroup(int rank, int size, std::vector<int> globalRanks)
    : rank_(rank), size_(size), globalRanks_(std::move(globalRanks)) {
  if (size < 1 || rank < 0 || rank >= size)
    throw CommError(
        fmt::format("process group rank = {}, size = {}: expected 0 <= rank < size", rank, size));
  if (globalRanks_.empty()) {
    globalRanks_.resize(static_cast<std::size_t>(size));
    std::iota(globalRanks_.begin(), globalRanks_.end(), 0);
  }
  if (globalRanks_.size() != static_cast<std::size_t>(size))
    throw CommError(
        fmt::format("process group of size {} given {} global ranks", size, globalRanks_.size()));
}

int ProcessGroup::globalRank(int groupRank) const {
  if (groupRank < 0 || groupRank >= size_)
    throw CommError(fmt::format("group rank = {}: expected a rank in [0, {})", groupRank, size_));
  return globalRanks_[static_cast<std::size_t>(groupRank)];
}

int ProcessGroup::groupRankOf(int global) const noexcept {
  const auto it = std::find(globalRanks_.begin(), globalRanks_.end(), global);
  return it == globalRanks_.end() ? -1 : static_cast<int>(it - globalRanks_.begin());
}

void ProcessGroup::setBackend(DeviceType type, std::shared_ptr<Backend> backend) {
  if (!backend)
    throw CommError(fmt::format("process group: null backend for {}", toString(type)));
  if (backend->rank() != rank_ || backend->size() != size_) {
    throw CommError(fmt::format(
        "process group rank {} of {}: backend {} has rank {} of {}: expected the group's", rank_,
        size_, backend->name(), backend->rank(), backend->size()));
  }
  backends_[type] = std::move(backend);
}

bool ProcessGroup::hasBackend(DeviceType type) const noexcept {
  return backends_.contains(type);
}

std::shared_ptr<Backend> ProcessGroup::sharedBackend(DeviceType type) const {
  const auto it = backends_.find(type);
  return it == backends_.end() ? nullptr : it->second;
}

Backend& ProcessGroup::backend(DeviceType type) const {
  const auto it = backends_.find(type);
  if (it != backends_.end())
    return *it->second;
  std::vector<std::string> have;
  for (const auto& [device, b] : backends_)
    have.push_back(fmt::format("{} ({})", b->name(), toString(device)));
  throw CommUnsupportedError(
      fmt::format("process group has no backend for {} buffers; it has: {}", toString(type),
                  have.empty() ? std::string("none") : fmt::format("{}", fmt::join(have, ", "))));
}

Backend& ProcessGroup::primaryBackend() const {
  if (hasBackend(DeviceType::Cpu))
    return backend(DeviceType::Cpu);
  if (backends_.empty())
    throw CommUnsupportedError("process group has no backend");
  return *backends_.begin()->second;
}

template <typename Issue>
std::shared_ptr<Work> ProcessGroup::run(OpType op, const BufferView& buffer,
                                        std::size_t loggedBytes, Issue&& issue) {
  Backend& b = op == OpType::Barrier ? primaryBackend() : backend(buffer.device.type);
  if (!logger_ || !logger_->shouldRecord(op))
    return issue(b);
  // As DeepSpeed's timed_op: the logged latency covers issue to completion, so the call
  // becomes synchronous while the logger records.
  const auto start = std::chrono::steady_clock::now();
  auto work = issue(b);
  work->wait();
  logger_->record(op, loggedBytes, size_, std::chrono::steady_clock::now() - start);
  return work;
}

std::shared_ptr<Work> ProcessGroup::allReduce(BufferView buffer, ReduceOp op,
                                              const CollectiveOptions& options) {
  return run(OpType::AllReduce, buffer, buffer.bytes(),
             [&](Backend& b) { return b.allReduce(buffer, op, options); });
}

std::shared_ptr<Work> ProcessGroup::broadcast(BufferView buffer, int root,
                                              const CollectiveOptions& options) {
  return run(OpType::Broadcast, buffer, buffer.bytes(),
             [&](Backend& b) { return b.broadcast(buffer, root, options); });
}

std::shared_ptr<Work> ProcessGroup::allGather(BufferView input, BufferView output,
                                              const CollectiveOptions& options) {
  return run(OpType::AllGather, input, output.bytes(),
             [&](Backend& b) { return b.allGather(input, output, options); });
}

std::shared_ptr<Work> ProcessGroup::reduceScatter(BufferView input, BufferView output, ReduceOp op,
                                                  const CollectiveOptions& options) {
  return run(OpType::ReduceScatter, input, input.bytes(),
             [&](Backend& b) { return b.reduceScatter(input, output, op, options); });
}

std::shared_ptr<Work> ProcessGroup::allToAll(BufferView input, BufferView output,
                                             const CollectiveOptions& options) {
  return run(OpType::AllToAll, input, input.bytes(),
             [&](Backend& b) { return b.allToAll(input, output, options); });
}

std::shared_ptr<Work> ProcessGroup::send(BufferView buffer, int peer, int tag,
                                         const CollectiveOptions& options) {
  return run(OpType::Send, buffer, buffer.bytes(),
             [&](Backend& b) { return b.send(buffer, peer, tag, options); });
}

std::shared_ptr<Work> ProcessGroup::recv(BufferView buffer, int peer, int tag,
                                         const CollectiveOptions& options) {
  return run(OpType::Recv, buffer, buffer.bytes(),
             [&](Backend& b) { return b.recv(buffer, peer, tag, options); });
}

std::shared_ptr<Work> ProcessGroup::barrier(const CollectiveOptions& options) {
  return run(OpType::Barrier, BufferView{}, 0, [&](Backend& b) { return b.barrier(options); });
}

void ProcessGroup::abort(std::string_view reason) {
  // A staged backend aborts its host, which may be this group's CPU backend too: aborting a
  // backend twice does nothing the second time (Backend::abort's contract).
  for (auto& [type, backend] : backends_)
    backend->abort(reason);
}

std::shared_ptr<ProcessGroup> ProcessGroup::newGroup(std::vector<int> ranks) {
  const int id = nextGroupId_++;
  if (ranks.empty())
    throw CommError(fmt::format("newGroup #{}: ranks = []: expected at least one rank", id));
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= size_)
      throw CommError(fmt::format("newGroup #{}: ranks = [{}]: rank {} is outside [0, {})", id,
                                  fmt::join(ranks, ", "), sorted[i], size_));
    if (i > 0 && sorted[i] == sorted[i - 1])
      throw CommError(fmt::format("newGroup #{}: ranks = [{}]: rank {} appears twice", id,
                                  fmt::join(ranks, ", "), sorted[i]));
  }
  const auto me = std::find(sorted.begin(), sorted.end(), rank_);
  if (me == sorted.end())
    return nullptr;
  const int myIndex = static_cast<int>(me - sorted.begin());
  std::vector<int> globals;
  globals.reserve(sorted.size());
  for (int r : sorted)
    globals.push_back(globalRanks_[static_cast<std::size_t>(r)]);
  auto group = std::make_shared<ProcessGroup>(myIndex, static_cast<int>(sorted.size()), globals);
  const std::string name = fmt::format("group{}", id);
  // A staged backend over one of this group's own backends (a CUDA job's Gloo) wraps that
  // backend's subgroup: creating a second one under the same name would collide in the store.
  std::map<const Backend*, std::shared_ptr<Backend>> made;
  for (const auto& [device, b] : backends_) {
    if (dynamic_cast<const StagedBackend*>(b.get()) == nullptr)
      made[b.get()] = b->createSubgroup(sorted, name);
  }
  for (const auto& [device, b] : backends_) {
    const auto* staged = dynamic_cast<const StagedBackend*>(b.get());
    if (staged == nullptr) {
      group->setBackend(device, made.at(b.get()));
    } else if (const auto host = made.find(staged->host().get()); host != made.end()) {
      group->setBackend(device, staged->withHost(host->second));
    } else {
      group->setBackend(device, b->createSubgroup(sorted, name));
    }
  }
  group->setCommsLogger(logger_);
  return group;
}

ParallelGroups makeParallelGroups(ProcessGroup& world, int pipelineStages) {
  if (pipelineStages < 1 || world.size() % pipelineStages != 0) {
    throw CommError(
        fmt::format("pipeline stages = {}: expected a positive divisor of the world size {}",
                    pipelineStages, world.size()));
  }
  const int dp = world.size() / pipelineStages;
  ParallelGroups out;
  out.stages = pipelineStages;
  out.stage = world.rank() / dp;
  // Every rank creates every group in the same order (newGroup's contract).
  for (int stage = 0; stage < pipelineStages; ++stage) {
    std::vector<int> ranks;
    for (int i = 0; i < dp; ++i)
      ranks.push_back(stage * dp + i);
    if (auto g = world.newGroup(ranks))
      out.dataParallel = std::move(g);
  }
  for (int i = 0; i < dp; ++i) {
    std::vector<int> ranks;
    for (int stage = 0; stage < pipelineStages; ++stage)
      ranks.push_back(stage * dp + i);
    if (auto g = world.newGroup(ranks))
      out.pipeline = std::move(g);
  }
  return out;
}

std::shared_ptr<Work> broadcastFromLastPipelineStage(ProcessGroup& pipeline, BufferView buffer,
                                                     const CollectiveOptions& options) {
  return pipeline.broadcast(buffer, pipeline.size() - 1, options);
}

}  // namespace stretch::comm
