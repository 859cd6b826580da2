// The engine's training semantics: data-parallel equivalence for ZeRO 0/1/2, gradient
// accumulation counters, averaging options, clipping, fp16 overflow skipping, bf16, the
// optimizer memory ZeRO saves, and config errors. Ranks are threads over the in-process backend.

#include "runtime/engine/engine.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "runtime/comm/in_process_backend.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/posix_files.hpp"
#include "runtime/config/ds_config.hpp"
#include "tests/runtime/engine/engine_test_util.hpp"

namespace stretch::engine {
namespace {

using test::makeGroups;
using test::Mlp;
using test::parse;

// Trains `steps` optimizer steps on `ranks` threads, rank r taking rows
// [step * tb + (micro * ranks + r) * mb, + mb) of the data, and returns rank 0's flat weights.
torch::Tensor trainDataParallel(int ranks, int micro, int gas, int steps, const std::string& extra,
                                const torch::Tensor& x, const torch::Tensor& y,
                                std::vector<std::int64_t>* stateBytes = nullptr) {
  const int tb = ranks * micro * gas;
  const std::string json = fmt::format(
      R"({{"train_batch_size": {}, "train_micro_batch_size_per_gpu": {},
          "gradient_accumulation_steps": {},
          "optimizer": {{"type": "AdamW", "params": {{"lr": 0.01, "weight_decay": 0.01}}}}{}}})",
      tb, micro, gas, extra);
  const auto config = parse(json);
  auto groups = makeGroups(ranks);
  std::vector<torch::Tensor> weights(static_cast<std::size_t>(ranks));
  if (stateBytes != nullptr)
    stateBytes->assign(static_cast<std::size_t>(ranks), 0);
  // Models are built here, one after the other: LibTorch's default generator is shared by the
  // threads, so building them concurrently would interleave their random draws.
  const auto models = test::seededModels(ranks);
  comm::runRankThreads(ranks, [&](int r) {
    Mlp model = models[static_cast<std::size_t>(r)];
    InitOptions options;
    options.processGroup = groups.groups[static_cast<std::size_t>(r)];
    options.device = torch::Device(torch::kCPU);
    auto engine = initialize(torch::nn::AnyModule(model), config, options).engine;
    for (int s = 0; s < steps; ++s) {
      for (int m = 0; m < gas; ++m) {
        const std::int64_t begin = s * tb + (m * ranks + r) * micro;
        auto out = engine->forward(x.narrow(0, begin, micro));
        auto loss = torch::mse_loss(out, y.narrow(0, begin, micro));
        engine->backward(loss);
        engine->step();
      }
    }
    EXPECT_EQ(engine->globalSteps(), steps);
    EXPECT_EQ(engine->microSteps(), steps * gas);
    EXPECT_EQ(engine->globalSamples(), static_cast<std::int64_t>(steps) * tb);
    weights[static_cast<std::size_t>(r)] = test::flatWeights(*model);
    if (stateBytes != nullptr)
      (*stateBytes)[static_cast<std::size_t>(r)] = engine->optimizerStateBytes();
  });
  for (int r = 1; r < ranks; ++r)
    EXPECT_TRUE(torch::equal(weights[0], weights[static_cast<std::size_t>(r)])) << "rank " << r;
  return weights[0];
}

class DataParallelEquivalence : public ::testing::TestWithParam<int> {};

TEST_P(DataParallelEquivalence, RanksTimesMicroTimesGasEqualsOneRankWithTheWholeBatch) {
  const int stage = GetParam();
  torch::manual_seed(1);
  const auto x = torch::randn({4 * 2 * 3 * 5, 6});
  const auto y = torch::randn({4 * 2 * 3 * 5, 3});
  const std::string zero = fmt::format(R"(, "zero_optimization": {{"stage": {}}})", stage);
  const auto reference = trainDataParallel(1, 24, 1, 5, zero, x, y);
  for (auto [ranks, micro, gas] : {std::tuple{4, 2, 3}, std::tuple{2, 3, 4}, std::tuple{3, 8, 1}}) {
    SCOPED_TRACE(fmt::format("stage {}, {} ranks x micro {} x gas {}", stage, ranks, micro, gas));
    const auto w = trainDataParallel(ranks, micro, gas, 5, zero, x, y);
    EXPECT_TRUE(torch::allclose(w, reference, 1e-6, 1e-7))
        << "max difference " << (w - reference).abs().max().item<double>();
  }
}

INSTANTIATE_TEST_SUITE_P(ZeroStages, DataParallelEquivalence, ::testing::Values(0, 1, 2),
                         [](const auto& param) { return "Stage" + std::to_string(param.param); });

TEST(EngineZero, StagesOneAndTwoGiveTheSameWeightsAsStageZero) {
  torch::manual_seed(2);
  const auto x = torch::randn({4 * 2 * 2 * 4, 6});
  const auto y = torch::randn({4 * 2 * 2 * 4, 3});
  std::vector<std::int64_t> bytes0, bytes1, bytes2;
  const auto w0 =
      trainDataParallel(4, 2, 2, 4, R"(, "zero_optimization": {"stage": 0})", x, y, &bytes0);
  const auto w1 =
      trainDataParallel(4, 2, 2, 4, R"(, "zero_optimization": {"stage": 1})", x, y, &bytes1);
  const auto w2 =
      trainDataParallel(4, 2, 2, 4, R"(, "zero_optimization": {"stage": 2})", x, y, &bytes2);
  EXPECT_TRUE(torch::allclose(w1, w0, 1e-6, 1e-7));
  EXPECT_TRUE(torch::allclose(w2, w0, 1e-6, 1e-7));
  // Per-rank optimizer memory (Adam state + fp32 master): about 1/4 of stage 0's on 4 ranks.
  const double ratio1 = static_cast<double>(bytes1[0]) / static_cast<double>(bytes0[0]);
  EXPECT_NEAR(ratio1, 0.25, 0.02) << bytes1[0] << " vs " << bytes0[0];
  // Stage 2 also keeps the owner's fp32 gradient accumulator (one more partition).
  const double ratio2 = static_cast<double>(bytes2[0]) / static_cast<double>(bytes0[0]);
  EXPECT_NEAR(ratio2, 4.0 / 12.0, 0.03) << bytes2[0] << " vs " << bytes0[0];
}

TEST(EngineZero, StageTwoHoldsNoGradientsAfterBackwardAndStageOneDoes) {
  torch::manual_seed(4);
  const auto x = torch::randn({8, 6});
  const auto y = torch::randn({8, 3});
  for (int stage : {1, 2}) {
    auto groups = makeGroups(2);
    const auto models = test::seededModels(2);
    const auto config = parse(fmt::format(
        R"({{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
            "optimizer": {{"type": "Adam", "params": {{"lr": 0.01}}}},
            "zero_optimization": {{"stage": {}, "reduce_bucket_size": 16}}}})",
        stage));
    comm::runRankThreads(2, [&](int r) {
      Mlp model = models[static_cast<std::size_t>(r)];
      InitOptions options;
      options.processGroup = groups.groups[static_cast<std::size_t>(r)];
      options.device = torch::Device(torch::kCPU);
      auto engine = initialize(torch::nn::AnyModule(model), config, options).engine;
      for (int m = 0; m < 2; ++m) {  // gradient accumulation 2: a micro step, then a boundary
        engine->backward(torch::mse_loss(engine->forward(x.narrow(0, (2 * m + r) * 2, 2)),
                                         y.narrow(0, (2 * m + r) * 2, 2)));
        for (const auto& p : model->parameters())
          EXPECT_EQ(p.grad().defined(), stage == 1) << "stage " << stage << ", rank " << r;
        engine->step();
      }
      EXPECT_EQ(engine->globalSteps(), 1);
    });
  }
}

TEST(EngineZero, SmallBucketsGiveTheSameResultAsOneBucket) {
  torch::manual_seed(3);
  const auto x = torch::randn({2 * 2 * 2 * 3, 6});
  const auto y = torch::randn({2 * 2 * 2 * 3, 3});
  for (int stage : {0, 1, 2}) {
    const auto one = trainDataParallel(
        2, 2, 2, 3, fmt::format(R"(, "zero_optimization": {{"stage": {}}})", stage), x, y);
    const auto many = trainDataParallel(
        2, 2, 2, 3,
        fmt::format(R"(, "zero_optimization": {{"stage": {}, "reduce_bucket_size": 10}})", stage),
        x, y);
    EXPECT_TRUE(torch::allclose(one, many, 1e-6, 1e-7)) << "stage " << stage;
  }
}

TEST(EngineOverlap, OverlappedBucketReductionGivesTheSameWeights) {
  torch::manual_seed(8);
  const auto x = torch::randn({3 * 2 * 2 * 4, 6});
  const auto y = torch::randn({3 * 2 * 2 * 4, 3});
  const auto plain = trainDataParallel(3, 2, 2, 4, R"(, "zero_optimization": {"stage": 0})", x, y);
  // Buckets of 20 elements: parameters straddle buckets and several launch during backward.
  const auto overlapped = trainDataParallel(
      3, 2, 2, 4,
      R"(, "zero_optimization": {"stage": 0, "overlap_comm": true, "reduce_bucket_size": 20},
          "gradient_predivide_factor": 2.0)",
      x, y);
  const auto predivided = trainDataParallel(
      3, 2, 2, 4, R"(, "zero_optimization": {"stage": 0}, "gradient_predivide_factor": 2.0)", x, y);
  EXPECT_TRUE(torch::allclose(overlapped, predivided, 1e-6, 1e-7))
      << (overlapped - predivided).abs().max().item<double>();
  EXPECT_TRUE(torch::allclose(overlapped, plain, 1e-5, 1e-6));
}

TEST(EngineOverlap, BucketsStartReducingBeforeBackwardReturns) {
  auto groups = makeGroups(2);
  const auto models = test::seededModels(2);
  std::vector<std::int64_t> launched(2);
  comm::runRankThreads(2, [&](int r) {
    InitOptions options;
    options.processGroup = groups.groups[static_cast<std::size_t>(r)];
    options.device = torch::Device(torch::kCPU);
    auto engine = initialize(torch::nn::AnyModule(models[static_cast<std::size_t>(r)]),
                             parse(R"({"train_batch_size": 4,
                                       "zero_optimization": {"overlap_comm": true,
                                                             "reduce_bucket_size": 16},
                                       "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})"),
                             options)
                      .engine;
    auto loss = torch::mse_loss(engine->forward(torch::ones({2, 6})), torch::zeros({2, 3}));
    engine->backward(loss);
    engine->step();
    launched[static_cast<std::size_t>(r)] = engine->bucketsLaunchedDuringBackward();
  });
  // 123 elements in buckets of 16: the last buckets (fc2's) are ready before fc1's gradients.
  EXPECT_GT(launched[0], 0);
  EXPECT_EQ(launched[0], launched[1]);
}

TEST(EngineAveraging, PredivideAndPrescaleGiveTheMeanAndSumGivesNTimesIt) {
  torch::manual_seed(4);
  const auto x = torch::randn({16, 6});
  const auto y = torch::randn({16, 3});
  // SGD makes the update proportional to the gradient, so "sum" must move N times as far.
  auto run = [&](const std::string& extra, int ranks) {
    const std::string json = fmt::format(
        R"({{"train_batch_size": {}, "train_micro_batch_size_per_gpu": 2,
            "optimizer": {{"type": "SGD", "params": {{"lr": 0.01}}}}{}}})",
        2 * ranks, extra);
    auto groups = makeGroups(ranks);
    std::vector<torch::Tensor> deltas(static_cast<std::size_t>(ranks));
    const auto models = test::seededModels(ranks);
    comm::runRankThreads(ranks, [&](int r) {
      Mlp model = models[static_cast<std::size_t>(r)];
      const auto before = test::flatWeights(*model);
      InitOptions options;
      options.processGroup = groups.groups[static_cast<std::size_t>(r)];
      options.device = torch::Device(torch::kCPU);
      auto engine = initialize(torch::nn::AnyModule(model), parse(json), options).engine;
      engine->backward(
          torch::mse_loss(engine->forward(x.narrow(0, 2 * r, 2)), y.narrow(0, 2 * r, 2)));
      engine->step();
      deltas[static_cast<std::size_t>(r)] = test::flatWeights(*model) - before;
    });
    return deltas[0];
  };
  const auto mean = run("", 4);
  EXPECT_TRUE(torch::allclose(run(R"(, "gradient_predivide_factor": 2.0)", 4), mean, 1e-5, 1e-8));
  EXPECT_TRUE(torch::allclose(run(R"(, "prescale_gradients": true)", 4), mean, 1e-5, 1e-8));
  const auto sum = run(R"(, "gradient_allreduce_op": "sum")", 4);
  // Deltas of fp32 weights carry ~1e-4 relative rounding.
  EXPECT_TRUE(torch::allclose(sum, mean * 4, 1e-3, 1e-7)) << (sum / mean).slice(0, 0, 5);
  EXPECT_FALSE(torch::allclose(sum, mean, 1e-3, 1e-7));
}

TEST(EngineClipping, ClippedUpdateMatchesAPlainLoopWithClipGradNorm) {
  torch::manual_seed(5);
  const auto x = torch::randn({8, 6}) * 10;
  const auto y = torch::randn({8, 3});
  // Plain LibTorch: SGD step after clip_grad_norm_(0.1).
  torch::manual_seed(0);
  Mlp plain(6, 12, 3);
  torch::optim::SGD sgd(plain->parameters(), torch::optim::SGDOptions(0.1));
  sgd.zero_grad();
  torch::mse_loss(plain->forward(x), y).backward();
  const double norm = torch::nn::utils::clip_grad_norm_(plain->parameters(), 0.1);
  ASSERT_GT(norm, 0.1) << "the test needs a binding clip";
  sgd.step();

  torch::manual_seed(0);
  Mlp model(6, 12, 3);
  InitOptions options;
  options.device = torch::Device(torch::kCPU);
  auto engine = initialize(torch::nn::AnyModule(model),
                           parse(R"({"train_batch_size": 8, "gradient_clipping": 0.1,
                                     "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})"),
                           options)
                    .engine;
  engine->backward(torch::mse_loss(engine->forward(x), y));
  engine->step();
  ASSERT_TRUE(engine->lastGradNorm().has_value());
  EXPECT_NEAR(*engine->lastGradNorm(), norm, 1e-4 * norm);
  EXPECT_TRUE(torch::allclose(test::flatWeights(*model), test::flatWeights(*plain), 1e-5, 1e-7));
}

TEST(EngineAdam, OneRankMatchesLibTorchsAdamW) {
  torch::manual_seed(6);
  const auto x = torch::randn({32, 6});
  const auto y = torch::randn({32, 3});
  torch::manual_seed(0);
  Mlp plain(6, 12, 3);
  torch::optim::AdamW adamw(plain->parameters(),
                            torch::optim::AdamWOptions(0.01).weight_decay(0.01));
  torch::manual_seed(0);
  Mlp model(6, 12, 3);
  InitOptions options;
  options.device = torch::Device(torch::kCPU);
  auto engine = initialize(torch::nn::AnyModule(model), parse(R"({"train_batch_size": 8,
                                     "optimizer": {"type": "Adam",
                                                   "params": {"lr": 0.01, "weight_decay": 0.01}}})"),
                           options)
                    .engine;
  for (int s = 0; s < 4; ++s) {
    adamw.zero_grad();
    torch::mse_loss(plain->forward(x.narrow(0, 8 * s, 8)), y.narrow(0, 8 * s, 8)).backward();
    adamw.step();
    engine->backward(
        torch::mse_loss(engine->forward(x.narrow(0, 8 * s, 8)), y.narrow(0, 8 * s, 8)));
    engine->step();
  }
  // "Adam" is decoupled-weight-decay Adam unless adam_w_mode is false (DeepSpeed's FusedAdam).
  EXPECT_TRUE(torch::allclose(test::flatWeights(*model), test::flatWeights(*plain), 1e-6, 1e-7))
      << (test::flatWeights(*model) - test::flatWeights(*plain)).abs().max().item<double>();
}

TEST(EngineCounters, BoundaryEveryGasMicroStepsAndBackwardReturnsTheScaledLoss) {
  torch::manual_seed(0);
  Mlp model(6, 12, 3);
  InitOptions options;
  options.device = torch::Device(torch::kCPU);
  auto engine = initialize(torch::nn::AnyModule(model),
                           parse(R"({"train_batch_size": 12, "train_micro_batch_size_per_gpu": 4,
                                     "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})"),
                           options)
                    .engine;
  EXPECT_EQ(engine->gradientAccumulationSteps(), 3);
  const auto x = torch::randn({4, 6});
  const auto y = torch::randn({4, 3});
  const auto before = test::flatWeights(*model);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(engine->isGradientAccumulationBoundary(), i == 2);
    auto loss = torch::mse_loss(engine->forward(x), y);
    auto returned = engine->backward(loss);
    EXPECT_NEAR(returned.item<double>(), loss.item<double>() / 3, 1e-7);
    engine->step();
    if (i < 2) {
      EXPECT_TRUE(torch::equal(test::flatWeights(*model), before)) << "updated before the boundary";
    }
  }
  EXPECT_FALSE(torch::equal(test::flatWeights(*model), before));
  EXPECT_EQ(engine->globalSteps(), 1);
  EXPECT_EQ(engine->microSteps(), 3);
  EXPECT_EQ(engine->globalSamples(), 12);
}

TEST(EngineFp16, AnOverflowSkipsTheUpdateAndTheSchedulerAndLowersTheScale) {
  torch::manual_seed(0);
  test::Elementwise model(8);  // half precision works on the CPU for element-wise ops
  InitOptions options;
  options.device = torch::Device(torch::kCPU);
  auto init = initialize(torch::nn::AnyModule(model), parse(R"({"train_batch_size": 4,
                                   "fp16": {"enabled": true, "initial_scale_power": 8,
                                            "hysteresis": 1},
                                   "scheduler": {"type": "WarmupLR",
                                                 "params": {"warmup_min_lr": 0,
                                                            "warmup_max_lr": 0.1,
                                                            "warmup_num_steps": 10,
                                                            "warmup_type": "linear"}},
                                   "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})"),
                         options);
  auto& engine = *init.engine;
  EXPECT_EQ(engine.dtype(), torch::kFloat16);
  EXPECT_EQ(engine.lossScale(), 256.0);
  const auto x = torch::randn({4, 8}).to(torch::kFloat16);
  // A finite step: applied, scheduler stepped.
  engine.backward(engine.forward(x).to(torch::kFloat32).pow(2).mean());
  engine.step();
  const auto after1 = test::flatWeights(*model);
  const double lr1 = engine.learningRates()[0];
  EXPECT_EQ(engine.skippedSteps(), 0);
  // An infinite loss: skipped, weights and lr unchanged, scale halved.
  engine.backward(engine.forward(x).to(torch::kFloat32).sum() * INFINITY);
  engine.step();
  EXPECT_EQ(engine.skippedSteps(), 1);
  EXPECT_EQ(engine.globalSteps(), 2);
  EXPECT_TRUE(torch::equal(test::flatWeights(*model), after1));
  EXPECT_EQ(engine.learningRates()[0], lr1);
  EXPECT_EQ(engine.lossScale(), 128.0);
}

TEST(EngineBf16, TrainsInBfloat16WithFp32MasterWeights) {
  torch::manual_seed(7);
  const auto x = torch::randn({64, 6});
  const auto y = x.narrow(1, 0, 3) * 0.5;
  torch::manual_seed(0);
  Mlp model(6, 12, 3);
  InitOptions options;
  options.device = torch::Device(torch::kCPU);
  auto engine = initialize(torch::nn::AnyModule(model),
                           parse(R"({"train_batch_size": 64, "bf16": {"enabled": true},
                                     "optimizer": {"type": "Adam", "params": {"lr": 0.01}}})"),
                           options)
                    .engine;
  EXPECT_EQ(engine->dtype(), torch::kBFloat16);
  const auto xb = x.to(torch::kBFloat16);
  const auto yb = y.to(torch::kBFloat16);
  double first = 0, last = 0;
  for (int s = 0; s < 60; ++s) {
    auto loss = torch::mse_loss(engine->forward(xb).to(torch::kFloat32), yb.to(torch::kFloat32));
    (s == 0 ? first : last) = loss.item<double>();
    engine->backward(loss);
    engine->step();
  }
  EXPECT_LT(last, first * 0.5) << first << " -> " << last;
  // 4 bytes of master + 8 of Adam state per element.
  EXPECT_EQ(engine->optimizerStateBytes(), 12 * test::parameterCount(*model));
}

TEST(EngineConfig, EverySettingWithoutEffectGetsOneWarningNamingItsKey) {
  EXPECT_TRUE(settingsWithoutEffect(parse(R"({"train_batch_size": 4})")).empty());
  // Defaults written out, and values the engine does act on, warn about nothing.
  EXPECT_TRUE(settingsWithoutEffect(parse(R"({"train_batch_size": 4, "zero_optimization":
      {"stage": 1, "offload_optimizer": {"device": "none"}, "reduce_scatter": true,
       "contiguous_gradients": true, "overlap_comm": false}, "activation_checkpointing": {}})"))
                  .empty());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}})",
       "zero_optimization.offload_optimizer.device = cpu"},
      {R"("zero_optimization": {"stage": 1, "contiguous_gradients": false})",
       "zero_optimization.contiguous_gradients = false"},
      {R"("zero_optimization": {"stage": 2, "reduce_scatter": false})",
       "zero_optimization.reduce_scatter = false"},
      {R"("zero_optimization": {"stage": 1, "allgather_partitions": false})",
       "zero_optimization.allgather_partitions = false"},
      {R"("zero_optimization": {"stage": 1, "allgather_bucket_size": 1000})",
       "zero_optimization.allgather_bucket_size = 1000"},
      {R"("zero_optimization": {"stage": 2, "round_robin_gradients": true})",
       "zero_optimization.round_robin_gradients = true"},
      {R"("zero_optimization": {"stage": 2, "ignore_unused_parameters": false})",
       "zero_optimization.ignore_unused_parameters = false"},
      {R"("zero_optimization": {"stage": 1, "overlap_comm": true})",
       "zero_optimization.overlap_comm = true"},
      {R"("zero_optimization": {"stage": 1, "elastic_checkpoint": true})",
       "zero_optimization.elastic_checkpoint = true"},
      {R"("zero_optimization": {"stage": 1, "load_from_fp32_weights": false})",
       "zero_optimization.load_from_fp32_weights = false"},
      {R"("checkpoint": {"load_universal": true})", "checkpoint.load_universal = true"},
      {R"("checkpoint": {"use_node_local_storage": true})",
       "checkpoint.use_node_local_storage = true"},
      {R"("bf16": {"enabled": true, "immediate_grad_update": true})",
       "bf16.immediate_grad_update = true"},
      {R"("comms_logger": {"enabled": true})", "comms_logger.enabled = true"},
      {R"("activation_checkpointing": {"partition_activations": true})",
       "activation_checkpointing.partition_activations = true"},
      {R"("activation_checkpointing": {"cpu_checkpointing": true})",
       "activation_checkpointing.cpu_checkpointing = true"},
      {R"("activation_checkpointing": {"contiguous_memory_optimization": true})",
       "activation_checkpointing.contiguous_memory_optimization = true"},
      {R"("activation_checkpointing": {"number_checkpoints": 4})",
       "activation_checkpointing.number_checkpoints = 4"},
  };
  for (const auto& [section, key] : cases) {
    const auto warnings =
        settingsWithoutEffect(parse(R"({"train_batch_size": 4, )" + section + "}"));
    ASSERT_EQ(warnings.size(), 1u) << section << ": " << ::testing::PrintToString(warnings);
    EXPECT_EQ(warnings[0].rfind(key + ": has no effect in the Stretch engine (", 0), 0u)
        << warnings[0];
  }
}

TEST(EngineConfig, ErrorsNameTheKey) {
  auto expectError = [](const std::string& json, const std::string& key) {
    torch::manual_seed(0);
    Mlp model(6, 12, 3);
    InitOptions options;
    options.device = torch::Device(torch::kCPU);
    try {
      initialize(torch::nn::AnyModule(model), parse(json), options);
      ADD_FAILURE() << "accepted: " << json;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  expectError(R"({"train_batch_size": 8, "zero_optimization": {"stage": 3},
                  "optimizer": {"type": "Adam"}})",
              "zero_optimization.stage");
  expectError(R"({"train_batch_size": 8})", "optimizer");
  expectError(R"({"train_batch_size": 8, "optimizer": {"type": "Adamax"}})", "optimizer.type");
  expectError(R"({"train_batch_size": 8, "optimizer": {"type": "Adam", "params": {"lr": -1}}})",
              "optimizer.params.lr");
  expectError(R"({"train_batch_size": 8,
                  "optimizer": {"type": "Adam", "params": {"max_grad_norm": 1.0}}})",
              "gradient_clipping");
  expectError(R"({"train_batch_size": 8, "fp16": {"enabled": true}, "bf16": {"enabled": true},
                  "optimizer": {"type": "Adam"}})",
              "fp16.enabled");
  expectError(R"({"train_batch_size": 8, "zero_optimization": {"stage": 2},
                  "gradient_predivide_factor": 2.0, "optimizer": {"type": "Adam"}})",
              "gradient_predivide_factor");
}

// ---- STRETCH_TIMINGS_FILE ---------------------------------------------------------------------

namespace timings {

struct Line {
  int rank = -1;
  std::int64_t world = 0, step = 0, micro = 0, gas = 0, bytes = 0, unixNs = 0;
  double forward = -1, backward = -1, allreduce = -1, optimizer = -1, total = -1, period = -1;
};

struct CheckpointLine {
  int rank = -1;
  std::string event;
  std::int64_t step = 0, unixNs = 0;
  double seconds = -1;
};

// The step lines of the file; its checkpoint lines go to `checkpoints` when given.
std::vector<Line> readLines(const std::string& path,
                            std::vector<CheckpointLine>* checkpoints = nullptr) {
  std::vector<Line> out;
  std::ifstream in(path);
  for (std::string s; std::getline(in, s);) {
    if (s.find("\"event\"") != std::string::npos) {
      CheckpointLine c;
      char event[8] = {};
      const int n = std::sscanf(
          s.c_str(),
          "{\"rank\":%d,\"event\":\"%7[a-z]\",\"step\":%ld,\"seconds\":%lf,\"unix_ns\":%ld}",
          &c.rank, event, &c.step, &c.seconds, &c.unixNs);
      EXPECT_EQ(n, 5) << "line: " << s;
      c.event = event;
      if (checkpoints != nullptr)
        checkpoints->push_back(c);
      continue;
    }
    Line l;
    const int n = std::sscanf(
        s.c_str(),
        "{\"rank\":%d,\"world_size\":%ld,\"step\":%ld,\"micro_batch\":%ld,\"gas\":%ld,"
        "\"gradient_bytes\":%ld,\"forward_ms\":%lf,\"backward_ms\":%lf,\"allreduce_ms\":%lf,"
        "\"optimizer_ms\":%lf,\"step_ms\":%lf,\"period_ms\":%lf,\"unix_ns\":%ld}",
        &l.rank, &l.world, &l.step, &l.micro, &l.gas, &l.bytes, &l.forward, &l.backward,
        &l.allreduce, &l.optimizer, &l.total, &l.period, &l.unixNs);
    EXPECT_EQ(n, 13) << "line: " << s;
    out.push_back(l);
  }
  return out;
}

std::int64_t unixNow() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string tempPath(const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  return stretch::joinPath(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                           fmt::format("stretch-{}-{}.jsonl", name, ::getpid()));
}

}  // namespace timings

TEST(EngineTimings, EveryRankAppendsOneLinePerStepWhosePartsFitInTheStep) {
  const std::string path = timings::tempPath("timings");
  const std::string ckpt = timings::tempPath("timings-ckpt");
  // POSIX calls, not std::filesystem: PyTorch 2.11's libtorch exports its own std::filesystem,
  // whose remove_all of a non-empty directory crashed this test there (docs/gpu.md).
  stretch::removePath(path);
  stretch::removeTree(ckpt);
  const std::int64_t began = timings::unixNow();
  ::setenv("STRETCH_TIMINGS_FILE", path.c_str(), 1);
  auto groups = makeGroups(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      torch::manual_seed(0);
      Mlp model(6, 12, 3);
      InitOptions options;
      options.device = torch::Device(torch::kCPU);
      options.processGroup = groups.groups[static_cast<std::size_t>(r)];
      auto engine =
          initialize(torch::nn::AnyModule(model),
                     parse(R"({"train_batch_size": 24, "train_micro_batch_size_per_gpu": 4,
                                         "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})"),
                     options)
              .engine;
      const auto x = torch::randn({4, 6});
      const auto y = torch::randn({4, 3});
      for (int i = 0; i < 3 * 3; ++i) {  // 3 steps of 3 micro steps
        engine->backward(torch::mse_loss(engine->forward(x), y));
        engine->step();
      }
      engine->saveCheckpoint(ckpt);
      engine->loadCheckpoint(ckpt);
    });
  }
  for (auto& t : ranks) {
    t.join();
  }
  ::unsetenv("STRETCH_TIMINGS_FILE");
  const std::int64_t ended = timings::unixNow();
  std::vector<timings::CheckpointLine> checkpoints;
  const std::vector<timings::Line> lines = timings::readLines(path, &checkpoints);
  // POSIX calls, not std::filesystem: PyTorch 2.11's libtorch exports its own std::filesystem,
  // whose remove_all of a non-empty directory crashed this test there (docs/gpu.md).
  stretch::removePath(path);
  stretch::removeTree(ckpt);
  ASSERT_EQ(lines.size(), 6u);
  // One save and one load per rank, after the third step, each within the test's wall time.
  ASSERT_EQ(checkpoints.size(), 4u);
  std::map<int, std::vector<std::string>> events;
  for (const auto& c : checkpoints) {
    events[c.rank].push_back(c.event);
    EXPECT_EQ(c.step, 3);
    EXPECT_GT(c.seconds, 0);
    EXPECT_LE(c.seconds * 1e9, static_cast<double>(ended - began));
    EXPECT_GE(c.unixNs, began);
    EXPECT_LE(c.unixNs, ended);
  }
  EXPECT_EQ(events[0], (std::vector<std::string>{"save", "load"}));
  EXPECT_EQ(events[1], (std::vector<std::string>{"save", "load"}));
  std::map<int, std::int64_t> lastEnd;
  std::map<int, std::vector<std::int64_t>> steps;
  for (const timings::Line& l : lines) {
    steps[l.rank].push_back(l.step);
    EXPECT_EQ(l.world, 2);
    EXPECT_EQ(l.micro, 4);
    EXPECT_EQ(l.gas, 3);
    EXPECT_EQ(l.bytes, (6 * 12 + 12 + 12 * 3 + 3) * 4);  // Mlp(6, 12, 3) in fp32
    EXPECT_GT(l.forward, 0);
    EXPECT_GT(l.backward, 0);
    EXPECT_GT(l.allreduce, 0);
    EXPECT_GE(l.optimizer, 0);
    // Every part lies between the step's first forward and the end of its optimizer step.
    EXPECT_LE(l.forward + l.backward + l.allreduce + l.optimizer, l.total * 1.001 + 0.01);
    EXPECT_GE(l.period * 1.001 + 0.01, l.total);
    // The wall clock at the step's end: within the test, in step order per rank.
    EXPECT_GE(l.unixNs, std::max(began, lastEnd[l.rank]));
    EXPECT_LE(l.unixNs, ended);
    lastEnd[l.rank] = l.unixNs;
  }
  EXPECT_EQ(steps[0], (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(steps[1], (std::vector<std::int64_t>{1, 2, 3}));
}

TEST(EngineTimings, AFileThatCannotBeOpenedNamesTheVariable) {
  ::setenv("STRETCH_TIMINGS_FILE", "/nonexistent-dir/timings.jsonl", 1);
  Mlp model(6, 12, 3);
  InitOptions options;
  options.device = torch::Device(torch::kCPU);
  try {
    initialize(torch::nn::AnyModule(model), parse(R"({"train_batch_size": 4})"), options);
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("STRETCH_TIMINGS_FILE = /nonexistent-dir/timings.jsonl"),
              std::string::npos)
        << e.what();
  }
  ::unsetenv("STRETCH_TIMINGS_FILE");
}

}  // namespace
}  // namespace stretch::engine
