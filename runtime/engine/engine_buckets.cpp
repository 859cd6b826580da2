// The engine's gradient buckets (runtime/engine/engine.hpp): how the flat gradient buffer is cut
// into buckets, the autograd hooks that launch a bucket's all-reduce as soon as its parameters'
// gradients are ready (overlap_comm), and ZeRO 2's reduce-scatter of each bucket into this rank's
// partition. engine.cpp holds the set-up, forward, backward and step that use them.

#include <chrono>

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include "runtime/common/error.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/engine/tensor_view.hpp"

namespace stretch::engine {

using Clock = std::chrono::steady_clock;

namespace {

// Runs after a parameter's gradient was accumulated into its slot of the flat buffer.
class GradReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  GradReadyHook(std::function<void()> onReady) : onReady_(std::move(onReady)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    onReady_();
    return outputs;
  }

 private:
  std::function<void()> onReady_;
};

}  // namespace

void Engine::computeBuckets(std::int64_t total, std::int64_t size) {
  buckets_.clear();
  for (std::int64_t begin = 0; begin < total; begin += size)
    buckets_.push_back({begin, std::min(size, total - begin), {}, 0, nullptr});
  paramBuckets_.assign(params_.size(), {});
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const std::int64_t n = params_[i].numel();
    const std::int64_t offset = paramOffsets_[i];
    if (n > 0) {
      const auto first = static_cast<std::size_t>(offset / size);
      const auto last = static_cast<std::size_t>((offset + n - 1) / size);
      for (std::size_t b = first; b <= last; ++b) {
        paramBuckets_[i].push_back(b);
        buckets_[b].members.push_back(i);
      }
    }
  }
}

void Engine::setUpBuckets(std::int64_t total, std::int64_t size) {
  computeBuckets(total, size);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(params_[i]);
    accumulator->add_post_hook(std::make_unique<GradReadyHook>([this, i] { onGradReady(i); }));
    accumulators_.push_back(std::move(accumulator));
  }
}

void Engine::armBuckets() {
  for (auto& b : buckets_) {
    b.pending = static_cast<int>(b.members.size());
    b.work.reset();
  }
  nextLaunch_ = static_cast<std::int64_t>(buckets_.size()) - 1;
  overlapActive_ = true;
}

void Engine::setUpOverlap() {
  setUpBuckets(flatGrads_.numel(), bucketElements_);
  overlapEnabled_ = true;
}

void Engine::onGradReady(std::size_t param) {
  if (!overlapActive_)
    return;
  for (const std::size_t b : paramBuckets_[param])
    --buckets_[b].pending;
  if (zeroStage_ == 2) {
    while (nextLaunch_ >= 0 && buckets_[static_cast<std::size_t>(nextLaunch_)].pending <= 0)
      reduceZero2Bucket(static_cast<std::size_t>(nextLaunch_--));
    return;
  }
  // Launch in a fixed order, the same on every rank: last bucket first, each once it is ready.
  while (nextLaunch_ >= 0 && buckets_[static_cast<std::size_t>(nextLaunch_)].pending <= 0) {
    launchBucket(static_cast<std::size_t>(nextLaunch_--));
    ++launchedDuringBackward_;
  }
}

void Engine::launchBucket(std::size_t index) {
  auto& b = buckets_[index];
  torch::Tensor bucket = flatGrads_.narrow(0, b.begin, b.size);
  scaleForAverage(bucket, true);
  b.work = group_->allReduce(toBufferView(bucket), comm::ReduceOp::Sum);
}

void Engine::finishOverlap() {
  overlapActive_ = false;
  // Buckets whose parameters got no gradient in this backward (unused parameters) go last.
  while (nextLaunch_ >= 0)
    launchBucket(static_cast<std::size_t>(nextLaunch_--));
  for (auto& b : buckets_) {
    b.work->wait();
    torch::Tensor bucket = flatGrads_.narrow(0, b.begin, b.size);
    scaleForAverage(bucket, false);
    b.work.reset();
  }
  overlapReduced_ = true;
}

void Engine::setUpZero2Buckets() {
  // Capped so that reducing during backward bounds the gradients alive at once: with
  // DeepSpeed's default (5e8 elements) one bucket would wait for every gradient.
  setUpBuckets(numel_, std::min(bucketElements_, kZero2MaxBucketElements));
  paramPending_.assign(params_.size(), 0);
}

void Engine::reduceZero2Bucket(std::size_t index) {
  const auto start = Clock::now();
  torch::NoGradGuard noGrad;
  const auto& b = buckets_[index];
  // The bucket's gradients, contiguous in flat order; a parameter without one adds zeros.
  torch::Tensor bucket = torch::empty({b.size}, master_.options().dtype(dtype_));
  for (const std::size_t i : b.members) {
    const std::int64_t begin = std::max(paramOffsets_[i], b.begin);
    const std::int64_t end = std::min(paramOffsets_[i] + params_[i].numel(), b.begin + b.size);
    torch::Tensor slot = bucket.narrow(0, begin - b.begin, end - begin);
    const torch::Tensor& grad = params_[i].grad();
    if (grad.defined())
      slot.copy_(grad.reshape({-1}).narrow(0, begin - paramOffsets_[i], end - begin));
    else
      slot.zero_();
  }
  // All-reduce the bucket (DeepSpeed's ZeRO 2 with reduce_scatter off: the same traffic as
  // ZeRO 0) and keep the part this rank owns, accumulated in fp32.
  scaleForAverage(bucket, true);
  if (dpWorldSize() > 1)
    group_->allReduce(toBufferView(bucket), comm::ReduceOp::Sum)->wait();
  scaleForAverage(bucket, false);
  const std::int64_t ownBegin = dpRank() * partitionSize_;
  const std::int64_t begin = std::max(ownBegin, b.begin);
  const std::int64_t end = std::min(ownBegin + partitionSize_, b.begin + b.size);
  if (begin < end) {
    gradAccum32_.narrow(0, begin - ownBegin, end - begin)
        .add_(bucket.narrow(0, begin - b.begin, end - begin).to(torch::kFloat32));
  }
  // A parameter whose every bucket is reduced gives its gradient back.
  for (const std::size_t i : b.members) {
    if (--paramPending_[i] == 0)
      params_[i].mutable_grad().reset();
  }
  zero2ReduceSeconds_ += std::chrono::duration<double>(Clock::now() - start).count();
}

void Engine::finishZero2() {
  overlapActive_ = false;
  // Buckets whose parameters got no gradient in this backward (unused ones) go last.
  while (nextLaunch_ >= 0)
    reduceZero2Bucket(static_cast<std::size_t>(nextLaunch_--));
  for (auto& p : params_)
    p.mutable_grad().reset();
}

}  // namespace stretch::engine
