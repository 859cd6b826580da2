#pragma once
// The environment of one worker process: what DeepSpeed's launch.py and DSElasticAgent set for
// each rank, under Stretch's names.
//
// workerEnvironment(spec) returns the variables to add to (and override in) the agent's own
// environment for that worker. Always set:
//  - RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE: the worker's ranks and sizes;
//  - GROUP_RANK (torchelastic's name) and CROSS_RANK (DeepSpeed's): the node rank;
//  - CROSS_SIZE: the number of nodes;
//  - MASTER_ADDR, MASTER_PORT: the rendezvous store;
//  - STRETCH_RESTART_COUNT, STRETCH_MAX_RESTARTS: torchelastic's TORCHELASTIC_RESTART_COUNT and
//    TORCHELASTIC_MAX_RESTARTS;
//  - STRETCH_STORE_TOKEN: the job's store token ("" = none).
// Set only when given:
//  - CUDA_VISIBLE_DEVICES: the given device indices joined with ',' in the given order ("" hides
//    every GPU). Like DeepSpeed, every worker of a node normally gets the node's whole slot list
//    and uses the device LOCAL_RANK within it;
//  - DEEPSPEED_ELASTICITY_CONFIG: the elasticity section as JSON (runtime/elasticity's
//    immutability check compares it with the worker's config).
//  - STRETCH_GENERATION: the agent's generation (1 for the first start, +1 for every (re)start);
//  - STRETCH_TRAIN_BATCH_SIZE, STRETCH_MICRO_BATCH_SIZE, STRETCH_GRADIENT_ACCUMULATION_STEPS:
//    the batch the elastic solver chose for this generation's world size (the config's own
//    triple for a job without elasticity); set when the job has a config.
//  - STRETCH_DS_CONFIG: the path of this generation's copy of the job's DeepSpeed config with
//    that batch and without the elasticity block (generation_config.hpp); with a config.
//
// Ranks: nodes in order, local ranks in order on every node, so
//   RANK = (slot counts of the earlier nodes) + LOCAL_RANK   (globalRank in hostfile.hpp).
// DeepSpeed's launch.py instead sets LOCAL_RANK = RANK % num_local_procs, which permutes the local
// ranks when nodes have different slot counts (nodes with 3 and 2 slots: node 1's ranks 3, 4 get
// LOCAL_RANK 1, 0). Stretch does not: LOCAL_RANK k always runs on the node's k-th slot.
// Not set (DeepSpeed/torchelastic set them): LOCAL_SIZE, ROLE_*, GROUP_WORLD_SIZE,
// TORCHELASTIC_RUN_ID, TORCHELASTIC_USE_AGENT_STORE, NCCL_ASYNC_ERROR_HANDLING.
//
// The spec is produced by the agent, not typed by a user: inconsistent values (a rank outside its
// size, a port outside 1..65535, restartCount > maxRestarts, a negative or repeated device index)
// are bugs and throw InternalError. Pure.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/agent/state_machine.hpp"
#include "runtime/config/batch.hpp"
#include "runtime/launcher/generation_config.hpp"
#include "runtime/launcher/job_protocol.hpp"

namespace stretch::launcher {

struct WorkerEnvSpec {
  std::int64_t nodeRank = 0;  // GROUP_RANK, CROSS_RANK
  std::int64_t numNodes = 1;  // CROSS_SIZE
  std::int64_t localRank = 0;
  std::int64_t localWorldSize = 1;
  std::int64_t globalRank = 0;  // RANK
  std::int64_t worldSize = 1;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  std::int64_t restartCount = 0;
  std::int64_t maxRestarts = 0;
  std::string storeToken;
  std::optional<std::vector<int>> cudaVisibleDevices;
  std::optional<std::string> elasticityConfigJson;
  std::optional<std::uint64_t> generation;
  std::optional<config::BatchTriple> batch;
  std::optional<std::string> dsConfigPath;
};

std::map<std::string, std::string> workerEnvironment(const WorkerEnvSpec& spec);

// A node's slot indices as the devices its workers may see (CUDA_VISIBLE_DEVICES) on a host
// whose accelerator is not the CPU; nullopt on a CPU-only host (no variable is set).
std::optional<std::vector<int>> devicesOfSlots(const std::vector<int>& slots);

// The variables of one worker of a generation, from the job's settings and the controller's
// StartWorkers: the one place a StartWorkers becomes a worker's environment. numNodes: the
// generation's node count (start.nodes.size() where the caller has them; a node agent has only
// its own assignment and the Start command's count). devices: the
// node's slot indices on a GPU host (CUDA_VISIBLE_DEVICES: the first localWorldSize of them),
// nullopt on a CPU-only host. configs: where this node writes the generation's copy of the
// job's config (STRETCH_DS_CONFIG); required when the job has a config (job.configJson).
std::map<std::string, std::string> jobWorkerEnvironment(
    const JobSettings& job, const agent::StartWorkers& start, const agent::NodeAssignment& node,
    std::int64_t numNodes, std::int64_t localRank, const std::string& masterAddr,
    const std::optional<std::vector<int>>& devices, GenerationConfigs* configs);

}  // namespace stretch::launcher
