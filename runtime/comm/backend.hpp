#pragma once
// The collective-communication interface every backend implements (Gloo, NCCL, in-process
// threads, the simulator). Modelled on c10d's Backend, without any tensor type: operations take
// non-owning BufferViews.
//
// Contract, for every implementation:
//  - Collectives must be issued in the same order on every rank of the backend; operations are
//    asynchronous and return a Work; a backend runs its operations in issue order.
//  - Every operation has a timeout (CollectiveOptions::timeout, else defaultTimeout()). A peer
//    that does not take part within it makes the operation fail with CommTimeoutError; a peer
//    that dies makes it fail with CommPeerError or CommTimeoutError, never hang.
//  - Buffers: allReduce and broadcast work in place. allGather: output.count ==
//    input.count * size(), rank r's input lands at output[r * input.count]. reduceScatter:
//    input.count == output.count * size(), rank r gets the reduction of block r. allToAll:
//    input.count == output.count, divisible by size(); block j of rank i's input lands in
//    block i of rank j's output. Shape mismatches throw CommError before anything is sent.
//  - Operations a backend lacks throw CommUnsupportedError naming the backend and the operation.
//  - Thread safety: issue operations from one thread at a time per backend (as c10d does).

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/comm/types.hpp"
#include "runtime/comm/work.hpp"

namespace stretch::comm {

struct CollectiveOptions {
  std::optional<Duration> timeout;  // nullopt: the backend's defaultTimeout()
};

class Backend {
 public:
  virtual ~Backend();

  // "gloo", "nccl", "in_process", "sim".
  virtual std::string_view name() const noexcept = 0;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  virtual Duration defaultTimeout() const noexcept = 0;
  // Devices whose memory this backend reads and writes directly.
  virtual bool supportsDevice(DeviceType type) const noexcept = 0;

  virtual std::shared_ptr<Work> allReduce(BufferView buffer, ReduceOp op,
                                          const CollectiveOptions& options = {});
  virtual std::shared_ptr<Work> broadcast(BufferView buffer, int root,
                                          const CollectiveOptions& options = {});
  virtual std::shared_ptr<Work> allGather(BufferView input, BufferView output,
                                          const CollectiveOptions& options = {});
  virtual std::shared_ptr<Work> reduceScatter(BufferView input, BufferView output, ReduceOp op,
                                              const CollectiveOptions& options = {});
  virtual std::shared_ptr<Work> allToAll(BufferView input, BufferView output,
                                         const CollectiveOptions& options = {});
  // Point to point. A send to `peer` with `tag` matches the recv from this rank with the same
  // tag; messages between a pair with the same tag arrive in order.
  virtual std::shared_ptr<Work> send(BufferView buffer, int peer, int tag = 0,
                                     const CollectiveOptions& options = {});
  virtual std::shared_ptr<Work> recv(BufferView buffer, int peer, int tag = 0,
                                     const CollectiveOptions& options = {});
  virtual std::shared_ptr<Work> barrier(const CollectiveOptions& options = {});

  // Leaves the group at once, without waiting for any peer: every pending operation of this rank
  // fails with CommError quoting `reason`, later ones fail too, and the connections close, so
  // peers waiting on this rank fail fast even while the backend object lives on (live recovery
  // leaves a generation this way). A second call does nothing. Backends without connections
  // (in-process, simulated) keep this no-op.
  virtual void abort(std::string_view reason);

  // A backend over the members `ranks` (ranks of this backend, ascending, containing rank()),
  // named `groupName` (unique per parent, identical on every member). Called by every member
  // and only by members; ProcessGroup::newGroup does the bookkeeping.
  virtual std::shared_ptr<Backend> createSubgroup(const std::vector<int>& ranks,
                                                  const std::string& groupName);

 protected:
  Duration timeoutOf(const CollectiveOptions& options) const noexcept {
    return options.timeout.value_or(defaultTimeout());
  }
  // "gloo all_reduce of 1024 x fp32 on rank 3 of 8".
  std::string describe(OpType op, const BufferView* buffer = nullptr) const;
  [[noreturn]] void throwUnsupported(OpType op, std::string_view why = {}) const;
  [[noreturn]] void throwUnsupportedSubgroups() const;

  // Shape and argument checks shared by every backend; throw CommError naming the operation.
  void checkBuffer(OpType op, const BufferView& buffer, std::string_view role) const;
  void checkRoot(OpType op, int root) const;
  void checkPeer(OpType op, int peer) const;
  void checkAllGather(const BufferView& input, const BufferView& output) const;
  void checkReduceScatter(const BufferView& input, const BufferView& output) const;
  void checkAllToAll(const BufferView& input, const BufferView& output) const;
};

}  // namespace stretch::comm
