#pragma once
// Replicas over several processes: `mpirun -n K stretch sim SCENARIO --seeds N` (and `stretch
// plan`) give each rank a contiguous block of the replicas and exchange the blocks' results, so
// that every rank holds every replica's result in replica order. Every statistic is computed
// from that ordered list, the same list one process would have, so rank 0 prints the same
// figures to the last digit (the wall times aside).
//
// The transport is abstract (ReplicaGroup): the MPI one lives with the command line
// (cli/mpi_group.hpp), where MPI is initialised; tests use an in-process one. Collective calls
// must be made by every rank in the same order.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/common/error.hpp"

namespace stretch::sim {

class ReplicaGroup {
 public:
  virtual ~ReplicaGroup() = default;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  // Collective: every rank passes its bytes and gets every rank's, in rank order.
  virtual std::vector<std::string> allGather(const std::string& mine) = 0;
};

// Rank `rank`'s block of `total` items: contiguous, rank 0's first, sizes differing by at most
// one (the first total % size ranks get one more).
struct ItemBlock {
  std::int64_t first = 0;
  std::int64_t count = 0;
};
ItemBlock itemBlock(std::int64_t total, int rank, int size) noexcept;

// An error a rank raised while running its block, raised on every rank: the kind and message of
// the lowest failing rank's error (kind() is that error's, "ConfigError" for one).
class ReplicaRankError : public Error {
 public:
  ReplicaRankError(std::string kind, int rank, const std::string& message);
  const char* kind() const noexcept override { return kind_.c_str(); }
  int failedRank() const noexcept { return rank_; }

 private:
  std::string kind_;
  int rank_;
};

// Runs items [0, total) over the group: this rank calls run(first, count) for its block, which
// returns the block's results as bytes; returns every block's bytes in rank order. If `run`
// throws on any rank, every rank throws: a rank's own error rethrown as it is, the others a
// ReplicaRankError naming the lowest failing rank. Collective.
std::vector<std::string> runSplit(
    ReplicaGroup& group, std::int64_t total,
    const std::function<std::string(std::int64_t first, std::int64_t count)>& run);

}  // namespace stretch::sim
