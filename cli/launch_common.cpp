#include "cli/launch_common.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include "runtime/agent/job_protocol.hpp"
#include "runtime/common/error.hpp"
#include "runtime/launcher/worker_env.hpp"

namespace stretch::cli {

std::map<std::string, std::string> workerEnvironment(
    const JobSettings& job, const agent::StartWorkers& start, const agent::NodeAssignment& node,
    std::int64_t localRank, const std::string& masterAddr,
    const std::optional<std::vector<int>>& devices) {
  launcher::WorkerEnvSpec spec;
  spec.nodeRank = node.nodeRank;
  spec.numNodes = static_cast<std::int64_t>(start.nodes.size());
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
  return launcher::workerEnvironment(spec);
}

void publishJob(comm::Store& store, const JobSettings& job, const std::vector<LaunchHost>& hosts) {
  store.set("job/argv/count", std::to_string(job.command.size()));
  for (std::size_t i = 0; i < job.command.size(); ++i)
    store.set(fmt::format("job/argv/{}", i), job.command[i]);
  for (std::size_t r = 0; r < hosts.size(); ++r) {
    store.set(fmt::format("job/host/{}", r),
              hosts[r].id + "\t" + agent::encodeDevices(hosts[r].slots));
  }
  store.set("job/env/MASTER_PORT", std::to_string(job.masterPort));
  store.set("job/env/STRETCH_MAX_RESTARTS", std::to_string(job.maxRestarts));
  if (job.elasticJson)
    store.set("job/env/DEEPSPEED_ELASTICITY_CONFIG", *job.elasticJson);
  store.set("job/ready", "1");
}

JobSettings readJob(comm::Store& store) {
  store.wait({"job/ready"});
  JobSettings job;
  const auto count = std::stoll(store.get("job/argv/count"));
  for (long long i = 0; i < count; ++i)
    job.command.push_back(store.get(fmt::format("job/argv/{}", i)));
  job.masterPort = std::stoi(store.get("job/env/MASTER_PORT"));
  job.maxRestarts = std::stoll(store.get("job/env/STRETCH_MAX_RESTARTS"));
  job.elasticJson = agent::tryGet(store, "job/env/DEEPSPEED_ELASTICITY_CONFIG");
  return job;
}

LaunchHost readLaunchHost(comm::Store& store, std::int64_t nodeRank) {
  const auto text = agent::tryGet(store, fmt::format("job/host/{}", nodeRank));
  if (!text) {
    throw ConfigError(
        ErrorDetail{"--node_rank", std::to_string(nodeRank), "the rank of a host of this launch"});
  }
  const auto tab = text->find('\t');
  LaunchHost host;
  host.id = text->substr(0, tab);
  if (tab != std::string::npos)
    host.slots = agent::decodeDevices(text->substr(tab + 1));
  return host;
}

std::string localAddressTowards(const std::string& peer) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(peer.c_str(), "9", &hints, &found) != 0 || found == nullptr)
    return "127.0.0.1";
  std::string out = "127.0.0.1";
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0) {
    if (::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
      sockaddr_in self{};
      socklen_t len = sizeof(self);
      char text[INET_ADDRSTRLEN] = {};
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0 &&
          ::inet_ntop(AF_INET, &self.sin_addr, text, sizeof(text)) != nullptr)
        out = text;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return out;
}

}  // namespace stretch::cli
