#include "runtime/launcher/worker_env.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include "runtime/accel/accelerator.hpp"
#include "runtime/common/check.hpp"
#include "runtime/common/worker_variables.hpp"

namespace stretch::launcher {

std::map<std::string, std::string> workerEnvironment(const WorkerEnvSpec& spec) {
  STRETCH_CHECK_GE(spec.numNodes, 1, "number of nodes");
  STRETCH_CHECK_GE(spec.nodeRank, 0, "node rank");
  STRETCH_CHECK_LT(spec.nodeRank, spec.numNodes, "node rank");
  STRETCH_CHECK_GE(spec.localWorldSize, 1, "local world size");
  STRETCH_CHECK_GE(spec.localRank, 0, "local rank");
  STRETCH_CHECK_LT(spec.localRank, spec.localWorldSize, "local rank");
  STRETCH_CHECK_GE(spec.worldSize, spec.localWorldSize, "world size");
  STRETCH_CHECK_GE(spec.globalRank, spec.localRank, "global rank");
  STRETCH_CHECK_LT(spec.globalRank, spec.worldSize, "global rank");
  STRETCH_CHECK(!spec.masterAddr.empty(), "master address");
  STRETCH_CHECK_GE(spec.masterPort, 1, "master port");
  STRETCH_CHECK_LE(spec.masterPort, 65535, "master port");
  STRETCH_CHECK_GE(spec.restartCount, 0, "restart count");
  STRETCH_CHECK_LE(spec.restartCount, spec.maxRestarts, "restart count");

  std::map<std::string, std::string> env = {
      {"RANK", std::to_string(spec.globalRank)},
      {"LOCAL_RANK", std::to_string(spec.localRank)},
      {"WORLD_SIZE", std::to_string(spec.worldSize)},
      {"LOCAL_WORLD_SIZE", std::to_string(spec.localWorldSize)},
      {"GROUP_RANK", std::to_string(spec.nodeRank)},
      {"CROSS_RANK", std::to_string(spec.nodeRank)},
      {"CROSS_SIZE", std::to_string(spec.numNodes)},
      {"MASTER_ADDR", spec.masterAddr},
      {"MASTER_PORT", std::to_string(spec.masterPort)},
      {worker_env::kRestartCount, std::to_string(spec.restartCount)},
      {worker_env::kMaxRestarts, std::to_string(spec.maxRestarts)},
      {worker_env::kStoreToken, spec.storeToken},
  };
  if (spec.cudaVisibleDevices) {
    std::string devices;
    std::set<int> seen;
    for (std::size_t i = 0; i < spec.cudaVisibleDevices->size(); ++i) {
      const int device = (*spec.cudaVisibleDevices)[i];
      STRETCH_CHECK_GE(device, 0, "device index");
      STRETCH_CHECK(seen.insert(device).second, "device {} listed twice", device);
      devices += i ? "," : "";
      devices += std::to_string(device);
    }
    env["CUDA_VISIBLE_DEVICES"] = devices;
  }
  if (spec.elasticityConfigJson) {
    env["DEEPSPEED_ELASTICITY_CONFIG"] = *spec.elasticityConfigJson;
  }
  if (spec.generation)
    env[worker_env::kGeneration] = std::to_string(*spec.generation);
  if (spec.batch) {
    STRETCH_CHECK_GE(spec.batch->microBatchPerGpu, 1, "micro batch");
    STRETCH_CHECK_GE(spec.batch->gradientAccumulation, 1, "gradient accumulation");
    env[worker_env::kTrainBatchSize] = std::to_string(spec.batch->trainBatchSize);
    env[worker_env::kMicroBatchSize] = std::to_string(spec.batch->microBatchPerGpu);
    env[worker_env::kGradientAccumulationSteps] = std::to_string(spec.batch->gradientAccumulation);
  }
  if (spec.dsConfigPath)
    env[worker_env::kDsConfig] = *spec.dsConfigPath;
  return env;
}

std::optional<std::vector<int>> devicesOfSlots(const std::vector<int>& slots) {
  if (accel::getAccelerator()->deviceType() == "cpu")
    return std::nullopt;
  return slots;
}

std::map<std::string, std::string> jobWorkerEnvironment(
    const JobSettings& job, const agent::StartWorkers& start, const agent::NodeAssignment& node,
    std::int64_t numNodes, std::int64_t localRank, const std::string& masterAddr,
    const std::optional<std::vector<int>>& devices, GenerationConfigs* configs) {
  WorkerEnvSpec spec;
  spec.nodeRank = node.nodeRank;
  spec.numNodes = numNodes;
  spec.localRank = localRank;
  spec.localWorldSize = node.localWorldSize;
  spec.globalRank = node.firstRank + localRank;
  spec.worldSize = start.worldSize;
  spec.masterAddr = masterAddr;
  spec.masterPort = job.masterPort;
  spec.restartCount = start.restartCount;
  spec.maxRestarts = job.maxRestarts;
  spec.storeToken = job.token;
  if (devices) {
    const auto n =
        std::min<std::size_t>(devices->size(), static_cast<std::size_t>(node.localWorldSize));
    spec.cudaVisibleDevices =
        std::vector<int>(devices->begin(), devices->begin() + static_cast<std::ptrdiff_t>(n));
  }
  spec.elasticityConfigJson = job.elasticJson;
  spec.generation = start.generation;
  if (job.batchFromConfig)
    spec.batch = start.batch;
  if (job.configJson) {
    STRETCH_CHECK(configs != nullptr, "a job with a config needs its generation configs");
    // Empty when no copy could be written (reported): the batch variables above still carry it.
    if (std::string path = configs->pathFor(start.generation, start.batch); !path.empty())
      spec.dsConfigPath = std::move(path);
  }
  return workerEnvironment(spec);
}

}  // namespace stretch::launcher
