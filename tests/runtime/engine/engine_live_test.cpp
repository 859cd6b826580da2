// Engine::abandonStep / rejoin (live recovery's engine side) with ranks as threads: survivors of
// a 4-rank job and a joiner built with InitOptions::liveJoin continue as 3 ranks and end bitwise
// where a 3-rank resume from the 4-rank job's checkpoint ends; a step abandoned half-way changes
// nothing; the overlap buckets follow the new layout; ZeRO 1/2 (fp32 and bf16) rebuild the
// state from the partition copies (a dead rank's from its buddy) and fail alike on every rank
// when a rank and its buddy died; a survivor left out of the new group gives the partition only
// it holds (a donor); errors for what cannot rejoin.

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

std::string configFor(int stage, bool overlap = false, bool bf16 = false) {
  return fmt::format(
      R"({{"train_batch_size": 24, "gradient_accumulation_steps": 1, "bf16": {{"enabled": {}}},
          "zero_optimization": {{"stage": {}, "overlap_comm": {}, "reduce_bucket_size": 50}},
          "gradient_clipping": 1.0,
          "optimizer": {{"type": "AdamW", "params": {{"lr": 0.01, "weight_decay": 0.01}}}},
          "scheduler": {{"type": "WarmupDecayLR",
                        "params": {{"warmup_num_steps": 3, "total_num_steps": 40,
                                   "warmup_max_lr": 0.01}}}}}})",
      bf16 ? "true" : "false", stage, overlap ? "true" : "false");
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
    // bf16 models take bf16 inputs; the loss is taken in fp32.
    const auto out = engine.forward(batch.inputs.to(engine.dtype())).to(torch::kFloat32);
    engine.backward(torch::mse_loss(out, batch.targets));
    engine.step();
  }
}

// Four ranks' models (seeded alike) and a joiner's (other weights: its state must come from
// rejoin).
std::vector<Mlp> fourAndAJoiner() {
  std::vector<Mlp> models;
  for (int r = 0; r < 5; ++r) {
    torch::manual_seed(r == 4 ? 42 : 0);
    models.emplace_back(6, 12, 3);
  }
  return models;
}

InitOptions rankOptions(const TensorDataset& data) {
  InitOptions options;
  options.device = torch::Device(torch::kCPU);
  options.trainingData = data;
  options.dataSeed = 5;
  return options;
}

Result resultOf(Engine& engine, Mlp& model, const Initialized& init) {
  return {test::flatWeights(*model),
          {engine.globalSteps(), engine.microSteps(), engine.globalSamples(),
           init.lrScheduler->lastBatchIteration(), init.dataLoader->position().consumed}};
}

// A joiner built straight into `group` with InitOptions::liveJoin: its state comes from
// rejoin(); then it trains `after` steps.
void runJoiner(Mlp& model, const config::DsConfig& parsed, InitOptions options,
               const std::shared_ptr<comm::ProcessGroup>& group, int after, bool copies) {
  options.processGroup = group;
  options.liveJoin = true;
  auto init = initialize(torch::nn::AnyModule(model), parsed, options);
  if (copies)
    init.engine->enablePartitionCopies();
  init.engine->rejoin(group, batchFor(group->size()));
  trainSteps(*init.engine, *init.dataLoader, after);
}

// 4 ranks train `before` steps and save; `resumed` ranks resume from the checkpoint and train
// `after`.
Result viaCheckpoint(const std::string& config, int before, int after, int resumed = 3) {
  stretch::test::TempDir dir("stretch-live-engine");
  const auto parsed = test::parse(config);
  const TensorDataset data = dataset();
  Result out;
  for (const bool resumedPhase : {false, true}) {
    const int world = resumedPhase ? resumed : 4;
    auto groups = test::makeGroups(world);
    std::vector<Mlp> models;
    for (int r = 0; r < world; ++r) {
      torch::manual_seed(resumedPhase ? 99 : 0);
      models.emplace_back(6, 12, 3);
    }
    comm::runRankThreads(world, [&](int r) {
      InitOptions options = rankOptions(data);
      options.processGroup = groups.groups[static_cast<std::size_t>(r)];
      auto init =
          initialize(torch::nn::AnyModule(models[static_cast<std::size_t>(r)]), parsed, options);
      if (resumedPhase) {
        ASSERT_TRUE(init.engine->loadCheckpoint(dir.path().native()).has_value());
      }
      trainSteps(*init.engine, *init.dataLoader, resumedPhase ? after : before);
      if (!resumedPhase)
        init.engine->saveCheckpoint(dir.path().native());
      if (r == 0 && resumedPhase)
        out = resultOf(*init.engine, models[0], init);
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
  std::vector<Mlp> models = fourAndAJoiner();
  Result out;
  std::atomic<int> abandoned{0};
  comm::runRankThreads(5, [&](int r) {
    InitOptions options = rankOptions(data);
    if (r == 4) {
      // The joiner: built straight into the new group, its state comes from rejoin().
      while (abandoned.load() < 3)
        std::this_thread::yield();
      runJoiner(models[4], parsed, options, newGroups.groups[2], after, /*copies=*/false);
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
    if (r == 0)
      out = resultOf(engine, models[0], init);
  });
  return out;
}

// ZeRO 1/2 with partition copies: 4 ranks train `before` steps; rank 3 dies; the survivors'
// live weights are spoiled as a half-applied update would leave them (the copies must be what
// counts); then old ranks 2, 0, 1 (in that order) and, with `joiner`, a new rank continue.
Result viaPartitionCopies(const std::string& config, int before, int after, bool joiner) {
  const auto parsed = test::parse(config);
  const TensorDataset data = dataset();
  const int newWorld = joiner ? 4 : 3;
  auto oldGroups = test::makeGroups(4);
  auto newGroups = test::makeGroups(newWorld);
  const int newRankOf[3] = {1, 2, 0};  // old rank -> new rank
  std::vector<Mlp> models = fourAndAJoiner();
  Result out;
  std::atomic<int> abandoned{0};
  comm::runRankThreads(5, [&](int r) {
    InitOptions options = rankOptions(data);
    if (r == 4) {
      if (!joiner)
        return;
      while (abandoned.load() < 3)
        std::this_thread::yield();
      runJoiner(models[4], parsed, options, newGroups.groups[3], after, /*copies=*/true);
      return;
    }
    options.processGroup = oldGroups.groups[static_cast<std::size_t>(r)];
    auto init =
        initialize(torch::nn::AnyModule(models[static_cast<std::size_t>(r)]), parsed, options);
    auto& engine = *init.engine;
    EXPECT_FALSE(engine.supportsLiveRecovery());
    engine.enablePartitionCopies();
    EXPECT_TRUE(engine.supportsLiveRecovery());
    engine.copyPartitions();
    trainSteps(engine, *init.dataLoader, before);
    // Own and ward copies of the last two steps: 4 x (weights + Adam's 2 tensors) x 4 bytes
    // per element of the partition.
    std::int64_t numel = 0;
    for (const auto& p : models[static_cast<std::size_t>(r)]->parameters())
      numel += p.numel();
    const std::int64_t partition = (numel + 3) / 4;
    EXPECT_EQ(engine.partitionCopyBytes(), 4 * 12 * partition);
    EXPECT_GT(engine.timers().partitionCopy, 0.0);
    if (r == 3)
      return;  // dies
    auto batch = init.dataLoader->next();
    engine.forward(batch.inputs.to(engine.dtype()));  // the step in flight: no collective yet
    {
      torch::NoGradGuard noGrad;
      for (auto& p : models[static_cast<std::size_t>(r)]->parameters())
        p.add_(1.0);
    }
    engine.abandonStep();
    ++abandoned;
    const int newRank = newRankOf[r];
    engine.rejoin(newGroups.groups[static_cast<std::size_t>(newRank)], batchFor(newWorld));
    EXPECT_EQ(engine.dpWorldSize(), newWorld);
    EXPECT_EQ(engine.dpRank(), newRank);
    trainSteps(engine, *init.dataLoader, after);
    if (r == 0)
      out = resultOf(engine, models[0], init);
  });
  return out;
}

TEST(EngineLive, Zero1And2RebuildTheStateFromTheCopies) {
  for (const int stage : {1, 2}) {
    for (const bool joiner : {false, true}) {
      const std::string config = configFor(stage);
      const Result expected = viaCheckpoint(config, 4, 5, joiner ? 4 : 3);
      const Result live = viaPartitionCopies(config, 4, 5, joiner);
      ASSERT_TRUE(expected.weights.defined());
      ASSERT_TRUE(live.weights.defined()) << "stage " << stage;
      EXPECT_TRUE(torch::equal(live.weights, expected.weights))
          << "stage " << stage << (joiner ? " with a joiner" : "");
      EXPECT_EQ(live.counters, expected.counters) << "stage " << stage;
    }
  }
}

// ZeRO 1/2, 4 ranks, rank 3 dies and the job goes on at 2: old ranks 0 and 1 train on, but
// partition 2's copies were on ranks 2 and 3, so old rank 2 (left out) gives it over as a donor
// (rank 2 of a transfer group of 3) and waits. Without it the job would fall back to its
// checkpoint.
Result viaDonor(const std::string& config, int before, int after) {
  const auto parsed = test::parse(config);
  const TensorDataset data = dataset();
  auto oldGroups = test::makeGroups(4);
  auto newGroups = test::makeGroups(2);
  auto transfer = test::makeGroups(3);
  std::vector<Mlp> models = fourAndAJoiner();
  Result out;
  comm::runRankThreads(4, [&](int r) {
    InitOptions options = rankOptions(data);
    options.processGroup = oldGroups.groups[static_cast<std::size_t>(r)];
    auto init =
        initialize(torch::nn::AnyModule(models[static_cast<std::size_t>(r)]), parsed, options);
    auto& engine = *init.engine;
    engine.enablePartitionCopies();
    engine.copyPartitions();
    trainSteps(engine, *init.dataLoader, before);
    if (r == 3)
      return;  // dies
    engine.abandonStep();
    const auto own = transfer.groups[static_cast<std::size_t>(r)];
    if (r == 2) {
      const auto weights = test::flatWeights(*models[2]);
      engine.donatePartitions(*own, 2);
      EXPECT_TRUE(torch::equal(test::flatWeights(*models[2]), weights));  // its own state stays
      EXPECT_EQ(engine.globalSteps(), before);
      return;
    }
    engine.rejoin(newGroups.groups[static_cast<std::size_t>(r)], batchFor(2), own);
    EXPECT_EQ(engine.dpWorldSize(), 2);
    trainSteps(engine, *init.dataLoader, after);
    if (r == 0)
      out = resultOf(engine, models[0], init);
  });
  return out;
}

TEST(EngineLive, ASurvivorLeftOutGivesThePartitionOnlyItHolds) {
  for (const int stage : {1, 2}) {
    const std::string config = configFor(stage);
    const Result expected = viaCheckpoint(config, 4, 5, 2);
    const Result live = viaDonor(config, 4, 5);
    ASSERT_TRUE(live.weights.defined()) << "stage " << stage;
    EXPECT_TRUE(torch::equal(live.weights, expected.weights)) << "stage " << stage;
    EXPECT_EQ(live.counters, expected.counters) << "stage " << stage;
  }
}

TEST(EngineLive, ABf16ModelsFp32MasterPartitionIsRebuiltToo) {
  const std::string config = configFor(1, /*overlap=*/false, /*bf16=*/true);
  const Result expected = viaCheckpoint(config, 4, 5, 4);
  const Result live = viaPartitionCopies(config, 4, 5, /*joiner=*/true);
  ASSERT_TRUE(live.weights.defined());
  EXPECT_TRUE(torch::equal(live.weights, expected.weights));
  EXPECT_EQ(live.counters, expected.counters);
}

TEST(EngineLive, ARankAndItsBuddyDeadLoseAPartitionOnEveryRankAlike) {
  const auto parsed = test::parse(configFor(1));
  const TensorDataset data = dataset();
  auto oldGroups = test::makeGroups(4);
  auto newGroups = test::makeGroups(2);
  std::vector<Mlp> models;
  for (int r = 0; r < 4; ++r) {
    torch::manual_seed(0);
    models.emplace_back(6, 12, 3);
  }
  std::atomic<int> lost{0};
  comm::runRankThreads(4, [&](int r) {
    InitOptions options;
    options.device = torch::Device(torch::kCPU);
    options.trainingData = data;
    options.processGroup = oldGroups.groups[static_cast<std::size_t>(r)];
    auto init =
        initialize(torch::nn::AnyModule(models[static_cast<std::size_t>(r)]), parsed, options);
    init.engine->enablePartitionCopies();
    init.engine->copyPartitions();
    trainSteps(*init.engine, *init.dataLoader, 3);
    if (r == 1 || r == 2)
      return;  // rank 1 and its buddy die
    init.engine->abandonStep();
    try {
      init.engine->rejoin(newGroups.groups[r == 0 ? 0 : 1], batchFor(2));
      ADD_FAILURE() << "rank " << r << " rejoined without partition 1";
    } catch (const PartitionsLostError& e) {
      EXPECT_NE(std::string(e.what()).find("partition 1 (held by old ranks 1 and 2)"),
                std::string::npos)
          << e.what();
      ++lost;
    }
  });
  EXPECT_EQ(lost.load(), 2);
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

// One rank's engine (CPU, `model` seeded alike) over `group`, with ZeRO `stage`.
Initialized oneRankEngine(Mlp& model, const std::shared_ptr<comm::ProcessGroup>& group, int stage) {
  torch::manual_seed(0);
  model = Mlp(6, 12, 3);
  InitOptions options;
  options.processGroup = group;
  options.device = torch::Device(torch::kCPU);
  return initialize(torch::nn::AnyModule(model), test::parse(configFor(stage)), options);
}

TEST(EngineLive, WhatCannotRejoinIsAConfigErrorNamingTheKey) {
  for (const int stage : {0, 2}) {
    auto groups = test::makeGroups(1);
    Mlp model(6, 12, 3);
    auto init = oneRankEngine(model, groups.groups[0], stage);
    EXPECT_EQ(init.engine->supportsLiveRecovery(), stage == 0);  // ZeRO 2: copies off
    EXPECT_THROW(init.engine->enablePartitionCopies(0), ConfigError);
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

// The live generation's batch passes the solver's cross-check, as the launcher's environment
// does at the start: micro x accumulation x ranks is not enough, it must be the batch this
// engine's config gives for the new group's size (here 24 = micro 24 x accumulation 1).
TEST(EngineLive, ABatchTheConfigDoesNotGiveIsAnElasticityConfigError) {
  auto groups = test::makeGroups(1);
  Mlp model(6, 12, 3);
  auto init = oneRankEngine(model, groups.groups[0], 0);
  auto fresh = test::makeGroups(1);
  // The launcher gives the batch (its --config): the record's must be the config's, whatever
  // the environment says (it was the start's world's).
  try {
    init.engine->rejoin(fresh.groups[0], config::BatchTriple{24, 12, 2});
    ADD_FAILURE() << "rejoin accepted a batch its config does not give";
  } catch (const ElasticityConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("the live generation's train_batch_size"), std::string::npos) << what;
    EXPECT_NE(what.find("24 = micro 24 x accumulation 1"), std::string::npos) << what;
  }
  // The batch the config gives is accepted.
  EXPECT_EQ(init.engine->rejoin(fresh.groups[0], config::BatchTriple{24, 24, 1}), 0);
  // A stand-in batch is no exception: one sample per rank is not this config's batch either.
  EXPECT_THROW(init.engine->rejoin(fresh.groups[0], config::BatchTriple{1, 1, 1}),
               ElasticityConfigError);
}

// A launch without --config gives no batch: the record carries none, and the worker's own config
// decides, as at its start (stretch sim --calibrate's live runs).
TEST(EngineLive, WithoutALauncherBatchTheWorkersConfigDecides) {
  auto groups = test::makeGroups(1);
  Mlp model(6, 12, 3);
  auto init = oneRankEngine(model, groups.groups[0], 0);
  auto fresh = test::makeGroups(1);
  EXPECT_EQ(init.engine->rejoin(fresh.groups[0], std::nullopt), 0);
  EXPECT_EQ(init.engine->trainBatchSize(), 24);
  EXPECT_EQ(init.engine->microBatchSize(), 24);
}

}  // namespace
}  // namespace stretch::engine
