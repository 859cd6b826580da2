#include "runtime/engine/engine.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "runtime/accel/accelerator.hpp"
#include "runtime/comm/in_process_backend.hpp"
#include "runtime/comm/init_distributed.hpp"
#include "runtime/common/error.hpp"
#include "runtime/elasticity/runtime_batch.hpp"
#include "runtime/engine/checkpoint_dir.hpp"
#include "runtime/engine/tensor_view.hpp"

namespace stretch::engine {

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::shared_ptr<comm::ProcessGroup> singleRankGroup() {
  // The backend keeps the world's state alive; the InProcessWorld object itself may go.
  auto group = std::make_shared<comm::ProcessGroup>(0, 1);
  group->setBackend(comm::DeviceType::Cpu, comm::InProcessWorld(1).backend(0));
  return group;
}

// The config's own errors, raised before the batch is resolved and before any collective.
void validateConfig(const config::DsConfig& config) {
  if (config.zero.stage < 0 || config.zero.stage > 2) {
    throw ConfigError(ErrorDetail{"zero_optimization.stage", std::to_string(config.zero.stage),
                                  "0, 1 or 2 (ZeRO stage 3 is not implemented)"});
  }
  if (config.fp16.enabled && config.bf16.enabled) {
    throw ConfigError(ErrorDetail{"fp16.enabled", "true",
                                  "fp16 and bf16 not both enabled (bf16.enabled is true)"});
  }
  if (config.zero.stage == 2 && config.gradientAllreduceOp == config::GradientAllreduceOp::Mean &&
      (config.prescaleGradients || config.gradientPredivideFactor != 1.0)) {
    throw ConfigError(ErrorDetail{
        "gradient_predivide_factor", fmt::format("{}", config.gradientPredivideFactor),
        "1.0 and prescale_gradients false with ZeRO stage 2 (DeepSpeed asserts the same)"});
  }
  if (config.gradientPredivideFactor <= 0.0) {
    throw ConfigError(ErrorDetail{"gradient_predivide_factor",
                                  fmt::format("{}", config.gradientPredivideFactor),
                                  "a positive number"});
  }
  if (config.gradientClipping < 0.0) {
    throw ConfigError(ErrorDetail{"gradient_clipping", fmt::format("{}", config.gradientClipping),
                                  "a non-negative number (0 disables clipping)"});
  }
}

// The elasticity solver's batch for this world size when enabled, else the batch keys; its
// warnings and the settings without effect are logged first, so that they show even when the
// group does not fit.
config::BatchTriple resolveBatch(const config::DsConfig& config, std::int64_t worldSize,
                                 int groupSize) {
  const auto training = elasticity::resolveTrainingBatch(
      config, worldSize, elasticity::ElasticEnvironment::fromProcess());
  for (const auto& warning : training.warnings)
    spdlog::warn("{}", warning);
  for (const auto& warning : settingsWithoutEffect(config))
    spdlog::warn("{}", warning);
  if (training.dataParallelSize != groupSize) {
    throw ConfigError(ErrorDetail{
        "world size", std::to_string(training.dataParallelSize),
        fmt::format("the process group's size {} (model parallelism is not implemented)",
                    groupSize)});
  }
  return training.triple;
}

}  // namespace

Initialized initialize(torch::nn::AnyModule model, const config::DsConfig& config,
                       InitOptions options) {
  std::shared_ptr<Engine> engine(new Engine());
  engine->setUp(std::move(model), config, options);
  engine->lastStepEnd_ = Clock::now();
  return {engine, engine->optimizer_, engine->loader_, engine->scheduler_};
}

Engine::~Engine() {
  // The last step's copy exchange, so that no transfer outlives the group (peers finish theirs).
  finishCopyExchange(/*tolerateFailure=*/true);
}

void Engine::setUp(torch::nn::AnyModule model, const config::DsConfig& config,
                   InitOptions& options) {
  config_ = config;
  model_ = std::move(model);
  timings_ = StepTimingsFile::fromEnvironment();
  heartbeat_ = Heartbeat::fromEnvironment();

  group_ = options.processGroup ? options.processGroup : comm::defaultGroup();
  if (!group_)
    group_ = singleRankGroup();

  validateConfig(config);
  zeroStage_ = static_cast<int>(config.zero.stage);
  batch_ = resolveBatch(config, options.worldSize.value_or(group_->size()), group_->size());
  bucketElements_ = std::max<std::int64_t>(1, config.zero.reduceBucketSize);

  // Device and dtype.
  device_ = options.device ? *options.device
                           : torch::Device(accel::getAccelerator()->currentDeviceName());
  dtype_ = config.fp16.enabled   ? torch::kFloat16
           : config.bf16.enabled ? torch::kBFloat16
                                 : torch::kFloat32;
  model_.ptr()->to(device_, dtype_);

  const std::vector<torch::Tensor> frozen = setUpFlatBuffers();
  // A live joiner gets the job's state from rejoin() instead.
  if (group_->size() > 1 && !options.liveJoin)
    broadcastInitialWeights(frozen);
  setUpMaster(config);
  setUpOptimizer(config, options);
  if (dpRank() == 0) {
    const int world = group_->size();
    spdlog::info(
        "stretch engine: {} parameters ({} trainable elements), {} on {}, ZeRO stage {}, "
        "{} rank(s), train_batch_size {} = micro batch {} x gradient accumulation {} x {}",
        params_.size(), numel_, c10::toString(dtype_), device_.str(), zeroStage_, world,
        batch_.trainBatchSize, batch_.microBatchPerGpu, batch_.gradientAccumulation, world);
  }
}

std::vector<torch::Tensor> Engine::setUpFlatBuffers() {
  // Flat parameter and gradient buffers; parameters and grads become views into them. A tensor
  // registered under two names (tied weights) gets one slot, under its first name; parameters
  // that need no gradient (frozen) stay where they are and are only broadcast.
  std::unordered_set<const c10::TensorImpl*> seen;
  std::vector<torch::Tensor> frozen;
  for (const auto& item : model_.ptr()->named_parameters(/*recurse=*/true)) {
    if (!seen.insert(item.value().unsafeGetTensorImpl()).second)
      continue;
    if (!item.value().requires_grad()) {
      frozen.push_back(item.value());
      continue;
    }
    paramNames_.push_back(item.key());
    params_.push_back(item.value());
    numel_ += item.value().numel();
  }
  if (params_.empty())
    throw ConfigError("initialize: the model has no trainable parameters");
  const int world = group_->size();
  const int partitions = zeroStage_ >= 1 ? world : 1;
  partitionSize_ = (numel_ + partitions - 1) / partitions;
  // Padded to a multiple of the world size so that reduce_scatter blocks line up with
  // partitions (stage 0 pads too: the cost is at most world - 1 elements).
  const std::int64_t padded =
      zeroStage_ >= 1 ? partitionSize_ * world : ((numel_ + world - 1) / world) * world;
  auto flatOptions = torch::TensorOptions().dtype(dtype_).device(device_);
  flatParams_ = torch::zeros({padded}, flatOptions);
  // ZeRO 2 keeps no full gradient buffer: autograd's per-parameter gradients are reduced bucket
  // by bucket during backward and released (setUpZero2Buckets).
  if (zeroStage_ != 2)
    flatGrads_ = torch::zeros({padded}, flatOptions);
  torch::NoGradGuard noGrad;
  std::int64_t offset = 0;
  for (auto& p : params_) {
    const std::int64_t n = p.numel();
    auto view = flatParams_.narrow(0, offset, n);
    view.copy_(p.detach().reshape({-1}));
    p.set_data(view.view(p.sizes()));
    if (flatGrads_.defined())
      p.mutable_grad() = flatGrads_.narrow(0, offset, n).view(p.sizes());
    else
      p.mutable_grad().reset();
    paramOffsets_.push_back(offset);
    offset += n;
  }
  return frozen;
}

void Engine::broadcastInitialWeights(const std::vector<torch::Tensor>& frozen) {
  // Every rank starts from rank 0's weights (DeepSpeed's _broadcast_model), frozen ones too.
  group_->broadcast(toBufferView(flatParams_), 0)->wait();
  torch::NoGradGuard noGrad;
  for (const auto& p : frozen) {
    if (p.is_contiguous()) {
      group_->broadcast(toBufferView(p), 0)->wait();
    } else {
      auto staged = p.contiguous();
      group_->broadcast(toBufferView(staged), 0)->wait();
      p.copy_(staged);
    }
  }
}

void Engine::setUpMaster(const config::DsConfig& config) {
  // fp32 master weights the optimizer steps.
  if (dtype_ == torch::kFloat32) {
    master_ = zeroStage_ >= 1 ? flatParams_.narrow(0, dpRank() * partitionSize_, partitionSize_)
                              : flatParams_;
  } else {
    auto slice = zeroStage_ >= 1 ? flatParams_.narrow(0, dpRank() * partitionSize_, partitionSize_)
                                 : flatParams_;
    master_ = slice.to(torch::kFloat32).clone();
  }
  if (zeroStage_ == 2) {
    gradAccum32_ = torch::zeros({partitionSize_}, master_.options());
    setUpZero2Buckets();
  }
  if (zeroStage_ == 0 && group_->size() > 1 && config.zero.overlapCommEffective())
    setUpOverlap();
}

void Engine::setUpOptimizer(const config::DsConfig& config, const InitOptions& options) {
  // Optimizer, scheduler, loss scaler, data.
  if (options.optimizer) {
    optimizer_ = options.optimizer;
  } else if (config.optimizer) {
    optimizer_ = makeOptimizer(*config.optimizer);
  } else {
    throw ConfigError(
        ErrorDetail{"optimizer", "missing", "an \"optimizer\" section or a client optimizer"});
  }
  if (options.lrScheduler) {
    scheduler_ = options.lrScheduler;
  } else if (config.scheduler) {
    LrScheduleOptions scheduleOptions;
    scheduleOptions.optimizerHasBetas = optimizer_->name().rfind("Adam", 0) == 0;
    scheduler_ = makeLrSchedule(*config.scheduler, 1, optimizer_->lr(), scheduleOptions);
    for (const auto& warning : scheduler_->warnings())
      spdlog::warn("scheduler: {}", warning);
  }
  if (scheduler_) {
    // DeepSpeed's schedules write their initial lr (and betas) into the optimizer when built.
    applySchedule(scheduler_->getLastLr());
  }
  if (config.fp16.enabled)
    // DeepSpeed's rule per wrapper: FP16_Optimizer's (no hysteresis) without ZeRO, the
    // DynamicLossScaler with ZeRO 1/2.
    scaler_ = makeLossScaler(config.fp16, zeroStage_ == 0 ? LossScaleRule::kFp16Optimizer
                                                          : LossScaleRule::kZeroOptimizer);
  if (options.trainingData) {
    loader_ = std::make_shared<DataLoader>(*options.trainingData, batch_.microBatchPerGpu, dpRank(),
                                           group_->size(), options.dataSeed,
                                           /*shuffle=*/true, /*dropLast=*/false);
  }
  if (loader_)
    positionAtStep_ = loader_->position();
}

int Engine::dpRank() const noexcept {
  return group_->rank();
}
int Engine::dpWorldSize() const noexcept {
  return group_->size();
}

comm::Backend& Engine::backend() const {
  return group_->backend(device_.is_cuda() ? comm::DeviceType::Cuda : comm::DeviceType::Cpu);
}

bool Engine::isGradientAccumulationBoundary() const noexcept {
  return (microSteps_ + 1) % batch_.gradientAccumulation == 0;
}

double Engine::lossScale() const {
  return scaler_ ? scaler_->curScale() : 1.0;
}

std::vector<double> Engine::learningRates() const {
  return {optimizer_->lr()};
}

std::int64_t Engine::optimizerStateBytes() const {
  std::int64_t bytes = optimizer_->stateBytes();
  if (dtype_ != torch::kFloat32 || zeroStage_ >= 1)
    bytes += master_.numel() * static_cast<std::int64_t>(sizeof(float));
  else
    bytes += numel_ * static_cast<std::int64_t>(sizeof(float));
  if (gradAccum32_.defined())
    bytes += gradAccum32_.numel() * static_cast<std::int64_t>(sizeof(float));
  return bytes;
}

torch::Tensor Engine::forward(const torch::Tensor& input) {
  const auto start = Clock::now();
  if (!stepStart_) {
    stepStart_ = start;
  }
  torch::Tensor in = input;
  if (config_.fp16.enabled && config_.fp16.autoCast && in.is_floating_point())
    in = in.to(dtype_);
  torch::Tensor out = model_.forward(in);
  timers_.forward += msSince(start);
  return out;
}

torch::Tensor Engine::backward(const torch::Tensor& loss) {
  const auto start = Clock::now();
  torch::Tensor scaled = loss;
  if (batch_.gradientAccumulation > 1)
    scaled = scaled.to(torch::kFloat32) / static_cast<double>(batch_.gradientAccumulation);
  torch::Tensor forBackward = scaled;
  if (scaler_)
    forBackward = scaled.to(torch::kFloat32) * scaler_->curScale();
  const bool overlap = overlapEnabled_ && isGradientAccumulationBoundary();
  const bool zero2 = zeroStage_ == 2;
  if (zero2) {
    for (std::size_t i = 0; i < params_.size(); ++i)
      paramPending_[i] = static_cast<int>(paramBuckets_[i].size());
    zero2ReduceSeconds_ = 0;
  }
  if (overlap || zero2)
    armBuckets();
  try {
    forBackward.backward();
  } catch (...) {
    overlapActive_ = false;
    throw;
  }
  if (overlap)
    finishOverlap();
  if (zero2)
    finishZero2();
  timers_.backward += msSince(start) - zero2ReduceSeconds_ * 1000.0;
  timers_.allreduce += zero2ReduceSeconds_ * 1000.0;
  return scaled.detach();
}

void Engine::scaleForAverage(torch::Tensor& t, bool beforeReduction) const {
  if (config_.gradientAllreduceOp == config::GradientAllreduceOp::Sum)
    return;
  const double world = dpWorldSize();
  const double predivide = config_.gradientPredivideFactor;
  if (config_.prescaleGradients) {
    if (beforeReduction)
      t.mul_(1.0 / world);
    return;
  }
  if (beforeReduction) {
    if (predivide != 1.0)
      t.mul_(1.0 / predivide);
  } else if (predivide != world) {
    t.mul_(predivide / world);
  }
}

void Engine::reduceScatterInto(const torch::Tensor& flat, torch::Tensor& out) {
  const int world = dpWorldSize();
  const std::int64_t p = partitionSize_;
  torch::Tensor input = flat;
  scaleForAverage(input, true);
  if (world == 1) {
    out.copy_(input);
  } else if (p * world <= bucketElements_) {
    group_->reduceScatter(toBufferView(input), toBufferView(out), comm::ReduceOp::Sum)->wait();
  } else {
    // Chunk c of every partition at once: stage the world blocks contiguously.
    const std::int64_t chunk = std::max<std::int64_t>(1, bucketElements_ / world);
    for (std::int64_t begin = 0; begin < p; begin += chunk) {
      const std::int64_t n = std::min(chunk, p - begin);
      std::vector<torch::Tensor> blocks;
      blocks.reserve(static_cast<std::size_t>(world));
      for (int r = 0; r < world; ++r)
        blocks.push_back(input.narrow(0, r * p + begin, n));
      torch::Tensor staged = torch::cat(blocks);
      torch::Tensor piece = out.narrow(0, begin, n);
      torch::Tensor result = piece.is_contiguous() ? piece : torch::empty_like(piece);
      group_->reduceScatter(toBufferView(staged), toBufferView(result), comm::ReduceOp::Sum)
          ->wait();
      if (!piece.is_same(result))
        piece.copy_(result);
    }
  }
  scaleForAverage(out, false);
}

void Engine::reduceBoundaryGradients() {
  const int world = dpWorldSize();
  if (world == 1) {
    scaleForAverage(flatGrads_, true);
    scaleForAverage(flatGrads_, false);
    return;
  }
  if (zeroStage_ == 0) {
    const std::int64_t total = flatGrads_.numel();
    for (std::int64_t begin = 0; begin < total; begin += bucketElements_) {
      torch::Tensor bucket = flatGrads_.narrow(0, begin, std::min(bucketElements_, total - begin));
      scaleForAverage(bucket, true);
      group_->allReduce(toBufferView(bucket), comm::ReduceOp::Sum)->wait();
      scaleForAverage(bucket, false);
    }
  }
}

bool Engine::anyRankOverflowed(const torch::Tensor& grad) {
  const bool local = !torch::isfinite(grad).all().item<bool>();
  if (dpWorldSize() == 1 || zeroStage_ == 0)
    return local;  // stage 0: every rank holds the same reduced gradient
  std::vector<std::int32_t> flag = {local ? 1 : 0};
  group_->allReduce(comm::BufferView::of(std::span(flag)), comm::ReduceOp::Max)->wait();
  return flag[0] != 0;
}

double Engine::globalNorm(const torch::Tensor& grad) {
  // DeepSpeed's (and clip_grad_norm_'s) sum: each parameter's norm in double, squared and
  // summed in double. One fp32 norm over the whole flat buffer loses ~4e-5 relative on a
  // 1 M-element model, enough to drift from PyTorch within 20 steps (bench/compare_gpt.py).
  const std::int64_t begin = zeroStage_ >= 1 ? dpRank() * partitionSize_ : 0;
  const std::int64_t end = begin + grad.numel();
  double sumSquares = 0;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const std::int64_t lo = std::max(begin, paramOffsets_[i]);
    const std::int64_t hi = std::min(end, paramOffsets_[i] + params_[i].numel());
    if (lo >= hi)
      continue;
    const double n = grad.narrow(0, lo - begin, hi - lo).to(torch::kFloat64).norm().item<double>();
    sumSquares += n * n;
  }
  if (zeroStage_ >= 1 && dpWorldSize() > 1) {
    std::vector<double> s = {sumSquares};
    group_->allReduce(comm::BufferView::of(std::span(s)), comm::ReduceOp::Sum)->wait();
    sumSquares = s[0];
  }
  return std::sqrt(sumSquares);
}

void Engine::step() {
  const auto start = Clock::now();
  double reduceMs = 0;
  const bool boundary = isGradientAccumulationBoundary();
  if (boundary) {
    const auto reduceStart = Clock::now();
    if (!overlapReduced_)
      reduceBoundaryGradients();
    overlapReduced_ = false;
    // The fp32 gradient of this rank's master weights.
    torch::Tensor grad32;
    if (zeroStage_ == 2) {
      grad32 = gradAccum32_;
    } else if (zeroStage_ == 1) {
      torch::Tensor mine = torch::empty({partitionSize_}, flatGrads_.options());
      reduceScatterInto(flatGrads_, mine);
      grad32 = mine.to(torch::kFloat32);
    } else {
      grad32 = flatGrads_.to(torch::kFloat32);
    }
    reduceMs = msSince(reduceStart);
    timers_.allreduce += reduceMs;

    // The previous step's copies reached every buddy before any rank can complete this step
    // (its gather of the weights needs every rank past this point): copyPartitions.
    finishCopyExchange(/*tolerateFailure=*/false);
    const double scale = scaler_ ? scaler_->curScale() : 1.0;
    const bool checkOverflow = scaler_ || (config_.bf16.enabled && config_.bf16.checkGradOverflow);
    const bool overflow = checkOverflow && anyRankOverflowed(grad32);
    if (scaler_)
      scaler_->update(overflow);
    if (overflow) {
      ++skippedSteps_;
      if (dpRank() == 0) {
        spdlog::info("step {}: gradient overflow, update skipped; loss scale {} -> {}",
                     globalSteps_ + 1, scale, lossScale());
      }
    } else {
      applyUpdate(grad32, scale);
      if (scheduler_)
        applySchedule(scheduler_->step());
    }
    if (flatGrads_.defined())
      flatGrads_.zero_();
    if (gradAccum32_.defined())
      gradAccum32_.zero_();
    ++globalSteps_;
    globalSamples_ += batch_.trainBatchSize;
    if (heartbeat_)
      heartbeat_->progress(globalSteps_);
    if (config_.stepsPerPrint && *config_.stepsPerPrint > 0 &&
        globalSteps_ % *config_.stepsPerPrint == 0) {
      printProgress();
    }
  }
  ++microSteps_;
  if (boundary) {
    microStepsAtStep_ = microSteps_;
    if (loader_)
      positionAtStep_ = loader_->position();
    // Live recovery (ZeRO 1/2): the completed step's partitions to host memory, and to the
    // buddy while the next step computes.
    copyPartitions();
  }
  const double stepMs = msSince(start);
  timers_.step += stepMs;
  if (boundary) {
    if (timings_) {
      StepTiming t;
      t.rank = dpRank();
      t.worldSize = group_->size();
      t.step = globalSteps_;
      t.microBatch = batch_.microBatchPerGpu;
      t.gas = batch_.gradientAccumulation;
      t.forwardMs = timers_.forward - timersAtStepStart_.forward;
      t.backwardMs = timers_.backward - timersAtStepStart_.backward;
      t.allreduceMs = timers_.allreduce - timersAtStepStart_.allreduce;
      t.optimizerMs = stepMs - reduceMs;
      t.gradientBytes = numel_ * static_cast<std::int64_t>(c10::elementSize(dtype_));
      t.stepMs = stepStart_ ? msSince(*stepStart_) : stepMs;
      t.periodMs = msSince(lastStepEnd_);
      t.unixNs = unixNowNs();
      timings_->record(t);
    }
    timersAtStepStart_ = timers_;
    stepStart_.reset();
    lastStepEnd_ = Clock::now();
  }
}

void Engine::applyUpdate(const torch::Tensor& grad32, double scale) {
  torch::NoGradGuard noGrad;
  // May alias flatGrads_ (fp32, stage 0) or gradAccum32_: both are zeroed after the step.
  torch::Tensor g = grad32;
  double combined = scale;
  if (config_.gradientClipping > 0.0) {
    // The norm costs a pass over the gradients: only computed when clipping needs it.
    const double norm = globalNorm(g) / scale;
    lastGradNorm_ = norm;
    const double coef = config_.gradientClipping / (norm + 1e-6);
    if (coef < 1.0)
      combined = scale / coef;
  }
  if (combined != 1.0)
    g.mul_(1.0 / combined);
  optimizer_->step(master_, g);
  publishMaster();
}

void Engine::applySchedule(const std::vector<double>& lrs) {
  if (!lrs.empty())
    optimizer_->setLr(lrs.front());
  if (scheduler_->cyclesMomentum()) {
    const auto betas = scheduler_->getLastMomentum();
    if (!betas.empty())
      optimizer_->setMomentum(betas.front().beta1);
  }
}

void Engine::publishMaster() {
  torch::NoGradGuard noGrad;
  const int world = dpWorldSize();
  torch::Tensor own = zeroStage_ >= 1
                          ? flatParams_.narrow(0, dpRank() * partitionSize_, partitionSize_)
                          : flatParams_;
  if (own.data_ptr() != master_.data_ptr())  // fp32 masters are the parameters themselves
    own.copy_(master_);
  if (zeroStage_ >= 1 && world > 1) {
    torch::Tensor mine = own.clone();
    group_->allGather(toBufferView(mine), toBufferView(flatParams_))->wait();
  }
}

void Engine::printProgress() {
  if (dpRank() != 0)
    return;
  std::string momentum;
  if (const auto m = optimizer_->momentum())
    momentum = fmt::format(", mom=[{}]", *m);
  spdlog::info("step={}, skipped={}, lr=[{}]{}{}", globalSteps_, skippedSteps_, optimizer_->lr(),
               momentum,
               scaler_ ? fmt::format(", loss_scale={}", scaler_->curScale()) : std::string());
  if (config_.wallClockBreakdown) {
    spdlog::info(
        "time (ms) | forward: {:.2f} | backward: {:.2f} | allreduce: {:.2f} | step: {:.2f}",
        timers_.forward, timers_.backward, timers_.allreduce, timers_.step);
  }
}

std::vector<std::string> settingsWithoutEffect(const config::DsConfig& config) {
  std::vector<std::string> out;
  const auto add = [&out](std::string_view key, std::string_view value, std::string_view why) {
    out.push_back(
        fmt::format("{} = {}: has no effect in the Stretch engine ({})", key, value, why));
  };
  const auto& zero = config.zero;
  if (const auto& offload = zero.offloadOptimizer;
      offload && offload->device != config::OffloadDevice::None) {
    add("zero_optimization.offload_optimizer.device",
        offload->device == config::OffloadDevice::Cpu ? "cpu" : "nvme",
        "the optimizer state stays on the training device");
  }
  if (!zero.contiguousGradients) {
    add("zero_optimization.contiguous_gradients", "false",
        "gradients always live in one flat buffer");
  }
  if (!zero.reduceScatter && zero.stage >= 1) {
    add("zero_optimization.reduce_scatter", "false",
        "ZeRO 1/2 always reduce-scatter; DeepSpeed's all-reduce fallback gives the same result");
  }
  if (!zero.allgatherPartitions && zero.stage >= 1) {
    add("zero_optimization.allgather_partitions", "false",
        "updated partitions are always all-gathered");
  }
  if (zero.allgatherBucketSize != config::ZeroConfig{}.allgatherBucketSize && zero.stage >= 1) {
    add("zero_optimization.allgather_bucket_size", std::to_string(zero.allgatherBucketSize),
        "the all-gather of updated partitions is one collective");
  }
  if (zero.roundRobinGradients)
    add("zero_optimization.round_robin_gradients", "true", "partitions are contiguous ranges");
  if (!zero.ignoreUnusedParameters && zero.stage >= 1) {
    add("zero_optimization.ignore_unused_parameters", "false",
        "parameters without a gradient count as zero gradients, never an error");
  }
  if (zero.overlapComm.value_or(false) && zero.stage == 1) {
    add("zero_optimization.overlap_comm", "true",
        "ZeRO 1 reduces at the accumulation boundary, after backward");
  }
  if (zero.elasticCheckpoint)
    add("zero_optimization.elastic_checkpoint", "true", "any checkpoint loads at any world size");
  if (!zero.loadFromFp32Weights) {
    add("zero_optimization.load_from_fp32_weights", "false",
        "the fp32 master weights in the optimizer states are always loaded");
  }
  if (config.checkpoint.loadUniversal) {
    add("checkpoint.load_universal", "true",
        "checkpoints are always loaded by element range, at any world size");
  }
  if (config.checkpoint.useNodeLocalStorage)
    add("checkpoint.use_node_local_storage", "true", "every rank writes to the given directory");
  if (config.checkpoint.parallelWritePipelineStage)
    add("checkpoint.parallel_write.pipeline_stage", "true", "there is no pipeline parallelism");
  if (config.bf16.immediateGradUpdate)
    add("bf16.immediate_grad_update", "true", "gradients are applied at the boundary");
  if (config.commsLogger.enabled) {
    add("comms_logger.enabled", "true",
        "the engine does not record its collectives; `stretch bench comm` measures them");
  }
  if (const auto& ac = config.activationCheckpointing) {
    if (ac->partitionActivations) {
      add("activation_checkpointing.partition_activations", "true",
          "there is no model parallelism to partition over");
    }
    if (ac->contiguousMemoryOptimization) {
      add("activation_checkpointing.contiguous_memory_optimization", "true",
          "checkpointed inputs are kept as they are");
    }
    if (ac->cpuCheckpointing) {
      add("activation_checkpointing.cpu_checkpointing", "true",
          "checkpointed inputs stay on the training device");
    }
    if (ac->numberCheckpoints) {
      add("activation_checkpointing.number_checkpoints", std::to_string(*ac->numberCheckpoints),
          "the model decides which blocks to checkpoint");
    }
    if (ac->synchronizeCheckpointBoundary) {
      add("activation_checkpointing.synchronize_checkpoint_boundary", "true",
          "only meaningful for CUDA streams DeepSpeed synchronises");
    }
    if (ac->profile)
      add("activation_checkpointing.profile", "true", "there is no checkpointing profiler");
  }
  return out;
}

}  // namespace stretch::engine
