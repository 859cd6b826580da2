// Engine::abandonStep / rejoin (live recovery's engine side) with ranks as threads: survivors of
// a 4-rank job and a joiner built with InitOptions::liveJoin continue as 3 ranks and end bitwise
// where a 3-rank resume from the 4-rank job's checkpoint ends; a step abandoned half-way changes
// nothing; the overlap buckets follow the new layout; errors for what cannot rejoin.

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "runtime/comm/in_process_backend.hpp"
#include "runtime/common/error.hpp"
#include "runtime/engine/engine.hpp"
#include "tests/runtime/engine/engine_test_util.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::engine {
namespace {

using test::Mlp;

TensorDataset dataset() {
  torch::manual_seed(11);
  return {torch::randn({96, 6}), torch::randn({96, 3})};
}

std::string configFor(int stage, bool overlap = false) {
  return fmt::format(
      R"({{"train_batch_size": 24, "gradient_accumulation_steps": 1,
          "zero_optimization": {{"stage": {}, "overlap_comm": {}, "reduce_bucket_size": 50}},
          "gradient_clipping": 1.0,
          "optimizer": {{"type": "AdamW", "params": {{"lr": 0.01, "weight_decay": 0.01}}}},
          "scheduler": {{"type": "WarmupDecayLR",
                        "params": {{"warmup_num_steps": 3, "total_num_steps": 40,
                                   "warmup_max_lr": 0.01}}}}}})",
      stage, overlap ? "true" : "false");
}

config::BatchTriple batchFor(int world) {
  config::BatchTriple b;
  b.trainBatchSize = 24;
  b.microBatchPerGpu = 24 / world;
  b.gradientAccumulation = 1;
  return b;
}

struct Result {
  torch::Tensor weights;
  std::vector<std::int64_t> counters;
};

void trainSteps(Engine& engine, DataLoader& loader, std::int64_t steps) {
  const std::int64_t target = engine.globalSteps() + steps;
  while (engine.globalSteps() < target) {
    auto batch = loader.next();
    engine.backward(torch::mse_loss(engine.forward(batch.inputs), batch.targets));
    engine.step();
  }
}

// 4 ranks train `before` steps and save; 3 ranks resume from the checkpoint and train `after`.
Result viaCheckpoint(const std::string& config, int before, int after) {
  stretch::test::TempDir dir("stretch-live-engine");
  const auto parsed = test::parse(config);
  const TensorDataset data = dataset();
  Result out;
  for (const int world : {4, 3}) {
    auto groups = test::makeGroups(world);
    std::vector<Mlp> models;
    for (int r = 0; r < world; ++r) {
      torch::manual_seed(world == 4 ? 0 : 99);
      models.emplace_back(6, 12, 3);
    }
    comm::runRankThreads(world, [&](int r) {
      InitOptions options;
      options.processGroup = groups.groups[static_cast<std::size_t>(r)];
      options.device = torch::Device(torch::kCPU);
      options.trainingData = data;
      options.dataSeed = 5;
      auto init =
          initialize(torch::nn::AnyModule(models[static_cast<std::size_t>(r)]), parsed, options);
      if (world == 3) {
        ASSERT_TRUE(init.engine->loadCheckpoint(dir.path().native()).has_value());
      }
      trainSteps(*init.engine, *init.dataLoader, world == 4 ? before : after);
      if (world == 4)
        init.engine->saveCheckpoint(dir.path().native());
      if (r == 0 && world == 3) {
        out.weights = test::flatWeights(*models[0]);
        out.counters = {init.engine->globalSteps(), init.engine->microSteps(),
                        init.engine->globalSamples(), init.lrScheduler->lastBatchIteration(),
                        init.dataLoader->position().consumed};
      }
    });
  }
  return out;
}

// 4 ranks train `before` steps; rank 3 dies with a half-done micro step on the others' hands
// (forward and backward, no step); ranks 0-2 abandon it and, with a joiner, continue as 3
// ranks over a new group: survivors 0 and 1 and the joiner as ranks 0-2 (rank 2 is left out,
// as a survivor outside an interim generation would be).
Result viaRejoin(const std::string& config, int before, int after, bool overlap = false) {
  const auto parsed = test::parse(config);
  const TensorDataset data = dataset();
  auto oldGroups = test::makeGroups(4);
  auto newGroups = test::makeGroups(3);
  std::vector<Mlp> models;
  for (int r = 0; r < 5; ++r) {
    torch::manual_seed(r == 4 ? 42 : 0);  // the joiner starts from other weights
    models.emplace_back(6, 12, 3);
  }
  Result out;
  std::atomic<int> abandoned{0};
  comm::runRankThreads(5, [&](int r) {
    InitOptions options;
    options.device = torch::Device(torch::kCPU);
    options.trainingData = data;
    options.dataSeed = 5;
    if (r == 4) {
      // The joiner: built straight into the new group, its state comes from rejoin().
      while (abandoned.load() < 3)
        std::this_thread::yield();
      options.processGroup = newGroups.groups[2];
      options.liveJoin = true;
      auto init = initialize(torch::nn::AnyModule(models[4]), parsed, options);
      init.engine->rejoin(newGroups.groups[2], batchFor(3));
      trainSteps(*init.engine, *init.dataLoader, after);
      return;
    }
    options.processGroup = oldGroups.groups[static_cast<std::size_t>(r)];
    auto init =
        initialize(torch::nn::AnyModule(models[static_cast<std::size_t>(r)]), parsed, options);
    auto& engine = *init.engine;
    trainSteps(engine, *init.dataLoader, before);
    if (r == 3)
      return;  // dies
    // The step in flight: a micro batch drawn and back-propagated (only its forward with
    // overlap_comm, whose backward would wait for rank 3 in a collective), then the failure.
    auto batch = init.dataLoader->next();
    auto loss = torch::mse_loss(engine.forward(batch.inputs), batch.targets);
    if (!overlap)
      engine.backward(loss);
    engine.abandonStep();
    ++abandoned;
    if (r == 2)
      return;  // left out of the new generation
    engine.rejoin(newGroups.groups[static_cast<std::size_t>(r)], batchFor(3));
    EXPECT_EQ(engine.dpWorldSize(), 3);
    EXPECT_EQ(engine.microBatchSize(), 8);
    trainSteps(engine, *init.dataLoader, after);
    if (r == 0) {
      out.weights = test::flatWeights(*models[0]);
      out.counters = {engine.globalSteps(), engine.microSteps(), engine.globalSamples(),
                      init.lrScheduler->lastBatchIteration(), init.dataLoader->position().consumed};
    }
  });
  return out;
}

TEST(EngineLive, SurvivorsAndAJoinerEndWhereAResumeFromTheCheckpointEnds) {
  const std::string config = configFor(0);
  const Result expected = viaCheckpoint(config, 4, 5);
  const Result live = viaRejoin(config, 4, 5);
  ASSERT_TRUE(expected.weights.defined());
  ASSERT_TRUE(live.weights.defined());
  EXPECT_TRUE(torch::equal(live.weights, expected.weights));
  EXPECT_EQ(live.counters, expected.counters);
}

TEST(EngineLive, OverlapBucketsFollowTheNewLayout) {
  const std::string config = configFor(0, /*overlap=*/true);
  const Result expected = viaCheckpoint(config, 3, 4);
  const Result live = viaRejoin(config, 3, 4, /*overlap=*/true);
  EXPECT_TRUE(torch::equal(live.weights, expected.weights));
}

TEST(EngineLive, WhatCannotRejoinIsAConfigErrorNamingTheKey) {
  const TensorDataset data = dataset();
  for (const int stage : {0, 2}) {
    auto groups = test::makeGroups(1);
    torch::manual_seed(0);
    Mlp model(6, 12, 3);
    InitOptions options;
    options.processGroup = groups.groups[0];
    options.device = torch::Device(torch::kCPU);
    auto init = initialize(torch::nn::AnyModule(model), test::parse(configFor(stage)), options);
    EXPECT_EQ(init.engine->supportsLiveRecovery(), stage == 0);
    auto fresh = test::makeGroups(1);
    try {
      // ZeRO 2: no live recovery; ZeRO 0: a batch that does not fit a group of one.
      config::BatchTriple bad = batchFor(3);
      init.engine->rejoin(fresh.groups[0], stage == 0 ? bad : batchFor(1));
      ADD_FAILURE() << "stage " << stage << ": rejoin accepted";
    } catch (const ConfigError& e) {
      const std::string key = stage == 0 ? "train_batch_size" : "zero_optimization.stage";
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace stretch::engine
