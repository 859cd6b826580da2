#include "runtime/config/ds_config.hpp"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <system_error>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/config/elasticity_reader.hpp"
#include "runtime/config/json_reader.hpp"

namespace stretch::config {

namespace {

using json::ErrorKind;
using json::IntRule;
using json::Json;
using json::KeySet;
using json::NumberRule;
using json::ObjectReader;

constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr double kNoLowerBound = -std::numeric_limits<double>::infinity();

// ---- key lists --------------------------------------------------------------------------------

constexpr std::array<std::string_view, 19> kTopKeys = {"train_batch_size",
                                                       "train_micro_batch_size_per_gpu",
                                                       "gradient_accumulation_steps",
                                                       "optimizer",
                                                       "scheduler",
                                                       "fp16",
                                                       "bf16",
                                                       "bfloat16",
                                                       "gradient_clipping",
                                                       "prescale_gradients",
                                                       "gradient_predivide_factor",
                                                       "gradient_allreduce_op",
                                                       "zero_optimization",
                                                       "elasticity",
                                                       "checkpoint",
                                                       "steps_per_print",
                                                       "wall_clock_breakdown",
                                                       "comms_logger",
                                                       "activation_checkpointing"};

// Keys DeepSpeed reads that Stretch has no use for (yet): listed as ignored, not unknown.
constexpr std::array<std::string_view, 39> kTopIgnored = {"amp",
                                                          "flops_profiler",
                                                          "tensorboard",
                                                          "wandb",
                                                          "csv_monitor",
                                                          "comet",
                                                          "aio",
                                                          "sparse_attention",
                                                          "data_types",
                                                          "communication_data_type",
                                                          "seq_parallel_communication_data_type",
                                                          "sparse_gradients",
                                                          "dataloader_drop_last",
                                                          "memory_breakdown",
                                                          "dump_state",
                                                          "zero_allow_untested_optimizer",
                                                          "zero_force_ds_cpu_optimizer",
                                                          "torch_autocast",
                                                          "managed_gradient_accumulation",
                                                          "gradient_accumulation_dtype",
                                                          "pipeline",
                                                          "compression_training",
                                                          "autotuning",
                                                          "eigenvalue",
                                                          "progressive_layer_drop",
                                                          "curriculum_learning",
                                                          "data_efficiency",
                                                          "quantize_training",
                                                          "nebula",
                                                          "hybrid_engine",
                                                          "weight_quantization",
                                                          "compile",
                                                          "sequence_parallel_size",
                                                          "tensor_parallel",
                                                          "timers",
                                                          "disable_allgather",
                                                          "use_data_before_expert_parallelism",
                                                          "graph_harvesting",
                                                          "zero_allow_comm_data_type_fp32"};

constexpr std::array<std::string_view, 8> kFp16Keys = {"enabled",
                                                       "auto_cast",
                                                       "loss_scale",
                                                       "initial_scale_power",
                                                       "loss_scale_window",
                                                       "hysteresis",
                                                       "consecutive_hysteresis",
                                                       "min_loss_scale"};
constexpr std::array<std::string_view, 1> kFp16Ignored = {"fp16_master_weights_and_grads"};

constexpr std::array<std::string_view, 3> kBf16Keys = {"enabled", "immediate_grad_update",
                                                       "check_grad_overflow"};
constexpr std::array<std::string_view, 2> kBf16Ignored = {"bf16_master_weights_and_grads",
                                                          "bf16_optimizer_states"};

constexpr std::array<std::string_view, 12> kZeroKeys = {"stage",
                                                        "contiguous_gradients",
                                                        "reduce_scatter",
                                                        "reduce_bucket_size",
                                                        "allgather_partitions",
                                                        "allgather_bucket_size",
                                                        "overlap_comm",
                                                        "load_from_fp32_weights",
                                                        "elastic_checkpoint",
                                                        "round_robin_gradients",
                                                        "ignore_unused_parameters",
                                                        "offload_optimizer"};
// The ZeRO-3 / ZeRO++ / MiCS knobs (with their pydantic aliases) and legacy offload switches.
constexpr std::array<std::string_view, 24> kZeroIgnored = {"offload_param",
                                                           "sub_group_size",
                                                           "stage3_*",
                                                           "prefetch_bucket_size",
                                                           "param_persistence_threshold",
                                                           "model_persistence_threshold",
                                                           "max_live_parameters",
                                                           "max_reuse_distance",
                                                           "gather_16bit_weights_on_model_save",
                                                           "module_granularity_threshold",
                                                           "use_all_reduce_for_fetch_params",
                                                           "zero_hpz_partition_size",
                                                           "zero_quantized_*",
                                                           "zeropp_loco_param",
                                                           "use_multi_rank_bucket_allreduce",
                                                           "legacy_stage1",
                                                           "cpu_offload",
                                                           "cpu_offload_params",
                                                           "cpu_offload_use_pin_memory",
                                                           "mics_*",
                                                           "memory_efficient_linear",
                                                           "pipeline_loading_checkpoint",
                                                           "override_module_apply",
                                                           "log_trace_cache_warnings"};

constexpr std::array<std::string_view, 4> kOffloadKeys = {"device", "nvme_path", "pin_memory",
                                                          "buffer_count"};
constexpr std::array<std::string_view, 5> kOffloadIgnored = {
    "pipeline", "pipeline_read", "pipeline_write", "fast_init", "ratio"};

constexpr std::array<std::string_view, 3> kOptimizerKeys = {"type", "params", "legacy_fusion"};
constexpr std::array<std::string_view, 2> kSchedulerKeys = {"type", "params"};
constexpr std::array<std::string_view, 4> kCheckpointKeys = {
    "tag_validation", "load_universal", "use_node_local_storage", "parallel_write"};
constexpr std::array<std::string_view, 1> kCheckpointIgnored = {"writer"};
constexpr std::array<std::string_view, 1> kParallelWriteKeys = {"pipeline_stage"};
constexpr std::array<std::string_view, 5> kCommsLoggerKeys = {"enabled", "verbose", "prof_all",
                                                              "debug", "prof_ops"};
constexpr std::array<std::string_view, 0> kNone = {};

const IntRule kPositive{1, kInt64Max, "a positive integer"};

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) {
      return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
    };
    if (lower(a[i]) != lower(b[i])) {
      return false;
    }
  }
  return true;
}

// ---- readers ----------------------------------------------------------------------------------

Params readParams(const ObjectReader& owner) {
  Params params;
  const Json* value = owner.find("params");
  if (value == nullptr || value->is_null()) {
    return params;
  }
  const std::string path = owner.childPath("params");
  if (!value->is_object()) {
    owner.failValue(path, *value, "an object of parameters");
  }
  for (const auto& [name, item] : value->items()) {
    const std::string itemPath = path + "." + json::shorten(name);
    if (item.is_boolean()) {
      params.emplace(name, item.get<bool>());
    } else if (item.is_number_integer()) {
      params.emplace(name, item.get<std::int64_t>());
    } else if (item.is_number_float()) {
      params.emplace(name, item.get<double>());
    } else if (item.is_string()) {
      params.emplace(name, item.get<std::string>());
    } else if (item.is_array()) {
      std::vector<double> numbers;
      numbers.reserve(item.size());
      for (std::size_t i = 0; i < item.size(); ++i) {
        if (!item[i].is_number()) {
          owner.failValue(fmt::format("{}[{}]", itemPath, i), item[i], "a number");
        }
        numbers.push_back(item[i].get<double>());
      }
      params.emplace(name, std::move(numbers));
    } else {
      owner.failValue(itemPath, item, "a boolean, number, string or list of numbers");
    }
  }
  return params;
}

std::string readType(const ObjectReader& reader) {
  const std::optional<std::string> type = reader.readString("type");
  if (!type || type->empty()) {
    reader.fail("type", "a non-empty string naming the class (it is required)");
  }
  return *type;
}

std::optional<OptimizerConfig> readOptimizer(const ObjectReader& top) {
  const auto reader = top.readObject("optimizer", ErrorKind::Config, /*nullIsAbsent=*/true);
  if (!reader) {
    return std::nullopt;
  }
  reader->reportKeys(KeySet{kOptimizerKeys, kNone});
  OptimizerConfig optimizer;
  optimizer.type = readType(*reader);
  optimizer.params = readParams(*reader);
  if (const auto it = optimizer.params.find("max_grad_norm"); it != optimizer.params.end()) {
    // As DeepSpeed (ValueError in _configure_basic_optimizer): clipping belongs to the engine.
    const std::string path = reader->childPath("params") + ".max_grad_norm";
    reader->failValue(path, (*reader->find("params"))["max_grad_norm"],
                      "no max_grad_norm in optimizer params: use the top-level "
                      "gradient_clipping key instead (as DeepSpeed requires)");
  }
  optimizer.legacyFusion = reader->readBool("legacy_fusion").value_or(false);
  return optimizer;
}

std::optional<SchedulerConfig> readScheduler(const ObjectReader& top) {
  const auto reader = top.readObject("scheduler", ErrorKind::Config, /*nullIsAbsent=*/true);
  if (!reader) {
    return std::nullopt;
  }
  reader->reportKeys(KeySet{kSchedulerKeys, kNone});
  SchedulerConfig scheduler;
  scheduler.type = readType(*reader);
  scheduler.params = readParams(*reader);
  return scheduler;
}

Fp16Config readFp16(const ObjectReader& top) {
  Fp16Config fp16;
  const auto reader = top.readObject("fp16", ErrorKind::Config);
  if (!reader) {
    return fp16;
  }
  reader->reportKeys(KeySet{kFp16Keys, kFp16Ignored});
  fp16.enabled = reader->readBool("enabled").value_or(fp16.enabled);
  fp16.autoCast = reader->readBool("auto_cast").value_or(fp16.autoCast);
  fp16.lossScale =
      reader
          ->readNumber("loss_scale",
                       NumberRule{0.0, false, "a finite number >= 0 (0 = dynamic loss scaling)"})
          .value_or(fp16.lossScale);
  fp16.initialScalePower =
      reader
          ->readInt("initial_scale_power",
                    IntRule{0, 1023, "an integer in [0, 1023] (the initial scale is 2^power)"})
          .value_or(fp16.initialScalePower);
  const bool dynamic = fp16.dynamicLossScale();
  fp16.lossScaleWindow =
      reader
          ->readInt("loss_scale_window",
                    dynamic ? IntRule{1, kInt64Max, "a positive integer (dynamic loss scaling)"}
                            : IntRule{kInt64Min, kInt64Max, "an integer"})
          .value_or(fp16.lossScaleWindow);
  fp16.hysteresis = reader->readInt("hysteresis", kPositive).value_or(fp16.hysteresis);
  fp16.consecutiveHysteresis =
      reader->readBool("consecutive_hysteresis").value_or(fp16.consecutiveHysteresis);
  fp16.minLossScale =
      reader
          ->readNumber("min_loss_scale",
                       dynamic ? NumberRule{0.0, true, "a number > 0 (dynamic loss scaling)"}
                               : NumberRule{kNoLowerBound, false, "a finite number"})
          .value_or(fp16.minLossScale);
  return fp16;
}

Bf16Config readBf16(const ObjectReader& top) {
  Bf16Config bf16;
  if (top.has("bf16") && top.has("bfloat16")) {
    top.fail("bfloat16", "no bfloat16 section next to bf16 (bfloat16 is an alias of bf16)");
  }
  const std::string_view key = top.has("bfloat16") ? "bfloat16" : "bf16";
  const auto reader = top.readObject(key, ErrorKind::Config);
  if (!reader) {
    return bf16;
  }
  reader->reportKeys(KeySet{kBf16Keys, kBf16Ignored});
  bf16.enabled = reader->readBool("enabled").value_or(bf16.enabled);
  bf16.immediateGradUpdate =
      reader->readBool("immediate_grad_update").value_or(bf16.immediateGradUpdate);
  bf16.checkGradOverflow = reader->readBool("check_grad_overflow").value_or(bf16.checkGradOverflow);
  return bf16;
}

OffloadConfig readOffload(const ObjectReader& reader) {
  reader.reportKeys(KeySet{kOffloadKeys, kOffloadIgnored});
  OffloadConfig offload;
  if (const auto device = reader.readString("device")) {
    if (*device == "none") {
      offload.device = OffloadDevice::None;
    } else if (*device == "cpu") {
      offload.device = OffloadDevice::Cpu;
    } else if (*device == "nvme") {
      offload.device = OffloadDevice::Nvme;
    } else {
      reader.fail("device", "\"none\", \"cpu\" or \"nvme\"");
    }
  }
  if (const Json* path = reader.find("nvme_path"); path != nullptr && !path->is_null()) {
    offload.nvmePath = reader.readString("nvme_path");
  }
  if (offload.device == OffloadDevice::Nvme && !offload.nvmePath) {
    reader.fail("nvme_path", "a directory path when device is \"nvme\"");
  }
  offload.pinMemory = reader.readBool("pin_memory").value_or(offload.pinMemory);
  offload.bufferCount =
      reader.readInt("buffer_count", IntRule{0, kInt64Max, "a non-negative integer"})
          .value_or(offload.bufferCount);
  return offload;
}

ZeroConfig readZero(const ObjectReader& top) {
  ZeroConfig zero;
  const Json* value = top.find("zero_optimization");
  if (value == nullptr) {
    return zero;
  }
  if (value->is_boolean()) {
    zero.stage = value->get<bool>() ? 1 : 0;  // the older boolean form
    return zero;
  }
  if (!value->is_object()) {
    top.fail("zero_optimization", "an object, or true/false (stage 1/0)");
  }
  const ObjectReader reader = *top.readObject("zero_optimization", ErrorKind::Config);
  reader.reportKeys(KeySet{kZeroKeys, kZeroIgnored});
  zero.stage = reader.readInt("stage", IntRule{0, 3, "an integer in [0, 3]"}).value_or(zero.stage);
  zero.contiguousGradients =
      reader.readBool("contiguous_gradients").value_or(zero.contiguousGradients);
  zero.reduceScatter = reader.readBool("reduce_scatter").value_or(zero.reduceScatter);
  // DeepSpeed's own examples write bucket sizes as 5e8, so integral floats are accepted here.
  const IntRule bucket{1, kInt64Max, "a positive integer (elements; 5e8 notation accepted)", true};
  zero.reduceBucketSize =
      reader.readInt("reduce_bucket_size", bucket).value_or(zero.reduceBucketSize);
  zero.allgatherPartitions =
      reader.readBool("allgather_partitions").value_or(zero.allgatherPartitions);
  zero.allgatherBucketSize =
      reader.readInt("allgather_bucket_size", bucket).value_or(zero.allgatherBucketSize);
  if (const Json* overlap = reader.find("overlap_comm");
      overlap != nullptr && !overlap->is_null()) {
    zero.overlapComm = reader.readBool("overlap_comm");
  }
  zero.loadFromFp32Weights =
      reader.readBool("load_from_fp32_weights").value_or(zero.loadFromFp32Weights);
  zero.elasticCheckpoint = reader.readBool("elastic_checkpoint").value_or(zero.elasticCheckpoint);
  zero.roundRobinGradients =
      reader.readBool("round_robin_gradients").value_or(zero.roundRobinGradients);
  zero.ignoreUnusedParameters =
      reader.readBool("ignore_unused_parameters").value_or(zero.ignoreUnusedParameters);
  if (const auto offload = reader.readObject("offload_optimizer", ErrorKind::Config, true)) {
    zero.offloadOptimizer = readOffload(*offload);
  }
  return zero;
}

CheckpointConfig readCheckpoint(const ObjectReader& top) {
  CheckpointConfig checkpoint;
  const auto reader = top.readObject("checkpoint", ErrorKind::Config);
  if (!reader) {
    return checkpoint;
  }
  reader->reportKeys(KeySet{kCheckpointKeys, kCheckpointIgnored});
  if (const auto tag = reader->readString("tag_validation")) {
    if (equalsIgnoreCase(*tag, "ignore")) {
      checkpoint.tagValidation = TagValidation::Ignore;
    } else if (equalsIgnoreCase(*tag, "warn")) {
      checkpoint.tagValidation = TagValidation::Warn;
    } else if (equalsIgnoreCase(*tag, "fail")) {
      checkpoint.tagValidation = TagValidation::Fail;
    } else {
      reader->fail("tag_validation", "\"Ignore\", \"Warn\" or \"Fail\" (any case)");
    }
  }
  checkpoint.loadUniversal = reader->readBool("load_universal").value_or(checkpoint.loadUniversal);
  checkpoint.useNodeLocalStorage =
      reader->readBool("use_node_local_storage").value_or(checkpoint.useNodeLocalStorage);
  if (const auto parallel = reader->readObject("parallel_write", ErrorKind::Config)) {
    parallel->reportKeys(KeySet{kParallelWriteKeys, kNone});
    checkpoint.parallelWritePipelineStage =
        parallel->readBool("pipeline_stage").value_or(checkpoint.parallelWritePipelineStage);
  }
  return checkpoint;
}

constexpr std::array<std::string_view, 6> kActivationCheckpointingKeys = {
    "partition_activations", "contiguous_memory_optimization",  "cpu_checkpointing",
    "number_checkpoints",    "synchronize_checkpoint_boundary", "profile"};

std::optional<ActivationCheckpointingConfig> readActivationCheckpointing(const ObjectReader& top) {
  const auto reader = top.readObject("activation_checkpointing", ErrorKind::Config);
  if (!reader) {
    return std::nullopt;
  }
  reader->reportKeys(KeySet{kActivationCheckpointingKeys, kNone});
  ActivationCheckpointingConfig c;
  c.partitionActivations = reader->readBool("partition_activations").value_or(false);
  c.contiguousMemoryOptimization =
      reader->readBool("contiguous_memory_optimization").value_or(false);
  c.cpuCheckpointing = reader->readBool("cpu_checkpointing").value_or(false);
  c.numberCheckpoints = reader->readInt(
      "number_checkpoints",
      IntRule{1, kInt64Max, "a positive integer or null", false, /*nullIsAbsent=*/true});
  c.synchronizeCheckpointBoundary =
      reader->readBool("synchronize_checkpoint_boundary").value_or(false);
  c.profile = reader->readBool("profile").value_or(false);
  return c;
}

CommsLoggerConfig readCommsLogger(const ObjectReader& top) {
  CommsLoggerConfig logger;
  const auto reader = top.readObject("comms_logger", ErrorKind::Config);
  if (!reader) {
    return logger;
  }
  reader->reportKeys(KeySet{kCommsLoggerKeys, kNone});
  logger.enabled = reader->readBool("enabled").value_or(logger.enabled);
  logger.verbose = reader->readBool("verbose").value_or(logger.verbose);
  logger.profAll = reader->readBool("prof_all").value_or(logger.profAll);
  logger.debug = reader->readBool("debug").value_or(logger.debug);
  if (const Json* ops = reader->find("prof_ops")) {
    const std::string path = reader->childPath("prof_ops");
    if (!ops->is_array()) {
      reader->failValue(path, *ops, "a list of operation names");
    }
    for (std::size_t i = 0; i < ops->size(); ++i) {
      if (!(*ops)[i].is_string()) {
        reader->failValue(fmt::format("{}[{}]", path, i), (*ops)[i], "a string");
      }
      logger.profOps.push_back((*ops)[i].get<std::string>());
    }
  }
  return logger;
}

void checkElasticBatchKeys(const ObjectReader& top, const DsConfig& config) {
  if (!config.elasticity.enabled || config.elasticity.ignoreNonElasticBatchInfo ||
      !config.batch.anySet()) {
    return;
  }
  std::vector<std::string_view> found;
  for (std::string_view key :
       {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"}) {
    if (const Json* v = top.find(key); v != nullptr && !v->is_null()) {
      found.push_back(key);
    }
  }
  const Json& first = *top.find(found.front());
  json::throwDetail(
      ErrorKind::Elasticity, std::string(found.front()),
      top.written(first, std::string(found.front())),
      fmt::format("no batch keys while elasticity is enabled: found {}; elastic training computes "
                  "train_batch_size, train_micro_batch_size_per_gpu and "
                  "gradient_accumulation_steps itself. Remove them, or set "
                  "elasticity.ignore_non_elastic_batch_info to true to ignore them",
                  fmt::join(found, ", ")));
}

DsConfig readConfig(const ObjectReader& top) {
  top.reportKeys(KeySet{kTopKeys, kTopIgnored});
  DsConfig config;
  const IntRule batchRule{1, kInt64Max, "a positive integer", false, /*nullIsAbsent=*/true};
  config.batch.trainBatchSize = top.readInt("train_batch_size", batchRule);
  config.batch.microBatchPerGpu = top.readInt("train_micro_batch_size_per_gpu", batchRule);
  config.batch.gradientAccumulation = top.readInt("gradient_accumulation_steps", batchRule);

  config.optimizer = readOptimizer(top);
  config.scheduler = readScheduler(top);
  config.fp16 = readFp16(top);
  config.bf16 = readBf16(top);
  if (config.fp16.enabled && config.bf16.enabled) {
    const std::string bf16Key = top.has("bfloat16") ? "bfloat16" : "bf16";
    json::throwDetail(ErrorKind::Config, bf16Key + ".enabled", "true",
                      "false while fp16.enabled is true (fp16 and bf16 cannot both be enabled)");
  }

  config.gradientClipping =
      top.readNumber("gradient_clipping", NumberRule{0.0, false, "a number >= 0 (0 = off)"})
          .value_or(config.gradientClipping);
  config.prescaleGradients = top.readBool("prescale_gradients").value_or(config.prescaleGradients);
  config.gradientPredivideFactor =
      top.readNumber("gradient_predivide_factor", NumberRule{0.0, true, "a number > 0"})
          .value_or(config.gradientPredivideFactor);
  if (const auto op = top.readString("gradient_allreduce_op")) {
    if (*op == "mean") {
      config.gradientAllreduceOp = GradientAllreduceOp::Mean;
    } else if (*op == "sum") {
      config.gradientAllreduceOp = GradientAllreduceOp::Sum;
    } else {
      top.fail("gradient_allreduce_op", "\"mean\" or \"sum\"");
    }
  }

  config.zero = readZero(top);
  if (const auto elastic = top.readObject("elasticity", ErrorKind::Elasticity)) {
    config.elasticity = detail::readElasticity(*elastic);
  }
  checkElasticBatchKeys(top, config);

  config.checkpoint = readCheckpoint(top);
  config.stepsPerPrint = top.readInt(
      "steps_per_print", IntRule{1, kInt64Max, "a positive integer", false, /*nullIsAbsent=*/true});
  config.wallClockBreakdown =
      top.readBool("wall_clock_breakdown").value_or(config.wallClockBreakdown);
  config.commsLogger = readCommsLogger(top);
  config.activationCheckpointing = readActivationCheckpointing(top);
  return config;
}

// ---- writer -----------------------------------------------------------------------------------

using Ordered = nlohmann::ordered_json;

Ordered paramsJson(const Params& params) {
  Ordered out = Ordered::object();
  for (const auto& entry : params) {  // not a structured binding: clang 14 cannot capture one
    std::visit([&out, &entry](const auto& v) { out[entry.first] = v; }, entry.second);
  }
  return out;
}

std::string_view offloadDeviceName(OffloadDevice device) {
  switch (device) {
    case OffloadDevice::Cpu:
      return "cpu";
    case OffloadDevice::Nvme:
      return "nvme";
    case OffloadDevice::None:
      break;
  }
  return "none";
}

std::string_view tagValidationName(TagValidation tag) {
  switch (tag) {
    case TagValidation::Ignore:
      return "Ignore";
    case TagValidation::Fail:
      return "Fail";
    case TagValidation::Warn:
      break;
  }
  return "Warn";
}

Ordered elasticityJson(const ElasticityConfig& e) {
  Ordered out = Ordered::object();
  out["enabled"] = e.enabled;
  out["max_train_batch_size"] = e.maxTrainBatchSize;
  out["micro_batch_sizes"] = e.microBatchSizes;
  out["min_gpus"] = e.minGpus;
  out["max_gpus"] = e.maxGpus;
  out["num_gpus_per_node"] = e.numGpusPerNode;
  out["model_parallel_size"] = e.modelParallelSize;
  out["min_time"] = e.minTime;
  out["prefer_larger_batch"] = e.preferLargerBatch;
  out["ignore_non_elastic_batch_info"] = e.ignoreNonElasticBatchInfo;
  // Numbers, as DeepSpeed's own examples write them (its immutability check compares raw values).
  switch (e.version) {
    case ElasticityVersion::V0_1:
      out["version"] = 0.1;
      break;
    case ElasticityVersion::V0_2:
      out["version"] = 0.2;
      break;
    case ElasticityVersion::Exact:
      out["version"] = "exact";
      if (e.targetBatchSize) {
        out["target_batch_size"] = *e.targetBatchSize;
      }
      out["batch_tolerance"] = e.batchTolerance;
      break;
  }
  return out;
}

ParsedConfig parseChecked(std::string_view text, std::string_view source) {
  const json::JsonDocument document = json::parseJsonDocument(text, source, "");
  json::KeyReport report;
  const ObjectReader top(document, document.root, "", ErrorKind::Config, report);
  ParsedConfig parsed{readConfig(top), {}};
  parsed.warnings = report.warnings();
  return parsed;
}

}  // namespace

ParsedConfig parseConfig(std::string_view jsonText, std::string_view source) {
  try {
    return parseChecked(jsonText, source);
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& ex) {
    // Only reachable through a bug; keep the promise that callers see stretch::Error alone.
    throw InternalError(
        fmt::format("{}: unexpected error while reading the config: {}", source, ex.what()));
  }
}

ParsedConfig loadConfig(const std::filesystem::path& path) {
  return parseConfig(readFile(path), path.string());
}

std::string elasticityToJson(const ElasticityConfig& elasticity) {
  return nlohmann::json::parse(elasticityJson(elasticity).dump()).dump();
}

std::string toJson(const DsConfig& config) {
  Ordered out = Ordered::object();
  if (config.batch.trainBatchSize) {
    out["train_batch_size"] = *config.batch.trainBatchSize;
  }
  if (config.batch.microBatchPerGpu) {
    out["train_micro_batch_size_per_gpu"] = *config.batch.microBatchPerGpu;
  }
  if (config.batch.gradientAccumulation) {
    out["gradient_accumulation_steps"] = *config.batch.gradientAccumulation;
  }
  if (config.optimizer) {
    out["optimizer"] = Ordered{{"type", config.optimizer->type},
                               {"params", paramsJson(config.optimizer->params)},
                               {"legacy_fusion", config.optimizer->legacyFusion}};
  }
  if (config.scheduler) {
    out["scheduler"] =
        Ordered{{"type", config.scheduler->type}, {"params", paramsJson(config.scheduler->params)}};
  }
  const Fp16Config& fp16 = config.fp16;
  out["fp16"] = Ordered{{"enabled", fp16.enabled},
                        {"auto_cast", fp16.autoCast},
                        {"loss_scale", fp16.lossScale},
                        {"initial_scale_power", fp16.initialScalePower},
                        {"loss_scale_window", fp16.lossScaleWindow},
                        {"hysteresis", fp16.hysteresis},
                        {"consecutive_hysteresis", fp16.consecutiveHysteresis},
                        {"min_loss_scale", fp16.minLossScale}};
  out["bf16"] = Ordered{{"enabled", config.bf16.enabled},
                        {"immediate_grad_update", config.bf16.immediateGradUpdate},
                        {"check_grad_overflow", config.bf16.checkGradOverflow}};
  out["gradient_clipping"] = config.gradientClipping;
  out["prescale_gradients"] = config.prescaleGradients;
  out["gradient_predivide_factor"] = config.gradientPredivideFactor;
  out["gradient_allreduce_op"] =
      config.gradientAllreduceOp == GradientAllreduceOp::Sum ? "sum" : "mean";

  const ZeroConfig& zero = config.zero;
  Ordered zeroJson = Ordered::object();
  zeroJson["stage"] = zero.stage;
  zeroJson["contiguous_gradients"] = zero.contiguousGradients;
  zeroJson["reduce_scatter"] = zero.reduceScatter;
  zeroJson["reduce_bucket_size"] = zero.reduceBucketSize;
  zeroJson["allgather_partitions"] = zero.allgatherPartitions;
  zeroJson["allgather_bucket_size"] = zero.allgatherBucketSize;
  if (zero.overlapComm) {
    zeroJson["overlap_comm"] = *zero.overlapComm;
  }
  zeroJson["load_from_fp32_weights"] = zero.loadFromFp32Weights;
  zeroJson["elastic_checkpoint"] = zero.elasticCheckpoint;
  zeroJson["round_robin_gradients"] = zero.roundRobinGradients;
  zeroJson["ignore_unused_parameters"] = zero.ignoreUnusedParameters;
  if (zero.offloadOptimizer) {
    const OffloadConfig& offload = *zero.offloadOptimizer;
    Ordered offloadJson = Ordered::object();
    offloadJson["device"] = offloadDeviceName(offload.device);
    if (offload.nvmePath) {
      offloadJson["nvme_path"] = *offload.nvmePath;
    }
    offloadJson["pin_memory"] = offload.pinMemory;
    offloadJson["buffer_count"] = offload.bufferCount;
    zeroJson["offload_optimizer"] = std::move(offloadJson);
  }
  out["zero_optimization"] = std::move(zeroJson);

  out["elasticity"] = elasticityJson(config.elasticity);
  const CheckpointConfig& checkpoint = config.checkpoint;
  out["checkpoint"] = Ordered{
      {"tag_validation", tagValidationName(checkpoint.tagValidation)},
      {"load_universal", checkpoint.loadUniversal},
      {"use_node_local_storage", checkpoint.useNodeLocalStorage},
      {"parallel_write", Ordered{{"pipeline_stage", checkpoint.parallelWritePipelineStage}}}};
  if (config.stepsPerPrint) {
    out["steps_per_print"] = *config.stepsPerPrint;
  }
  out["wall_clock_breakdown"] = config.wallClockBreakdown;
  const CommsLoggerConfig& logger = config.commsLogger;
  out["comms_logger"] = Ordered{{"enabled", logger.enabled},
                                {"verbose", logger.verbose},
                                {"prof_all", logger.profAll},
                                {"debug", logger.debug},
                                {"prof_ops", logger.profOps}};
  if (const auto& ac = config.activationCheckpointing) {
    out["activation_checkpointing"] =
        Ordered{{"partition_activations", ac->partitionActivations},
                {"contiguous_memory_optimization", ac->contiguousMemoryOptimization},
                {"cpu_checkpointing", ac->cpuCheckpointing},
                {"number_checkpoints",
                 ac->numberCheckpoints ? Ordered(*ac->numberCheckpoints) : Ordered(nullptr)},
                {"synchronize_checkpoint_boundary", ac->synchronizeCheckpointBoundary},
                {"profile", ac->profile}};
  }
  // Strings in a DsConfig built by hand may hold invalid UTF-8; never let dump() throw.
  return out.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace stretch::config
