// stretch-train-gpt: a GPT-style character language model (examples/gpt/gpt_model.hpp) trained
// with the Stretch engine from a DeepSpeed config, on a text corpus cut into windows
// (char_corpus.hpp; default: the licence texts bundled in fixtures/data/text).
//
//   build/bin/stretch-train-gpt                              # the small preset, one process
//   build/bin/stretch-train-gpt --preset bench --steps 20    # the ~19 M-parameter benchmark size
//   stretch launch --num_gpus 2 --config CONFIG build/bin/stretch-train-gpt --config CONFIG ...
//
// Distributed when WORLD_SIZE (or OpenMPI's variables) is set, as stretch-train-digits. Prints a
// progress line every --log-every steps, the validation loss every --eval-every steps, a summary
// and a sample of generated text; --json prints the summary as one JSON object instead. Exit
// status: 0 trained, 1 a runtime failure, 2 bad input.
//
// Dropout draws from a generator reseeded before every micro batch from (--seed, step, micro
// batch, rank), so that a job resumed from a checkpoint draws the masks an uninterrupted one
// would have drawn.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "examples/common/job_support.hpp"
#include "examples/gpt/char_corpus.hpp"
#include "examples/gpt/gpt_model.hpp"
#include "runtime/comm/init_distributed.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/common/posix_files.hpp"
#include "runtime/engine/checkpoint_io.hpp"
#include "runtime/engine/engine.hpp"

#ifdef STRETCH_EXAMPLE_HAVE_CUDA  // LibTorch built with CUDA (examples/gpt/CMakeLists.txt)
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace {

using stretch::examples::Gpt;
using stretch::examples::GptShape;

struct Preset {
  const char* name;
  const char* config;  // under fixtures/jobs/gpt
  GptShape shape;
  std::int64_t steps;
};

// small: trains in about 10 s on one CPU core (OpenBLAS); bench: the benchmark and GPU size.
const Preset kPresets[] = {
    {"small", "ds_config.json", {0, 64, 2, 4, 64, 0.0, false}, 500},
    {"bench", "ds_config_bench.json", {0, 256, 6, 8, 512, 0.1, false}, 50},
};

const Preset& findPreset(const std::string& name) {
  for (const auto& p : kPresets) {
    if (name == p.name)
      return p;
  }
  throw stretch::ConfigError(stretch::ErrorDetail{"--preset", name, "small or bench"});
}

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t dropoutSeed(std::uint64_t seed, std::int64_t step, std::int64_t micro, int rank) {
  return mix(mix(mix(seed) ^ static_cast<std::uint64_t>(step)) ^
             (static_cast<std::uint64_t>(micro) << 20 | static_cast<std::uint64_t>(rank)));
}

torch::Tensor lossOf(const torch::Tensor& logits, const torch::Tensor& targets) {
  return torch::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}).to(torch::kFloat32),
                                   targets.reshape({-1}));
}

// Mean loss over the first `windows` validation windows, in eval mode without gradients.
double validationLoss(Gpt& model, const stretch::engine::TensorDataset& data, std::int64_t windows,
                      std::int64_t batch, torch::Device device) {
  torch::NoGradGuard noGrad;
  model->eval();
  const std::int64_t n = std::min(windows, data.size());
  double sum = 0;
  for (std::int64_t begin = 0; begin < n; begin += batch) {
    const std::int64_t count = std::min(batch, n - begin);
    const auto logits = model->forward(data.inputs.narrow(0, begin, count).to(device));
    sum += lossOf(logits, data.targets.narrow(0, begin, count).to(device)).item<double>() *
           static_cast<double>(count);
  }
  model->train();
  return sum / static_cast<double>(n);
}

// Copies the tensors of a state file into the model's parameters, by name; every parameter
// must be there with its shape.
void loadInitialWeights(Gpt& model, const std::string& path) {
  const auto state = stretch::engine::loadStateDict(path);
  torch::NoGradGuard noGrad;
  for (auto& item : model->named_parameters()) {
    const auto found = state.find(item.key());
    if (found == state.end() || !found->second.isTensor()) {
      throw stretch::ConfigError(stretch::ErrorDetail{
          "--init-from", path, fmt::format("a state file with a tensor '{}'", item.key())});
    }
    const auto t = found->second.toTensor();
    if (t.sizes() != item.value().sizes()) {
      throw stretch::ConfigError(stretch::ErrorDetail{
          "--init-from", path,
          fmt::format("'{}' of shape [{}] (it has [{}])", item.key(),
                      fmt::join(item.value().sizes(), ", "), fmt::join(t.sizes(), ", "))});
    }
    item.value().copy_(t);
  }
}

void exportWeights(Gpt& model, const std::string& path) {
  stretch::engine::StateDict state;
  for (const auto& item : model->named_parameters())
    state[item.key()] = item.value().detach().to(torch::kCPU).clone();
  stretch::engine::saveStateFile(path, state);
}

double allReduce(stretch::comm::ProcessGroup* group, double value, stretch::comm::ReduceOp op) {
  if (group == nullptr || group->size() == 1)
    return value;
  std::vector<double> v = {value};
  group->allReduce(stretch::comm::BufferView::of(std::span(v)), op)->wait();
  return v[0];
}

// The command line, with the preset's defaults filled in.
struct GptArgs {
  stretch::examples::JobOptions job;
  std::string preset = "small";
  std::string dataPath;
  GptShape shape{};
  std::int64_t evalEvery = 50;
  std::int64_t evalWindows = 128;
  std::int64_t logEvery = 10;
  std::int64_t sampleChars = 200;
  std::string initFrom;
  std::string exportInit;
};

// Parses the command line into `args`; an exit status when the job should end at once (--help,
// a bad flag).
std::optional<int> parseGptArgs(int argc, char** argv, GptArgs& args) {
  const std::string source = STRETCH_SOURCE_DIR;
  auto& [job, preset, dataPath, shape, evalEvery, evalWindows, logEvery, sampleChars, initFrom,
         exportInit] = args;
  dataPath = stretch::joinPath(source, "fixtures/data/text/licenses.txt.gz");

  CLI::App app{
      "Train a GPT-style character language model with the Stretch engine.\n"
      "Distributed when WORLD_SIZE (or OpenMPI's variables) is set: every process\n"
      "joins over Gloo with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT.\n"
      "Presets: small (2 layers, 4 heads, width 64, context 64, no dropout: 0.11 M\n"
      "parameters, 500 steps) and bench (6 layers, 8 heads, width 512, context 256,\n"
      "dropout 0.1: 19 M parameters, 50 steps).",
      "stretch-train-gpt"};
  auto* configOption = stretch::examples::addJobOptions(app, job);
  configOption->description("DeepSpeed config (JSON; default: the preset's, fixtures/jobs/gpt)");
  app.add_option("--preset", preset, "model size and default config: small or bench")
      ->capture_default_str()
      ->check(CLI::IsMember({"small", "bench"}));
  app.add_option("--data", dataPath, "text corpus (plain or .gz), one byte per token")
      ->capture_default_str();
  app.add_option("--layers", shape.layers, "transformer blocks (default: the preset's)")
      ->check(CLI::PositiveNumber);
  app.add_option("--heads", shape.heads, "attention heads (default: the preset's)")
      ->check(CLI::PositiveNumber);
  app.add_option("--width", shape.width, "embedding width, a multiple of --heads")
      ->check(CLI::PositiveNumber);
  app.add_option("--context", shape.context, "tokens per sample (default: the preset's)")
      ->check(CLI::PositiveNumber);
  app.add_option("--dropout", shape.dropout, "dropout probability (default: the preset's)")
      ->check(CLI::Range(0.0, 0.999));
  app.add_option("--eval-every", evalEvery, "validation loss every N steps (0: only at the end)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--eval-windows", evalWindows, "validation windows per evaluation")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--log-every", logEvery, "progress line every N steps (0: none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--sample-chars", sampleChars, "characters of generated text at the end")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--init-from", initFrom,
                 "start from the weights of this state file (torch.save of a dict name -> tensor)");
  app.add_option("--export-init", exportInit,
                 "write the initial weights to this state file (rank 0) before training");
  CLI11_PARSE(app, argc, argv);
  if (const auto problem = stretch::examples::checkJobOptions(job); !problem.empty()) {
    std::cerr << "stretch-train-gpt: error: " << problem << "\n";
    return 2;
  }

  const Preset& chosen = findPreset(preset);
  const auto given = [&app](const char* name) { return app.count(name) > 0; };
  if (job.configPath.empty())
    job.configPath = stretch::joinPath(source, std::string("fixtures/jobs/gpt/") + chosen.config);
  if (!given("--steps"))
    job.steps = chosen.steps;
  if (!given("--layers"))
    shape.layers = chosen.shape.layers;
  if (!given("--heads"))
    shape.heads = chosen.shape.heads;
  if (!given("--width"))
    shape.width = chosen.shape.width;
  if (!given("--context"))
    shape.context = chosen.shape.context;
  if (!given("--dropout"))
    shape.dropout = chosen.shape.dropout;
  return std::nullopt;
}

// Peak bytes LibTorch's caching allocator reserved from the driver and handed out on `device`
// (torch.cuda.max_memory_reserved / max_memory_allocated); zeros on the CPU.
struct DeviceMemory {
  double reserved = 0;
  double allocated = 0;
};

DeviceMemory peakDeviceMemory(const torch::Device& device) {
#ifdef STRETCH_EXAMPLE_HAVE_CUDA
  if (device.is_cuda()) {
    const auto stats =
        c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    return {static_cast<double>(stats.reserved_bytes[0].peak),
            static_cast<double>(stats.allocated_bytes[0].peak)};
  }
#endif
  (void)device;
  return {};
}

// What a run leaves for its summary line (or JSON object).
struct GptSummary {
  const std::vector<double>& losses;
  const nlohmann::json& validations;
  double lastValidation;
  double medianSeconds;
  std::int64_t tokensPerStep;
  std::int64_t parameters;
  std::int64_t generation;
  double peakRss;
  DeviceMemory peakDevice;  // the largest rank's
  double unigramEntropy;
  std::string sample;
};

// Rank 0's summary: one JSON object with --json, else two lines.
void printGptSummary(const stretch::engine::Engine& engine, torch::nn::Module& model,
                     const GptArgs& args, const GptSummary& s) {
  const auto& job = args.job;
  const auto& shape = args.shape;
  const auto& [losses, validations, lastValidation, medianSeconds, tokensPerStep, parameters,
               generation, peakRss, peakDevice, unigramEntropy, sample] = s;
  const double tokensPerSecond =
      medianSeconds > 0 ? static_cast<double>(tokensPerStep) / medianSeconds : 0.0;
  if (job.json) {
    nlohmann::json out = {
        {"steps", engine.globalSteps()},
        {"skipped_steps", engine.skippedSteps()},
        {"samples", engine.globalSamples()},
        {"tokens", engine.globalSamples() * shape.context},
        {"world_size", engine.dpWorldSize()},
        {"generation", generation},
        {"micro_batch", engine.microBatchSize()},
        {"gradient_accumulation_steps", engine.gradientAccumulationSteps()},
        {"train_batch_size", engine.trainBatchSize()},
        {"zero_stage", engine.zeroStage()},
        {"parameters", parameters},
        {"layers", shape.layers},
        {"heads", shape.heads},
        {"width", shape.width},
        {"context", shape.context},
        {"vocabulary", shape.vocab},
        {"activation_checkpointing", shape.activationCheckpointing},
        {"final_loss", losses.empty() ? std::nan("") : losses.back()},
        {"losses", losses},
        {"learning_rate", engine.learningRates().front()},
        {"validation_loss", lastValidation},
        {"validation", validations},
        {"unigram_entropy", unigramEntropy},
        {"step_seconds_median", medianSeconds},
        {"tokens_per_second", tokensPerSecond},
        {"peak_rss_bytes", static_cast<std::int64_t>(peakRss)},
        {"peak_device_reserved_bytes", static_cast<std::int64_t>(peakDevice.reserved)},
        {"peak_device_allocated_bytes", static_cast<std::int64_t>(peakDevice.allocated)},
        {"weights_sha256", stretch::examples::weightsDigest(model)},
        {"optimizer_state_bytes", engine.optimizerStateBytes()},
        {"sample", sample}};
    if (const auto copies = stretch::examples::partitionCopyFigures(engine)) {
      out["partition_copy_bytes"] = copies->bytes;  // live recovery, ZeRO 1/2 (docs/launch.md)
      out["partition_copy_ms_per_step"] = copies->msPerStep;
    }
    std::cout << out.dump() << "\n";
  } else {
    std::cout << fmt::format(
        "gpt: {} steps on {} rank(s), {} tokens; final training loss {:.4f}; validation loss "
        "{:.4f} (unigram entropy {:.4f}); {:.0f} tokens/s; peak RSS {:.0f} MiB\n"
        "sample: {}\n",
        engine.globalSteps(), engine.dpWorldSize(), engine.globalSamples() * shape.context,
        losses.empty() ? std::nan("") : losses.back(), lastValidation, unigramEntropy,
        tokensPerSecond, peakRss / (1 << 20), sample);
  }
}

int runGpt(int argc, char** argv) {
  GptArgs args;
  if (const auto status = parseGptArgs(argc, argv, args))
    return *status;
  auto& [job, preset, dataPath, shape, evalEvery, evalWindows, logEvery, sampleChars, initFrom,
         exportInit] = args;
  stretch::examples::routeLogs(job);
  stretch::examples::setDeterminism(job);

  const auto config = stretch::examples::readJobConfig(job.configPath);
  shape.activationCheckpointing = config.activationCheckpointing.has_value();
  const auto corpus = stretch::examples::loadCharCorpus(dataPath, shape.context);
  shape.vocab = corpus.vocabSize();
  stretch::examples::checkShape(shape);
  const auto live = stretch::engine::LiveRecovery::fromEnvironment();
  auto group = stretch::examples::joinIfDistributed(live.get());

  torch::manual_seed(job.seed);
  Gpt model(shape);
  if (!initFrom.empty())
    loadInitialWeights(model, initFrom);
  const int rank = group ? group->rank() : 0;
  if (!exportInit.empty() && rank == 0)
    exportWeights(model, exportInit);

  stretch::engine::InitOptions options;
  options.processGroup = std::move(group);
  options.liveJoin = live && live->joining();
  options.trainingData = corpus.train;
  options.dataSeed = job.seed;
  auto [engine, optimizer, loader, scheduler] =
      stretch::engine::initialize(torch::nn::AnyModule(model), config, options);
  stretch::examples::startTraining(*engine, job, live.get());
  const auto device = engine->device();
  const std::int64_t parameters = stretch::examples::parameterCount(*model);
  const std::int64_t generation = stretch::examples::launcherGeneration();
  const std::int64_t tokensPerStep = engine->trainBatchSize() * shape.context;
  if (rank == 0) {
    spdlog::info(
        "gpt: {} parameters ({} layers, {} heads, width {}, context {}, vocabulary {}); {} "
        "training and {} validation windows from {} ({} bytes; unigram entropy {:.4f} nats); "
        "generation {}, {} rank(s), micro {} x accumulation {}{}",
        parameters, shape.layers, shape.heads, shape.width, shape.context, shape.vocab,
        corpus.train.size(), corpus.validation.size(), dataPath, corpus.bytes,
        corpus.unigramEntropy, generation, engine->dpWorldSize(), engine->microBatchSize(),
        engine->gradientAccumulationSteps(),
        shape.activationCheckpointing ? ", activation checkpointing" : "");
  }

  std::vector<double> losses;  // the global mean loss of every step of this run
  nlohmann::json validations = nlohmann::json::array();
  double lastValidation = std::nan("");
  stretch::examples::StepLedger ledger(job);
  std::int64_t micro = 0;
  while (engine->globalSteps() < job.steps) {
    const bool completed = stretch::examples::liveMicroStep(*engine, live.get(), job.steps, [&] {
      auto batch = loader->next();
      torch::manual_seed(dropoutSeed(job.seed, engine->globalSteps(), micro++, engine->dpRank()));
      auto loss = lossOf(engine->forward(batch.inputs.to(device)), batch.targets.to(device));
      engine->backward(loss);
      ledger.addMicroLoss(loss.item<double>());
      const bool boundary = engine->isGradientAccumulationBoundary();
      engine->step();
      if (!boundary)
        return;
      micro = 0;
      const auto [meanLoss, seconds] = ledger.closeStep();
      const double stepLoss =
          allReduce(engine->processGroup().get(), meanLoss, stretch::comm::ReduceOp::Avg);
      losses.push_back(stepLoss);
      const std::int64_t step = engine->globalSteps();
      if (engine->dpRank() == 0 && logEvery > 0 && (step % logEvery == 0 || step == job.steps)) {
        spdlog::info(
            "step {}/{} loss {:.4f} lr {:.3e} tokens/s {:.0f} step {:.3f} s (median {:.3f} s) "
            "peak rss {:.0f} MiB generation {} world {} micro {} x {}",
            step, job.steps, stepLoss, engine->learningRates().front(),
            static_cast<double>(tokensPerStep) / seconds, seconds,
            stretch::examples::median(ledger.stepSeconds()),
            static_cast<double>(stretch::examples::peakRssBytes()) / (1 << 20), generation,
            engine->dpWorldSize(), engine->microBatchSize(), engine->gradientAccumulationSteps());
      }
      if (engine->dpRank() == 0 && evalEvery > 0 && step % evalEvery == 0 && step < job.steps) {
        lastValidation =
            validationLoss(model, corpus.validation, evalWindows, engine->microBatchSize(), device);
        validations.push_back({{"step", step}, {"loss", lastValidation}});
        spdlog::info("step {}: validation loss {:.4f} (unigram entropy {:.4f})", step,
                     lastValidation, corpus.unigramEntropy);
      }
      ledger.finishStep(*engine);
    });
    if (!completed) {
      micro = 0;
      ledger.abandonStep();
    }
  }

  if (live)
    live->finish();  // workers still waiting for a generation have nothing left to do
  const double peakRss = allReduce(engine->processGroup().get(),
                                   static_cast<double>(stretch::examples::peakRssBytes()),
                                   stretch::comm::ReduceOp::Max);
  DeviceMemory peakDevice = peakDeviceMemory(device);
  peakDevice.reserved =
      allReduce(engine->processGroup().get(), peakDevice.reserved, stretch::comm::ReduceOp::Max);
  peakDevice.allocated =
      allReduce(engine->processGroup().get(), peakDevice.allocated, stretch::comm::ReduceOp::Max);
  if (engine->dpRank() == 0) {
    lastValidation =
        validationLoss(model, corpus.validation, evalWindows, engine->microBatchSize(), device);
    validations.push_back({{"step", engine->globalSteps()}, {"loss", lastValidation}});
    const auto sample = corpus.decode(
        stretch::examples::generate(model, corpus.encode("The "), sampleChars, 0.8, job.seed));
    printGptSummary(
        *engine, *model, args,
        GptSummary{losses, validations, lastValidation,
                   stretch::examples::median(ledger.stepSeconds()), tokensPerStep, parameters,
                   generation, peakRss, peakDevice, corpus.unigramEntropy, sample});
  }
  stretch::comm::destroyProcessGroup();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return stretch::examples::runJob("stretch-train-gpt", [&] { return runGpt(argc, argv); });
}
