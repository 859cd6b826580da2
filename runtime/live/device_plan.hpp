#pragma once
// How a live generation's device communicator (NCCL) comes to be: from the one its survivors
// hold, shrunk and perhaps grown, or from a new unique id. Pure: the plan follows from the
// library's features, the generation record and which communicator each member holds, so that
// rank 0 of the generation decides and publishes it (device_generations.hpp) and tests check
// every case without a GPU.
//
// The paths:
//   Shrink      the members are a prefix of survivors that hold the parent generation's
//               communicator, in the parent's rank order: they shrink it, leaving out the
//               parent's other ranks (dead, or left out of this generation).
//   ShrinkGrow  as Shrink, then the other members (replacements, a new node's workers) join the
//               shrunk communicator through ncclCommGrow, taking the ranks after the survivors'.
//   Init        every member builds a new communicator from a new unique id (and first aborts
//               the one it holds, if any): the first generation, a library without shrink
//               (before 2.27), joiners without grow (before 2.29), or members whose order does
//               not keep the parent's.
// A node one of whose members lost its communicator to an abort (an NCCL error, a timeout) gives
// no survivor: every rank of a node aborts together, for a rank shrinking beside an aborted peer
// on its node would hang. (A replacement started on the node holds nothing but aborted nothing:
// its node-mates still shrink.)
// Survivors whose communicator was revoked shrink it as it is; without revoke (2.27) the shrink
// is abortive (NCCL_SHRINK_ABORT ends the parent's in-flight work first).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/comm/communicator.hpp"
#include "runtime/live/generation.hpp"

namespace stretch::live {

enum class DevicePath { Init, Shrink, ShrinkGrow };

struct DevicePlan {
  DevicePath path = DevicePath::Init;
  // Shrink, ShrinkGrow: the live generation whose communicator the survivors hold.
  std::uint64_t parent = 0;
  // Shrink, ShrinkGrow: the parent's ranks left out (ascending).
  std::vector<int> excluded;
  // Ranks 0 .. survivors-1 of the generation come from the parent; the others join or init.
  int survivors = 0;
  // NCCL_SHRINK_ABORT (the library cannot revoke).
  bool abortiveShrink = false;
  // After an abortive shrink on 2.31+: the parent is aborted, not destroyed.
  bool abortParent = false;
  // Init: the new unique id (made by rank 0 while publishing the plan).
  std::string uniqueId;
  // Why this path, for the log: "NCCL 2.28.9: 2 survivors shrink generation 3's communicator
  // (ncclCommShrink, leaving out rank 1), 1 joiner re-initialises: ncclCommGrow needs 2.29".
  std::string reason;
  bool operator==(const DevicePlan&) const = default;
};

std::string_view toString(DevicePath path) noexcept;

// The number a launch's own group is held under (it has no live record): above every live
// generation, one per start of the job (the agent's generation, STRETCH_GENERATION), so that it
// is never 0 ("nothing held") and its node-wide abort key never meets another start's.
inline constexpr std::uint64_t kLaunchGroupBase = std::uint64_t{1} << 48;
constexpr std::uint64_t launchGroupGeneration(std::uint64_t agentGeneration) {
  return kLaunchGroupBase + agentGeneration;
}
// "generation 4's communicator", or for a launch's group "the launch's communicator (start 3)".
std::string communicatorName(std::uint64_t generation);

// The plan for `next`'s members. `held[r]` is the live generation whose communicator rank r of
// `next` holds (0: none, or it was aborted); `parent` is the record of generation held[0] (the
// communicator rank 0 holds is the only candidate parent: rank 0 is a survivor whenever any
// path but Init is taken), nullopt when held[0] is 0. `aborted[r]`: rank r's communicator was
// aborted (its held[r] is then 0); empty for none. Throws InternalError when held.size() (or a
// non-empty aborted.size()) is not next.worldSize or parent is not generation held[0]. The
// uniqueId is left empty.
DevicePlan planDeviceGeneration(const comm::CommunicatorFeatures& features,
                                const std::optional<LiveGeneration>& parent,
                                const LiveGeneration& next, const std::vector<std::uint64_t>& held,
                                const std::vector<bool>& aborted = {});

// One line: "PATH PARENT SURVIVORS ABORTIVE ABORT_PARENT EXCLUDED(comma list or -) UNIQUE_ID(or
// -)", then the reason on a line of its own. Throws comm::CommError naming the text when
// parseDevicePlan cannot read it.
std::string formatDevicePlan(const DevicePlan& plan);
DevicePlan parseDevicePlan(const std::string& text);

}  // namespace stretch::live
