#pragma once
// DeviceGenerations: one worker's device communicators (NCCL) across live generations, over the
// comm::Communicator interface, so that the same logic runs on NCCL and, in tests, on
// tests/support/fake_communicator.hpp.
//
// A worker holds at most one communicator: the one of the last generation it trained in. When
// it enters generation N (enter(), collective over N's members, beside the generation's Gloo
// group), through N's group store:
//   device/held/<rank>  each member says which generation's communicator it holds and its rank
//                       and size there ("GENERATION RANK SIZE"; "0": none; "aborted": an abort
//                       took it, so its node gives no survivor);
//   device/plan         rank 0 reads them, lays out the parent from them (no record needed: the
//                       launch's own group has none), plans (device_plan.hpp: shrink, shrink and
//                       grow, or a new unique id) and publishes the plan;
//   device/grow_id      on ShrinkGrow, rank 0 publishes the id joiners grow in with, after the
//                       survivors shrank.
// Then survivors shrink the parent (revoked, or abortively before 2.28) and dispose of it (abort
// after an abortive shrink on 2.31+, where destroying it hangs; destroy otherwise), and grow;
// joiners abort whatever they hold and join or init. Rank 0 logs the path the library's version
// chose, once per process (and again only when a later plan takes another path).
//
// The Backend enter() returns is the generation's device backend. Its abort() (Engine::
// abandonStep, the supersession watch: ProcessGroup::abort) revokes the communicator instead of
// aborting it, so that it stays the parent of the next generation; with a library that cannot
// revoke, pending Works fail at once and the device work waits for the abortive shrink.
//
// Every rank of a node aborts together: a rank whose communicator was aborted (an NCCL error, a
// timeout) publishes live/device_abort/<N>/<NODE> in the agent's store, and poll() aborts the
// communicators of the node's other ranks when it sees it. A node with one rank aborted and
// another shrinking would hang the shrink on the dead intra-node peer.
//
// Not thread-safe except poll() and supersede(), which the supersession watch calls from its
// own thread while the worker is blocked in an operation.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/comm/backend.hpp"
#include "runtime/comm/communicator.hpp"
#include "runtime/comm/store.hpp"
#include "runtime/live/device_plan.hpp"
#include "runtime/live/generation.hpp"

namespace stretch::live {

namespace live_keys {
// Set by a rank of `nodeId` whose communicator of generation `generation` was aborted.
std::string deviceAbort(std::uint64_t generation, const std::string& nodeId);
}  // namespace live_keys

class DeviceGenerations {
 public:
  DeviceGenerations(std::shared_ptr<comm::CommunicatorLibrary> library, std::string nodeId,
                    std::int64_t localRank);
  // Aborts the communicator still held (never destroys it: a peer may be dead).
  ~DeviceGenerations();
  DeviceGenerations(const DeviceGenerations&) = delete;
  DeviceGenerations& operator=(const DeviceGenerations&) = delete;

  // The communicator behind `backend` (the job's first group, built by initDistributed) becomes
  // the one this worker holds for `generation`, when the library made it
  // (CommunicatorLibrary::adopt). Returns the backend to serve the group in `backend`'s place,
  // whose abort() revokes (as enter()'s does), so that leaving the group keeps the
  // communicator a parent; nullptr when the library did not make it (the first failure then
  // takes the Init path).
  std::shared_ptr<comm::Backend> adopt(std::uint64_t generation,
                                       const std::shared_ptr<comm::Backend>& backend);

  // Collective over `record`'s members (this worker is one; a donor calls nothing): builds the
  // generation's communicator as above and returns its device backend. `group` is the
  // generation's group store (live/pg/<N>/, the prefix the Gloo group uses too), `root` the
  // agent's store (a node-wide abort, poll()). Throws CommTimeoutError after `timeout`,
  // CommAbortedError once `interrupt` says so, CommError when a management call fails: the
  // caller waits for the next generation, this worker then holding nothing.
  std::shared_ptr<comm::Backend> enter(const LiveGeneration& record, comm::Store& group,
                                       comm::Store& root, comm::Duration timeout,
                                       const comm::Interrupt& interrupt);

  // The generation whose communicator this worker holds; 0 when none (or it was aborted).
  std::uint64_t held() const;
  // The plan of the last enter() (tests, logs).
  std::optional<DevicePlan> lastPlan() const;

  // Revokes the held communicator (ncclCommRevoke; without revoke, its pending Works fail and
  // the next plan shrinks abortively). Idempotent; any thread.
  void supersede(std::string_view reason);
  // For the supersession watch, every few tens of milliseconds, any thread: publishes this
  // node's abort when the held communicator was aborted, and aborts it when another rank of the
  // node published one for its generation. One store check per call.
  void poll(comm::Store& root);

 private:
  class Held;
  std::shared_ptr<Held> current() const;
  // Its generation; 0 for none or an aborted one.
  static std::uint64_t generationOf(const std::shared_ptr<Held>& held);
  // Aborts the held communicator and lets go of it (enter() failing or leaving it, adopt(), the
  // destructor): nothing is left for poll() to publish.
  void dropHeld(std::string_view reason);
  // Lets go of a shrunk parent, then aborts it (`abort`: after an abortive shrink on 2.31+) or
  // destroys it.
  void disposeParent(const std::shared_ptr<Held>& parent, bool abort, const std::string& what);
  std::shared_ptr<comm::CommunicatorLibrary> library_;
  std::string nodeId_;
  std::int64_t localRank_;
  mutable std::mutex mutex_;
  std::shared_ptr<Held> held_;
  std::optional<DevicePlan> lastPlan_;
  std::optional<DevicePath> loggedPath_;
};

}  // namespace stretch::live
