#pragma once
// A fake NCCL for tests: comm::CommunicatorLibrary and comm::Communicator over threads of one
// process, behaving as NCCL does where live recovery depends on it, with the features of the
// version it is given (comm::ncclFeatures), so that the generation logic
// (runtime/live/device_generations.hpp) is tested on CPU for every path a version takes.
//
// The world: a FakeNccl is the network; each worker ("process") gets its own library
// (library(name)). Communicators are keyed by their unique id; a collective's buffers are host
// memory whatever BufferView::device says (as TorchDeviceStaging's test mode).
//
// What it models:
//  - init, shrink, grow and join are collective: each blocks until every rank it needs arrived,
//    polling the Interrupt and the timeout (CommAbortedError, CommTimeoutError). Shrink needs
//    every non-excluded rank, grow every existing rank and every joiner.
//  - The backend: allReduce (Sum, Avg, Min, Max, Product on fp32, fp64, int32, int64), broadcast,
//    barrier; other operations throw CommUnsupportedError. A collective completes when every
//    rank issued it; until then its Work waits. A rank of a killed process never takes part:
//    its peers' Works wait until revoke(), abort() or the timeout (CommTimeoutError), as a real
//    collective on a dead peer does.
//  - revoke(): pending and later Works fail with CommPeerError; with features.revoke the
//    communicator can still be shrunk non-abortively; without it, only an abortive shrink
//    (abortInFlight) or abort() ends the device work: shrinking such a communicator without
//    abortInFlight while a Work of it is pending records the trap "shrink of a communicator
//    with work in flight, without NCCL_SHRINK_ABORT" and hangs until the timeout.
//  - Calls the version does not have (shrink before 2.27, revoke's ncclCommRevoke before 2.28,
//    growId/grow/join before 2.29) throw CommUnsupportedError and record a trap.
//  - destroy() of the parent of an abortive shrink on 2.31+ records the trap "destroy of the
//    parent of an abortive shrink (hangs on NCCL 2.31+)" and throws CommTimeoutError instead
//    of hanging the test; destroy() with a collective still pending on it records a trap too.
//  - kill(process): every communicator of that process stops taking part (its threads may go
//    on calling; their calls throw CommPeerError); its peers see ncclRemoteError through
//    asyncError() only after they revoke or abort, as NCCL reports nothing for a silent peer.
//  - The backend is named "nccl" (logs read as with the real one); its default timeout is the
//    timeout of the call that made the communicator. A Work waited on past its own timeout
//    aborts the communicator, as NCCL's watchdog does: every pending Work of that rank fails
//    with CommTimeoutError. A wait() given a shorter timeout only throws CommTimeoutError.
// Thread-safe: every rank runs on a thread of its own.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/communicator.hpp"

namespace stretch::test {

class FakeNccl {
 public:
  explicit FakeNccl(comm::CommunicatorFeatures features);
  ~FakeNccl();
  FakeNccl(const FakeNccl&) = delete;
  FakeNccl& operator=(const FakeNccl&) = delete;

  const comm::CommunicatorFeatures& features() const noexcept;
  // The library of the process `process` (the same object for the same name).
  std::shared_ptr<comm::CommunicatorLibrary> library(const std::string& process);
  // The process dies: its communicators stop taking part.
  void kill(const std::string& process);

  // Misuse of NCCL the fake caught ("destroy of the parent of an abortive shrink (hangs on NCCL
  // 2.31+)", ...), each with the process and the communicator's rank; empty when none.
  std::vector<std::string> traps() const;
  // Communicators neither aborted nor destroyed (per process, "" for all); a killed process
  // holds none.
  int liveCommunicators(const std::string& process = "") const;
  // How many communicators were made by init, shrink, grow and join (counts of each), and how
  // many revoke, abort and destroy calls took effect (not a repeated call, nor a destroy after
  // an abort; the watchdog's abort counts).
  struct Counts {
    int init = 0;
    int shrink = 0;
    int grow = 0;
    int join = 0;
    int revoke = 0;
    int abort = 0;
    int destroy = 0;
  };
  Counts counts() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace stretch::test
