// chooseCommBackend: the rule that picks NCCL or Gloo staged through host memory for a job's
// device buffers, from what the machine and the build offer and STRETCH_COMM_BACKEND.

#include "runtime/comm/backend_choice.hpp"

#include <gtest/gtest.h>

#include "runtime/common/error.hpp"

namespace stretch::comm {
namespace {

const std::vector<std::string> kGlooOnly = {"in_process", "gloo"};
const std::vector<std::string> kWithNccl = {"in_process", "gloo", "nccl"};

CommChoiceInput cuda(int devices, int localRanks, std::vector<std::string> built,
                     std::string override = "") {
  return {DeviceType::Cuda, devices, localRanks, localRanks, std::move(built), std::move(override)};
}

std::string refusal(const CommChoiceInput& input) {
  try {
    chooseCommBackend(input);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(CommChoice, CpuJobsUseGloo) {
  const CommChoice choice = chooseCommBackend({DeviceType::Cpu, 0, 4, 8, kWithNccl, ""});
  EXPECT_EQ(choice.hostBackend, "gloo");
  EXPECT_EQ(choice.deviceBackend, "");
  EXPECT_FALSE(choice.staged);
  EXPECT_EQ(choice.summary, "comm: gloo, 4 ranks on the CPU");
  EXPECT_EQ(chooseCommBackend({DeviceType::Cpu, 0, 1, 1, kGlooOnly, "GLOO"}).summary,
            "comm: gloo, 1 rank on the CPU");
}

TEST(CommChoice, ADeviceForEveryRankUsesNccl) {
  const CommChoice choice = chooseCommBackend(cuda(8, 8, kWithNccl));
  EXPECT_EQ(choice.deviceBackend, "nccl");
  EXPECT_FALSE(choice.staged);
  EXPECT_EQ(choice.hostBackend, "gloo");  // flags and metadata stay on the CPU
  EXPECT_EQ(choice.summary, "comm: nccl, 8 ranks on 8 devices");
  EXPECT_EQ(chooseCommBackend(cuda(8, 4, kWithNccl, "nccl")).summary,
            "comm: nccl, 4 ranks on 4 devices");
}

TEST(CommChoice, RanksSharingADeviceStageThroughHostMemory) {
  const CommChoice choice = chooseCommBackend(cuda(1, 2, kWithNccl));
  EXPECT_EQ(choice.deviceBackend, "");
  EXPECT_TRUE(choice.staged);
  EXPECT_EQ(choice.summary, "comm: gloo staged through pinned host memory, 2 ranks share cuda:0");
  EXPECT_EQ(chooseCommBackend(cuda(2, 4, kWithNccl)).summary,
            "comm: gloo staged through pinned host memory, 4 ranks share 2 devices");
}

TEST(CommChoice, ABuildWithoutNcclStagesAndSaysWhy) {
  EXPECT_EQ(chooseCommBackend(cuda(2, 2, kGlooOnly)).summary,
            "comm: gloo staged through pinned host memory, 2 ranks on 2 devices (this build has "
            "no NCCL)");
}

TEST(CommChoice, TheOverrideForcesGlooOrInsistsOnNccl) {
  const CommChoice forced = chooseCommBackend(cuda(8, 8, kWithNccl, "gloo"));
  EXPECT_TRUE(forced.staged);
  EXPECT_EQ(forced.summary,
            "comm: gloo staged through pinned host memory, 8 ranks on 8 devices "
            "(STRETCH_COMM_BACKEND=gloo)");
  EXPECT_EQ(chooseCommBackend(cuda(8, 8, kWithNccl, "auto")).deviceBackend, "nccl");

  EXPECT_EQ(refusal(cuda(1, 2, kWithNccl, "nccl")),
            "STRETCH_COMM_BACKEND = nccl: expected gloo or auto here: NCCL needs a device per "
            "rank, and the 2 ranks on this node see 1 device");
  EXPECT_NE(refusal(cuda(2, 2, kGlooOnly, "nccl")).find("it has no NCCL"), std::string::npos);
  EXPECT_NE(
      refusal({DeviceType::Cpu, 0, 2, 2, kWithNccl, "nccl"}).find("NCCL moves CUDA buffers only"),
      std::string::npos);
  EXPECT_EQ(refusal(cuda(2, 2, kWithNccl, "mpi")),
            "STRETCH_COMM_BACKEND = mpi: expected auto, gloo or nccl");
}

TEST(CommChoice, WhatCannotRunIsRefused) {
  EXPECT_NE(refusal(cuda(0, 1, kWithNccl)).find("none is visible"), std::string::npos);
  EXPECT_NE(refusal({DeviceType::Cpu, 0, 2, 2, {"in_process"}, ""}).find("libgloo-dev"),
            std::string::npos);
  // One rank needs no Gloo at all.
  EXPECT_NO_THROW(chooseCommBackend({DeviceType::Cpu, 0, 1, 1, {"in_process"}, ""}));
}

}  // namespace
}  // namespace stretch::comm
