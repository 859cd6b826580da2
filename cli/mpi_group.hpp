#pragma once
// `mpirun -n K stretch sim|plan ... --seeds N`: the MPI world as a sim::ReplicaGroup, so the
// replicas are split over the K processes and rank 0 prints the result one process would.
// Built with MPI when CMake finds it (Debian: libopenmpi-dev; `stretch report` says); without
// it, a start by mpirun with more than one rank is an error instead of K copies of the same run.

#include <memory>
#include <string>

#include "sim/replica_group.hpp"

namespace stretch::cli {

// The MPI world when this process was started by an MPI launcher with more than one rank
// (OpenMPI's OMPI_COMM_WORLD_SIZE, PMI's PMI_SIZE, PMIx's PMIX_SIZE... in the environment),
// initialised here and finalised when the group is destroyed; null when not started so or with
// one rank. Throws ConfigError naming `command` when started so by a build without MPI.
std::unique_ptr<sim::ReplicaGroup> joinMpiWorld(const std::string& command);

}  // namespace stretch::cli
