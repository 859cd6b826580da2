// Checkpoints without std::filesystem (tests/runtime/engine/fs_trap.cmake, docs/gpu.md).
//
// This executable defines every std::filesystem function that the C++ runtime exports as a trap
// that names the function and aborts: a definition in the executable wins over libstdc++'s, as
// libtorch.so's copies do under PyTorch 2.11, where std::filesystem::remove_all crashed. A
// checkpoint save, load and resume through the Engine, the checkpoint files' own functions and
// runtime/common's file operations run here; any std::filesystem call on their path aborts the
// test with "std::filesystem trap: <function>" and a backtrace. FsTraps.AreInPlace proves that a
// call would be caught.
//
// Nothing here may construct a std::filesystem::path either (its constructor is a trapped
// out-of-line function): hence ScratchDir rather than the shared TempDir.

#include "tests/runtime/engine/fs_trap.hpp"

#include <cstdlib>
#include <filesystem>  // FsTraps.AreInPlace only: the calls that must abort
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "runtime/comm/in_process_backend.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/common/posix_files.hpp"
#include "runtime/engine/checkpoint_io.hpp"
#include "runtime/engine/engine.hpp"
#include "tests/runtime/engine/engine_test_util.hpp"

namespace stretch::engine {
namespace {

using test::Mlp;

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it: mkdtemp and
// removeTree, no std::filesystem.
class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/stretch-fs-trap-XXXXXX";
    if (::mkdtemp(pattern.data()) != nullptr)
      path_ = pattern;
  }
  ~ScratchDir() {
    try {
      removeTree(path_);
    } catch (const std::exception&) {
    }
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& relative) const { return joinPath(path_, relative); }

 private:
  std::string path_;
};

// ---- the traps themselves ----

TEST(FsTraps, AreInPlace) {
  // Every std::filesystem function of libstdc++ is trapped (a few hundred); each call below
  // would have run libstdc++'s code and returned.
  EXPECT_GT(stretch_fs_trap_count, 50);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  namespace fs = std::filesystem;
  // Even an empty path's constructor is out of line (path::_List::_List()), so the calls get
  // a path that was never constructed: the trap aborts before anything reads it.
  alignas(fs::path) static const unsigned char kRaw[sizeof(fs::path)] = {};
  const fs::path& none = *reinterpret_cast<const fs::path*>(kRaw);
  EXPECT_DEATH(fs::remove_all(none), "std::filesystem trap: std::filesystem::remove_all");
  EXPECT_DEATH(fs::create_directories(none),
               "std::filesystem trap: std::filesystem::create_directories");
  EXPECT_DEATH((void)fs::exists(none), "std::filesystem trap: std::filesystem::status");
  EXPECT_DEATH((void)fs::file_size(none), "std::filesystem trap: std::filesystem::file_size");
  EXPECT_DEATH(
      {
        const fs::path p("ckpt");
        (void)p;
      },
      "std::filesystem trap: std::filesystem::.*path::");
}

// ---- runtime/common's file operations ----

TEST(FsTrapCommon, FileOperationsUsePosixCallsOnly) {
  const ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  makeDirectories(dir / "a/b/c");
  makeDirectories(dir / "a/b/c");  // already there
  EXPECT_TRUE(isDirectory(dir / "a/b"));
  writeFileAtomically(dir / "a/b/c/f.txt", "hello");
  writeFileAtomically(dir / "new/parent/g.txt", "created parents");
  EXPECT_EQ(readFile(dir / "a/b/c/f.txt"), "hello");
  EXPECT_EQ(fileSize(dir / "new/parent/g.txt"), 15u);
  EXPECT_TRUE(isRegularFile(dir / "a/b/c/f.txt"));
  EXPECT_TRUE(pathExists(dir / "a"));
  EXPECT_FALSE(pathExists(dir / "missing"));
  renamePath(dir / "a/b/c/f.txt", dir / "a/f.txt");
  EXPECT_EQ(listDirectory(dir / "a"), (std::vector<std::string>{"b", "f.txt"}));
  EXPECT_THROW(readFile(dir / "a", "checkpoint"), IoError);
  EXPECT_THROW(makeDirectories(dir / "a/f.txt/sub"), IoError);
  EXPECT_TRUE(removePath(dir / "a/f.txt"));
  EXPECT_EQ(removeTree(dir / "a"), 3u);  // a, b, c
  EXPECT_EQ(removeTree(dir / "a"), 0u);
  EXPECT_EQ(listDirectory(dir.path()), std::vector<std::string>{"new"});
}

// ---- checkpoint files ----

TEST(FsTrapCheckpointFiles, WriteVerifyAndLoad) {
  const ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string tagDir = dir / "nested/global_step1";
  StateDict state;
  state["w"] = torch::arange(6, torch::kFloat32);
  state["step"] = std::int64_t{1};
  CheckpointManifest manifest;
  manifest.tag = "global_step1";
  manifest.dpWorldSize = 1;
  manifest.add(saveStateFile(joinPath(tagDir, modelStatesName()), state));
  writeManifest(tagDir, manifest);
  writeLatest(dir / "nested", "global_step1");
  EXPECT_EQ(readLatest(dir / "nested"), std::optional<std::string>("global_step1"));
  const CheckpointManifest back = readManifest(tagDir);
  EXPECT_EQ(back, manifest);
  verifyAll(tagDir, back);
  EXPECT_EQ(sha256OfFile(joinPath(tagDir, modelStatesName())), manifest.files[0].sha256);
  const StateDict loaded =
      toStateDict(loadStateFile(joinPath(tagDir, modelStatesName()), manifest));
  EXPECT_TRUE(torch::equal(loaded.at("w").toTensor(), state.at("w").toTensor()));
  // Errors take the same path: a missing file, an unwritable location.
  removePath(joinPath(tagDir, modelStatesName()));
  EXPECT_THROW(verifyAll(tagDir, back), CheckpointError);
  writeFileAtomically(dir / "plain", "x");
  EXPECT_THROW(writeTextAtomically(dir / "plain/f", "t"), CheckpointError);
}

// ---- the Engine ----

TensorDataset dataset() {
  torch::manual_seed(11);
  return {torch::randn({96, 6}), torch::randn({96, 3})};
}

std::string configFor(int stage) {
  return fmt::format(
      R"({{"train_batch_size": 24, "zero_optimization": {{"stage": {}}},
          "optimizer": {{"type": "AdamW", "params": {{"lr": 0.01, "weight_decay": 0.01}}}},
          "scheduler": {{"type": "WarmupDecayLR",
                        "params": {{"warmup_num_steps": 3, "total_num_steps": 40,
                                   "warmup_max_lr": 0.01}}}}}})",
      stage);
}

struct TrainResult {
  torch::Tensor weights;  // rank 0's flat weights at the end
  std::int64_t steps = 0;
  std::string loadedPath;
  StateDict clientState;
};

// `steps` optimizer steps on `ranks` thread-ranks; loads dir `loadFrom` (tag `loadTag`, or
// latest) first when given, saves to `saveTo` (tag `saveTag`, or global_stepN) at the end when
// given.
TrainResult train(int ranks, int stage, int steps, const std::string& loadFrom = {},
                  const std::optional<std::string>& loadTag = std::nullopt,
                  const std::string& saveTo = {},
                  const std::optional<std::string>& saveTag = std::nullopt,
                  std::uint64_t seed = 0) {
  auto groups = test::makeGroups(ranks);
  std::vector<Mlp> models;
  for (int r = 0; r < ranks; ++r) {
    torch::manual_seed(seed);
    models.emplace_back(6, 12, 3);
  }
  const auto config = test::parse(configFor(stage));
  const TensorDataset data = dataset();
  TrainResult run;
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
      const auto loaded = engine.loadCheckpoint(loadFrom, loadTag);
      ASSERT_TRUE(loaded.has_value());
      if (r == 0) {
        run.loadedPath = loaded->path;
        run.clientState = loaded->clientState;
      }
    }
    const std::int64_t target = engine.globalSteps() + steps;
    while (engine.globalSteps() < target) {
      auto batch = init.dataLoader->next();
      engine.backward(torch::mse_loss(engine.forward(batch.inputs), batch.targets));
      engine.step();
    }
    if (!saveTo.empty()) {
      StateDict client;
      client["note"] = c10::IValue(std::string("saved at ") + std::to_string(target));
      const std::string path = engine.saveCheckpoint(saveTo, saveTag, client);
      EXPECT_EQ(path, joinPath(saveTo, saveTag.value_or(fmt::format("global_step{}", target))));
    }
    if (r == 0) {
      run.weights = test::flatWeights(*models[0]);
      run.steps = engine.globalSteps();
    }
  });
  return run;
}

TEST(FsTrapEngine, SaveLoadAndResumeUsePosixCallsOnly) {
  const ScratchDir scratch;
  ASSERT_FALSE(scratch.path().empty());
  const std::string dir = scratch / "runs/job1/ckpt";  // parents created by the save

  const TrainResult straight = train(2, 1, 6);
  train(2, 1, 3, {}, std::nullopt, dir);
  EXPECT_EQ(readLatest(dir), std::optional<std::string>("global_step3"));
  EXPECT_EQ(listDirectory(joinPath(dir, "global_step3")),
            (std::vector<std::string>{"manifest.json", modelStatesName(), zeroOptimStatesName(0),
                                      zeroOptimStatesName(1)}));

  // Resume through `latest` from other initial weights: bitwise the uninterrupted run; then a
  // save under an explicit tag.
  const TrainResult resumed = train(2, 1, 3, dir, std::nullopt, dir, std::string("final"), 99);
  EXPECT_EQ(resumed.loadedPath, joinPath(dir, "global_step3"));
  EXPECT_EQ(resumed.clientState.at("note").toStringRef(), "saved at 3");
  EXPECT_EQ(resumed.steps, 6);
  EXPECT_TRUE(torch::equal(resumed.weights, straight.weights));
  EXPECT_EQ(readLatest(dir), std::optional<std::string>("final"));

  // Elastic: the tag loaded by name on one rank at ZeRO stage 0.
  const TrainResult elastic = train(1, 0, 1, dir, std::string("final"), {}, std::nullopt, 7);
  EXPECT_EQ(elastic.steps, 7);
  verifyAll(joinPath(dir, "final"), readManifest(joinPath(dir, "final")));

  // Failures are CheckpointErrors, not std::filesystem calls: a missing shard, a checkpoint
  // directory that cannot be created; the fallback to an older checkpoint is POSIX calls too.
  removePath(joinPath(dir, "final/" + zeroOptimStatesName(1)));
  torch::manual_seed(0);
  Mlp model(6, 12, 3);
  InitOptions options;
  options.device = torch::Device(torch::kCPU);
  auto engine = initialize(torch::nn::AnyModule(model), test::parse(configFor(0)), options).engine;
  EXPECT_THROW(engine->loadCheckpoint(dir, std::string("final")), CheckpointError);
  // Without a tag the load falls back to the newest checkpoint that loads.
  const auto fallback = engine->loadCheckpoint(dir);
  ASSERT_TRUE(fallback.has_value());
  EXPECT_EQ(fallback->tag, "global_step3");
  EXPECT_FALSE(engine->loadCheckpoint(scratch / "empty").has_value());
  writeFileAtomically(scratch / "file", "not a directory");
  EXPECT_THROW(engine->saveCheckpoint(scratch / "file/ckpt"), CheckpointError);
}

}  // namespace
}  // namespace stretch::engine
