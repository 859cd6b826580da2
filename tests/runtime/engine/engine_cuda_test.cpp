// The engine on a CUDA device (label gpu; every case skips, saying why, without one): the same
// training as on the CPU in fp32, real half precision with dynamic loss scaling, bf16, and
// checkpoints that move between the CPU and the GPU in both directions.

#include <string>

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "runtime/common/posix_files.hpp"
#include "runtime/engine/engine.hpp"
#include "tests/runtime/engine/engine_test_util.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::engine {
namespace {

using test::Mlp;

class EngineCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available())
      GTEST_SKIP() << "no CUDA device visible to LibTorch (torch::cuda::is_available() is false)";
  }
};

std::shared_ptr<Engine> makeEngine(Mlp model, const std::string& extra, torch::Device device) {
  InitOptions options;
  options.device = device;
  return initialize(torch::nn::AnyModule(model),
                    test::parse(R"({"train_batch_size": 32, "gradient_clipping": 1.0,
                                    "optimizer": {"type": "AdamW", "params": {"lr": 0.01}})" +
                                extra + "}"),
                    options)
      .engine;
}

double trainSteps(Engine& engine, int steps, torch::ScalarType inputType = torch::kFloat32) {
  torch::manual_seed(3);
  const auto x = torch::randn({32 * steps, 6});
  const auto y = x.narrow(1, 0, 3) * 0.5;
  double last = 0;
  for (int s = 0; s < steps; ++s) {
    auto in = x.narrow(0, 32 * s, 32).to(engine.device(), inputType);
    auto loss =
        (engine.forward(in).to(torch::kFloat32) - y.narrow(0, 32 * s, 32).to(engine.device()))
            .pow(2)
            .mean();
    last = loss.item<double>();
    engine.backward(loss);
    engine.step();
  }
  return last;
}

TEST_F(EngineCuda, Fp32TrainingMatchesTheCpu) {
  auto models = test::seededModels(2);
  auto cpu = makeEngine(models[0], "", torch::kCPU);
  auto gpu = makeEngine(models[1], "", torch::Device(torch::kCUDA, 0));
  trainSteps(*cpu, 10);
  trainSteps(*gpu, 10);
  const auto a = test::flatWeights(*models[0]);
  const auto b = test::flatWeights(*models[1]).to(torch::kCPU);
  EXPECT_TRUE(torch::allclose(a, b, 1e-4, 1e-5)) << (a - b).abs().max().template item<double>();
}

TEST_F(EngineCuda, Fp16WithDynamicLossScalingTrains) {
  auto models = test::seededModels(1);
  auto engine = makeEngine(models[0], R"(, "fp16": {"enabled": true, "initial_scale_power": 16})",
                           torch::Device(torch::kCUDA, 0));
  EXPECT_EQ(engine->dtype(), torch::kFloat16);
  torch::manual_seed(3);
  const double first = trainSteps(*engine, 1, torch::kFloat16);
  const double last = trainSteps(*engine, 60, torch::kFloat16);
  EXPECT_LT(last, first) << first << " -> " << last;
  EXPECT_LT(engine->skippedSteps(), 10);
  EXPECT_GT(engine->lossScale(), 1.0);
}

TEST_F(EngineCuda, Bf16Trains) {
  auto models = test::seededModels(1);
  auto engine =
      makeEngine(models[0], R"(, "bf16": {"enabled": true})", torch::Device(torch::kCUDA, 0));
  const double first = trainSteps(*engine, 1, torch::kBFloat16);
  const double last = trainSteps(*engine, 60, torch::kBFloat16);
  EXPECT_LT(last, first) << first << " -> " << last;
}

TEST_F(EngineCuda, CheckpointsMoveBetweenCpuAndGpu) {
  // String paths and POSIX file calls, as in the engine: std::filesystem::remove_all crashed in
  // this process under PyTorch 2.11's LibTorch (docs/gpu.md).
  const stretch::test::TempDir tmp("stretch-cuda-ckpt");
  ASSERT_FALSE(tmp.path().empty());
  const std::string a = joinPath(tmp.path().native(), "a");
  const std::string b = joinPath(tmp.path().native(), "b");
  auto models = test::seededModels(3);
  // CPU: 5 steps, save; then the GPU resumes and 5 more steps; the CPU resumes that and 5 more.
  auto cpu = makeEngine(models[0], "", torch::kCPU);
  trainSteps(*cpu, 5);
  cpu->saveCheckpoint(a);
  auto gpu = makeEngine(models[1], "", torch::Device(torch::kCUDA, 0));
  ASSERT_TRUE(gpu->loadCheckpoint(a).has_value());
  EXPECT_EQ(gpu->globalSteps(), 5);
  EXPECT_TRUE(
      torch::equal(test::flatWeights(*models[1]).to(torch::kCPU), test::flatWeights(*models[0])));
  trainSteps(*gpu, 5);
  gpu->saveCheckpoint(b);
  auto back = makeEngine(models[2], "", torch::kCPU);
  ASSERT_TRUE(back->loadCheckpoint(b).has_value());
  EXPECT_EQ(back->globalSteps(), 10);
  EXPECT_TRUE(
      torch::equal(test::flatWeights(*models[2]), test::flatWeights(*models[1]).to(torch::kCPU)));
}

}  // namespace
}  // namespace stretch::engine
