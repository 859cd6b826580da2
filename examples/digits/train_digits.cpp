// stretch-train-digits: the example training job. A 64-128-10 MLP learns the 1,797 handwritten
// digits (first 1,500 rows train, the last 297 test) with the engine, from a DeepSpeed config.
//
//   build/bin/stretch-train-digits                          # one process
//   RANK=r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 build/bin/stretch-train-digits
//                                                            # one of two processes over Gloo
//
// Prints a progress line every steps_per_print steps and a summary; --json prints the summary
// as one JSON object. Exit status: 0 trained, 1 a runtime failure, 2 bad input.

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "examples/digits/digits_data.hpp"
#include "runtime/comm/builtin/builtin_backends.hpp"
#include "runtime/comm/init_distributed.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/common/posix_files.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/engine/checkpoint_io.hpp"
#include "runtime/engine/engine.hpp"

namespace {

struct DigitsNetImpl : torch::nn::Module {
  DigitsNetImpl()
      : fc1(register_module("fc1", torch::nn::Linear(64, 128))),
        fc2(register_module("fc2", torch::nn::Linear(128, 10))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2->forward(torch::relu(fc1->forward(x))); }
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
};
TORCH_MODULE(DigitsNet);

double accuracy(DigitsNet& model, const stretch::engine::TensorDataset& data,
                torch::ScalarType dtype) {
  torch::NoGradGuard noGrad;
  auto logits = model->forward(data.inputs.to(dtype)).to(torch::kFloat32);
  return logits.argmax(1).eq(data.targets).to(torch::kFloat64).mean().item<double>();
}

// SHA-256 of the parameters' bytes in module order: equal digests mean bitwise-equal weights.
std::string weightsDigest(DigitsNet& model) {
  std::string bytes;
  for (const auto& p : model->parameters()) {
    const auto t = p.detach().contiguous().to(torch::kCPU);
    bytes.append(static_cast<const char*>(t.data_ptr()),
                 static_cast<std::size_t>(t.numel()) * t.element_size());
  }
  return stretch::engine::sha256Hex(bytes);
}

std::int64_t parameterCount(DigitsNet& model) {
  std::int64_t n = 0;
  for (const auto& p : model->parameters())
    n += p.numel();
  return n;
}

// The median of the values (0 when there are none).
double median(std::vector<double> values) {
  if (values.empty())
    return 0.0;
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), mid, values.end());
  return *mid;
}

// Fault script hooks for the sim-to-real test (tests/cli/sim_to_real_test.cpp), read from the
// environment; each acts after a step (and its checkpoint) completes, once per job, remembered
// by marker files in STRETCH_FAULT_DIR:
//   STRETCH_FAULT_KILL_AT_STEP=S:R     rank R SIGKILLs itself after step S (marker kill_S);
//   STRETCH_FAULT_PAUSE_AT_STEPS=S,T   after step S every rank waits until the test creates
//                                      pause_S.release (rank 0 creates pause_S.reached first), so
//                                      the test can take a node away or add one at that step.
struct FaultScript {
  std::string dir;
  std::int64_t killStep = -1;
  std::int64_t killRank = -1;
  std::vector<std::int64_t> pauseSteps;

  static FaultScript fromEnvironment() {
    FaultScript f;
    const char* dir = std::getenv("STRETCH_FAULT_DIR");
    if (dir == nullptr)
      return f;
    f.dir = dir;
    if (const char* kill = std::getenv("STRETCH_FAULT_KILL_AT_STEP")) {
      if (std::sscanf(kill, "%ld:%ld", &f.killStep, &f.killRank) != 2)
        throw stretch::ConfigError(
            stretch::ErrorDetail{"STRETCH_FAULT_KILL_AT_STEP", kill, "STEP:RANK"});
    }
    if (const char* pauses = std::getenv("STRETCH_FAULT_PAUSE_AT_STEPS")) {
      std::string text = pauses;
      for (std::size_t pos = 0; pos < text.size();) {
        const auto comma = std::min(text.find(',', pos), text.size());
        f.pauseSteps.push_back(std::stoll(text.substr(pos, comma - pos)));
        pos = comma + 1;
      }
    }
    return f;
  }

  void afterStep(std::int64_t step, std::int64_t rank) const {
    if (dir.empty())
      return;
    if (step == killStep && rank == killRank) {
      const std::string marker = stretch::joinPath(dir, fmt::format("kill_{}", step));
      if (!stretch::pathExists(marker)) {
        stretch::writeFileAtomically(marker, fmt::format("{}\n", rank));
        spdlog::warn("fault script: rank {} kills itself after step {}", rank, step);
        ::kill(::getpid(), SIGKILL);
      }
    }
    if (std::find(pauseSteps.begin(), pauseSteps.end(), step) == pauseSteps.end())
      return;
    const std::string release = stretch::joinPath(dir, fmt::format("pause_{}.release", step));
    if (stretch::pathExists(release))
      return;
    if (rank == 0)
      stretch::writeFileAtomically(stretch::joinPath(dir, fmt::format("pause_{}.reached", step)),
                                   "\n");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!stretch::pathExists(release)) {
      if (std::chrono::steady_clock::now() > deadline) {
        spdlog::error("fault script: nobody released the pause at step {}", step);
        std::exit(3);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
};

bool distributedEnvironment() {
  return std::getenv("WORLD_SIZE") != nullptr || std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string source = STRETCH_SOURCE_DIR;
  std::string configPath = stretch::joinPath(source, "fixtures/jobs/digits/ds_config.json");
  std::string dataPath = stretch::joinPath(source, "fixtures/data/digits/digits.csv.gz");
  std::int64_t steps = 600;
  std::int64_t trainRows = 1500;
  std::string checkpointDir;
  std::int64_t saveAt = 0;
  std::int64_t saveEvery = 0;
  bool resume = false;
  bool json = false;
  std::uint64_t seed = 0;

  CLI::App app{
      "Train the example MLP on the handwritten digits with the Stretch engine.\n"
      "Distributed when WORLD_SIZE (or OpenMPI's variables) is set: every process\n"
      "joins over Gloo with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT.",
      "stretch-train-digits"};
  app.add_option("--config", configPath, "DeepSpeed config (JSON)")->capture_default_str();
  app.add_option("--data", dataPath, "digits.csv.gz")->capture_default_str();
  app.add_option("--steps", steps, "optimizer steps to train")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--train-rows", trainRows, "rows used for training; the rest test")
      ->capture_default_str()
      ->check(CLI::Range(1, 1796));
  app.add_option("--seed", seed, "model initialisation and data shuffling seed")
      ->capture_default_str();
  app.add_option("--checkpoint-dir", checkpointDir, "directory for checkpoints");
  app.add_option("--save-at", saveAt, "save a checkpoint after this step (needs --checkpoint-dir)")
      ->check(CLI::PositiveNumber);
  app.add_option("--save-every", saveEvery,
                 "save a checkpoint every N steps (needs --checkpoint-dir)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--resume", resume,
               "load the latest checkpoint of --checkpoint-dir first, if there is one");
  app.add_flag("--json", json, "print the summary as one JSON object");
  CLI11_PARSE(app, argc, argv);
  if ((saveAt > 0 || saveEvery > 0 || resume) && checkpointDir.empty()) {
    std::cerr << "stretch-train-digits: error: --save-at, --save-every and --resume need "
                 "--checkpoint-dir\n";
    return 2;
  }

  try {
    // parseConfig(readFile) rather than loadConfig, whose std::filesystem::path parameter would
    // construct a path (out-of-line std::filesystem code: docs/gpu.md).
    const auto parsed = stretch::config::parseConfig(stretch::readFile(configPath), configPath);
    for (const auto& w : parsed.warnings)
      spdlog::warn("{}", w);
    std::shared_ptr<stretch::comm::ProcessGroup> group;
    if (distributedEnvironment()) {
      stretch::comm::registerBuiltinBackends();
      group = stretch::comm::initDistributed({});
    }

    torch::manual_seed(static_cast<std::uint64_t>(seed));
    DigitsNet model;
    const auto train = stretch::examples::loadDigits(dataPath, 0, trainRows);
    const auto test = stretch::examples::loadDigits(dataPath, trainRows, -1);

    stretch::engine::InitOptions options;
    options.processGroup = group;
    options.trainingData = train;
    options.dataSeed = seed;
    options.device = torch::Device(torch::kCPU);
    auto [engine, optimizer, loader, scheduler] =
        stretch::engine::initialize(torch::nn::AnyModule(model), parsed.config, options);

    if (resume) {
      if (auto loaded = engine->loadCheckpoint(checkpointDir)) {
        if (engine->dpRank() == 0) {
          spdlog::info("resumed from {} at step {} (written by {} rank(s))", loaded->path,
                       engine->globalSteps(), loaded->savedDpWorldSize);
        }
      }
    }

    double lossSum = 0;
    std::int64_t lossCount = 0;
    double lastLoss = 0;
    // Wall time of every optimizer step (checkpoint saves excluded): the simulator's calibration
    // (`stretch sim --calibrate`) compares its predicted step time with their median.
    std::vector<double> stepSeconds;
    const FaultScript faults = FaultScript::fromEnvironment();
    auto stepBegan = std::chrono::steady_clock::now();
    while (engine->globalSteps() < steps) {
      auto batch = loader->next();
      auto loss = torch::cross_entropy_loss(
          engine->forward(batch.inputs.to(engine->dtype())).to(torch::kFloat32), batch.targets);
      engine->backward(loss);
      lossSum += loss.item<double>();
      ++lossCount;
      const bool boundary = engine->isGradientAccumulationBoundary();
      engine->step();
      if (boundary) {
        lastLoss = lossSum / static_cast<double>(lossCount);
        lossSum = 0;
        lossCount = 0;
        stepSeconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - stepBegan).count());
        const std::int64_t step = engine->globalSteps();
        if (!checkpointDir.empty() &&
            (step == saveAt || (saveEvery > 0 && step % saveEvery == 0 && step < steps))) {
          engine->saveCheckpoint(checkpointDir);
        }
        faults.afterStep(step, engine->dpRank());
        stepBegan = std::chrono::steady_clock::now();
      }
    }
    // The mean training loss of the last step, averaged over the data-parallel ranks.
    std::vector<double> reduced = {lastLoss};
    if (engine->dpWorldSize() > 1) {
      group
          ->allReduce(stretch::comm::BufferView::of(std::span(reduced)),
                      stretch::comm::ReduceOp::Avg)
          ->wait();
    }
    const double acc = accuracy(model, test, engine->dtype());
    if (engine->dpRank() == 0) {
      if (json) {
        nlohmann::json out = {{"steps", engine->globalSteps()},
                              {"skipped_steps", engine->skippedSteps()},
                              {"samples", engine->globalSamples()},
                              {"world_size", engine->dpWorldSize()},
                              {"final_loss", reduced[0]},
                              {"test_accuracy", acc},
                              {"weights_sha256", weightsDigest(model)},
                              {"test_rows", test.size()},
                              {"parameters", parameterCount(model)},
                              {"step_seconds_median", median(stepSeconds)},
                              {"micro_batch", engine->microBatchSize()},
                              {"gradient_accumulation_steps", engine->gradientAccumulationSteps()}};
        std::cout << out.dump() << "\n";
      } else {
        std::cout << fmt::format(
            "digits: {} steps on {} rank(s), {} samples; final training loss {:.4f}; test "
            "accuracy {:.3f} on {} held-out digits\n",
            engine->globalSteps(), engine->dpWorldSize(), engine->globalSamples(), reduced[0], acc,
            test.size());
      }
    }
    stretch::comm::destroyProcessGroup();
    return 0;
  } catch (const stretch::ConfigError& e) {
    std::cerr << "stretch-train-digits: error: " << e.what() << "\n";
    return 2;
  } catch (const stretch::IoError& e) {
    std::cerr << "stretch-train-digits: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "stretch-train-digits: error: " << e.what() << "\n";
    return 1;
  }
}
