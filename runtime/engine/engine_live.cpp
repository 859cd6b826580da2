// Engine::abandonStep / rejoin / copyPartitions: live recovery's engine side. A generation's
// survivors and its joiners end up with one state, sent over the new group so that every rank
// applies identical bytes and the replicas stay bitwise equal: ZeRO 0 takes the state of the
// rank that completed the most steps; ZeRO 1/2 rebuild the latest step whose every partition
// survives from the owners' and buddies' host copies (partition_plan.hpp), those of donors too
// (survivors outside the new group, over a transfer group). The driver (store protocol, new
// groups) is live_recovery.cpp.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "runtime/comm/errors.hpp"
#include "runtime/common/error.hpp"
#include "runtime/elasticity/runtime_batch.hpp"
#include "runtime/engine/checkpoint_io.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/engine/partition_plan.hpp"
#include "runtime/engine/tensor_view.hpp"
#include "runtime/live/generation.hpp"

namespace stretch::engine {

namespace {

using GenericDict = c10::impl::GenericDict;

// The tags of the buddy copies' and of rejoin's point-to-point messages.
constexpr int kCopyTag = 0x5350;
constexpr int kStateTag = 0x5351;

const c10::IValue& entry(const GenericDict& dict, const std::string& key) {
  const auto it = dict.find(key);
  if (it == dict.end())
    throw InternalError(fmt::format("live state: the key '{}' is missing", key));
  return it->value();
}

// `bytes` of rank `root` on every rank of `group`.
void broadcastBytes(comm::ProcessGroup& group, std::vector<char>& bytes, int root) {
  std::vector<std::int64_t> length = {static_cast<std::int64_t>(bytes.size())};
  group.broadcast(comm::BufferView::of(std::span(length)), root)->wait();
  bytes.resize(static_cast<std::size_t>(length[0]));
  std::span<std::uint8_t> raw(reinterpret_cast<std::uint8_t*>(bytes.data()), bytes.size());
  group.broadcast(comm::BufferView::of(raw), root)->wait();
}

// Elements [begin, begin + size) of `full` (fp32, at least `valid` long), zeros past `valid`.
torch::Tensor sliceOrZeros(const torch::Tensor& full, std::int64_t valid, std::int64_t begin,
                           std::int64_t size, const torch::TensorOptions& options) {
  auto out = torch::zeros({size}, options);
  const std::int64_t end = std::min(begin + size, valid);
  if (begin < end)
    out.narrow(0, 0, end - begin).copy_(full.narrow(0, begin, end - begin));
  return out;
}

std::string joinKeys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys)
    out += (out.empty() ? "" : "\n") + k;
  return out;
}

std::vector<std::string> splitKeys(const std::string& joined) {
  std::vector<std::string> out;
  std::size_t begin = 0;
  while (begin < joined.size()) {
    const std::size_t end = std::min(joined.find('\n', begin), joined.size());
    out.push_back(joined.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

// Where old partition p's elements go in the new layout: `tensors` optimizer rows beside the
// fp32 weights, old partitions of `oldSize` elements, new slices of `newSize`.
struct PartitionLayout {
  std::int64_t numel = 0;
  std::int64_t oldSize = 0;
  std::int64_t newSize = 0;
  std::int64_t tensors = 0;

  // [begin, end) of old partition p that member q's new slice holds (end == begin: nothing).
  std::pair<std::int64_t, std::int64_t> overlap(std::int64_t p, std::int64_t q) const {
    const std::int64_t begin = std::max(p * oldSize, q * newSize);
    const std::int64_t end = std::min({(p + 1) * oldSize, (q + 1) * newSize, numel});
    return std::pair{begin, std::max(begin, end)};
  }
  // The optimizer rows of `copy` (old partition p) in [begin, end), contiguous.
  torch::Tensor blockOf(const torch::Tensor& copy, std::int64_t p, std::int64_t begin,
                        std::int64_t end) const {
    return copy.view({1 + tensors, oldSize})
        .narrow(0, 1, tensors)
        .narrow(1, begin - p * oldSize, end - begin)
        .contiguous();
  }
  // The elements of old partition p that are weights (not padding).
  std::int64_t weightsIn(std::int64_t p) const {
    return std::clamp<std::int64_t>(numel - p * oldSize, 0, oldSize);
  }
  // A block of old partition p into member `rank`'s slices.
  void takeBlock(const std::vector<torch::Tensor>& slices, const torch::Tensor& block,
                 std::int64_t p, int rank) const {
    const auto [begin, end] = overlap(p, rank);
    for (std::int64_t k = 0; k < tensors; ++k) {
      slices[static_cast<std::size_t>(k)]
          .narrow(0, begin - rank * newSize, end - begin)
          .copy_(block[k]);
    }
  }
};

}  // namespace

void Engine::abandonStep() {
  // The copy exchange of the last completed step first: it completes unless a peer died (whose
  // closed connection fails it at once).
  finishCopyExchange(/*tolerateFailure=*/true);
  // Leave the old group now: its connections close, so peers still waiting in a collective with
  // this rank fail at once instead of at their timeout. Aborted rather than only released, for
  // other owners (the job's InitOptions, the default group) may keep its backend alive. A group
  // with the same rank and size and no backend stays, for dpRank() and logs.
  group_->abort(
      fmt::format("rank {} abandoned step {} for live recovery", group_->rank(), globalSteps_ + 1));
  group_ = std::make_shared<comm::ProcessGroup>(group_->rank(), group_->size());
  if (flatGrads_.defined())
    flatGrads_.zero_();
  if (gradAccum32_.defined())
    gradAccum32_.zero_();
  if (zeroStage_ == 2) {
    for (auto& p : params_)
      p.mutable_grad().reset();
  }
  for (auto& b : buckets_)
    b.work.reset();
  overlapActive_ = false;
  overlapReduced_ = false;
  microSteps_ = microStepsAtStep_;
  if (loader_)
    loader_->setPosition(positionAtStep_);
  stepStart_.reset();
}

void Engine::enablePartitionCopies(int buddyDistance) {
  if (buddyDistance < 1) {
    throw ConfigError(
        ErrorDetail{"buddy distance", std::to_string(buddyDistance), "a positive number of ranks"});
  }
  buddyDistance_ = buddyDistance;
  if (zeroStage_ >= 1)
    partitionCopies_ = true;
}

int Engine::buddyDistance() const noexcept {
  // The layout the agent assumes when it picks an interim generation's members.
  return live::liveBuddyDistance(buddyDistance_, dpWorldSize());
}

std::int64_t Engine::partitionCopyBytes() const {
  std::int64_t bytes = 0;
  for (const auto* copies : {ownCopies_, wardCopies_}) {
    for (int i = 0; i < 2; ++i) {
      if (copies[i].data.defined())
        bytes += copies[i].data.numel() * static_cast<std::int64_t>(sizeof(float));
    }
  }
  return bytes;
}

void Engine::copyPartitions() {
  if (!partitionCopies_)
    return;
  const auto start = std::chrono::steady_clock::now();
  torch::NoGradGuard noGrad;
  const int rank = dpRank();
  const int world = dpWorldSize();
  const std::int64_t size = partitionSize_;
  std::vector<std::string> keys;
  std::vector<torch::Tensor> tensors;
  for (const auto& [key, t] : optimizer_->stateTensors()) {
    if (t.defined()) {
      keys.push_back(key);
      tensors.push_back(t);
    }
  }
  const std::int64_t length = (1 + static_cast<std::int64_t>(keys.size())) * size;
  const auto hostFloat = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCPU);

  // This rank's own partition into the older of its two buffers.
  finishCopyExchange(/*tolerateFailure=*/false);  // the previous one, if nothing waited yet
  const int ownSlot = 1 - newestOwn_;
  PartitionCopy& own = ownCopies_[ownSlot];
  own.step = -1;
  if (!own.data.defined() || own.data.numel() != length)
    own.data = torch::empty({length}, hostFloat);
  own.data.narrow(0, 0, size).copy_(master_);
  for (std::size_t i = 0; i < tensors.size(); ++i)
    own.data.narrow(0, static_cast<std::int64_t>(1 + i) * size, size).copy_(tensors[i]);
  own.world = world;
  own.partition = rank;
  own.keys = keys;
  own.replicated = replicatedState();
  own.step = globalSteps_;
  newestOwn_ = ownSlot;

  // Sent to the buddy and the ward's received while the next step computes (every partition is
  // the same size); finishCopyExchange() waits before that step's first collective.
  if (world > 1) {
    const int wardSlot = 1 - newestWard_;
    PartitionCopy& ward = wardCopies_[wardSlot];
    ward.step = -1;
    if (!ward.data.defined() || ward.data.numel() != length)
      ward.data = torch::empty({length}, hostFloat);
    ward.world = world;
    const int distance = buddyDistance();
    ward.partition = (rank + world - distance) % world;
    ward.keys = keys;
    copySend_ = group_->send(toBufferView(own.data), (rank + distance) % world, kCopyTag);
    copyReceive_ =
        group_->recv(toBufferView(ward.data), static_cast<int>(ward.partition), kCopyTag);
    copyReceiveSlot_ = wardSlot;
  }
  ++partitionCopyCount_;
  timers_.partitionCopy +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

void Engine::finishCopyExchange(bool tolerateFailure) {
  if (!copySend_ && !copyReceive_)
    return;
  const auto start = std::chrono::steady_clock::now();
  auto send = std::move(copySend_);
  auto receive = std::move(copyReceive_);
  try {
    if (send)
      send->wait();
    if (receive) {
      receive->wait();
      // The ward's copy of the step its own copy was made at (the rank's own newest).
      wardCopies_[copyReceiveSlot_].step = ownCopies_[newestOwn_].step;
      newestWard_ = copyReceiveSlot_;
    }
  } catch (const comm::CommError&) {
    if (!tolerateFailure)
      throw;
  }
  timers_.partitionCopy +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

void Engine::relayoutForWorld() {
  const int world = group_->size();
  const int rank = group_->rank();
  const int partitions = zeroStage_ >= 1 ? world : 1;
  const std::int64_t size = (numel_ + partitions - 1) / partitions;
  const std::int64_t padded =
      zeroStage_ >= 1 ? size * world : ((numel_ + world - 1) / world) * world;
  torch::NoGradGuard noGrad;
  if (padded != flatParams_.numel()) {
    auto params = torch::zeros({padded}, flatParams_.options());
    params.narrow(0, 0, numel_).copy_(flatParams_.narrow(0, 0, numel_));
    flatParams_ = params;
    if (zeroStage_ != 2)
      flatGrads_ = torch::zeros({padded}, flatParams_.options());
    for (std::size_t i = 0; i < params_.size(); ++i) {
      auto& p = params_[i];
      const std::int64_t n = p.numel();
      p.set_data(flatParams_.narrow(0, paramOffsets_[i], n).view(p.sizes()));
      if (flatGrads_.defined())
        p.mutable_grad() = flatGrads_.narrow(0, paramOffsets_[i], n).view(p.sizes());
      else
        p.mutable_grad().reset();
    }
  }
  partitionSize_ = size;
  if (zeroStage_ >= 1) {
    // The rank's slice of the new layout (transferPartitions fills an fp16/bf16 model's copy).
    auto slice = flatParams_.narrow(0, rank * size, size);
    master_ = dtype_ == torch::kFloat32 ? slice : slice.to(torch::kFloat32).clone();
    if (zeroStage_ == 2)
      gradAccum32_ = torch::zeros({size}, master_.options());
  } else if (dtype_ == torch::kFloat32) {
    master_ = flatParams_;
  } else if (master_.numel() != padded) {
    auto master = torch::zeros({padded}, master_.options());
    master.narrow(0, 0, numel_).copy_(master_.narrow(0, 0, numel_));
    master_ = master;
  }
  const bool overlap = zeroStage_ == 0 && world > 1 && config_.zero.overlapCommEffective();
  if (overlap && accumulators_.empty())
    setUpOverlap();
  else if (zeroStage_ == 0 && !accumulators_.empty())
    computeBuckets(flatGrads_.numel(), bucketElements_);
  overlapEnabled_ = overlap;
}

GenericDict Engine::replicatedState() const {
  auto state = newStringDict();
  auto scalars = newStringDict();
  for (const auto& [key, v] : optimizer_->scalarState())
    scalars.insert(key, v);
  state.insert("scalars", scalars);
  auto buffers = newStringDict();
  for (const auto& item : model_.ptr()->named_buffers(true))
    buffers.insert(item.key(), item.value().detach().to(torch::kCPU).clone());
  state.insert("buffers", buffers);
  state.insert("lr_last_batch_iteration",
               scheduler_ ? scheduler_->lastBatchIteration() : std::int64_t{0});
  state.insert("scaler", scalerState());
  state.insert("epoch", positionAtStep_.epoch);
  state.insert("consumed", positionAtStep_.consumed);
  state.insert("global_steps", globalSteps_);
  state.insert("global_samples", globalSamples_);
  state.insert("skipped_steps", skippedSteps_);
  state.insert("micro_steps", microStepsAtStep_);
  return state;
}

void Engine::applyReplicatedState(const GenericDict& state,
                                  const std::map<std::string, torch::Tensor>& optimizerTensors) {
  torch::NoGradGuard noGrad;
  std::map<std::string, double> scalars;
  for (const auto& item : entry(state, "scalars").toGenericDict())
    scalars[item.key().toStringRef()] = item.value().toDouble();
  optimizer_->loadState(optimizerTensors, scalars);
  const GenericDict buffers = entry(state, "buffers").toGenericDict();
  for (const auto& item : model_.ptr()->named_buffers(true))
    item.value().copy_(entry(buffers, item.key()).toTensor());
  if (scheduler_) {
    LrScheduleState s;
    s.lastBatchIteration = entry(state, "lr_last_batch_iteration").toInt();
    scheduler_->loadState(s);
    applySchedule(scheduler_->getLr());
  }
  if (scaler_) {
    const GenericDict saved = entry(state, "scaler").toGenericDict();
    auto s = scaler_->state();
    s.curScale = entry(saved, "cur_scale").toDouble();
    s.curIter = entry(saved, "cur_iter").toInt();
    s.lastOverflowIter = entry(saved, "last_overflow_iter").toInt();
    s.curHysteresis = entry(saved, "cur_hysteresis").toInt();
    scaler_->loadState(s);
  }
  globalSteps_ = entry(state, "global_steps").toInt();
  globalSamples_ = entry(state, "global_samples").toInt();
  skippedSteps_ = entry(state, "skipped_steps").toInt();
  // A step starts at a multiple of the (possibly new) accumulation count.
  const std::int64_t gas = batch_.gradientAccumulation;
  microSteps_ = (entry(state, "micro_steps").toInt() + gas - 1) / gas * gas;
  microStepsAtStep_ = microSteps_;
  positionAtStep_ = {entry(state, "epoch").toInt(), entry(state, "consumed").toInt()};
  if (loader_)
    loader_->reshard(dpRank(), dpWorldSize(), batch_.microBatchPerGpu, positionAtStep_);
  if (flatGrads_.defined())
    flatGrads_.zero_();
  if (gradAccum32_.defined())
    gradAccum32_.zero_();
  stepStart_.reset();
  timersAtStepStart_ = timers_;
}

int Engine::rejoinReplicated(GenericDict& state,
                             std::map<std::string, torch::Tensor>& optimizerTensors) {
  const int rank = dpRank();
  const int world = dpWorldSize();
  // Who continues: the lowest rank that completed the most steps. (A rank can be one step
  // ahead: it finished a step's last collective before a peer's connection broke.)
  std::vector<std::int64_t> most = {globalSteps_};
  group_->allReduce(comm::BufferView::of(std::span(most)), comm::ReduceOp::Max)->wait();
  std::vector<std::int64_t> source = {globalSteps_ == most[0] ? rank : world};
  group_->allReduce(comm::BufferView::of(std::span(source)), comm::ReduceOp::Min)->wait();
  const int root = static_cast<int>(source[0]);

  std::vector<char> bytes;
  if (rank == root) {
    auto mine = replicatedState();
    mine.insert("fp32", master_.narrow(0, 0, numel_).detach().to(torch::kCPU).clone());
    auto tensors = newStringDict();
    for (const auto& [key, t] : optimizer_->stateTensors()) {
      if (t.defined())
        tensors.insert(key, t.narrow(0, 0, numel_).detach().to(torch::kCPU).clone());
    }
    mine.insert("state", tensors);
    bytes = serializeState(mine);
  }
  broadcastBytes(*group_, bytes, root);
  state = deserializeState(bytes, "live state").toGenericDict();

  relayoutForWorld();
  torch::NoGradGuard noGrad;
  master_.narrow(0, 0, numel_).copy_(entry(state, "fp32").toTensor().to(master_.device()));
  for (const auto& item : entry(state, "state").toGenericDict()) {
    auto t = torch::zeros({master_.numel()}, master_.options());
    t.narrow(0, 0, numel_).copy_(item.value().toTensor().to(master_.device()));
    optimizerTensors[item.key().toStringRef()] = t;
  }
  publishMaster();
  return root;
}

int Engine::transferPartitions(comm::ProcessGroup& pool, int newWorld, bool member,
                               GenericDict* state,
                               std::map<std::string, torch::Tensor>* optimizerTensors) {
  const PartitionPlan plan = planFromPooledCopies(pool);
  const std::vector<std::string> keys = broadcastReplicatedState(pool, plan, member, state);

  // The fp32 weights: an fp32 model on the CPU receives them straight into its flat buffer (laid
  // out for the new group first), others into a temporary fp32 copy.
  const std::int64_t newSize = (numel_ + newWorld - 1) / newWorld;
  const auto hostFloat = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCPU);
  torch::Tensor weights;
  std::vector<torch::Tensor> slices;
  const bool direct = member && dtype_ == torch::kFloat32 && flatParams_.is_cpu();
  if (member) {
    if (direct) {
      relayoutForWorld();
      weights = flatParams_;
    } else {
      weights = torch::zeros({numel_}, hostFloat);
    }
    for (std::int64_t k = 0; k < plan.stateTensors; ++k)
      slices.push_back(torch::zeros({newSize}, hostFloat));
  }
  exchangePartitions(pool, plan, newWorld, weights, slices);
  if (!member)
    return plan.replicated.rank;
  installPartitionSlice(pool.rank(), direct, weights, keys, slices, *optimizerTensors);
  return plan.replicated.rank;
}

PartitionPlan Engine::planFromPooledCopies(comm::ProcessGroup& pool) const {
  // What every rank of the pool holds, pooled; every rank plans alike from the same reports.
  std::vector<HeldCopy> mine;
  for (int slot = 0; slot < 2; ++slot) {
    const PartitionCopy& own = ownCopies_[slot];
    if (own.step >= 0) {
      mine.push_back({true, own.step, own.world, own.partition,
                      static_cast<std::int64_t>(own.keys.size()), slot});
    }
    const PartitionCopy& ward = wardCopies_[slot];
    if (ward.step >= 0) {
      mine.push_back({false, ward.step, ward.world, ward.partition,
                      static_cast<std::int64_t>(ward.keys.size()), slot});
    }
  }
  const std::vector<std::int64_t> encoded = encodeHeld(mine);
  std::vector<std::int64_t> pooled(encoded.size() * static_cast<std::size_t>(pool.size()));
  {
    std::vector<std::int64_t> input = encoded;
    pool.allGather(comm::BufferView::of(std::span(input)), comm::BufferView::of(std::span(pooled)))
        ->wait();
  }
  const auto held = decodeHeld(pooled, pool.size());
  auto plan = planPartitionRecovery(held);
  if (!plan) {
    throw PartitionsLostError(fmt::format(
        "live recovery of ZeRO stage {} is impossible: {}; the job restarts from its last "
        "checkpoint",
        zeroStage_, describeLostPartitions(held, buddyDistance_)));
  }
  return std::move(*plan);
}

const Engine::PartitionCopy& Engine::copyAt(const PartitionSource& source) const {
  return source.own ? ownCopies_[source.slot] : wardCopies_[source.slot];
}

std::vector<std::string> Engine::broadcastReplicatedState(comm::ProcessGroup& pool,
                                                          const PartitionPlan& plan, bool member,
                                                          GenericDict* state) {
  // The replicated state of the step, with the names of the optimizer tensors.
  std::vector<char> bytes;
  if (pool.rank() == plan.replicated.rank) {
    const PartitionCopy& own = copyAt(plan.replicated);
    auto replicated = own.replicated.toGenericDict().copy();
    replicated.insert("state_keys", joinKeys(own.keys));
    bytes = serializeState(replicated);
  }
  broadcastBytes(pool, bytes, plan.replicated.rank);
  std::vector<std::string> keys;
  if (member) {
    *state = deserializeState(bytes, "live state").toGenericDict();
    keys = splitKeys(entry(*state, "state_keys").toStringRef());
    if (static_cast<std::int64_t>(keys.size()) != plan.stateTensors)
      throw InternalError("live state: the optimizer tensors' names do not match the copies");
  }
  return keys;
}

void Engine::exchangePartitions(comm::ProcessGroup& pool, const PartitionPlan& plan, int newWorld,
                                const torch::Tensor& weights,
                                const std::vector<torch::Tensor>& slices) {
  // Old partition p, from its source, to every member q of the new layout: the fp32 weights of
  // the partition (every member holds the whole model), received in place, then the optimizer
  // tensors' elements that fall in q's new slice (a member holds only its slice: nothing else of
  // the old state is materialised). Two messages per (p, q), in p order on both sides.
  const int rank = pool.rank();
  const PartitionLayout layout{numel_, (numel_ + plan.world - 1) / plan.world,
                               (numel_ + newWorld - 1) / newWorld, plan.stateTensors};
  const auto hostFloat = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCPU);
  std::vector<std::pair<torch::Tensor, std::shared_ptr<comm::Work>>> sends;
  std::vector<std::tuple<torch::Tensor, std::int64_t, std::shared_ptr<comm::Work>>> receives;
  for (std::int64_t p = 0; p < plan.world; ++p) {
    const PartitionSource& source = plan.partitions[static_cast<std::size_t>(p)];
    for (int q = 0; q < newWorld; ++q) {
      const auto [begin, end] = layout.overlap(p, q);
      const std::int64_t valid = layout.weightsIn(p);
      if (rank == source.rank) {
        const torch::Tensor& copy = copyAt(source).data;
        const auto own = copy.narrow(0, 0, valid);  // row 0: the weights, contiguous
        if (q == rank) {
          weights.narrow(0, p * layout.oldSize, valid).copy_(own);
          if (end > begin)
            layout.takeBlock(slices, layout.blockOf(copy, p, begin, end), p, rank);
          continue;
        }
        if (valid > 0)
          sends.emplace_back(own, pool.send(toBufferView(own), q, kStateTag));
        if (end > begin) {
          auto block = layout.blockOf(copy, p, begin, end);
          sends.emplace_back(block, pool.send(toBufferView(block), q, kStateTag));
        }
      } else if (q == rank) {
        if (valid > 0) {
          auto into = weights.narrow(0, p * layout.oldSize, valid);
          receives.emplace_back(into, -1, pool.recv(toBufferView(into), source.rank, kStateTag));
        }
        if (end > begin) {
          auto block = torch::empty({layout.tensors, end - begin}, hostFloat);
          receives.emplace_back(block, p, pool.recv(toBufferView(block), source.rank, kStateTag));
        }
      }
    }
  }
  for (auto& [buffer, p, work] : receives) {
    work->wait();
    if (p >= 0)
      layout.takeBlock(slices, buffer, p, rank);
  }
  for (auto& [buffer, work] : sends)
    work->wait();
}

void Engine::installPartitionSlice(int rank, bool direct, const torch::Tensor& weights,
                                   const std::vector<std::string>& keys,
                                   const std::vector<torch::Tensor>& slices,
                                   std::map<std::string, torch::Tensor>& optimizerTensors) {
  // This rank's slice of the new layout.
  torch::NoGradGuard noGrad;
  if (!direct) {
    relayoutForWorld();
    flatParams_.narrow(0, 0, numel_).copy_(weights.to(flatParams_.device()));
  }
  flatParams_.narrow(0, numel_, flatParams_.numel() - numel_).zero_();
  const auto hostFloat = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCPU);
  if (dtype_ != torch::kFloat32)  // an fp32 model's master is its slice of flatParams_
    master_.copy_(sliceOrZeros(weights, numel_, rank * partitionSize_, partitionSize_, hostFloat));
  const auto onDevice = master_.options();
  for (std::size_t k = 0; k < keys.size(); ++k)
    optimizerTensors[keys[k]] = slices[k].to(onDevice);
}

void Engine::donatePartitions(comm::ProcessGroup& transfer, int newWorld) {
  if (zeroStage_ == 0 || !partitionCopies_)
    return;  // the members need nothing from a ZeRO 0 rank: each holds the whole state
  if (newWorld < 1 || newWorld >= transfer.size() || transfer.rank() < newWorld) {
    throw InternalError(fmt::format(
        "donatePartitions: rank {} of a transfer group of {} is not a donor to {} member(s)",
        transfer.rank(), transfer.size(), newWorld));
  }
  transferPartitions(transfer, newWorld, /*member=*/false, nullptr, nullptr);
}

std::int64_t Engine::rejoin(std::shared_ptr<comm::ProcessGroup> group,
                            const std::optional<config::BatchTriple>& batch,
                            const std::shared_ptr<comm::ProcessGroup>& transfer) {
  if (!supportsLiveRecovery()) {
    throw ConfigError(ErrorDetail{
        "zero_optimization.stage", std::to_string(zeroStage_),
        "0 for live recovery, or partition copies on (Engine::enablePartitionCopies): a ZeRO "
        "1/2 partition without a copy dies with its rank"});
  }
  if (!group)
    throw InternalError("rejoin: no process group");
  if (transfer && (transfer->rank() != group->rank() || transfer->size() < group->size())) {
    throw InternalError(fmt::format(
        "rejoin: rank {} of {} is rank {} of a transfer group of {}; members come first",
        group->rank(), group->size(), transfer->rank(), transfer->size()));
  }
  if (batch) {
    const std::int64_t dp = batch->microBatchPerGpu * batch->gradientAccumulation;
    if (dp < 1 || batch->trainBatchSize != dp * group->size()) {
      throw ConfigError(ErrorDetail{
          "train_batch_size", std::to_string(batch->trainBatchSize),
          fmt::format("micro batch {} x gradient accumulation {} x the new group's {} rank(s)",
                      batch->microBatchPerGpu, batch->gradientAccumulation, group->size())});
    }
  }
  // One route, as at the start: the batch is this engine's config's for the new group's size
  // (elasticity::resolveTrainingBatch); the launcher's batch, which the live generation record
  // carries when the launcher has a --config, is only checked against it, so that a config that
  // differs from the launcher's is an error here as it is at the start. The environment's batch
  // was the start's world's: it has no say here.
  elasticity::ElasticEnvironment env = elasticity::ElasticEnvironment::fromProcess();
  env.worldSize = std::to_string(group->size());
  env.launcherBatch = batch;
  env.launcherBatchName = "the live generation's train_batch_size";
  const config::BatchTriple effective =
      elasticity::resolveTrainingBatch(config_, group->size(), env).triple;
  group_ = std::move(group);
  batch_ = effective;
  GenericDict state = newStringDict();
  std::map<std::string, torch::Tensor> optimizerTensors;
  const int source = zeroStage_ == 0
                         ? rejoinReplicated(state, optimizerTensors)
                         : transferPartitions(transfer ? *transfer : *group_, group_->size(),
                                              /*member=*/true, &state, &optimizerTensors);
  applyReplicatedState(state, optimizerTensors);
  if (dpRank() == 0) {
    spdlog::info(
        "stretch engine: continuing live at step {} on {} rank(s) (state of rank {}{}), "
        "train_batch_size {} = micro batch {} x gradient accumulation {} x {}",
        globalSteps_, dpWorldSize(), source,
        zeroStage_ == 0 ? "" : ", partitions from their owners' or buddies' copies",
        batch_.trainBatchSize, batch_.microBatchPerGpu, batch_.gradientAccumulation, dpWorldSize());
  }
  copyPartitions();
  return globalSteps_;
}

}  // namespace stretch::engine
