// Runs the real `stretch` executable: exit codes, the --json contract and readable errors.

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "tests/support/test_support.hpp"

namespace stretch {
namespace {

struct Result {
  int exitCode;
  std::string out;  // stdout and stderr, in order
};

Result runStretch(const std::string& args, const std::string& env = "") {
  const auto run = stretch::test::runShell(env + " " + STRETCH_CLI + " " + args + " 2>&1");
  return {run.exitCode, run.out};
}

class StretchCli : public ::testing::Test {
 protected:
  std::string writeConfig(const std::string& text) {
    const auto path =
        std::filesystem::temp_directory_path() /
        ("stretch-cli-" +
         std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + ".json");
    std::ofstream(path) << text;
    files_.push_back(path);
    return path.string();
  }
  void TearDown() override {
    for (const auto& f : files_)
      std::filesystem::remove(f);
  }
  std::vector<std::filesystem::path> files_;
};

const char* kFixture =
    R"({"elasticity": {"enabled": true, "max_train_batch_size": 10000,
        "micro_batch_sizes": [8, 12, 16, 17], "min_gpus": 32, "max_gpus": 1500,
        "min_time": 20, "version": 0.1}})";

TEST_F(StretchCli, JsonPlanMatchesDeepSpeed) {
  const Result r = runStretch("elastic --json --config " + writeConfig(kFixture));
  ASSERT_EQ(r.exitCode, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("final_batch_size"), 9792);
  EXPECT_EQ(j.at("valid_gpus").size(), 23u);
  EXPECT_TRUE(j.at("micro_batch").is_null());
  EXPECT_EQ(j.size(), 3u);
}

TEST_F(StretchCli, JsonWorldSizeGivesMicroBatch) {
  const Result r = runStretch("elastic --json --world-size 64 -c " + writeConfig(kFixture));
  ASSERT_EQ(r.exitCode, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("micro_batch"), 17);
}

TEST_F(StretchCli, JsonErrorsAreTypedWithExitCode2) {
  const Result r = runStretch("elastic --json --world-size 128 -c " + writeConfig(kFixture));
  EXPECT_EQ(r.exitCode, 2);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("error"), "ElasticityIncompatibleWorldSize");
  EXPECT_NE(j.at("message").get<std::string>().find("128"), std::string::npos);

  const Result missing = runStretch("elastic --json -c /nonexistent/ds.json");
  EXPECT_EQ(missing.exitCode, 2);
  EXPECT_EQ(nlohmann::json::parse(missing.out).at("error"), "ConfigError");
}

TEST_F(StretchCli, V02ReadsWorldSizeFromTheEnvironment) {
  const std::string path = writeConfig(
      R"({"elasticity": {"enabled": true, "max_train_batch_size": 100000,
          "micro_batch_sizes": [8, 12, 16, 17], "min_gpus": 32, "max_gpus": 1500,
          "num_gpus_per_node": 8, "model_parallel_size": 2, "version": 0.2}})");
  const Result without = runStretch("elastic --json -c " + path, "env -u WORLD_SIZE");
  EXPECT_EQ(without.exitCode, 2);
  EXPECT_EQ(nlohmann::json::parse(without.out).at("error"), "ElasticityConfigError");
  const Result with = runStretch("elastic --json -c " + path, "WORLD_SIZE=32");
  ASSERT_EQ(with.exitCode, 0) << with.out;
  const auto j = nlohmann::json::parse(with.out);
  EXPECT_EQ(j.at("final_batch_size"), 80640);
  EXPECT_EQ(j.at("micro_batch"), 16);
}

TEST_F(StretchCli, HumanOutputHasTheTableAndOneLineErrors) {
  const Result r = runStretch("elastic -c " + writeConfig(kFixture) + " -w 64");
  ASSERT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("final train batch size : 9792"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("micro batch 17, gradient accumulation 9"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    1224           ", 0), std::string::npos) << r.out;

  const Result bad = runStretch(
      "elastic -c " + writeConfig(R"({"elasticity": {"enabled": true, "max_train_batch_size": 100,
                      "micro_batch_sizes": [4, -1]}})"));
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_EQ(std::count(bad.out.begin(), bad.out.end(), '\n'), 1) << bad.out;
  EXPECT_NE(bad.out.find("elasticity.micro_batch_sizes[1]"), std::string::npos) << bad.out;
}

TEST_F(StretchCli, UsageErrorsExit2AndHelpExits0) {
  EXPECT_EQ(runStretch("").exitCode, 2);
  EXPECT_EQ(runStretch("elastic").exitCode, 2);  // --config is required
  EXPECT_EQ(runStretch("elastic -c x.json --world-size -3").exitCode, 2);
  const Result help = runStretch("elastic --help");
  EXPECT_EQ(help.exitCode, 0);
  EXPECT_NE(help.out.find("--world-size"), std::string::npos);
}

// Keep-alive names the nodes' liveness, heartbeat the workers'; the old flag names still parse.
TEST_F(StretchCli, KeepAliveFlagsKeepTheirOldNames) {
  for (const std::string command : {"launch", "agent"}) {
    const Result help = runStretch(command + " --help");
    EXPECT_EQ(help.exitCode, 0) << help.out;
    EXPECT_NE(help.out.find(command == "launch" ? "--keepalive_timeout" : "--keepalive_interval"),
              std::string::npos)
        << help.out;
  }
  for (const std::string flag : {"--keepalive_timeout", "--heartbeat_timeout"}) {
    const Result bad = runStretch("launch " + flag + " 0 true");
    EXPECT_EQ(bad.exitCode, 2) << bad.out;
    EXPECT_NE(bad.out.find("keepalive_timeout"), std::string::npos) << bad.out;
  }
  const Result agent = runStretch("agent --heartbeat_interval 0");
  EXPECT_EQ(agent.exitCode, 2) << agent.out;
  EXPECT_NE(agent.out.find("keepalive_interval"), std::string::npos) << agent.out;
}

// The slim agent executable that a local launch starts (cli/agent_main.cpp) is `stretch agent`:
// the same options, defaults and usage errors, under its own name.
TEST_F(StretchCli, TheSlimAgentExecutableIsStretchAgent) {
  const auto agent = [](const std::string& args) {
    const auto run = test::runShell(std::string(STRETCH_AGENT) + " " + args + " 2>&1");
    return Result{run.exitCode, run.out};
  };
  const Result version = agent("--version");
  EXPECT_EQ(version.exitCode, 0) << version.out;
  EXPECT_EQ(version.out.rfind("stretch-agent ", 0), 0u) << version.out;
  EXPECT_EQ(agent("agent --help").out, [&] {
    std::string out = runStretch("agent --help").out;
    return out.replace(out.find("Usage: stretch agent"), 20, "Usage: stretch-agent agent");
  }());
  const Result missing = agent("agent --node_rank 0");
  EXPECT_EQ(missing.exitCode, 2) << missing.out;
  EXPECT_NE(missing.out.find("--rdzv"), std::string::npos) << missing.out;
  EXPECT_NE(missing.out.find("stretch-agent: error:"), std::string::npos) << missing.out;
  const Result none = agent("");
  EXPECT_EQ(none.exitCode, 2) << none.out;
}

TEST_F(StretchCli, BundledExampleRuns) {
  const Result r = runStretch("elastic --json -c " +
                              test::fixturePath("examples/ds_config_elastic.json").string());
  ASSERT_EQ(r.exitCode, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_LE(j.at("final_batch_size").get<int>(), 4096);
  EXPECT_FALSE(j.at("valid_gpus").empty());
}

TEST_F(StretchCli, ConfigCommandResolvesTheBatch) {
  const std::string path =
      writeConfig(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4})");
  const Result r = runStretch("config " + path + " --world-size 4");
  ASSERT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("gradient_accumulation_steps 2"), std::string::npos) << r.out;
  const Result bad = runStretch("config " + path + " --world-size 3");
  EXPECT_EQ(bad.exitCode, 2) << bad.out;
}

// `stretch report` must not depend on the caller's accelerator variables unless a test sets them.
const char* kNoAcceleratorEnv = "env -u STRETCH_ACCELERATOR -u DS_ACCELERATOR";

TEST_F(StretchCli, ReportPrintsEverySection) {
  const Result r = runStretch("report", kNoAcceleratorEnv);
  ASSERT_EQ(r.exitCode, 0) << r.out;
  for (const char* text : {"Stretch environment report", "stretch version", "Accelerator",
                           "selected", "CUDA", "Communication", "gloo", "nccl", "redis",
                           "Libraries", "fmt", "nlohmann_json", "compiler", "build type"}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text << " missing from:\n" << r.out;
  }
}

TEST_F(StretchCli, ReportJsonHasEveryKey) {
  const Result r = runStretch("report --json", kNoAcceleratorEnv);
  ASSERT_EQ(r.exitCode, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j.at("stretch_version").get<std::string>().empty());

  const auto& acc = j.at("accelerator");
  const std::string name = acc.at("name");
  EXPECT_TRUE(name == "cpu" || name == "cuda") << name;
  EXPECT_EQ(acc.at("source"), "detection");
  EXPECT_FALSE(acc.at("reason").get<std::string>().empty());
  EXPECT_EQ(acc.at("communication_backend"), name == "cpu" ? "gloo" : "nccl");
  ASSERT_FALSE(acc.at("devices").empty());
  for (const auto& device : acc.at("devices")) {
    EXPECT_GT(device.at("total_memory").get<std::uint64_t>(), 0u) << device;
    EXPECT_LE(device.at("available_memory").get<std::uint64_t>(),
              device.at("total_memory").get<std::uint64_t>());
  }

  const auto& cuda = j.at("cuda");
  EXPECT_TRUE(cuda.at("built").is_boolean());
  EXPECT_TRUE(cuda.at("device_count").is_number_integer());
  if (cuda.at("device_count") == 0) {
    EXPECT_EQ(name, "cpu");
    EXPECT_TRUE(cuda.at("unavailable_reason").is_string());
  }

  for (const char* backend : {"gloo", "nccl", "redis", "mpi"}) {
    const auto& b = j.at("communication").at(backend);
    if (b.at("built").get<bool>()) {
      EXPECT_FALSE(b.at("version").get<std::string>().empty()) << backend;
    } else {
      EXPECT_FALSE(b.at("reason").get<std::string>().empty()) << backend;
    }
  }
  EXPECT_EQ(j.at("communication").at("nccl").at("built"), cuda.at("built"));
  for (const char* lib : {"fmt", "spdlog", "nlohmann_json"})
    EXPECT_TRUE(j.at("libraries").at(lib).is_string()) << lib;
  EXPECT_FALSE(j.at("build").at("compiler").get<std::string>().empty());
  EXPECT_TRUE(j.at("build").contains("build_type"));
}

TEST_F(StretchCli, ReportSaysWhichVariableChoseTheAccelerator) {
  const Result r = runStretch("report --json", "env -u STRETCH_ACCELERATOR DS_ACCELERATOR=CPU");
  ASSERT_EQ(r.exitCode, 0) << r.out;
  const auto acc = nlohmann::json::parse(r.out).at("accelerator");
  EXPECT_EQ(acc.at("name"), "cpu");
  EXPECT_EQ(acc.at("source"), "environment");
  EXPECT_EQ(acc.at("reason"), "DS_ACCELERATOR=CPU");
  EXPECT_EQ(acc.at("devices").size(), 1u);
}

TEST_F(StretchCli, ReportRejectsAnUnknownAcceleratorWithExit2) {
  const Result r = runStretch("report", "STRETCH_ACCELERATOR=bogus");
  EXPECT_EQ(r.exitCode, 2) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(r.out.find("STRETCH_ACCELERATOR = bogus: expected one of cpu"), std::string::npos)
      << r.out;

  const Result json = runStretch("report --json", "STRETCH_ACCELERATOR=bogus");
  EXPECT_EQ(json.exitCode, 2) << json.out;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j.at("error"), "ConfigError");
  EXPECT_NE(j.at("message").get<std::string>().find("STRETCH_ACCELERATOR"), std::string::npos);
}

}  // namespace
}  // namespace stretch
