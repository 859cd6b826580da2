// Heartbeat (the worker's side of hang detection): the file is written at once, rewritten every
// period with the last completed step and the steps completed here even when no step completes,
// the first completed step at once, and removed at the end; an engine beats by itself when
// STRETCH_HEARTBEAT_FILE names a file.

#include "runtime/engine/heartbeat.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdlib.h>
#include <string>
#include <sys/stat.h>
#include <thread>

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "runtime/engine/engine.hpp"
#include "tests/runtime/engine/engine_test_util.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::engine {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::int64_t stampOf(const fs::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0)
    return -1;
  return static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec;
}

TEST(Heartbeat, RewritesTheLastStepEveryPeriodAndRemovesTheFileAtTheEnd) {
  stretch::test::TempDir dir("stretch-heartbeat");
  const fs::path file = dir.path() / "beat";
  {
    Heartbeat beat(file.string(), 50ms);
    std::this_thread::sleep_for(20ms);  // the first beat comes at once from its thread
    EXPECT_EQ(stretch::test::readFileIfAny(file), "0 0\n");
    beat.progress(17);  // (a resumed job's first step): step 17, one completed here
    beat.progress(18);
    const auto before = stampOf(file);
    std::this_thread::sleep_for(200ms);  // no step completes meanwhile: the file still changes
    EXPECT_NE(stampOf(file), before);
    EXPECT_EQ(stretch::test::readFileIfAny(file), "18 2\n");
  }
  EXPECT_FALSE(fs::exists(file));
}

TEST(Heartbeat, TheFirstCompletedStepIsWrittenAtOnce) {
  stretch::test::TempDir dir("stretch-heartbeat");
  const fs::path file = dir.path() / "beat";
  Heartbeat beat(file.string(), std::chrono::milliseconds(60'000));
  std::this_thread::sleep_for(20ms);
  beat.progress(201);
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (stretch::test::readFileIfAny(file) != "201 1\n" &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(stretch::test::readFileIfAny(file), "201 1\n");  // not a minute later
}

TEST(Heartbeat, AnEngineBeatsItsCompletedStepsAndStopsWhenItEnds) {
  stretch::test::TempDir dir("stretch-heartbeat");
  const fs::path file = dir.path() / "beat";
  ::setenv("STRETCH_HEARTBEAT_FILE", file.c_str(), 1);
  {
    auto models = test::seededModels(1);
    auto groups = test::makeGroups(1);
    InitOptions options;
    options.processGroup = groups.groups[0];
    options.device = torch::Device(torch::kCPU);
    auto engine = initialize(torch::nn::AnyModule(models[0]), test::parse(R"({"train_batch_size": 2,
                                             "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})"),
                             options)
                      .engine;
    ::unsetenv("STRETCH_HEARTBEAT_FILE");
    for (int step = 0; step < 3; ++step) {
      engine->backward(torch::mse_loss(engine->forward(torch::ones({2, 6})), torch::zeros({2, 3})));
      engine->step();
    }
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (stretch::test::readFileIfAny(file) != "3 3\n" &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(20ms);
    EXPECT_EQ(stretch::test::readFileIfAny(file), "3 3\n");
  }
  EXPECT_FALSE(fs::exists(file));
}

TEST(Heartbeat, OnlyWhenTheLauncherNamesAFile) {
  ::unsetenv("STRETCH_HEARTBEAT_FILE");
  EXPECT_EQ(Heartbeat::fromEnvironment(), nullptr);
  ::setenv("STRETCH_HEARTBEAT_FILE", "", 1);
  EXPECT_EQ(Heartbeat::fromEnvironment(), nullptr);
  ::unsetenv("STRETCH_HEARTBEAT_FILE");
}

TEST(Heartbeat, AFileThatCannotBeWrittenStopsTheBeatWithoutAFile) {
  Heartbeat beat("/nonexistent-dir/beat", 10ms);
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(fs::exists("/nonexistent-dir/beat"));
}

}  // namespace
}  // namespace stretch::engine
