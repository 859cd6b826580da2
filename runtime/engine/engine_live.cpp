// Engine::abandonStep / rejoin: live recovery's engine side. A generation's survivors and its
// joiners end up with the state of the rank that completed the most steps, sent over the new
// group as the same pickled dict on every rank (so every rank applies identical bytes and the
// replicas stay bitwise equal). The driver (store protocol, new groups) is live_recovery.cpp.

#include <algorithm>
#include <cstdint>
#include <span>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "runtime/common/error.hpp"
#include "runtime/engine/checkpoint_io.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/engine/tensor_view.hpp"

namespace stretch::engine {

namespace {

using GenericDict = c10::impl::GenericDict;

GenericDict newDict() {
  return GenericDict(c10::StringType::get(), c10::AnyType::get());
}

const c10::IValue& entry(const GenericDict& dict, const std::string& key) {
  const auto it = dict.find(key);
  if (it == dict.end())
    throw InternalError(fmt::format("live state: the key '{}' is missing", key));
  return it->value();
}

}  // namespace

void Engine::abandonStep() {
  // Let go of the old group now (a group with the same rank and size and no backend stays, for
  // dpRank() and logs): its connections close, so peers still waiting in a collective with this
  // rank fail at once instead of at their timeout.
  group_ = std::make_shared<comm::ProcessGroup>(group_->rank(), group_->size());
  if (flatGrads_.defined())
    flatGrads_.zero_();
  if (gradAccum32_.defined())
    gradAccum32_.zero_();
  for (auto& b : buckets_)
    b.work.reset();
  overlapActive_ = false;
  overlapReduced_ = false;
  microSteps_ = microStepsAtStep_;
  if (loader_)
    loader_->setPosition(positionAtStep_);
  stepStart_.reset();
}

void Engine::relayoutForWorld() {
  const int world = group_->size();
  const std::int64_t padded = ((numel_ + world - 1) / world) * world;
  if (padded != flatParams_.numel()) {
    torch::NoGradGuard noGrad;
    auto params = torch::zeros({padded}, flatParams_.options());
    params.narrow(0, 0, numel_).copy_(flatParams_.narrow(0, 0, numel_));
    flatParams_ = params;
    flatGrads_ = torch::zeros({padded}, flatParams_.options());
    for (std::size_t i = 0; i < params_.size(); ++i) {
      auto& p = params_[i];
      const std::int64_t n = p.numel();
      p.set_data(flatParams_.narrow(0, paramOffsets_[i], n).view(p.sizes()));
      p.mutable_grad() = flatGrads_.narrow(0, paramOffsets_[i], n).view(p.sizes());
    }
    if (dtype_ == torch::kFloat32) {
      master_ = flatParams_;
    } else {
      auto master = torch::zeros({padded}, master_.options());
      master.narrow(0, 0, numel_).copy_(master_.narrow(0, 0, numel_));
      master_ = master;
    }
  }
  partitionSize_ = numel_;
  const bool overlap = world > 1 && config_.zero.overlapCommEffective();
  if (overlap && accumulators_.empty())
    setUpOverlap();
  else if (!accumulators_.empty())
    computeBuckets(flatGrads_.numel(), bucketElements_);
  overlapEnabled_ = overlap;
}

std::int64_t Engine::rejoin(std::shared_ptr<comm::ProcessGroup> group,
                            const config::BatchTriple& batch) {
  if (!supportsLiveRecovery()) {
    throw ConfigError(ErrorDetail{
        "zero_optimization.stage", std::to_string(zeroStage_),
        "0 for live recovery (a ZeRO 1/2 partition dies with its rank; the job restarts from "
        "its checkpoint instead)"});
  }
  if (!group)
    throw InternalError("rejoin: no process group");
  const std::int64_t dp = batch.microBatchPerGpu * batch.gradientAccumulation;
  if (dp < 1 || batch.trainBatchSize != dp * group->size()) {
    throw ConfigError(ErrorDetail{
        "train_batch_size", std::to_string(batch.trainBatchSize),
        fmt::format("micro batch {} x gradient accumulation {} x the new group's {} rank(s)",
                    batch.microBatchPerGpu, batch.gradientAccumulation, group->size())});
  }
  group_ = std::move(group);
  batch_ = batch;
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
    auto state = newDict();
    state.insert("fp32", master_.narrow(0, 0, numel_).detach().to(torch::kCPU).clone());
    auto tensors = newDict();
    for (const auto& [key, t] : optimizer_->stateTensors()) {
      if (t.defined())
        tensors.insert(key, t.narrow(0, 0, numel_).detach().to(torch::kCPU).clone());
    }
    state.insert("state", tensors);
    auto scalars = newDict();
    for (const auto& [key, v] : optimizer_->scalarState())
      scalars.insert(key, v);
    state.insert("scalars", scalars);
    auto buffers = newDict();
    for (const auto& item : model_.ptr()->named_buffers(true))
      buffers.insert(item.key(), item.value().detach().to(torch::kCPU).clone());
    state.insert("buffers", buffers);
    state.insert("lr_last_batch_iteration",
                 scheduler_ ? scheduler_->lastBatchIteration() : std::int64_t{0});
    if (scaler_) {
      const auto s = scaler_->state();
      state.insert("cur_scale", s.curScale);
      state.insert("cur_iter", s.curIter);
      state.insert("last_overflow_iter", s.lastOverflowIter);
      state.insert("cur_hysteresis", s.curHysteresis);
    }
    state.insert("epoch", positionAtStep_.epoch);
    state.insert("consumed", positionAtStep_.consumed);
    state.insert("global_steps", globalSteps_);
    state.insert("global_samples", globalSamples_);
    state.insert("skipped_steps", skippedSteps_);
    state.insert("micro_steps", microStepsAtStep_);
    bytes = serializeState(state);
  }
  std::vector<std::int64_t> length = {static_cast<std::int64_t>(bytes.size())};
  group_->broadcast(comm::BufferView::of(std::span(length)), root)->wait();
  bytes.resize(static_cast<std::size_t>(length[0]));
  std::span<std::uint8_t> raw(reinterpret_cast<std::uint8_t*>(bytes.data()), bytes.size());
  group_->broadcast(comm::BufferView::of(raw), root)->wait();
  const GenericDict state = deserializeState(bytes, "live state").toGenericDict();

  relayoutForWorld();
  {
    torch::NoGradGuard noGrad;
    master_.narrow(0, 0, numel_).copy_(entry(state, "fp32").toTensor().to(master_.device()));
    std::map<std::string, torch::Tensor> tensors;
    for (const auto& item : entry(state, "state").toGenericDict()) {
      auto t = torch::zeros({master_.numel()}, master_.options());
      t.narrow(0, 0, numel_).copy_(item.value().toTensor().to(master_.device()));
      tensors[item.key().toStringRef()] = t;
    }
    std::map<std::string, double> scalars;
    for (const auto& item : entry(state, "scalars").toGenericDict())
      scalars[item.key().toStringRef()] = item.value().toDouble();
    optimizer_->loadState(tensors, scalars);
    publishMaster();
    const GenericDict buffers = entry(state, "buffers").toGenericDict();
    for (const auto& item : model_.ptr()->named_buffers(true))
      item.value().copy_(entry(buffers, item.key()).toTensor());
  }
  if (scheduler_) {
    LrScheduleState s;
    s.lastBatchIteration = entry(state, "lr_last_batch_iteration").toInt();
    scheduler_->loadState(s);
    applySchedule(scheduler_->getLr());
  }
  if (scaler_) {
    auto s = scaler_->state();
    s.curScale = entry(state, "cur_scale").toDouble();
    s.curIter = entry(state, "cur_iter").toInt();
    s.lastOverflowIter = entry(state, "last_overflow_iter").toInt();
    s.curHysteresis = entry(state, "cur_hysteresis").toInt();
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
    loader_->reshard(rank, world, batch_.microBatchPerGpu, positionAtStep_);
  if (flatGrads_.defined())
    flatGrads_.zero_();
  stepStart_.reset();
  timersAtStepStart_ = timers_;
  if (rank == 0) {
    spdlog::info(
        "stretch engine: continuing live at step {} on {} rank(s) (state of rank {}, {} bytes), "
        "train_batch_size {} = micro batch {} x gradient accumulation {} x {}",
        globalSteps_, world, root, bytes.size(), batch_.trainBatchSize, batch_.microBatchPerGpu,
        batch_.gradientAccumulation, world);
  }
  return globalSteps_;
}

}  // namespace stretch::engine
