#pragma once
// An NCCL-style communicator as live recovery needs it (runtime/live/device_generations.hpp):
// created from a unique id, revoked, shrunk to its survivors, grown by joiners, aborted. No NCCL
// or CUDA type appears here, so that the generation logic is written and tested once against
// this interface: runtime/comm/nccl implements it over NCCL (registered as "nccl" by
// registerNcclBackend), tests/support/fake_communicator.hpp over threads of one process, with
// the failures and version traps of the real one.
//
// What each NCCL release offers (CommunicatorFeatures, from the loaded library's version and
// capped by what the headers this build was compiled against declare):
//   2.27  ncclCommShrink, with NCCL_SHRINK_ABORT to end in-flight work of the parent first;
//   2.28  ncclCommRevoke: stops in-flight work and keeps the communicator as a parent;
//   2.29  ncclCommGrow: joiners added through a unique id an existing rank makes;
//   2.31  ncclCommDestroy of the parent of an abortive shrink hangs: abort that parent instead.
// Every communicator is non-blocking (ncclConfig_t::blocking = 0) and polled, so that no call
// waits on a dead peer past its timeout or an Interrupt.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/comm/backend.hpp"
#include "runtime/comm/types.hpp"

namespace stretch::comm {

struct CommunicatorFeatures {
  std::string library = "nccl";
  int major = 0;
  int minor = 0;
  int patch = 0;
  bool shrink = false;  // survivors build a smaller communicator (NCCL 2.27)
  bool revoke = false;  // in-flight work stopped, the communicator kept as a parent (2.28)
  bool grow = false;    // joiners added to an existing communicator (2.29)
  // Destroying the parent of an abortive shrink hangs (2.31 and later): abort it instead.
  bool abortParentAfterAbortiveShrink = false;

  // "2.28.9".
  std::string version() const;
  bool operator==(const CommunicatorFeatures&) const = default;
};

// NCCL's features at major.minor.patch (the table above).
CommunicatorFeatures ncclFeatures(int major, int minor, int patch);

// Polled by blocking management calls (init, shrink, grow) every few milliseconds: true ends the
// call with CommAbortedError (the new communicator, if any, is aborted). Live recovery passes
// "a newer generation was published".
using Interrupt = std::function<bool()>;

class Communicator {
 public:
  virtual ~Communicator();

  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  // The collectives over this communicator (shares its state; the same Backend every call).
  // Backend::abort on it is abort() here.
  virtual std::shared_ptr<Backend> backend() = 0;

  // ncclCommGetAsyncError: nullopt while healthy or in progress, else NCCL's message.
  virtual std::optional<std::string> asyncError() = 0;
  // True once abort() ran, here or through the backend (a timeout or an NCCL error aborts it).
  virtual bool aborted() const = 0;

  // Stops in-flight work: its Works fail with CommPeerError quoting `reason`, later operations
  // throw. With features().revoke this is ncclCommRevoke and the communicator stays a parent for
  // shrink; without it the device work stays queued until an abortive shrink (NCCL_SHRINK_ABORT)
  // or abort() ends it. Idempotent; returns at once.
  virtual void revoke(std::string_view reason) = 0;
  // ncclCommAbort: frees the communicator without waiting for any peer; pending Works fail.
  // Idempotent; the communicator can only be destroyed afterwards (its destructor does nothing).
  virtual void abort(std::string_view reason) = 0;
  // ncclCommDestroy: frees it cleanly. Only for a communicator whose work has finished or was
  // revoked, and never for the parent of an abortive shrink when
  // features().abortParentAfterAbortiveShrink (it would hang).
  virtual void destroy() = 0;

  // Collective over the ranks not in `excluded` (ranks of this communicator, ascending, none of
  // them this rank's): a communicator of those ranks, in their order. `abortInFlight` is
  // NCCL_SHRINK_ABORT (every caller passes the same). Requires features().shrink. Throws
  // CommTimeoutError after `timeout`, CommAbortedError when `interrupt` says so, CommError when
  // NCCL fails; this communicator is left as it was (revoked).
  virtual std::unique_ptr<Communicator> shrink(const std::vector<int>& excluded, bool abortInFlight,
                                               Duration timeout, const Interrupt& interrupt) = 0;
  // The unique id joiners need to grow this communicator (ncclCommGetUniqueId), as text that
  // travels through a Store. One existing rank (rank 0) makes it. Requires features().grow.
  virtual std::string growId() = 0;
  // Collective over this communicator's ranks and the joiners (CommunicatorLibrary::join): this
  // communicator grown to `newSize` ranks, the joiners taking ranks size().. newSize-1. The rank
  // that made the id passes it, the others nullopt. Throws as shrink does.
  virtual std::unique_ptr<Communicator> grow(int newSize, const std::optional<std::string>& id,
                                             Duration timeout, const Interrupt& interrupt) = 0;
};

// One process's access to a communicator library.
class CommunicatorLibrary {
 public:
  virtual ~CommunicatorLibrary();

  virtual const CommunicatorFeatures& features() const noexcept = 0;
  // ncclGetUniqueId, as text that travels through a Store.
  virtual std::string uniqueId() = 0;
  // ncclCommInitRankConfig, non-blocking and polled: collective over `size` ranks that pass the
  // same id. Throws as Communicator::shrink does.
  virtual std::unique_ptr<Communicator> init(const std::string& id, int rank, int size,
                                             Duration timeout, const Interrupt& interrupt) = 0;
  // A joiner's side of Communicator::grow (ncclCommGrow with no parent): rank `rank` of
  // `newSize`, from the id an existing rank made. Requires features().grow.
  virtual std::unique_ptr<Communicator> join(const std::string& growId, int rank, int newSize,
                                             Duration timeout, const Interrupt& interrupt) = 0;
  // The communicator behind `backend` when this library made it (the NCCL backend
  // initDistributed built), sharing its state; nullptr for any other backend. Live recovery
  // adopts the job's first group's communicator as the parent of its first generation.
  virtual std::shared_ptr<Communicator> adopt(const std::shared_ptr<Backend>& backend) = 0;
};

// This process's library for `name` ("nccl" once registerNcclBackend ran, for the CUDA device
// this thread has current); nullptr when none is registered under that name.
std::shared_ptr<CommunicatorLibrary> communicatorLibrary(std::string_view name);
// Registers `make` (called at most once per name, on first use). Idempotent per name.
void registerCommunicatorLibrary(std::string name,
                                 std::function<std::shared_ptr<CommunicatorLibrary>()> make);

}  // namespace stretch::comm
