// Engine::saveCheckpoint / loadCheckpoint: DeepSpeed's file layout, written durably and checked
// on load (runtime/engine/checkpoint_io.hpp), and elastic: the optimizer state is stored by
// element range of the unpadded flat parameter vector, so a job of any data-parallel size and
// ZeRO stage can load a checkpoint written by any other.
//
// dir/tag/mp_rank_00_model_states.pt (rank 0): module (state dict in the model's dtype),
//   lr_scheduler {last_batch_iteration}, global_steps, global_samples, skipped_steps,
//   micro_steps, dp_world_size, mp_world_size, zero_stage, loss_scaler {...},
//   data_sampler {epoch, consumed}, param_shapes, ds_config, ds_version, optimizer (stage 0:
//   the whole optimizer shard, see below; None with ZeRO), and the client state's keys.
// dir/tag/zero_pp_rank_R_mp_rank_00_optim_states.pt (ZeRO 1/2, rank R): optimizer_state_dict =
//   {begin, end: the element range, fp32: master weights [begin, end), one tensor per optimizer
//   state (exp_avg, ...) over the same range, scalars {step, ...}, type, numel}.
// dir/tag/manifest.json: every file's size and SHA-256; dir/latest: the tag, written last;
// dir/.stretch.lock: the lock of the job that saves there (checkpoint_dir.hpp).

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "runtime/checkpoint/layout.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/posix_files.hpp"
#include "runtime/common/worker_variables.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/engine/checkpoint_dir.hpp"
#include "runtime/engine/checkpoint_io.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/engine/tensor_view.hpp"

namespace stretch::engine {

namespace {

constexpr const char* kVersion = "stretch 0.1.0";

using GenericDict = c10::impl::GenericDict;

const c10::IValue& field(const GenericDict& dict, const std::string& key, const std::string& file) {
  const auto it = dict.find(key);
  if (it == dict.end())
    throw CheckpointError(fmt::format("{}: the key '{}' is missing", file, key));
  return it->value();
}

std::int64_t intField(const GenericDict& dict, const std::string& key, const std::string& file) {
  const auto& v = field(dict, key, file);
  if (!v.isInt())
    throw CheckpointError(fmt::format("{}: '{}' is not an integer", file, key));
  return v.toInt();
}

double doubleField(const GenericDict& dict, const std::string& key, const std::string& file) {
  const auto& v = field(dict, key, file);
  if (v.isDouble())
    return v.toDouble();
  if (v.isInt())
    return static_cast<double>(v.toInt());
  throw CheckpointError(fmt::format("{}: '{}' is not a number", file, key));
}

GenericDict dictField(const GenericDict& dict, const std::string& key, const std::string& file) {
  const auto& v = field(dict, key, file);
  if (!v.isGenericDict())
    throw CheckpointError(fmt::format("{}: '{}' is not a dict", file, key));
  return v.toGenericDict();
}

torch::Tensor tensorField(const GenericDict& dict, const std::string& key,
                          const std::string& file) {
  const auto& v = field(dict, key, file);
  if (!v.isTensor())
    throw CheckpointError(fmt::format("{}: '{}' is not a tensor", file, key));
  return v.toTensor();
}

// mkdir -p for a checkpoint directory; its failure is a CheckpointError like a file's.
void makeCheckpointDirectory(const std::string& path) {
  try {
    makeDirectories(path);
  } catch (const CheckpointError&) {
    throw;
  } catch (const IoError& e) {
    throw CheckpointError(e.what());
  }
}

const std::set<std::string>& engineKeys() {
  static const std::set<std::string> keys = {
      "module",        "optimizer",    "lr_scheduler",  "global_steps",  "global_samples",
      "skipped_steps", "micro_steps",  "dp_world_size", "mp_world_size", "zero_stage",
      "loss_scaler",   "data_sampler", "param_shapes",  "ds_config",     "ds_version",
      "buffer_names",  "numel"};
  return keys;
}

// A save or load line for STRETCH_TIMINGS_FILE (step_timings.hpp), when it is set.
void recordCheckpoint(StepTimingsFile* timings, const char* event, int rank, std::int64_t step,
                      std::chrono::steady_clock::time_point began) {
  if (timings == nullptr)
    return;
  CheckpointTiming t;
  t.rank = rank;
  t.event = event;
  t.step = step;
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  t.unixNs = unixNowNs();
  timings->record(t);
}

// The module's tensors paired with the saved ones, every name and shape checked; nothing copied.
std::vector<std::pair<torch::Tensor, torch::Tensor>> readModuleWeights(
    torch::nn::Module& module, const GenericDict& model, const std::string& modelFile) {
  const GenericDict weights = dictField(model, "module", modelFile);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> out;
  auto pair = [&](const std::string& name, const torch::Tensor& mine) {
    const auto t = tensorField(weights, name, modelFile);
    if (t.sizes() != mine.sizes()) {
      throw CheckpointError(fmt::format("{}: module.{} has shape {}, the model's is {}", modelFile,
                                        name, fmt::join(t.sizes(), "x"),
                                        fmt::join(mine.sizes(), "x")));
    }
    out.emplace_back(mine, t);
  };
  for (const auto& item : module.named_parameters(true))
    pair(item.key(), item.value());
  for (const auto& item : module.named_buffers(true))
    pair(item.key(), item.value());
  return out;
}

// A rank's range [begin, end) of the unpadded flat vector, gathered from the saved shards that
// overlap it; the tensors are as long as the rank's master weights (zeros past the range).
struct OptimizerSlice {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  torch::Tensor fp32;
  std::map<std::string, torch::Tensor> stateTensors;
  std::map<std::string, double> scalars;
  std::string savedType;
};

void absorbShard(OptimizerSlice& slice, const GenericDict& shard, const std::string& file) {
  slice.savedType = field(shard, "type", file).toStringRef();
  const std::int64_t b = intField(shard, "begin", file);
  const std::int64_t e = intField(shard, "end", file);
  const std::int64_t lo = std::max(b, slice.begin);
  const std::int64_t hi = std::min(e, slice.end);
  if (lo < hi) {
    slice.fp32.narrow(0, lo - slice.begin, hi - lo)
        .copy_(tensorField(shard, "fp32", file).narrow(0, lo - b, hi - lo));
    const GenericDict states = dictField(shard, "state", file);
    for (const auto& item : states) {
      const std::string key = item.key().toStringRef();
      auto& dst = slice.stateTensors[key];
      if (!dst.defined())
        dst = torch::zeros({slice.fp32.numel()}, torch::kFloat32);
      dst.narrow(0, lo - slice.begin, hi - lo)
          .copy_(item.value().toTensor().narrow(0, lo - b, hi - lo));
    }
  }
  for (const auto& item : dictField(shard, "scalars", file))
    slice.scalars[item.key().toStringRef()] = item.value().toDouble();
}

// A stage 0 checkpoint holds the whole shard in its model states; a ZeRO 1/2 one a file per
// saved rank, of which only those that overlap the slice are read.
void readOptimizerShards(OptimizerSlice& slice, const GenericDict& model,
                         const std::string& modelFile, const std::string& path,
                         const CheckpointManifest& manifest, std::int64_t numel,
                         std::int64_t savedWorld, std::int64_t savedStage) {
  if (savedStage == 0) {
    absorbShard(slice, dictField(model, "optimizer", modelFile), modelFile);
    return;
  }
  const std::int64_t savedPartition = (numel + savedWorld - 1) / savedWorld;
  for (std::int64_t r = 0; r < savedWorld; ++r) {
    const std::int64_t b = std::min(numel, r * savedPartition);
    const std::int64_t e = std::min(numel, b + savedPartition);
    if (std::max(b, slice.begin) >= std::min(e, slice.end) && r != 0)
      continue;  // no overlap (rank 0's shard is always read for the scalars)
    const std::string file = joinPath(path, zeroOptimStatesName(static_cast<int>(r)));
    const GenericDict data = loadStateFile(file, manifest).toGenericDict();
    absorbShard(slice, dictField(data, "optimizer_state_dict", file), file);
  }
}

// The keys of the model states the engine did not write: the client state saveCheckpoint added.
StateDict clientStateOf(const GenericDict& model) {
  StateDict clientState;
  for (const auto& item : model) {
    const std::string key = item.key().toStringRef();
    if (engineKeys().count(key) == 0)
      clientState[key] = item.value();
  }
  return clientState;
}

}  // namespace

// Everything one checkpoint would change in the engine, read and checked before anything is
// applied: a checkpoint that turns out unusable on any rank leaves every rank as it was.
struct PendingLoad {
  std::string path;
  std::int64_t savedWorld = 0;
  StateDict clientState;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> weights;  // (the model's, the saved)
  std::optional<OptimizerSlice> slice;
  std::optional<std::int64_t> lastBatchIteration;
  std::optional<LossScalerState> scaler;
  std::optional<SamplerState> position;
  std::int64_t globalSteps = 0;
  std::int64_t globalSamples = 0;
  std::int64_t skippedSteps = 0;
  std::int64_t microSteps = 0;
};

GenericDict Engine::scalerState() const {
  auto scaler = newStringDict();
  if (scaler_) {
    const auto s = scaler_->state();
    scaler.insert("cur_scale", s.curScale);
    scaler.insert("cur_iter", s.curIter);
    scaler.insert("last_overflow_iter", s.lastOverflowIter);
    scaler.insert("cur_hysteresis", s.curHysteresis);
  }
  return scaler;
}

void Engine::claimCheckpointDir(const std::string& dir) {
  if (dir.empty())
    throw ConfigError(ErrorDetail{"checkpoint directory", "\"\"", "a directory"});
  if (saveLock_ && saveLock_->dir() == dir && saveLock_->holder())
    return;
  saveLock_.reset();
  saveLock_ = std::make_unique<CheckpointDirLock>(dir, currentJobId());
}

std::string Engine::saveCheckpoint(const std::string& dir, std::optional<std::string> tag,
                                   const StateDict& clientState) {
  if (dir.empty())
    throw ConfigError(ErrorDetail{"save_dir", "\"\"", "a directory"});
  const auto began = std::chrono::steady_clock::now();
  const std::string name = tag.value_or(checkpoint::defaultTag(globalSteps_));
  const std::string path = joinPath(dir, name);
  const int rank = dpRank();
  checkTagAgreement(name);
  claimCheckpointDir(dir);
  if (rank == 0)
    makeCheckpointDirectory(path);
  group_->barrier()->wait();
  makeCheckpointDirectory(path);  // shared or node-local storage alike

  // The optimizer shard this rank owns: the unpadded element range of its partition.
  const std::int64_t begin = zeroStage_ >= 1 ? std::min(numel_, rank * partitionSize_) : 0;
  const std::int64_t end = zeroStage_ >= 1 ? std::min(numel_, begin + partitionSize_) : numel_;
  auto shard = newStringDict();
  shard.insert("type", optimizer_->name());
  shard.insert("begin", begin);
  shard.insert("end", end);
  shard.insert("numel", numel_);
  shard.insert("fp32", master_.narrow(0, 0, end - begin).detach().to(torch::kCPU).clone());
  auto states = newStringDict();
  for (const auto& [key, t] : optimizer_->stateTensors()) {
    if (t.defined())
      states.insert(key, t.narrow(0, 0, end - begin).detach().to(torch::kCPU).clone());
  }
  shard.insert("state", states);
  auto scalars = newStringDict();
  for (const auto& [key, v] : optimizer_->scalarState())
    scalars.insert(key, v);
  shard.insert("scalars", scalars);

  std::vector<FileRecord> records;
  if (zeroStage_ >= 1) {
    auto file = newStringDict();
    file.insert("optimizer_state_dict", shard);
    file.insert("ds_version", kVersion);
    records.push_back(saveStateFile(joinPath(path, zeroOptimStatesName(rank)), file));
  }
  if (rank == 0) {
    auto module = newStringDict();
    torch::NoGradGuard noGrad;
    for (const auto& item : model_.ptr()->named_parameters(true))
      module.insert(item.key(), item.value().detach().to(torch::kCPU).clone());
    std::vector<std::string> bufferNames;
    for (const auto& item : model_.ptr()->named_buffers(true)) {
      module.insert(item.key(), item.value().detach().to(torch::kCPU).clone());
      bufferNames.push_back(item.key());
    }
    auto shapes = newStringDict();
    for (std::size_t i = 0; i < params_.size(); ++i)
      shapes.insert(paramNames_[i], c10::IValue(params_[i].sizes().vec()));
    auto scheduler = newStringDict();
    if (scheduler_)
      scheduler.insert(std::string(kLastBatchIterationKey), scheduler_->lastBatchIteration());
    auto scaler = scalerState();
    auto sampler = newStringDict();
    if (loader_) {
      sampler.insert("epoch", loader_->position().epoch);
      sampler.insert("consumed", loader_->position().consumed);
    }
    auto file = newStringDict();
    file.insert("module", module);
    file.insert("buffer_names", c10::IValue(bufferNames));
    file.insert("optimizer", zeroStage_ == 0 ? c10::IValue(shard) : c10::IValue());
    file.insert("param_shapes", shapes);
    file.insert("numel", numel_);
    file.insert("lr_scheduler", scheduler_ ? c10::IValue(scheduler) : c10::IValue());
    file.insert("loss_scaler", scaler_ ? c10::IValue(scaler) : c10::IValue());
    file.insert("data_sampler", loader_ ? c10::IValue(sampler) : c10::IValue());
    file.insert("global_steps", globalSteps_);
    file.insert("global_samples", globalSamples_);
    file.insert("skipped_steps", skippedSteps_);
    file.insert("micro_steps", microSteps_);
    file.insert("dp_world_size", static_cast<std::int64_t>(dpWorldSize()));
    file.insert("mp_world_size", static_cast<std::int64_t>(1));
    file.insert("zero_stage", static_cast<std::int64_t>(zeroStage_));
    file.insert("ds_config", config::toJson(config_));
    file.insert("ds_version", kVersion);
    for (const auto& [key, value] : clientState) {
      if (engineKeys().count(key) > 0) {
        throw ConfigError(
            ErrorDetail{"client_state." + key, "set", "a key the engine does not write itself"});
      }
      file.insert(key, value);  // DeepSpeed merges client_state at the top level
    }
    records.push_back(saveStateFile(joinPath(path, modelStatesName()), file));
  }
  // Rank 0 writes the manifest of every rank's files, then `latest`.
  // Fault injection for the launcher's tests (docs/testing.md): on a job's first attempt
  // (STRETCH_RESTART_COUNT unset or 0), the last rank dies like a SIGKILLed process after its
  // files of the given step are written and before the manifest and `latest`.
  const char* restarts = std::getenv(worker_env::kRestartCount);
  if (const char* step = std::getenv(worker_env::kFaultKillDuringSave);
      step != nullptr && std::to_string(globalSteps_) == step && rank == dpWorldSize() - 1 &&
      (restarts == nullptr || std::string(restarts) == "0")) {
    spdlog::warn("saveCheckpoint: STRETCH_FAULT_KILL_DURING_SAVE={}: killing rank {} mid-save",
                 step, rank);
    std::raise(SIGKILL);
  }
  std::vector<FileRecord> all = gatherRecords(records);
  if (rank == 0) {
    CheckpointManifest manifest;
    manifest.tag = name;
    manifest.version = kVersion;
    manifest.dpWorldSize = dpWorldSize();
    manifest.zeroStage = zeroStage_;
    manifest.files = all;
    writeManifest(path, manifest);
    writeLatest(dir, name);
    for (const std::string& partial : removePartialCheckpoints(dir, name))
      spdlog::info("saveCheckpoint: removed {}, which a failed save left incomplete",
                   joinPath(dir, partial));
  }
  group_->barrier()->wait();
  recordCheckpoint(timings_.get(), "save", rank, globalSteps_, began);
  return path;
}

void Engine::checkTagAgreement(const std::string& tag) {
  // DeepSpeed's _checkpoint_tag_validation: a digest of the tag, all-reduced with MIN and MAX,
  // must be the same on every rank.
  const auto mode = config_.checkpoint.tagValidation;
  if (mode == config::TagValidation::Ignore || dpWorldSize() == 1)
    return;
  const std::string digest = sha256Hex(tag);
  const auto value = static_cast<std::int64_t>(std::stoull(digest.substr(0, 15), nullptr, 16));
  std::vector<std::int64_t> lo = {value};
  std::vector<std::int64_t> hi = {value};
  group_->allReduce(comm::BufferView::of(std::span(lo)), comm::ReduceOp::Min)->wait();
  group_->allReduce(comm::BufferView::of(std::span(hi)), comm::ReduceOp::Max)->wait();
  if (lo[0] == hi[0])
    return;
  const std::string message = fmt::format(
      "saveCheckpoint: the checkpoint tag '{}' of rank {} is not the same on every rank; every "
      "rank must pass the same tag (checkpoint.tag_validation = {})",
      tag, dpRank(), mode == config::TagValidation::Fail ? "Fail" : "Warn");
  if (mode == config::TagValidation::Fail)
    throw ConfigError(message);
  spdlog::warn("{}", message);
}

std::vector<FileRecord> Engine::gatherRecords(const std::vector<FileRecord>& mine) {
  // Each rank's records as JSON text, padded to the longest, all-gathered as bytes.
  const std::string text = recordsToJson(mine);
  const int world = dpWorldSize();
  if (world == 1)
    return mine;
  std::vector<std::int64_t> length = {static_cast<std::int64_t>(text.size())};
  group_->allReduce(comm::BufferView::of(std::span(length)), comm::ReduceOp::Max)->wait();
  std::vector<std::uint8_t> out(static_cast<std::size_t>(length[0]) *
                                static_cast<std::size_t>(world));
  std::vector<std::uint8_t> in(static_cast<std::size_t>(length[0]), ' ');
  std::copy(text.begin(), text.end(), in.begin());
  group_->allGather(comm::BufferView::of(std::span(in)), comm::BufferView::of(std::span(out)))
      ->wait();
  std::vector<FileRecord> all;
  for (int r = 0; r < world; ++r) {
    const auto* p = out.data() + static_cast<std::size_t>(r) * in.size();
    const auto records = recordsFromJson(std::string(p, p + in.size()));
    all.insert(all.end(), records.begin(), records.end());
  }
  return all;
}

std::optional<LoadedCheckpoint> Engine::loadCheckpoint(const std::string& dir,
                                                       std::optional<std::string> tag,
                                                       bool loadOptimizerStates,
                                                       bool loadLrSchedulerStates) {
  const auto began = std::chrono::steady_clock::now();
  const int rank = dpRank();
  // Another job's directory is refused before anything is read: its next save would overwrite
  // what this job trains from, or this job's saves would overwrite its checkpoints.
  if (isDirectory(dir))
    claimCheckpointDir(dir);
  // An explicit tag is loaded or fails; without one, latest's tag and then older global_step
  // directories (runtime/checkpoint/layout.hpp).
  checkpoint::LoadCandidates candidates;
  if (tag)
    candidates.tags = {*tag};
  else
    candidates = checkpoint::loadCandidates(dir);
  if (candidates.tags.empty()) {
    if (rank == 0) {
      spdlog::warn(
          "loadCheckpoint: {} has no 'latest' file{} and no tag was given; nothing "
          "loaded",
          dir, candidates.latestProblem == "missing" ? "" : " that can be read");
    }
    return std::nullopt;
  }
  if (!tag && rank == 0) {
    if (!candidates.latestProblem.empty()) {
      spdlog::warn(
          "loadCheckpoint: {}'s 'latest' file is {}; trying its global_step "
          "directories, newest first",
          dir, candidates.latestProblem == "missing" ? "missing" : "unusable");
      if (candidates.latestProblem != "missing")
        spdlog::warn("loadCheckpoint: {}", candidates.latestProblem);
    }
  }
  std::vector<std::string> skipped;  // "tag: why", for the checkpoints this rank could not use
  std::string firstError;
  for (const std::string& name : candidates.tags) {
    std::optional<PendingLoad> pending;
    std::string error;
    try {
      pending = readForLoad(joinPath(dir, name), loadOptimizerStates);
    } catch (const CheckpointError& e) {
      error = e.what();
    }
    // Every rank reads its own files: all of them must have succeeded.
    if (everyRankAgrees(pending.has_value())) {
      applyLoad(*pending, loadLrSchedulerStates);
      if (!skipped.empty() || !candidates.latestProblem.empty()) {
        spdlog::warn("loadCheckpoint: rank {} resumed from {}, {}", rank, pending->path,
                     skipped.empty() ? "the newest complete checkpoint"
                                     : fmt::format("the newest that every rank could load; not "
                                                   "used: {}",
                                                   fmt::join(skipped, "; ")));
      }
      LoadedCheckpoint loaded;
      loaded.path = pending->path;
      loaded.tag = name;
      loaded.savedDpWorldSize = pending->savedWorld;
      loaded.clientState = std::move(pending->clientState);
      loaded.skipped = std::move(skipped);
      group_->barrier()->wait();
      recordCheckpoint(timings_.get(), "load", rank, globalSteps_, began);
      return loaded;
    }
    if (error.empty())
      error = "another rank could not load its part of it";
    if (firstError.empty())
      firstError = error;
    skipped.push_back(name + ": " + error);
    if (tag)
      break;
    spdlog::warn("loadCheckpoint: rank {} cannot use {}: {}", rank, joinPath(dir, name), error);
  }
  if (skipped.size() == 1)
    throw CheckpointError(firstError);
  throw CheckpointError(fmt::format("no checkpoint under {} could be loaded; tried {}", dir,
                                    fmt::join(skipped, "; ")));
}

bool Engine::everyRankAgrees(bool ok) {
  if (dpWorldSize() == 1)
    return ok;
  std::vector<std::int64_t> flag = {ok ? 1 : 0};
  group_->allReduce(comm::BufferView::of(std::span(flag)), comm::ReduceOp::Min)->wait();
  return flag[0] == 1;
}

PendingLoad Engine::readForLoad(const std::string& path, bool loadOptimizerStates) {
  PendingLoad p;
  p.path = path;
  const CheckpointManifest manifest = readManifest(path);
  const std::string modelFile = joinPath(path, modelStatesName());
  const GenericDict model = loadStateFile(modelFile, manifest).toGenericDict();
  p.weights = readModuleWeights(*model_.ptr(), model, modelFile);
  const std::int64_t savedNumel = intField(model, "numel", modelFile);
  if (savedNumel != numel_) {
    throw CheckpointError(
        fmt::format("{}: {} trainable elements, the model has {}", modelFile, savedNumel, numel_));
  }
  p.savedWorld = intField(model, "dp_world_size", modelFile);
  const std::int64_t savedStage = intField(model, "zero_stage", modelFile);
  if (loadOptimizerStates) {
    // This rank's range of the unpadded flat vector, from the saved shards of any size and stage.
    OptimizerSlice& slice = p.slice.emplace();
    slice.begin = zeroStage_ >= 1 ? std::min(numel_, dpRank() * partitionSize_) : 0;
    slice.end = zeroStage_ >= 1 ? std::min(numel_, slice.begin + partitionSize_) : numel_;
    slice.fp32 = torch::zeros({master_.numel()}, torch::kFloat32);
    readOptimizerShards(slice, model, modelFile, path, manifest, numel_, p.savedWorld, savedStage);
    if (slice.savedType != optimizer_->name()) {
      throw CheckpointError(fmt::format("{}: optimizer state of {} cannot be loaded into {}", path,
                                        slice.savedType, optimizer_->name()));
    }
  }
  if (scheduler_) {
    const auto& s = field(model, "lr_scheduler", modelFile);
    if (s.isGenericDict()) {
      p.lastBatchIteration =
          intField(s.toGenericDict(), std::string(kLastBatchIterationKey), modelFile);
    }
  }
  if (scaler_) {
    const auto& s = field(model, "loss_scaler", modelFile);
    if (s.isGenericDict()) {
      const GenericDict d = s.toGenericDict();
      LossScalerState& state = p.scaler.emplace(scaler_->state());
      state.curScale = doubleField(d, "cur_scale", modelFile);
      state.curIter = intField(d, "cur_iter", modelFile);
      state.lastOverflowIter = intField(d, "last_overflow_iter", modelFile);
      state.curHysteresis = intField(d, "cur_hysteresis", modelFile);
    }
  }
  if (loader_) {
    const auto& s = field(model, "data_sampler", modelFile);
    if (s.isGenericDict()) {
      const GenericDict d = s.toGenericDict();
      p.position =
          SamplerState{intField(d, "epoch", modelFile), intField(d, "consumed", modelFile)};
    }
  }
  p.globalSteps = intField(model, "global_steps", modelFile);
  p.globalSamples = intField(model, "global_samples", modelFile);
  p.skippedSteps = intField(model, "skipped_steps", modelFile);
  p.microSteps = intField(model, "micro_steps", modelFile);
  p.clientState = clientStateOf(model);
  return p;
}

void Engine::applyLoad(PendingLoad& p, bool loadLrSchedulerStates) {
  torch::NoGradGuard noGrad;
  for (auto& [mine, saved] : p.weights)
    mine.copy_(saved);
  if (p.slice) {
    master_.copy_(p.slice->fp32.to(master_.device()));
    for (auto& [key, t] : p.slice->stateTensors)
      t = t.to(master_.device());
    optimizer_->loadState(p.slice->stateTensors, p.slice->scalars);
    // The model's weights from the fp32 masters (exact for fp32; the module file holds the
    // rounded half-precision copy).
    publishMaster();
  }
  if (loadLrSchedulerStates && scheduler_ && p.lastBatchIteration) {
    LrScheduleState state;
    state.lastBatchIteration = *p.lastBatchIteration;
    scheduler_->loadState(state);
    applySchedule(scheduler_->getLr());
  }
  if (scaler_ && p.scaler)
    scaler_->loadState(*p.scaler);
  if (loader_ && p.position)
    loader_->setPosition(*p.position);
  globalSteps_ = p.globalSteps;
  globalSamples_ = p.globalSamples;
  skippedSteps_ = p.skippedSteps;
  // Rounded up to a multiple of this run's accumulation count, so that the first step after a
  // resume at another world size (another accumulation count) has a whole accumulation.
  const std::int64_t gas = batch_.gradientAccumulation;
  microSteps_ = (p.microSteps + gas - 1) / gas * gas;
  microStepsAtStep_ = microSteps_;
  if (loader_)
    positionAtStep_ = loader_->position();
  if (flatGrads_.defined())
    flatGrads_.zero_();
  if (gradAccum32_.defined())
    gradAccum32_.zero_();
}

}  // namespace stretch::engine
