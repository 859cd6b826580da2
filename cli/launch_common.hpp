#pragma once
// What `stretch launch` and `stretch agent` share: the job-wide worker settings, the workers'
// environment built from them, and the job description the launcher publishes in the job's
// store for node agents (keys in runtime/agent/job_protocol.hpp).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/agent/state_machine.hpp"
#include "runtime/comm/store.hpp"

namespace stretch::cli {

// Settings every worker of the job gets, whatever its node.
struct JobSettings {
  int masterPort = 29500;
  std::int64_t maxRestarts = 0;
  std::string token;                       // STRETCH_STORE_TOKEN
  std::optional<std::string> elasticJson;  // DEEPSPEED_ELASTICITY_CONFIG
  std::vector<std::string> command;        // the worker program and its arguments
};

// RANK, LOCAL_RANK, WORLD_SIZE, ... for one worker (launcher/worker_env.hpp). devices: the
// node's slot indices on a GPU host (CUDA_VISIBLE_DEVICES: the first localWorldSize of them),
// nullopt on a CPU-only host.
std::map<std::string, std::string> workerEnvironment(
    const JobSettings& job, const agent::StartWorkers& start, const agent::NodeAssignment& node,
    std::int64_t localRank, const std::string& masterAddr,
    const std::optional<std::vector<int>>& devices);

// The launch's hosts in node-rank order: id and slot indices.
struct LaunchHost {
  std::string id;
  std::vector<int> slots;
};

// Writes the job description (job/argv, job/host/<rank>, job/env/..., then job/ready).
void publishJob(comm::Store& store, const JobSettings& job, const std::vector<LaunchHost>& hosts);
// Waits (up to the store's timeout) for job/ready and reads the description back; token is
// left empty (an agent already has it). Throws ConfigError when the job has no host of that
// rank.
JobSettings readJob(comm::Store& store);
LaunchHost readLaunchHost(comm::Store& store, std::int64_t nodeRank);

// The local address this host uses to reach `peer` (a UDP socket's source address; nothing is
// sent). Falls back to "127.0.0.1" when there is no route.
std::string localAddressTowards(const std::string& peer);

}  // namespace stretch::cli
