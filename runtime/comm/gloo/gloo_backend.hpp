#pragma once
// Gloo collectives on CPU memory over TCP (c10d's ProcessGroupGloo, without tensors). This header
// carries no Gloo types so that executables can name the backend without Gloo's headers.
//
// How it works:
//  - Construction is collective: every rank of the group builds its backend with the same
//    BackendInit::store (already prefixed for the group). The ranks publish their TCP addresses
//    under "gloo/..." keys of that store and connect a full mesh (gloo::rendezvous::Context::
//    connectFullMesh) through a gloo TCP device bound to BackendInit::host. Backends of one
//    process on the same host share one device, hence one Gloo I/O thread.
//  - Collectives run on one worker thread per backend, in issue order (the order every rank
//    must use), and complete a CompletionWork. The algorithms are Stretch's own
//    (runtime/comm/collectives/algorithms.hpp: recursive doubling or direct reduce-scatter +
//    all-gather all_reduce, direct all_gather, reduce_scatter and all_to_all, direct or
//    scatter + all-gather broadcast, a dissemination barrier), run over a Channel that this
//    backend implements with Gloo's unbound-buffer send/recv. Every DataType (bf16 included) and
//    every ReduceOp works; all_reduce results are bit-identical on every rank.
//  - Sends and receives are posted from Gloo's I/O thread rather than from the worker: on hosts
//    with fewer cores than threads, Gloo's I/O thread otherwise spins while the worker holds a
//    connection lock, which costs milliseconds per operation.
//  - send/recv are posted at once (not behind queued collectives) and completed by a helper
//    thread, so two ranks may post crossing sends and receives before waiting. A send matches
//    the peer's recv with the same tag; messages between a pair with the same tag arrive in
//    order. The receive buffer must be at least as large as the message (a larger one leaves
//    its tail untouched).
//  - Timeouts: every operation has CollectiveOptions::timeout, else the backend's default,
//    counted from the moment it starts running. A peer that does not take part in time makes
//    the operation fail with CommTimeoutError; a peer whose connection breaks (process killed)
//    makes it fail with CommPeerError. Either way the backend is then broken, as Gloo's context
//    is: its connections are closed (so peers fail fast too), its other pending operations fail
//    at once, and every later operation fails with CommError quoting the first failure. Build a
//    new backend (an elastic restart does). abort() breaks it the same way on purpose.
//  - Zero-count buffers and groups of one complete at once. CUDA buffers throw
//    CommUnsupportedError; shape, root and peer errors throw CommError before anything is sent.
//  - Destruction never waits for a peer: queued and running operations fail with CommError
//    ("backend destroyed") and the connections close.
//
// Thread safety: issue operations from one thread at a time (Backend's contract); Works may be
// polled and waited for from any thread.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/comm/backend.hpp"
#include "runtime/comm/backend_registry.hpp"

namespace stretch::comm::gloo {

class GlooBackend final : public Backend {
 public:
  // Collective: blocks until every rank of the group has connected. Throws CommTimeoutError
  // naming the ranks that did and did not arrive when the mesh is not complete within
  // init.timeout, CommError when the device cannot bind to init.host or Gloo fails otherwise.
  explicit GlooBackend(const BackendInit& init);
  ~GlooBackend() override;
  GlooBackend(const GlooBackend&) = delete;
  GlooBackend& operator=(const GlooBackend&) = delete;

  std::string_view name() const noexcept override { return "gloo"; }
  int rank() const noexcept override;
  int size() const noexcept override;
  Duration defaultTimeout() const noexcept override;
  bool supportsDevice(DeviceType type) const noexcept override { return type == DeviceType::Cpu; }

  // The group's name (BackendInit::groupName, or the sub-group's).
  const std::string& groupName() const noexcept;
  // True once an operation failed with a transport error or timeout (see above).
  bool isBroken() const;

  std::shared_ptr<Work> allReduce(BufferView buffer, ReduceOp op,
                                  const CollectiveOptions& options = {}) override;
  std::shared_ptr<Work> broadcast(BufferView buffer, int root,
                                  const CollectiveOptions& options = {}) override;
  std::shared_ptr<Work> allGather(BufferView input, BufferView output,
                                  const CollectiveOptions& options = {}) override;
  std::shared_ptr<Work> reduceScatter(BufferView input, BufferView output, ReduceOp op,
                                      const CollectiveOptions& options = {}) override;
  std::shared_ptr<Work> allToAll(BufferView input, BufferView output,
                                 const CollectiveOptions& options = {}) override;
  std::shared_ptr<Work> send(BufferView buffer, int peer, int tag = 0,
                             const CollectiveOptions& options = {}) override;
  std::shared_ptr<Work> recv(BufferView buffer, int peer, int tag = 0,
                             const CollectiveOptions& options = {}) override;
  std::shared_ptr<Work> barrier(const CollectiveOptions& options = {}) override;

  // A new Gloo context over the members, rendezvousing under "<groupName>/" of this backend's
  // store and sharing its TCP device. Blocks until every member has joined (this backend's
  // default timeout).
  std::shared_ptr<Backend> createSubgroup(const std::vector<int>& ranks,
                                          const std::string& groupName) override;
  void abort(std::string_view reason) override;

  struct Impl;

 private:
  explicit GlooBackend(std::shared_ptr<Impl> impl);

  std::shared_ptr<Impl> impl_;
};

// Registers the factory under "gloo" (DeviceType::Cpu) in runtime/comm/backend_registry.hpp.
// Idempotent.
void registerGlooBackend();

// The Gloo version this module was compiled against ("0.5.0", from gloo/config.h; Gloo has no
// run-time version query), so that executables need not include Gloo's headers.
std::string glooVersion();

}  // namespace stretch::comm::gloo
