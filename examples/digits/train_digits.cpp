// stretch-train-digits: the example training job. A 64-128-10 MLP learns the 1,797 handwritten
// digits (first 1,500 rows train, the last 297 test) with the engine, from a DeepSpeed config.
//
//   build/bin/stretch-train-digits                          # one process
//   RANK=r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 build/bin/stretch-train-digits
//                                                            # one of two processes over Gloo
//
// Prints a progress line every steps_per_print steps and a summary; --json prints the summary
// as one JSON object. Exit status: 0 trained, 1 a runtime failure, 2 bad input.

#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "examples/common/job_support.hpp"
#include "examples/digits/digits_data.hpp"
#include "runtime/comm/init_distributed.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/common/posix_files.hpp"
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

int runDigits(int argc, char** argv) {
  const std::string source = STRETCH_SOURCE_DIR;
  stretch::examples::JobOptions job;
  job.configPath = stretch::joinPath(source, "fixtures/jobs/digits/ds_config.json");
  job.steps = 600;
  std::string dataPath = stretch::joinPath(source, "fixtures/data/digits/digits.csv.gz");
  std::int64_t trainRows = 1500;

  CLI::App app{
      "Train the example MLP on the handwritten digits with the Stretch engine.\n"
      "Distributed when WORLD_SIZE (or OpenMPI's variables) is set: every process\n"
      "joins over Gloo with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT.",
      "stretch-train-digits"};
  stretch::examples::addJobOptions(app, job);
  app.add_option("--data", dataPath, "digits.csv.gz")->capture_default_str();
  app.add_option("--train-rows", trainRows, "rows used for training; the rest test")
      ->capture_default_str()
      ->check(CLI::Range(1, 1796));
  CLI11_PARSE(app, argc, argv);
  if (const auto problem = stretch::examples::checkJobOptions(job); !problem.empty()) {
    std::cerr << "stretch-train-digits: error: " << problem << "\n";
    return 2;
  }
  stretch::examples::routeLogs(job);
  stretch::examples::setDeterminism(job);

  const auto config = stretch::examples::readJobConfig(job.configPath);
  const auto live = stretch::engine::LiveRecovery::fromEnvironment();

  torch::manual_seed(job.seed);
  DigitsNet model;
  const auto train = stretch::examples::loadDigits(dataPath, 0, trainRows);
  const auto test = stretch::examples::loadDigits(dataPath, trainRows, -1);

  stretch::engine::InitOptions options;
  options.processGroup = stretch::examples::joinIfDistributed(live.get());
  options.liveJoin = live && live->joining();
  options.trainingData = train;
  options.dataSeed = job.seed;
  options.device = torch::Device(torch::kCPU);
  auto [engine, optimizer, loader, scheduler] =
      stretch::engine::initialize(torch::nn::AnyModule(model), config, options);
  stretch::examples::startTraining(*engine, job, live.get());

  double lastLoss = 0;
  stretch::examples::StepLedger ledger(job);
  while (engine->globalSteps() < job.steps) {
    const bool completed = stretch::examples::liveMicroStep(*engine, live.get(), job.steps, [&] {
      auto batch = loader->next();
      auto loss = torch::cross_entropy_loss(
          engine->forward(batch.inputs.to(engine->dtype())).to(torch::kFloat32), batch.targets);
      engine->backward(loss);
      ledger.addMicroLoss(loss.item<double>());
      const bool boundary = engine->isGradientAccumulationBoundary();
      engine->step();
      if (boundary) {
        lastLoss = ledger.closeStep().meanLoss;
        ledger.finishStep(*engine);
      }
    });
    if (!completed)
      ledger.abandonStep();
  }
  if (live)
    live->finish();  // workers still waiting for a generation have nothing left to do
  // The mean training loss of the last step, averaged over the data-parallel ranks.
  std::vector<double> reduced = {lastLoss};
  if (engine->dpWorldSize() > 1) {
    engine->processGroup()
        ->allReduce(stretch::comm::BufferView::of(std::span(reduced)), stretch::comm::ReduceOp::Avg)
        ->wait();
  }
  const double acc = accuracy(model, test, engine->dtype());
  if (engine->dpRank() == 0) {
    if (job.json) {
      nlohmann::json out = {
          {"steps", engine->globalSteps()},
          {"skipped_steps", engine->skippedSteps()},
          {"samples", engine->globalSamples()},
          {"world_size", engine->dpWorldSize()},
          {"final_loss", reduced[0]},
          {"test_accuracy", acc},
          {"weights_sha256", stretch::examples::weightsDigest(*model)},
          {"test_rows", test.size()},
          {"parameters", stretch::examples::parameterCount(*model)},
          {"step_seconds_median", stretch::examples::median(ledger.stepSeconds())},
          {"micro_batch", engine->microBatchSize()},
          {"gradient_accumulation_steps", engine->gradientAccumulationSteps()},
          {"optimizer_state_bytes", engine->optimizerStateBytes()}};
      if (const auto copies = stretch::examples::partitionCopyFigures(*engine)) {
        out["partition_copy_bytes"] = copies->bytes;  // live recovery, ZeRO 1/2 (docs/launch.md)
        out["partition_copy_ms_per_step"] = copies->msPerStep;
      }
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
}

}  // namespace

int main(int argc, char** argv) {
  return stretch::examples::runJob("stretch-train-digits", [&] { return runDigits(argc, argv); });
}
