#include "runtime/launcher/slurm_allocation.hpp"

#include <cstdlib>
#include <sstream>
#include <utility>

#include <spdlog/spdlog.h>

#include "runtime/launcher/launch_error.hpp"
#include "runtime/launcher/process.hpp"
#include "runtime/launcher/remote.hpp"
#include "runtime/launcher/worker_command.hpp"

namespace stretch::launcher {

// --launcher slurm runs inside an allocation (salloc, sbatch): the launcher waits only a short
// while for the agents to register, and an srun outside one would queue for an allocation of its
// own. Returns the allocation's compressed node list.
std::string slurmAllocationNodes() {
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* nodes = std::getenv("SLURM_JOB_NODELIST");
  if (nodes == nullptr || *nodes == '\0')
    nodes = std::getenv("SLURM_NODELIST");  // the name before Slurm 16.05
  if (job == nullptr || *job == '\0' || nodes == nullptr || *nodes == '\0') {
    throw LaunchError(ErrorDetail{
        "--launcher", "slurm",
        "to run inside a Slurm allocation (`salloc -N 2 stretch launch --launcher slurm ...` or "
        "an sbatch script): SLURM_JOB_ID and SLURM_JOB_NODELIST are not set"});
  }
  return nodes;
}

// --launcher slurm without a hostfile: the allocation's nodes (`nodes` expanded by `scontrol show
// hostnames`, else by expandSlurmHostlist), each with `slots` slots.
ResourcePool slurmResourcePool(const std::string& nodes, int slots) {
  const int checked = localResourcePool(slots).front().slots;  // 1..kMaxSlotsPerHost
  std::vector<std::string> names;
  if (!findExecutable("scontrol").empty()) {
    const Captured listed = runCaptured({"scontrol", "show", "hostnames", nodes}, "/dev/null");
    std::istringstream lines(listed.out);
    for (std::string line; listed.exit.ok() && std::getline(lines, line);) {
      if (!line.empty())
        names.push_back(line);
    }
  }
  if (names.empty())
    names = expandSlurmHostlist(nodes);
  ResourcePool pool;
  for (auto& name : names) {
    if (!isValidHostName(name))
      throw LaunchError(ErrorDetail{"SLURM_JOB_NODELIST", name, "host names a hostfile accepts"});
    pool.push_back(Host{std::move(name), checked});
  }
  spdlog::info("launch: Slurm allocation {}: {} node(s) with {} slot(s) each", nodes, pool.size(),
               checked);
  return pool;
}

// Slots per node of a Slurm allocation: --num_gpus, else the GPUs Slurm gave each node
// (SLURM_GPUS_ON_NODE), else what this machine counts (1 on CPU).
int slurmSlots(std::optional<int> numGpus, int localSlots) {
  if (numGpus)
    return *numGpus;
  const char* gpus = std::getenv("SLURM_GPUS_ON_NODE");
  if (gpus != nullptr) {
    char* end = nullptr;
    const long n = std::strtol(gpus, &end, 10);
    if (end != gpus && *end == '\0' && n > 0 && n <= kMaxSlotsPerHost)
      return static_cast<int>(n);
  }
  return localSlots;
}

}  // namespace stretch::launcher
