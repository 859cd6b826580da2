// Job files: the plan object's keys, defaults, warnings for unknown keys and errors that name the
// key, the value and what was expected.

#include "planner/plan_input.hpp"

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::planner {
namespace {

std::string job(const std::string& plan, const std::string& extra = "") {
  return R"({"cluster": {"nodes": 4, "gpus_per_node": 8, "intra_node_GBps": 450,
              "inter_node_GBps": 50, "intra_latency_us": 0.6, "inter_latency_us": 2.7},
             "job": {"config": {"train_micro_batch_size_per_gpu": 2},
                     "seconds_per_sample_per_gpu": 0.1, "horizon_hours": 10},
             "failures": {"model": "exponential", "node_mtbf_hours": 100})" +
         extra + (plan.empty() ? "" : ", \"plan\": " + plan) + "}";
}

PlanInput parse(const std::string& text) {
  return parsePlanInput(text, test::fixturePath("plans"));
}

// The error's three parts.
void expectError(const std::string& plan, const std::string& path, const std::string& value,
                 const std::string& expected) {
  SCOPED_TRACE(plan);
  try {
    parse(job(plan));
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    ASSERT_TRUE(e.detail().has_value()) << e.what();
    EXPECT_EQ(e.detail()->path, path) << e.what();
    EXPECT_EQ(e.detail()->value, value) << e.what();
    EXPECT_NE(e.detail()->expected.find(expected), std::string::npos) << e.what();
  }
}

TEST(PlanInput, DefaultsWithoutAPlanObject) {
  const PlanInput in = parse(job(""));
  EXPECT_EQ(in.settings.objective, Objective::Time);
  EXPECT_FALSE(in.settings.pricePerGpuHour);
  EXPECT_EQ(in.settings.seeds, 0);
  EXPECT_EQ(in.settings.versions.size(), 3u);
  EXPECT_DOUBLE_EQ(in.settings.batchTolerance, 0.1);
  EXPECT_TRUE(in.warnings.empty());
}

TEST(PlanInput, ReadsEveryKey) {
  const PlanInput in = parse(job(R"({"objective": "cost", "price_per_gpu_hour": 2.5, "seeds": 100,
      "sweep_seeds": 50, "threads": 2, "versions": ["exact", 0.1], "batch_tolerance": 0.2,
      "micro_batch_candidates": [[1, 2], [4, 8]], "expected_world_sizes": {"32": 3, "16": 1},
      "checkpoint_interval_minutes": {"min": 5, "max": 90}, "max_rows": 4})"));
  const PlanSettings& s = in.settings;
  EXPECT_EQ(s.objective, Objective::Cost);
  EXPECT_DOUBLE_EQ(*s.pricePerGpuHour, 2.5);
  EXPECT_EQ(s.seeds, 100);
  EXPECT_EQ(s.sweepSeeds, 50);
  EXPECT_EQ(s.threads, 2);
  EXPECT_EQ(s.versions,
            (std::vector{config::ElasticityVersion::Exact, config::ElasticityVersion::V0_1}));
  EXPECT_DOUBLE_EQ(s.batchTolerance, 0.2);
  EXPECT_EQ(s.microBatchCandidates.size(), 2u);
  ASSERT_EQ(s.expectedSizes.size(), 2u);
  EXPECT_EQ(s.expectedSizes[0], (ExpectedSize{16, 1.0}));
  EXPECT_EQ(s.expectedSizes[1], (ExpectedSize{32, 3.0}));
  EXPECT_FALSE(s.expectedFromRange);
  EXPECT_DOUBLE_EQ(*s.intervalMinMinutes, 5.0);
  EXPECT_DOUBLE_EQ(*s.intervalMaxMinutes, 90.0);
  EXPECT_EQ(s.maxRows, 4);
  EXPECT_TRUE(in.warnings.empty()) << in.warnings.front();
}

TEST(PlanInput, UnknownKeysAreWarnings) {
  const PlanInput in = parse(
      job(R"({"objektive": "time", "world_sizes": {"min_gpus": 8, "max_gpus": 32, "step": 8}})",
          R"(, "colour": "blue")"));
  ASSERT_EQ(in.warnings.size(), 3u);
  EXPECT_EQ(in.warnings[0], "colour: unknown key, ignored");  // the scenario's own
  const std::vector<std::string> rest(in.warnings.begin() + 1, in.warnings.end());
  EXPECT_THAT(rest, ::testing::UnorderedElementsAre("plan.objektive: unknown key, ignored",
                                                    "plan.world_sizes.step: unknown key, ignored"));
  EXPECT_TRUE(in.settings.expectedFromRange);
}

TEST(PlanInput, BadValuesNameKeyValueAndExpectation) {
  expectError(R"({"objective": "speed"})", "plan.objective", "\"speed\"",
              "\"time\", \"cost\" or \"ettr\"");
  expectError(R"({"seeds": -1})", "plan.seeds", "-1", "an integer in [0, 1000000]");
  expectError(R"({"seeds": 1.5})", "plan.seeds", "1.5", "an integer");
  expectError(R"({"price_per_gpu_hour": 0})", "plan.price_per_gpu_hour", "0", "a positive price");
  expectError(R"({"batch_tolerance": 0.7})", "plan.batch_tolerance", "0.7",
              "a fraction in [0, 0.5]");
  expectError(R"({"max_batch": 0})", "plan.max_batch", "0", "a positive integer");
  expectError(R"({"micro_batch_sizes": [2, -1]})", "plan.micro_batch_sizes[1]", "-1",
              "a positive integer");
  expectError(R"({"micro_batch_candidates": [[2], []]})", "plan.micro_batch_candidates[1]", "[]",
              "a non-empty array");
  expectError(R"({"versions": ["0.3"]})", "plan.versions[0]", "\"0.3\"",
              "\"0.1\", \"0.2\" or \"exact\"");
  expectError(R"({"expected_world_sizes": {"abc": 1}})", "plan.expected_world_sizes.abc", "\"abc\"",
              "a positive GPU count");
  expectError(R"({"expected_world_sizes": {"8": -1}})", "plan.expected_world_sizes.8", "-1",
              "a non-negative weight");
  expectError(R"({"expected_world_sizes": {"8": 0}})", "plan.expected_world_sizes", "{\"8\":0}",
              "at least one positive weight");
  expectError(R"({"world_sizes": {"min_gpus": 64, "max_gpus": 32}})", "plan.world_sizes.max_gpus",
              "32", "a number >= min_gpus (64)");
  expectError(R"({"world_sizes": {"min_gpus": 8}})", "plan.world_sizes.max_gpus", "(missing)",
              "the most GPUs");
  expectError(R"({"world_sizes": {"max_gpus": 8}, "expected_world_sizes": {"8": 1}})",
              "plan.expected_world_sizes", "{\"8\":1}", "not both");
  expectError(R"({"checkpoint_interval_minutes": {"min": 10, "max": 5}})",
              "plan.checkpoint_interval_minutes.max", "5", "a number >= min (10)");
  expectError(R"({"checkpoint_interval_minutes": {"min": 0}})",
              "plan.checkpoint_interval_minutes.min", "0", "a positive number of minutes");
  expectError(R"({"max_rows": 0})", "plan.max_rows", "0", "an integer in [1, 1000]");
  expectError(R"("fast")", "plan", "\"fast\"", "a JSON object");
}

TEST(PlanInput, ScenarioErrorsComeFromTheSimulator) {
  try {
    parse(R"({"cluster": {"nodes": 4}, "job": {}})");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cluster."), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse("{not json"), ConfigError);
  EXPECT_THROW(parse("[1, 2]"), ConfigError);
}

TEST(PlanInput, MissingFileIsAnIoError) {
  EXPECT_THROW(loadPlanInput("/nonexistent/job.json"), IoError);
  try {
    loadPlanInput("/nonexistent/job.json");
  } catch (const IoError& e) {
    EXPECT_STREQ(e.what(), "cannot read job file /nonexistent/job.json: No such file or directory");
  }
}

TEST(PlanInput, SyntaxErrorsNameTheFileLineAndColumn) {
  test::TempDir dir("plan-input");
  ASSERT_FALSE(dir.path().empty());
  const auto path = dir.path() / "broken.json";
  std::ofstream(path) << "{\n  \"plan\": {\"seeds\": }\n}\n";
  try {
    loadPlanInput(path);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::StartsWith(path.string() + ":2:21: invalid JSON: "));
  }
  try {
    parse("{\"cluster\": }");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::StartsWith("job:1:13: invalid JSON: "));
  }
}

TEST(PlanInput, BundledExampleIsTheFixture) {
  EXPECT_EQ(bundledExampleText(), test::readFile(test::fixturePath("plans/example.json")));
  const PlanInput in = bundledExample();
  EXPECT_EQ(in.name, "example");
  EXPECT_TRUE(in.warnings.empty());
  EXPECT_EQ(in.scenario.cluster.gpus(), 1024);
  EXPECT_DOUBLE_EQ(*in.settings.pricePerGpuHour, 2.5);
  EXPECT_FALSE(in.description.empty());
}

TEST(PlanInput, EveryFixtureParsesWithoutWarnings) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::fixturePath("plans"))) {
    if (entry.path().extension() != ".json") {
      continue;
    }
    SCOPED_TRACE(entry.path().string());
    const PlanInput in = loadPlanInput(entry.path());
    EXPECT_TRUE(in.warnings.empty()) << in.warnings.front();
    EXPECT_FALSE(in.description.empty());
    ++count;
  }
  EXPECT_GE(count, 4);
}

}  // namespace
}  // namespace stretch::planner
