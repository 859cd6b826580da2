// The GPT example job under `stretch launch --config` with an elastic config: two workers, one
// SIGKILLed by the fault script after step 15 (checkpoints every 10 steps); the launcher restarts
// both, they resume from step 10 and end with bitwise the weights of an uninterrupted run (the
// same world size throughout, dropout on: the masks are reseeded from the step).

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "tests/cli/launch_support.hpp"
#include "tests/support/test_support.hpp"

namespace {

using namespace stretch::test::launch;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string gptConfig() {
  return std::string(STRETCH_SOURCE) + "/fixtures/jobs/gpt/ds_config_elastic.json";
}

std::vector<std::string> gptJob(const fs::path& dir, int steps) {
  return {"--num_gpus",
          "2",
          "--master_port",
          std::to_string(freePort()),
          "--config",
          gptConfig(),
          "--elastic",
          "1:1",
          "--monitor_interval",
          "1",
          "--log_dir",
          (dir / "logs").string(),
          "--event_log",
          (dir / "events.jsonl").string(),
          "--checkpoint_dir",
          (dir / "ckpt").string(),
          "--recovery",
          "restart",
          STRETCH_TRAIN_GPT,
          "--config",
          gptConfig(),
          "--steps",
          std::to_string(steps),
          "--layers",
          "2",
          "--heads",
          "2",
          "--width",
          "32",
          "--context",
          "32",
          "--dropout",
          "0.1",
          "--eval-every",
          "0",
          "--log-every",
          "5",
          "--sample-chars",
          "20",
          "--checkpoint-dir",
          (dir / "ckpt").string(),
          "--save-every",
          "10",
          "--resume",
          "--json"};
}

TEST(GptLaunch, AWorkerKilledMidRunRestartsAndEndsBitwiseAsTheUninterruptedRun) {
  ::setenv("OMP_NUM_THREADS", "1", 1);
  stretch::test::TempDir reference("stretch-gpt-launch");
  Launch straight(reference.path(), gptJob(reference.path(), 40));
  ASSERT_EQ(straight.wait(300s), 0) << straight.err();
  const auto expected = jobSummary(reference.path());
  ASSERT_TRUE(expected.contains("weights_sha256")) << expected.dump();
  EXPECT_EQ(expected["world_size"], 2);
  EXPECT_EQ(expected["train_batch_size"], 16);
  EXPECT_EQ(expected["generation"], 1);

  stretch::test::TempDir dir("stretch-gpt-launch");
  const fs::path faults = dir.path() / "faults";
  fs::create_directories(faults);
  ::setenv("STRETCH_FAULT_DIR", faults.c_str(), 1);
  ::setenv("STRETCH_FAULT_KILL_AT_STEP", "15:1", 1);
  Launch faulted(dir.path(), gptJob(dir.path(), 40));
  const int status = faulted.wait(300s);
  ::unsetenv("STRETCH_FAULT_DIR");
  ::unsetenv("STRETCH_FAULT_KILL_AT_STEP");
  ASSERT_EQ(status, 0) << faulted.err();
  ASSERT_TRUE(fs::exists(faults / "kill_15"));
  const auto summary = jobSummary(dir.path());
  EXPECT_EQ(summary["weights_sha256"], expected["weights_sha256"]) << summary.dump();
  EXPECT_EQ(summary["samples"], expected["samples"]);
  EXPECT_EQ(summary["generation"], 2);
  const auto starts = startsOf(dir.path() / "events.jsonl");
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[1]["resume_step"], 10) << starts[1].dump();
}

}  // namespace
