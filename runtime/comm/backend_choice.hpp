#pragma once
// Which backends carry a job's buffers: one pure function of the device the engine trains on,
// the devices this process sees, the job's ranks on this node, the backends this build has and
// the user's override (STRETCH_COMM_BACKEND), so that the rule is unit-tested on any machine and
// logged once at start (docs/comm.md, "Choosing the backend").
//
//  - CPU buffers always go to Gloo: a CPU job's gradients, and a CUDA job's flags and metadata.
//  - CUDA buffers go to NCCL when this build has it and every rank on the node has a device of
//    its own; otherwise (ranks sharing a device, the only way to test elasticity on a one-GPU
//    machine, or a build without NCCL) to Gloo, staged through pinned host memory, the way
//    PyTorch's Gloo process group accepts CUDA tensors (runtime/comm/staged_backend.hpp).
//  - STRETCH_COMM_BACKEND=gloo forces the staged path; =nccl insists on NCCL and is an error
//    where NCCL cannot run; =auto or unset applies the rule above.

#include <string>
#include <string_view>
#include <vector>

#include "runtime/comm/types.hpp"

namespace stretch::comm {

class Store;

inline constexpr std::string_view kCommBackendEnv = "STRETCH_COMM_BACKEND";

struct CommChoiceInput {
  DeviceType device = DeviceType::Cpu;  // where the engine's buffers live
  int devicesVisible = 0;               // devices of that type this process sees (CUDA)
  int localRanks = 1;                   // the job's ranks on this node (LOCAL_WORLD_SIZE)
  int worldSize = 1;                    // the job's ranks in all
  std::vector<std::string> built;       // registered backend names ("gloo", "nccl", ...)
  std::string override;                 // STRETCH_COMM_BACKEND's value; "" when unset
};

struct CommChoice {
  std::string hostBackend = "gloo";  // serves CPU buffers
  std::string deviceBackend;         // serves device buffers natively ("nccl"); "" otherwise
  bool staged = false;               // device buffers go through pinned host memory to Gloo
  bool forced = false;               // STRETCH_COMM_BACKEND named the choice: no fallback
  std::string summary;               // "comm: nccl, 8 ranks on 8 devices", logged once at start
};

// Throws ConfigError naming STRETCH_COMM_BACKEND, its value and what was expected for an
// unknown value or one that cannot run here (nccl without NCCL in the build, nccl with more
// ranks than devices, nccl for a CPU job), and for a multi-rank job in a build without Gloo.
CommChoice chooseCommBackend(const CommChoiceInput& input);

// Whether two ranks of a group train on the same physical device, which chooseCommBackend cannot
// see: it counts the ranks of one node, but `stretch launch --launcher local` runs several
// "nodes" on one machine, whose ranks then each see one device of their own and share it (NCCL
// refuses such a communicator: "Duplicate GPU detected"). Every rank gives `identity` (its
// device's UUID); collective over `store` (a prefix of this group's own): each rank makes
// three requests and waits once, whatever the group's size, and every rank gets the same answer.
// Throws StoreTimeoutError when a rank does not take part within `timeout`.
bool anyDeviceShared(Store& store, int rank, int size, const std::string& identity,
                     Duration timeout);

}  // namespace stretch::comm
