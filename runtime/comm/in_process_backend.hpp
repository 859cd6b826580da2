#pragma once
// A Backend whose ranks are threads of one process: the reference implementation of the
// Backend contract, used by unit tests (contract suite, ProcessGroup, initDistributed) and by
// the simulator's functional mode, where small buffers are really reduced across in-process
// ranks.
//
// Operations run synchronously on the calling thread: a collective returns once every rank of
// the world has issued it and the result is in place, so the Work it returns is already
// complete (or failed). Sends are eager (copied into the receiver's mailbox), so a pair of ranks
// may send to each other before receiving. Reductions happen in rank order, so every rank gets
// bit-identical results. A rank that does not join a collective within the timeout makes the
// others fail with CommTimeoutError and poisons the world: every later operation fails at once,
// as a real backend's broken communicator would. Ranks calling different collectives at the
// same point fail with CommError naming both.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/backend.hpp"

namespace stretch::comm {

class InProcessWorld {
 public:
  explicit InProcessWorld(int size, Duration timeout = kDefaultTimeout);
  ~InProcessWorld();
  InProcessWorld(const InProcessWorld&) = delete;
  InProcessWorld& operator=(const InProcessWorld&) = delete;

  int size() const noexcept;
  // The backend of `rank`; each rank's backend is created once and shared.
  std::shared_ptr<Backend> backend(int rank);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// Runs body(rank) for ranks 0..ranks-1, each on its own thread (as an InProcessWorld's or a
// simulated world's ranks run), returns when all have finished, then rethrows the lowest rank's
// exception, if any.
void runRankThreads(int ranks, const std::function<void(int rank)>& body);

}  // namespace stretch::comm
