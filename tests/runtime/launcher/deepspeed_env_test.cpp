// What DeepSpeed's runner forwards to remote nodes (remote.hpp, deepspeedExports): NCCL*,
// PYTHON*, MLFLOW*, MV2*, UCX* variables, PYTHONPATH with the launch directory in front, and
// .deepspeed_env lines, never the store token.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/launcher/launch_error.hpp"
#include "runtime/launcher/remote.hpp"

namespace {

using Env = std::map<std::string, std::string>;
using stretch::launcher::deepspeedExports;

TEST(DeepSpeedExports, PrefixedVariablesAndPythonPathFromTheEnvironment) {
  const Env env = {{"NCCL_DEBUG", "INFO"},  {"PYTHONPATH", "/lib/py"},
                   {"PYTHONHASHSEED", "0"}, {"UCX_TLS", "tcp"},
                   {"MV2_X", "1"},          {"MLFLOW_RUN", "r"},
                   {"HOME", "/root"},       {"CUDA_HOME", "/cuda"},
                   {"MYNCCL", "no"},        {"STRETCH_STORE_TOKEN", "t"}};
  const Env out = deepspeedExports(env, "/work/job", {});
  EXPECT_EQ(out, (Env{{"NCCL_DEBUG", "INFO"},
                      {"PYTHONPATH", "/work/job:/lib/py"},
                      {"PYTHONHASHSEED", "0"},
                      {"UCX_TLS", "tcp"},
                      {"MV2_X", "1"},
                      {"MLFLOW_RUN", "r"}}));
  EXPECT_EQ(deepspeedExports({}, "/work/job", {}), (Env{{"PYTHONPATH", "/work/job"}}));
}

TEST(DeepSpeedExports, EnvFileLinesWinInOrderAndBadLinesNameFileAndLine) {
  const std::vector<std::pair<std::string, std::string>> files = {
      {"/home/u/.deepspeed_env", "NCCL_IB_HCA=mlx5\n\n# a comment\nA = 1 \nB=x=y\n"},
      {"/job/.deepspeed_env", "A=2\nSTRETCH_STORE_TOKEN=leak\n"}};
  const Env out = deepspeedExports({{"NCCL_IB_HCA", "old"}}, "/w", files);
  EXPECT_EQ(out.at("NCCL_IB_HCA"), "mlx5");
  EXPECT_EQ(out.at("A"), "2");
  EXPECT_EQ(out.at("B"), "x=y");
  EXPECT_EQ(out.count("STRETCH_STORE_TOKEN"), 0u);
  for (const char* bad : {"no equals sign", "1A=x", "A B=x", "=x"}) {
    try {
      deepspeedExports({}, "/w", {{"/job/.deepspeed_env", std::string("OK=1\n") + bad + "\n"}});
      FAIL() << "accepted: " << bad;
    } catch (const stretch::launcher::LaunchError& e) {
      EXPECT_NE(std::string(e.what()).find("/job/.deepspeed_env:2"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
