// Engine checkpoints: exact resume (bitwise on the CPU at the same world size and stage),
// elastic resume at other world sizes and ZeRO stages, restored counters, schedule and data
// position, client state, and clear errors for missing, truncated or corrupted files.

#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "runtime/checkpoint/layout.hpp"
#include "runtime/comm/in_process_backend.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/common/posix_files.hpp"
#include "runtime/engine/checkpoint_dir.hpp"
#include "runtime/engine/checkpoint_io.hpp"
#include "runtime/engine/engine.hpp"
#include "tests/runtime/engine/engine_test_util.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::engine {
namespace {

using test::Mlp;

// Paths are strings and file operations POSIX calls (runtime/common/posix_files), as in the
// engine: a std::filesystem call in a process linked against PyTorch 2.11's LibTorch can crash
// (docs/gpu.md).
std::string under(const stretch::test::TempDir& dir, const std::string& relative) {
  return joinPath(dir.path().native(), relative);
}

void truncateTo(const std::string& file, std::uint64_t bytes) {
  ASSERT_EQ(::truncate(file.c_str(), static_cast<off_t>(bytes)), 0) << file;
}

// A data set of 96 samples; the job trains with a global batch of 24 (micro batch 24 / ranks /
// gas) so every world size in the tests keeps the same global batch.
TensorDataset dataset() {
  torch::manual_seed(11);
  auto x = torch::randn({96, 6});
  auto y = torch::randn({96, 3});
  return {x, y};
}

// The same global batch for every world size: the engine derives micro batch x accumulation.
std::string configFor(int stage, int gas = 1) {
  return fmt::format(
      R"({{"train_batch_size": 24, "gradient_accumulation_steps": {},
          "zero_optimization": {{"stage": {}}},
          "optimizer": {{"type": "AdamW", "params": {{"lr": 0.01, "weight_decay": 0.01}}}},
          "scheduler": {{"type": "WarmupDecayLR",
                        "params": {{"warmup_num_steps": 3, "total_num_steps": 40,
                                   "warmup_max_lr": 0.01}}}}}})",
      gas, stage);
}

struct TrainRun {
  std::vector<double> losses;  // the job's mean loss per micro step (mean over the ranks)
  torch::Tensor weights;       // rank 0's flat weights at the end
  std::vector<std::int64_t> counters;
  std::int64_t consumedAfterLoad = -1;
  std::vector<std::string> skipped;  // rank 0's LoadedCheckpoint::skipped
};

// Trains `steps` optimizer steps on `ranks` threads; optionally loads `loadFrom` first (with
// freshly initialised models that differ from the saved ones) and saves to `saveTo` at the end.
TrainRun train(int ranks, int stage, int steps, const std::string& loadFrom = {},
               const std::string& saveTo = {}, int gas = 1, std::uint64_t modelSeed = 0) {
  auto groups = test::makeGroups(ranks);
  std::vector<Mlp> models;
  for (int r = 0; r < ranks; ++r) {
    torch::manual_seed(modelSeed);
    models.emplace_back(6, 12, 3);
  }
  const auto config = test::parse(configFor(stage, gas));
  const TensorDataset data = dataset();  // here: the threads would race on the default generator
  TrainRun run;
  std::vector<std::vector<double>> rankLosses(static_cast<std::size_t>(ranks));
  comm::runRankThreads(ranks, [&](int r) {
    InitOptions options;
    options.processGroup = groups.groups[static_cast<std::size_t>(r)];
    options.device = torch::Device(torch::kCPU);
    options.trainingData = data;
    options.dataSeed = 5;
    auto init =
        initialize(torch::nn::AnyModule(models[static_cast<std::size_t>(r)]), config, options);
    auto& engine = *init.engine;
    if (!loadFrom.empty()) {
      auto loaded = engine.loadCheckpoint(loadFrom);
      ASSERT_TRUE(loaded.has_value());
      if (r == 0) {
        run.consumedAfterLoad = init.dataLoader->position().consumed;
        run.skipped = loaded->skipped;
      }
    }
    const std::int64_t target = engine.globalSteps() + steps;
    while (engine.globalSteps() < target) {
      auto batch = init.dataLoader->next();
      auto loss = torch::mse_loss(engine.forward(batch.inputs), batch.targets);
      engine.backward(loss);
      engine.step();
      rankLosses[static_cast<std::size_t>(r)].push_back(loss.item<double>());
    }
    if (!saveTo.empty()) {
      StateDict client;
      client["note"] = c10::IValue(std::string("hello"));
      client["epoch_hint"] = c10::IValue(static_cast<std::int64_t>(7));
      engine.saveCheckpoint(saveTo, std::nullopt, client);
    }
    if (r == 0) {
      run.weights = test::flatWeights(*models[0]);
      run.counters = {engine.globalSteps(), engine.microSteps(), engine.skippedSteps(),
                      engine.globalSamples(), init.lrScheduler->lastBatchIteration()};
    }
  });
  // Every rank's micro batch has the same size, so the mean of the ranks' means is the job's.
  for (std::size_t i = 0; i < rankLosses[0].size(); ++i) {
    double sum = 0;
    for (const auto& l : rankLosses)
      sum += l[i];
    run.losses.push_back(sum / ranks);
  }
  return run;
}

class ExactResume : public ::testing::TestWithParam<int> {};

TEST_P(ExactResume, SaveLoadAndContinueIsBitwiseIdenticalToTrainingStraight) {
  const int stage = GetParam();
  stretch::test::TempDir dir("stretch-ckpt");
  const TrainRun straight = train(2, stage, 10);
  const TrainRun first = train(2, stage, 5, {}, dir.path());
  ASSERT_TRUE(pathExists(under(dir, "latest")));
  ASSERT_TRUE(pathExists(under(dir, "global_step5/" + modelStatesName())));
  if (stage >= 1) {
    EXPECT_TRUE(pathExists(under(dir, "global_step5/" + zeroOptimStatesName(0))));
    EXPECT_TRUE(pathExists(under(dir, "global_step5/" + zeroOptimStatesName(1))));
  }
  // The resumed job starts from other random weights: everything must come from the checkpoint.
  const TrainRun resumed = train(2, stage, 5, dir.path(), {}, 1, /*modelSeed=*/99);
  EXPECT_TRUE(torch::equal(resumed.weights, straight.weights))
      << (resumed.weights - straight.weights).abs().max().item<double>();
  EXPECT_EQ(resumed.counters, straight.counters);
  std::vector<double> tail(straight.losses.begin() + 5, straight.losses.end());
  EXPECT_EQ(resumed.losses, tail);
}

INSTANTIATE_TEST_SUITE_P(ZeroStages, ExactResume, ::testing::Values(0, 1, 2),
                         [](const auto& param) { return "Stage" + std::to_string(param.param); });

TEST(ElasticResume, ACheckpointFromFourRanksContinuesOnTwoAndOneWithTheSameLossCurve) {
  stretch::test::TempDir dir("stretch-ckpt");
  const TrainRun straight = train(4, 2, 12, {}, {}, 1);
  train(4, 2, 6, {}, dir.path(), 1);
  std::vector<double> tail(straight.losses.begin() + 6, straight.losses.end());
  // Same global batch: two ranks with micro batch 12, one rank with 24, other ZeRO stages.
  for (auto [ranks, stage] : {std::pair{2, 1}, std::pair{1, 0}, std::pair{2, 2}}) {
    SCOPED_TRACE(fmt::format("{} ranks, stage {}", ranks, stage));
    const TrainRun resumed = train(ranks, stage, 6, dir.path(), {}, 1, 99);
    EXPECT_TRUE(torch::allclose(resumed.weights, straight.weights, 1e-5, 1e-6))
        << (resumed.weights - straight.weights).abs().max().item<double>();
    EXPECT_EQ(resumed.counters[0], straight.counters[0]);  // global steps
    EXPECT_EQ(resumed.counters[3], straight.counters[3]);  // global samples
    EXPECT_EQ(resumed.counters[4], straight.counters[4]);  // scheduler position
    EXPECT_EQ(resumed.consumedAfterLoad, 6 * 24 - 96);     // epoch 1, 48 samples in
    ASSERT_EQ(resumed.losses.size(), tail.size());
    for (std::size_t i = 0; i < tail.size(); ++i)
      EXPECT_NEAR(resumed.losses[i], tail[i], 1e-5 * tail[i]) << "step " << i;
  }
}

TEST(CheckpointFiles, ClientStateComesBackAndLatestNamesTheTag) {
  stretch::test::TempDir dir("stretch-ckpt");
  auto groups = test::makeGroups(1);
  torch::manual_seed(0);
  Mlp model(6, 12, 3);
  InitOptions options;
  options.device = torch::Device(torch::kCPU);
  auto engine = initialize(torch::nn::AnyModule(model), test::parse(configFor(0)), options).engine;
  StateDict client;
  client["note"] = c10::IValue(std::string("hello"));
  client["best_loss"] = c10::IValue(0.25);
  const auto path = engine->saveCheckpoint(dir.path(), std::string("my_tag"), client);
  EXPECT_EQ(path, under(dir, "my_tag"));
  EXPECT_EQ(readLatest(dir.path()), std::optional<std::string>("my_tag"));
  auto loaded = engine->loadCheckpoint(dir.path());
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->tag, "my_tag");
  EXPECT_EQ(loaded->clientState.size(), 2u);
  EXPECT_EQ(loaded->clientState.at("note").toStringRef(), "hello");
  EXPECT_EQ(loaded->clientState.at("best_loss").toDouble(), 0.25);
  // A client key that would overwrite the engine's own is refused.
  StateDict clash;
  clash["global_steps"] = c10::IValue(static_cast<std::int64_t>(1));
  EXPECT_THROW(engine->saveCheckpoint(dir.path(), std::string("t2"), clash), ConfigError);
  // No latest and no tag: nothing loaded, as DeepSpeed.
  stretch::test::TempDir empty("stretch-ckpt");
  EXPECT_FALSE(engine->loadCheckpoint(empty.path()).has_value());
}

TEST(CheckpointTags, DifferentTagsOnTheRanksFailWithTagValidationFail) {
  stretch::test::TempDir dir("stretch-ckpt");
  auto groups = test::makeGroups(2);
  const auto models = test::seededModels(2);
  auto config = test::parse(configFor(0));
  config.checkpoint.tagValidation = config::TagValidation::Fail;
  std::vector<int> refused(2, 0);
  comm::runRankThreads(2, [&](int r) {
    InitOptions options;
    options.processGroup = groups.groups[static_cast<std::size_t>(r)];
    options.device = torch::Device(torch::kCPU);
    auto engine =
        initialize(torch::nn::AnyModule(models[static_cast<std::size_t>(r)]), config, options)
            .engine;
    try {
      engine->saveCheckpoint(dir.path(), r == 0 ? std::string("a") : std::string("b"));
    } catch (const ConfigError& e) {
      refused[static_cast<std::size_t>(r)] =
          std::string(e.what()).find("not the same on every rank") != std::string::npos;
    }
  });
  EXPECT_EQ(refused, (std::vector<int>{1, 1}));
  EXPECT_FALSE(pathExists(under(dir, "latest")));
}

class Corruption : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::manual_seed(0);
    model_ = Mlp(6, 12, 3);
    InitOptions options;
    options.device = torch::Device(torch::kCPU);
    engine_ = initialize(torch::nn::AnyModule(model_), test::parse(configFor(0)), options).engine;
    path_ = engine_->saveCheckpoint(dir_.path());
    file_ = joinPath(path_, modelStatesName());
  }

  void expectErrorNamingTheFile(const std::string& what) {
    try {
      engine_->loadCheckpoint(dir_.path());
      ADD_FAILURE() << what << ": loaded";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(modelStatesName()), std::string::npos)
          << what << ": " << e.what();
    }
  }

  stretch::test::TempDir dir_{"stretch-ckpt"};
  Mlp model_{nullptr};
  std::shared_ptr<Engine> engine_;
  std::string path_;
  std::string file_;
};

TEST_F(Corruption, TruncatedFile) {
  truncateTo(file_, fileSize(file_) / 2);
  expectErrorNamingTheFile("truncated");
}

TEST_F(Corruption, FlippedByte) {
  std::fstream f(file_, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(fileSize(file_) / 3));
  f.put('\x5a');
  f.close();
  expectErrorNamingTheFile("flipped byte");
}

TEST_F(Corruption, MissingFile) {
  removePath(file_);
  expectErrorNamingTheFile("missing");
}

TEST_F(Corruption, WeightsAreUntouchedWhenTheLoadFails) {
  const auto before = test::flatWeights(*model_);
  truncateTo(file_, 100);
  EXPECT_THROW(engine_->loadCheckpoint(dir_.path()), CheckpointError);
  EXPECT_TRUE(torch::equal(test::flatWeights(*model_), before));
}

TEST(CheckpointShape, AModelOfAnotherShapeIsRefused) {
  stretch::test::TempDir dir("stretch-ckpt");
  torch::manual_seed(0);
  Mlp small(6, 12, 3);
  Mlp other(6, 13, 3);
  InitOptions options;
  options.device = torch::Device(torch::kCPU);
  auto a = initialize(torch::nn::AnyModule(small), test::parse(configFor(0)), options).engine;
  a->saveCheckpoint(dir.path());
  auto b = initialize(torch::nn::AnyModule(other), test::parse(configFor(0)), options).engine;
  try {
    b->loadCheckpoint(dir.path());
    ADD_FAILURE() << "loaded into a model of another shape";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("fc1.weight"), std::string::npos) << e.what();
  }
}

// ---- falling back to an older checkpoint, tidying, one job per directory ----

void flipByteOf(const std::string& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(fileSize(file) / 3));
  const char c = static_cast<char>(f.get());
  f.seekp(static_cast<std::streamoff>(fileSize(file) / 3));
  f.put(static_cast<char>(c ^ 0x5a));
}

// A directory holding global_step3 and global_step6 of a 2-rank ZeRO 2 job (latest: 6), and the
// job trained straight to 3 + `more` steps and to 6 + `more`.
struct TwoCheckpoints {
  stretch::test::TempDir dir{"stretch-ckpt"};
  TrainRun from3;
  TrainRun from6;
  static constexpr int kMore = 2;
  TwoCheckpoints() {
    train(2, 2, 3, {}, dir.path());
    train(2, 2, 3, dir.path(), dir.path());
    from3 = train(2, 2, 3 + kMore);
    from6 = train(2, 2, 6 + kMore);
  }
  std::string at(const std::string& relative) const { return under(dir, relative); }
};

TEST(CheckpointFallback, ACorruptNewestCheckpointFallsBackToTheOlderOneOnEveryRank) {
  TwoCheckpoints c;
  // Only rank 1 reads its own optimizer shard: rank 0 alone would have loaded step 6.
  flipByteOf(c.at("global_step6/" + zeroOptimStatesName(1)));
  // What the launcher's event log reports for this start: the checkpoint the engine loads.
  EXPECT_EQ(checkpoint::resumePoint(c.dir.path()), (checkpoint::ResumePoint{"global_step3", 3}));
  const TrainRun r = train(2, 2, TwoCheckpoints::kMore, c.dir.path(), {}, 1, 99);
  EXPECT_EQ(r.counters[0], 3 + TwoCheckpoints::kMore);
  EXPECT_TRUE(torch::allclose(r.weights, c.from3.weights, 1e-6, 1e-7));
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_EQ(r.skipped[0].rfind("global_step6: ", 0), 0u) << r.skipped[0];
}

TEST(CheckpointFallback, LatestNamingAMissingCheckpointFallsBackToTheNewestThatLoads) {
  TwoCheckpoints c;
  writeLatest(c.dir.path(), "global_step9");
  EXPECT_EQ(checkpoint::resumePoint(c.dir.path()), (checkpoint::ResumePoint{"global_step6", 6}));
  const TrainRun r = train(2, 2, TwoCheckpoints::kMore, c.dir.path(), {}, 1, 99);
  EXPECT_EQ(r.counters[0], 6 + TwoCheckpoints::kMore);
  EXPECT_TRUE(torch::allclose(r.weights, c.from6.weights, 1e-6, 1e-7));
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find("global_step9"), std::string::npos);
}

TEST(CheckpointFallback, AMissingLatestResumesFromTheNewestCheckpointInsteadOfStepZero) {
  TwoCheckpoints c;
  ASSERT_TRUE(removePath(c.at("latest")));
  EXPECT_EQ(checkpoint::resumePoint(c.dir.path()), (checkpoint::ResumePoint{"global_step6", 6}));
  const TrainRun r = train(2, 2, TwoCheckpoints::kMore, c.dir.path(), {}, 1, 99);
  EXPECT_EQ(r.counters[0], 6 + TwoCheckpoints::kMore);
  EXPECT_TRUE(r.skipped.empty());
}

TEST(CheckpointFallback, NothingLoadableIsAnErrorThatListsEveryCheckpointTried) {
  TwoCheckpoints c;
  flipByteOf(c.at("global_step6/" + modelStatesName()));
  truncateTo(c.at("global_step3/" + modelStatesName()), 100);
  EXPECT_EQ(checkpoint::resumePoint(c.dir.path()), std::nullopt);
  torch::manual_seed(0);
  Mlp model(6, 12, 3);
  InitOptions options;
  options.device = torch::Device(torch::kCPU);
  auto engine = initialize(torch::nn::AnyModule(model), test::parse(configFor(0)), options).engine;
  const auto before = test::flatWeights(*model);
  try {
    engine->loadCheckpoint(c.dir.path());
    ADD_FAILURE() << "loaded";
  } catch (const CheckpointError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("global_step6: "), std::string::npos) << what;
    EXPECT_NE(what.find("global_step3: "), std::string::npos) << what;
    EXPECT_NE(what.find(modelStatesName()), std::string::npos) << what;
  }
  EXPECT_TRUE(torch::equal(test::flatWeights(*model), before));
  // An explicit tag never falls back.
  EXPECT_THROW(engine->loadCheckpoint(c.dir.path(), std::string("global_step6")), CheckpointError);
}

// The first save was killed before its manifest and `latest`: nothing was ever completed, so
// the job starts afresh (it used to be an error at every restart: a crash loop).
TEST(CheckpointDir, OnlyAnIncompleteSaveIsNothingToLoad) {
  stretch::test::TempDir dir("stretch-ckpt");
  makeDirectories(under(dir, "global_step40"));
  std::ofstream(under(dir, "global_step40/" + modelStatesName())) << "partial";
  EXPECT_TRUE(checkpoint::loadCandidates(dir.path()).tags.empty());
  EXPECT_EQ(checkpoint::resumePoint(dir.path()), std::nullopt);
  torch::manual_seed(0);
  Mlp model(6, 12, 3);
  InitOptions options;
  options.device = torch::Device(torch::kCPU);
  auto engine = initialize(torch::nn::AnyModule(model), test::parse(configFor(0)), options).engine;
  EXPECT_FALSE(engine->loadCheckpoint(dir.path()).has_value());
}

TEST(CheckpointDir, ASaveRemovesWhatFailedSavesLeftAndNothingElse) {
  stretch::test::TempDir dir("stretch-ckpt");
  auto touch = [&](const std::string& relative) {
    makeDirectories(parentPath(under(dir, relative)));
    std::ofstream(under(dir, relative)) << "x";
  };
  touch("global_step7/mp_rank_00_model_states.pt");  // died before the manifest
  touch("global_step8/zero_pp_rank_0_mp_rank_00_optim_states.pt.tmp.123.4");  // mid-write
  touch("latest.tmp.99.0");
  touch("notes/readme.txt");        // the user's
  touch("global_step9/train.log");  // not a checkpoint file: kept
  makeDirectories(under(dir, "empty_dir"));
  torch::manual_seed(0);
  Mlp model(6, 12, 3);
  InitOptions options;
  options.device = torch::Device(torch::kCPU);
  auto engine = initialize(torch::nn::AnyModule(model), test::parse(configFor(0)), options).engine;
  engine->saveCheckpoint(dir.path());
  EXPECT_FALSE(pathExists(under(dir, "global_step7")));
  EXPECT_FALSE(pathExists(under(dir, "global_step8")));
  EXPECT_FALSE(pathExists(under(dir, "latest.tmp.99.0")));
  EXPECT_TRUE(pathExists(under(dir, "notes/readme.txt")));
  EXPECT_TRUE(pathExists(under(dir, "global_step9/train.log")));
  EXPECT_TRUE(pathExists(under(dir, "global_step0/" + std::string(CheckpointManifest::kFileName))));
}

TEST(CheckpointDir, ASecondJobCannotSaveIntoADirectoryAnotherJobHolds) {
  stretch::test::TempDir dir("stretch-ckpt");
  torch::manual_seed(0);
  Mlp model(6, 12, 3);
  InitOptions options;
  options.device = torch::Device(torch::kCPU);
  auto engine = initialize(torch::nn::AnyModule(model), test::parse(configFor(0)), options).engine;
  {
    CheckpointDirLock other(dir.path(), "job other");
    EXPECT_TRUE(other.holder());
    try {
      engine->saveCheckpoint(dir.path());
      ADD_FAILURE() << "saved into a directory another job holds";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find("in use by another job (job other"), std::string::npos)
          << e.what();
    }
    EXPECT_FALSE(pathExists(under(dir, "latest")));
    // The same job shares it.
    CheckpointDirLock same(dir.path(), "job other");
    EXPECT_FALSE(same.holder());
  }
  // Released with its holder: the engine saves, and holds it from then on.
  engine->saveCheckpoint(dir.path());
  EXPECT_TRUE(pathExists(under(dir, "latest")));
  EXPECT_THROW(CheckpointDirLock(dir.path(), "job third"), CheckpointDirInUseError);
}

// Two jobs, one directory: job B once trained and restarted 18 times with its saves refused,
// then overwrote job A's `latest` when A ended, and with --resume silently loaded A's
// checkpoint. Now B's first touch, a load or a claim at its start, is refused naming A, and
// nothing of A's is read or changed.
TEST(CheckpointDir, ALoadOrAClaimOfADirectoryAnotherJobHoldsIsRefusedBeforeAnythingIsRead) {
  stretch::test::TempDir dir("stretch-ckpt");
  torch::manual_seed(0);
  Mlp model(6, 12, 3);
  InitOptions options;
  options.device = torch::Device(torch::kCPU);
  auto a = initialize(torch::nn::AnyModule(model), test::parse(configFor(0)), options).engine;
  a->saveCheckpoint(dir.path());  // A (this process's job) holds the directory from now on
  const std::string holder = currentJobId();
  const std::string latest = readFileIfExists(under(dir, "latest")).value_or("");
  ASSERT_FALSE(latest.empty());
  // B: another job (another token) in a process of its own; here, a second open file
  // description, which flock(2) treats alike.
  ::setenv("STRETCH_STORE_TOKEN", "job-b-token-0123456789abcdef", 1);
  Mlp modelB(6, 12, 3);
  auto b = initialize(torch::nn::AnyModule(modelB), test::parse(configFor(0)), options).engine;
  for (const bool load : {true, false}) {
    try {
      if (load)
        b->loadCheckpoint(dir.path());
      else
        b->claimCheckpointDir(dir.path());
      ADD_FAILURE() << (load ? "loaded" : "claimed") << " a directory another job holds";
    } catch (const CheckpointDirInUseError& e) {
      EXPECT_NE(std::string(e.what()).find("in use by another job (" + holder), std::string::npos)
          << e.what();
    }
  }
  ::unsetenv("STRETCH_STORE_TOKEN");
  EXPECT_EQ(b->globalSteps(), 0);  // nothing loaded
  EXPECT_EQ(readFileIfExists(under(dir, "latest")).value_or(""), latest);
  // A, the holder, loads and claims its own directory.
  EXPECT_TRUE(a->loadCheckpoint(dir.path()).has_value());
  a->claimCheckpointDir(dir.path());
}

}  // namespace
}  // namespace stretch::engine
