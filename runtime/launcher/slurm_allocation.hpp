#pragma once
// The Slurm allocation a `stretch launch --launcher slurm` runs in (docs/launch.md, "Slurm"): its
// node list, its nodes as the launch's hosts and the slots each has.

#include <optional>
#include <string>

#include "runtime/launcher/hostfile.hpp"

namespace stretch::launcher {

// The allocation's compressed node list (SLURM_JOB_NODELIST, or SLURM_NODELIST before Slurm
// 16.05). Outside an allocation (no SLURM_JOB_ID or no node list): LaunchError naming --launcher
// slurm, since an srun there would queue for an allocation of its own.
std::string slurmAllocationNodes();

// The allocation's nodes (`scontrol show hostnames NODES`, else expandSlurmHostlist), each with
// `slots` slots (checked as a hostfile's are). A node name a hostfile would refuse: LaunchError
// naming SLURM_JOB_NODELIST.
ResourcePool slurmResourcePool(const std::string& nodes, int slots);

// Slots per node: `numGpus` (--num_gpus) when given, else the GPUs Slurm gave each node
// (SLURM_GPUS_ON_NODE, when it is a valid slot count), else `localSlots` (what this machine
// counts).
int slurmSlots(std::optional<int> numGpus, int localSlots);

}  // namespace stretch::launcher
