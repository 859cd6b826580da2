#pragma once
// The training engine: DeepSpeed's deepspeed.initialize / engine.forward / backward / step on
// LibTorch, over runtime/comm. docs/engine.md shows the loop a user writes and every config key.
//
//   auto [engine, optimizer, loader, scheduler] = stretch::engine::initialize(model, config, opts);
//   for (...) {                                   // every micro batch
//     auto batch = loader->next();
//     auto loss = lossFn(engine->forward(batch.inputs), batch.targets);
//     engine->backward(loss);
//     engine->step();                             // updates weights at each GAS boundary
//   }
//
// Memory layout: every trainable parameter becomes a view into one flat buffer of the model's
// dtype, and (ZeRO 0/1) its .grad a view into one flat gradient buffer, both padded to a
// multiple of the data-parallel size, so that reductions and ZeRO partitions are slices of one
// tensor (no flatten/unflatten copies). ZeRO 2 keeps no full gradient buffer: during every
// backward, buckets of min(reduce_bucket_size, 2^22) elements of the flat order are all-reduced
// as soon as their parameters' gradients are ready, the owner adds its part to its fp32
// partition, and the gradients are released, so a rank holds only its partition between steps. The
// fp32 master weights the optimizer steps are the flat buffer itself (fp32 model, stage 0), the
// rank's slice of it (fp32, ZeRO 1/2), or a separate fp32 copy of the rank's slice (fp16/bf16
// models).
//
// Semantics follow DeepSpeed v0.18.2 (../shared/reference/deepspeed_engine.md §1):
//  - boundary when (micro_steps + 1) % gradient_accumulation_steps == 0; micro_steps counts
//    step() calls; global_steps counts boundaries including skipped (overflow) ones;
//  - backward scales the loss by 1/GAS (and by the loss scale for fp16) and returns loss/GAS;
//  - gradients are reduced at the boundary (ZeRO 0: all_reduce in buckets; ZeRO 1: reduce_scatter
//    at the boundary; ZeRO 2: bucket by bucket during every backward, accumulated in fp32 by the
//    owner), with predivide/postscale, prescale_gradients and "gradient_allreduce_op": "sum";
//  - gradient clipping by the global L2 norm (coef = min(1, clip / (norm + 1e-6)));
//  - fp16: dynamic or static loss scaling; an overflow (inf/NaN in any rank's grads) skips the
//    update and the LR scheduler step; bf16: no scaling;
//  - the LR scheduler steps after each applied update.
// Deliberate differences are listed in docs/compatibility.md.

#include <ATen/core/ivalue.h>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/csrc/autograd/function.h>
#include <torch/nn/modules/container/any.h>
#include <torch/types.h>

#include "runtime/comm/process_group.hpp"
#include "runtime/common/error.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/engine/checkpoint_io.hpp"
#include "runtime/engine/data.hpp"
#include "runtime/engine/heartbeat.hpp"
#include "runtime/engine/loss_scaler.hpp"
#include "runtime/engine/lr_schedules.hpp"
#include "runtime/engine/optimizer.hpp"
#include "runtime/engine/step_timings.hpp"

namespace stretch::engine {

struct InitOptions {
  // Override config["optimizer"] / config["scheduler"] (DeepSpeed's precedence).
  std::shared_ptr<FlatOptimizer> optimizer;
  std::shared_ptr<LrSchedule> lrScheduler;
  // The data-parallel group; default: comm::defaultGroup(), else a group of one.
  std::shared_ptr<comm::ProcessGroup> processGroup;
  // When given, initialize() builds a DataLoader of micro batches for this rank.
  std::optional<TensorDataset> trainingData;
  std::uint64_t dataSeed = 0;
  // Where the model lives; default: the accelerator's current device (cpu, or cuda:LOCAL_RANK).
  std::optional<torch::Device> device;
  // Global world size for the elastic batch (default: the group's size).
  std::optional<std::int64_t> worldSize;
  // Live recovery's joiner (a replacement worker or a new node, Engine::rejoin): skip the
  // broadcast of rank 0's initial weights, because the job's state follows with rejoin().
  bool liveJoin = false;
};

class Engine;
struct PartitionPlan;
struct PendingLoad;
class CheckpointDirLock;
struct PartitionSource;

struct Initialized {
  std::shared_ptr<Engine> engine;
  std::shared_ptr<FlatOptimizer> optimizer;
  std::shared_ptr<DataLoader> dataLoader;   // null without trainingData
  std::shared_ptr<LrSchedule> lrScheduler;  // null without a scheduler
};

// The config settings the engine accepts but does not act on, one message each naming the key,
// its value and why it has no effect (initialize() logs them as warnings): the optimizer
// offload, DeepSpeed's communication-layout switches (reduce_scatter, allgather_partitions,
// round_robin_gradients, ...), checkpoint-storage switches, and activation_checkpointing's
// options. Keys the config parser lists as not implemented warn there (docs/config.md).
std::vector<std::string> settingsWithoutEffect(const config::DsConfig& config);

// Wraps `model` (moved to the device and dtype, its parameters re-homed into flat buffers and
// broadcast from rank 0). Throws ConfigError for config problems (batch triple, optimizer,
// scheduler, unsupported ZeRO stage), naming the key.
Initialized initialize(torch::nn::AnyModule model, const config::DsConfig& config,
                       InitOptions options = {});

// Per-phase wall-clock totals (wall_clock_breakdown), in milliseconds.
struct Timers {
  double forward = 0;
  double backward = 0;
  double allreduce = 0;
  double step = 0;
  // Live recovery's ZeRO 1/2 partition copies (copyPartitions), inside `step`.
  double partitionCopy = 0;
};

// Live recovery of a ZeRO 1/2 job is impossible: a partition died with every rank that held a
// copy of it (the job falls back to its last checkpoint). The message names the partitions.
STRETCH_DECLARE_ERROR(PartitionsLostError, Error);

// What loadCheckpoint found.
struct LoadedCheckpoint {
  std::string path;  // dir/tag
  std::string tag;
  StateDict clientState;  // the keys saveCheckpoint's clientState added
  std::int64_t savedDpWorldSize = 0;
  // The newer checkpoints that could not be loaded (missing or corrupt), "tag: why", newest
  // first; empty when latest's was loaded.
  std::vector<std::string> skipped;
};

class Engine {
 public:
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine();

  torch::Tensor forward(const torch::Tensor& input);
  // Returns the GAS-scaled loss (loss / gradient_accumulation_steps), as DeepSpeed does.
  torch::Tensor backward(const torch::Tensor& loss);
  void step();

  bool isGradientAccumulationBoundary() const noexcept;
  std::int64_t globalSteps() const noexcept { return globalSteps_; }
  std::int64_t microSteps() const noexcept { return microSteps_; }
  std::int64_t skippedSteps() const noexcept { return skippedSteps_; }
  std::int64_t globalSamples() const noexcept { return globalSamples_; }
  std::int64_t trainBatchSize() const noexcept { return batch_.trainBatchSize; }
  std::int64_t microBatchSize() const noexcept { return batch_.microBatchPerGpu; }
  std::int64_t gradientAccumulationSteps() const noexcept { return batch_.gradientAccumulation; }
  int dpRank() const noexcept;
  int dpWorldSize() const noexcept;
  int zeroStage() const noexcept { return zeroStage_; }
  torch::Device device() const noexcept { return device_; }
  torch::ScalarType dtype() const noexcept { return dtype_; }
  double lossScale() const;
  // The global gradient norm of the last applied step (unscaled, before clipping); computed
  // only when gradient_clipping is on.
  std::optional<double> lastGradNorm() const noexcept { return lastGradNorm_; }
  std::vector<double> learningRates() const;
  // Bytes of optimizer state and fp32 master weights this rank holds (1/N of stage 0's with
  // ZeRO 1/2 on N ranks, up to padding).
  std::int64_t optimizerStateBytes() const;
  const Timers& timers() const noexcept { return timers_; }
  // overlap_comm: buckets whose all-reduce started before backward returned (0 without it).
  std::int64_t bucketsLaunchedDuringBackward() const noexcept { return launchedDuringBackward_; }
  torch::nn::AnyModule& module() noexcept { return model_; }
  FlatOptimizer& optimizer() noexcept { return *optimizer_; }
  // The data-parallel group the engine trains over (a new one after rejoin()).
  const std::shared_ptr<comm::ProcessGroup>& processGroup() const noexcept { return group_; }
  LrSchedule* lrScheduler() noexcept { return scheduler_.get(); }
  DataLoader* dataLoader() noexcept { return loader_.get(); }

  // DeepSpeed's layout: dir/tag/mp_rank_00_model_states.pt (rank 0), per-rank
  // zero_pp_rank_R_mp_rank_00_optim_states.pt (ZeRO 1/2; written by every rank), dir/latest
  // (written last). Collective: every rank calls it. Returns dir/tag. Creates dir/tag; a
  // directory that cannot be created or a file that cannot be written is a CheckpointError.
  // One job per directory: the first save takes dir's lock (runtime/engine/checkpoint_dir.hpp)
  // and a save into a directory another job holds is a CheckpointError naming that job. After
  // `latest`, rank 0 removes step directories that failed saves left without a manifest.
  // Paths are plain strings and the files are written with POSIX calls, never std::filesystem
  // (runtime/engine/checkpoint_io.hpp).
  std::string saveCheckpoint(const std::string& dir, std::optional<std::string> tag = std::nullopt,
                             const StateDict& clientState = {});
  // Collective. tag: that checkpoint, or a CheckpointError naming the missing, truncated or
  // corrupt file. nullopt: dir/latest's, and when it is missing, unreadable or names a
  // checkpoint that any rank cannot load, the global_step<N> directories older than it, newest
  // first (LoadedCheckpoint::skipped says which were passed over; every rank warns why).
  // Nothing there → nullopt (DeepSpeed warns and returns None); nothing loadable → a
  // CheckpointError listing every checkpoint tried. A checkpoint that fails changes nothing. Any
  // data-parallel size may load a checkpoint written at any other: ZeRO shards are
  // re-partitioned.
  // One job per directory: a load takes (or shares) dir's lock first when dir exists, so a
  // directory another job holds is a CheckpointDirInUseError before anything is read.
  std::optional<LoadedCheckpoint> loadCheckpoint(const std::string& dir,
                                                 std::optional<std::string> tag = std::nullopt,
                                                 bool loadOptimizerStates = true,
                                                 bool loadLrSchedulerStates = true);
  // Takes (or shares) dir's lock now, creating dir, so that a job whose checkpoint directory
  // another job holds ends before its first step (CheckpointDirInUseError naming the holder)
  // instead of at its first save, after training it cannot keep. Not collective.
  void claimCheckpointDir(const std::string& dir);

  // ---- Live recovery (engine_live.cpp; runtime/engine/live_recovery.hpp drives it) ----
  // Whether this engine can continue in a new group without a checkpoint: ZeRO stage 0, whose
  // ranks each hold the whole state, or ZeRO 1/2 with partition copies on.
  bool supportsLiveRecovery() const noexcept { return zeroStage_ == 0 || partitionCopies_; }
  // ZeRO 1/2: from now on every completed step ends with copyPartitions(). Local (no
  // communication); every rank of the group must call it, with the same distance, before the
  // next step (or rejoin). A rank's buddy is `buddyDistance` ranks further (mod the world size;
  // 1 when the distance is a multiple of it): pass the ranks per node so that a copy lives on
  // another node than its partition. No effect for ZeRO 0, whose ranks each hold the whole
  // state. ConfigError for a distance below 1.
  void enablePartitionCopies(int buddyDistance = 1);
  bool partitionCopiesEnabled() const noexcept { return partitionCopies_; }
  // Copies this rank's optimizer partition (fp32 weights and optimizer tensors, with the
  // counters, scheduler, loss scaler and data position of the step) into host memory and starts
  // sending it to its buddy (enablePartitionCopies: the next rank by default) and receiving
  // its ward's (the rank it is the buddy of). The exchange runs while the next step computes and is
  // waited for before that step's first collective, so no rank completes step k + 1 before every
  // partition of step k is on its owner and its buddy. The last two steps' copies are kept, of its
  // own partition and of its ward's: a failure anywhere leaves every partition of one of the last
  // two steps on some survivor unless a rank and its buddy die together (at most one completed
  // step is trained again). Memory: 4 x (1 + optimizer tensors) x 4 bytes per element of the
  // partition (48 bytes per element with Adam: 4x the partition's own state); traffic: 1/4 of
  // that per step, sent and received. Collective; step() calls it at every boundary once
  // enablePartitionCopies() was called.
  void copyPartitions();
  // Host bytes the copies take now (0 without them), and how many copies this rank made.
  std::int64_t partitionCopyBytes() const;
  std::int64_t partitionCopyCount() const noexcept { return partitionCopyCount_; }
  // Drops the step in flight after a collective failed or a new generation was announced: the
  // gradients gathered since the last completed step are zeroed and the micro-step count and
  // the data loader go back to that step. ZeRO 0: nothing of an unfinished step was applied
  // (every collective of a step comes before the update), so the weights are those of the last
  // step this rank completed; ZeRO 1/2: a partition may be updated and the weights half
  // gathered, which rejoin() replaces from the copies. The engine lets go of its group (its
  // connections close, so peers waiting on this rank fail at once); only rejoin() may follow.
  // Local: no communication.
  void abandonStep();
  // Continues in `group` (a new generation) with `batch`, whose data-parallel size must be the
  // group's size (ConfigError otherwise), laying the flat buffers out for the new size.
  //  - ZeRO 0: every rank takes the state of the rank that completed the most steps (the
  //    lowest such rank): fp32 weights, optimizer state, loss scaler, LR scheduler, step
  //    counters, module buffers and the data position, sent by broadcast.
  //  - ZeRO 1/2: the ranks pool the copies they hold (copyPartitions) and continue from the
  //    latest step whose every partition survives (partition_plan.hpp): each partition's
  //    weights go from its owner or its buddy to every rank, its optimizer elements only to
  //    the rank whose new slice holds them (no rank materialises the whole optimizer state).
  //    PartitionsLostError (on every rank alike) when a partition died with all its copies.
  //    With `transfer` (the group's ranks first, with the same numbers, then donors: survivors
  //    left out of the group, calling donatePartitions), the copies of the whole transfer
  //    group count; ZeRO 0 ignores it.
  // A rank that never trained (a replacement or a new node, built with InitOptions::liveJoin)
  // receives the state like the others. Collective over `group`; every rank must have called
  // abandonStep() (or just been initialised). Returns the number of completed steps the job
  // continues from. The batch is this engine's config's for the group's size
  // (elasticity::resolveTrainingBatch, as at the start); `batch`, the launcher's for the live
  // generation (nullopt when the launcher has no --config), is a check: ConfigError when
  // supportsLiveRecovery() is false or `batch` is not micro x accumulation x the group's size;
  // ElasticityConfigError (naming the live generation's train_batch_size) when it is not the
  // batch this engine's config gives.
  std::int64_t rejoin(std::shared_ptr<comm::ProcessGroup> group,
                      const std::optional<config::BatchTriple>& batch,
                      const std::shared_ptr<comm::ProcessGroup>& transfer = nullptr);
  // A donor's half of rejoin() with a transfer group (ranks `newWorld` and above are donors):
  // sends the partitions of its copies that the plan takes from it and changes nothing of its
  // own state (it stays out of the group and may rejoin a later one). No effect for ZeRO 0 or
  // without partition copies. PartitionsLostError as rejoin(), CommError when a member fails.
  void donatePartitions(comm::ProcessGroup& transfer, int newWorld);

 private:
  friend Initialized initialize(torch::nn::AnyModule, const config::DsConfig&, InitOptions);
  Engine() = default;

  void setUp(torch::nn::AnyModule model, const config::DsConfig& config, InitOptions& options);
  // setUp's steps after the checks, in its order. The flat buffers, with the parameters and
  // their gradients as views; returns the frozen parameters, which stay where they are.
  std::vector<torch::Tensor> setUpFlatBuffers();
  void broadcastInitialWeights(const std::vector<torch::Tensor>& frozen);
  void setUpMaster(const config::DsConfig& config);
  void setUpOptimizer(const config::DsConfig& config, const InitOptions& options);
  void reduceBoundaryGradients();
  void reduceScatterInto(const torch::Tensor& flat, torch::Tensor& out);
  void scaleForAverage(torch::Tensor& t, bool beforeReduction) const;
  bool anyRankOverflowed(const torch::Tensor& grad);
  double globalNorm(const torch::Tensor& grad);
  void applyUpdate(const torch::Tensor& grad32, double scale);
  void publishMaster();
  void applySchedule(const std::vector<double>& lrs);
  std::vector<FileRecord> gatherRecords(const std::vector<FileRecord>& mine);
  void checkTagAgreement(const std::string& tag);
  // loadCheckpoint's parts: read and check one checkpoint's files for this rank (every rank's
  // range of the optimizer state, from any saved size and stage) without changing anything;
  // then apply what was read. everyRankAgrees: the AND of `ok` over the group.
  PendingLoad readForLoad(const std::string& path, bool loadOptimizerStates);
  void applyLoad(PendingLoad& pending, bool loadLrSchedulerStates);
  bool everyRankAgrees(bool ok);
  // Buckets of `size` elements over [0, total) of the flat order, each parameter's buckets, and
  // a post hook on every parameter's gradient accumulator (overlap_comm and ZeRO 2 share them).
  void setUpBuckets(std::int64_t total, std::int64_t size);
  // Before a backward that reduces in hooks: every bucket pending, the last launched first.
  void armBuckets();
  void setUpOverlap();
  void setUpZero2Buckets();
  void reduceZero2Bucket(std::size_t bucket);
  void finishZero2();
  void onGradReady(std::size_t param);
  void launchBucket(std::size_t bucket);
  void finishOverlap();
  void printProgress();
  comm::Backend& backend() const;
  // The flat buffers (and an fp16/bf16 model's fp32 master copy) re-laid out for the group's
  // size, keeping the first numel_ elements; overlap buckets follow (engine_live.cpp).
  void relayoutForWorld();
  // Bucket boundaries over [0, total) and each parameter's buckets (no hooks).
  void computeBuckets(std::int64_t total, std::int64_t size);
  // Waits for the copy exchange copyPartitions started; the ward's copy counts once received.
  // A failed exchange throws its CommError, or with `tolerateFailure` leaves the copy empty.
  void finishCopyExchange(bool tolerateFailure);
  // The buddy's distance in the current group (enablePartitionCopies).
  int buddyDistance() const noexcept;
  // Live recovery (engine_live.cpp): the state every rank holds alike (optimizer scalars,
  // module buffers, scheduler, loss scaler, counters, data position of the last completed
  // step), and installing it with the optimizer tensors of this rank's (new) partition.
  c10::impl::GenericDict replicatedState() const;
  // The loss scaler's state as checkpoints and live recovery carry it (empty without fp16).
  c10::impl::GenericDict scalerState() const;
  void applyReplicatedState(const c10::impl::GenericDict& state,
                            const std::map<std::string, torch::Tensor>& optimizerTensors);
  // ZeRO 0's and ZeRO 1/2's halves of rejoin(): the state dict to apply and, laid out for the
  // new group, the weights and optimizer tensors; return the index of the rank it came from.
  int rejoinReplicated(c10::impl::GenericDict& state,
                       std::map<std::string, torch::Tensor>& optimizerTensors);
  // ZeRO 1/2 over `pool` (the new group, or its transfer group): ranks below `newWorld` are the
  // new group's; a `member` fills `state` and `optimizerTensors`, a donor only sends.
  int transferPartitions(comm::ProcessGroup& pool, int newWorld, bool member,
                         c10::impl::GenericDict* state,
                         std::map<std::string, torch::Tensor>* optimizerTensors);
  // transferPartitions' steps, collective over `pool` in this order on every rank: the plan
  // from every rank's copies (PartitionsLostError when there is none); the step's replicated
  // state, into `state` on a member (returns the optimizer tensors' names); each old partition
  // to the members, into `weights` and `slices` (a donor's are empty); then, on a member alone,
  // its new slice installed.
  PartitionPlan planFromPooledCopies(comm::ProcessGroup& pool) const;
  std::vector<std::string> broadcastReplicatedState(comm::ProcessGroup& pool,
                                                    const PartitionPlan& plan, bool member,
                                                    c10::impl::GenericDict* state);
  void exchangePartitions(comm::ProcessGroup& pool, const PartitionPlan& plan, int newWorld,
                          const torch::Tensor& weights, const std::vector<torch::Tensor>& slices);
  void installPartitionSlice(int rank, bool direct, const torch::Tensor& weights,
                             const std::vector<std::string>& keys,
                             const std::vector<torch::Tensor>& slices,
                             std::map<std::string, torch::Tensor>& optimizerTensors);

  config::DsConfig config_;
  config::BatchTriple batch_;
  torch::nn::AnyModule model_;
  std::shared_ptr<comm::ProcessGroup> group_;
  torch::Device device_ = torch::kCPU;
  torch::ScalarType dtype_ = torch::kFloat32;
  int zeroStage_ = 0;

  std::vector<torch::Tensor> params_;  // trainable, in module order
  std::vector<std::string> paramNames_;
  std::vector<std::int64_t> paramOffsets_;  // each parameter's first element in the flat buffers
  std::int64_t numel_ = 0;                  // trainable elements
  std::int64_t partitionSize_ = 0;          // elements per rank (padded)
  torch::Tensor flatParams_;                // model dtype, partitionSize_ * world
  torch::Tensor flatGrads_;    // ZeRO 0/1: model dtype, same size; params' .grad are views
  torch::Tensor master_;       // fp32: the optimizer's tensor (see header comment)
  torch::Tensor gradAccum32_;  // ZeRO 2: the owner's fp32 accumulated partition

  std::shared_ptr<FlatOptimizer> optimizer_;
  std::shared_ptr<LrSchedule> scheduler_;
  std::unique_ptr<LossScaler> scaler_;
  std::shared_ptr<DataLoader> loader_;

  std::int64_t globalSteps_ = 0;
  std::int64_t microSteps_ = 0;
  std::int64_t skippedSteps_ = 0;
  std::int64_t globalSamples_ = 0;
  std::optional<double> lastGradNorm_;
  Timers timers_;
  // STRETCH_TIMINGS_FILE (step_timings.hpp): the timers at the start of the current step and
  // when its first forward began.
  std::unique_ptr<StepTimingsFile> timings_;
  std::unique_ptr<CheckpointDirLock> saveLock_;  // of the directory of the last save
  std::unique_ptr<Heartbeat> heartbeat_;  // STRETCH_HEARTBEAT_FILE: the launcher's hang detection
  Timers timersAtStepStart_;
  std::optional<std::chrono::steady_clock::time_point> stepStart_;
  std::chrono::steady_clock::time_point lastStepEnd_;
  // Where the last completed step left the data loader and the micro-step count (abandonStep).
  SamplerState positionAtStep_;
  std::int64_t microStepsAtStep_ = 0;
  std::int64_t bucketElements_ = 500'000'000;

  // overlap_comm (ZeRO 0): buckets all-reduced during the boundary backward, launched from
  // gradient-accumulator post hooks in a fixed order (last bucket first) on every rank.
  struct OverlapBucket {
    std::int64_t begin = 0;
    std::int64_t size = 0;
    std::vector<std::size_t> members;  // parameters overlapping the bucket
    int pending = 0;                   // of them, not yet accumulated in this backward
    std::shared_ptr<comm::Work> work;
  };
  bool overlapEnabled_ = false;
  bool overlapActive_ = false;   // inside a boundary backward
  bool overlapReduced_ = false;  // the boundary's gradients are already reduced
  std::vector<OverlapBucket> buckets_;
  std::vector<std::vector<std::size_t>> paramBuckets_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::int64_t nextLaunch_ = -1;
  std::int64_t launchedDuringBackward_ = 0;
  // ZeRO 2: the same buckets over the unpadded flat range, reduced during every backward as
  // their gradients are ready (last first); a parameter's gradient is released once all its
  // buckets are reduced, so between steps a rank holds only its fp32 partition (gradAccum32_).
  static constexpr std::int64_t kZero2MaxBucketElements = std::int64_t{1} << 22;
  std::vector<int> paramPending_;
  double zero2ReduceSeconds_ = 0;

  // Live recovery's copies of ZeRO 1/2 partitions (copyPartitions): the last two of this
  // rank's own and of its ward's, in host memory.
  struct PartitionCopy {
    std::int64_t step = -1;  // -1: empty or being written
    std::int64_t world = 0;
    std::int64_t partition = -1;
    std::vector<std::string> keys;  // the optimizer tensors after the fp32 weights
    torch::Tensor data;             // fp32, CPU: (1 + keys) x partition elements
    c10::IValue replicated;         // own copies: replicatedState() of the step
  };
  // The copy a plan's source names: one of this rank's own or of its ward's.
  const PartitionCopy& copyAt(const PartitionSource& source) const;
  bool partitionCopies_ = false;
  int buddyDistance_ = 1;
  PartitionCopy ownCopies_[2];
  PartitionCopy wardCopies_[2];
  int newestOwn_ = 0;
  int newestWard_ = 0;
  std::int64_t partitionCopyCount_ = 0;
  // The exchange in flight: the send of the own copy, the receive into wardCopies_[slot].
  std::shared_ptr<comm::Work> copySend_;
  std::shared_ptr<comm::Work> copyReceive_;
  int copyReceiveSlot_ = 0;
};

}  // namespace stretch::engine
