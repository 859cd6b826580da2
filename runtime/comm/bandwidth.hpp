#pragma once
// Algorithm and bus bandwidth with nccl-tests' definitions (doc/PERFORMANCE.md there). The one
// place these factors live: the comm benchmark, the comms logger, the simulator's cost model
// and docs/comm.md all use this header, so measured and simulated figures compare directly.
//
//   algbw = bytes / time, where bytes is the size of the operation as nccl-tests counts it:
//           the buffer for all_reduce and broadcast, the full (gathered) output for all_gather,
//           the full input for reduce_scatter, the full send buffer for all_to_all.
//   busbw = algbw * factor(n):
//           all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n;
//           broadcast, send/recv 1; barrier 0 (no payload).
// Bandwidths are in GB/s = 1e9 bytes per second, as nccl-tests prints them.

#include <cstddef>

#include "runtime/comm/types.hpp"

namespace stretch::comm {

// busbw / algbw for `op` on `ranks` ranks (1 rank: 0 for the collectives, which move nothing).
constexpr double busBandwidthFactor(OpType op, int ranks) noexcept {
  if (ranks <= 0)
    return 0.0;
  const double n = ranks;
  switch (op) {
    case OpType::AllReduce:
      return 2.0 * (n - 1.0) / n;
    case OpType::AllGather:
    case OpType::ReduceScatter:
    case OpType::AllToAll:
      return (n - 1.0) / n;
    case OpType::Broadcast:
    case OpType::Send:
    case OpType::Recv:
      return 1.0;
    case OpType::Barrier:
      return 0.0;
  }
  return 0.0;
}

struct Bandwidth {
  double algbwGBps = 0.0;
  double busbwGBps = 0.0;
};

// `bytes` as nccl-tests counts them (see above); `seconds` > 0.
constexpr Bandwidth computeBandwidth(OpType op, std::size_t bytes, double seconds,
                                     int ranks) noexcept {
  if (seconds <= 0.0)
    return {};
  const double algbw = static_cast<double>(bytes) / seconds / 1e9;
  return {algbw, algbw * busBandwidthFactor(op, ranks)};
}

}  // namespace stretch::comm
