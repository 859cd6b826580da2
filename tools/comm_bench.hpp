#pragma once
// The communication benchmark behind `stretch bench comm`: an nccl-tests-style sweep of
// collectives over powers-of-two sizes, run by every rank of a Backend.
//
// Method (bench/comm_peer/torch_comm_bench.py implements the same one for torch.distributed, so
// that bench/compare_comm.py compares like with like):
//  - Sizes: minBytes, 2 minBytes, 4 minBytes, ... <= maxBytes (nccl-tests -f 2). "bytes" is the
//    size as nccl-tests counts it (runtime/comm/bandwidth.hpp): the buffer for all_reduce and
//    broadcast, the gathered output for all_gather, the full input for reduce_scatter. A size is
//    rounded down to a whole number of elements (of ranks x elements for all_gather and
//    reduce_scatter), at least one; a size that rounds to the previous row's is skipped.
//  - Per size: `warmup` untimed operations, a barrier, `iters` timed operations (each issued and
//    waited for, as a blocking torch.distributed call is), then one checked operation. The
//    time of a rank is (end - start) / iters on a steady clock; a row's time is the maximum over
//    the ranks (an all_reduce MAX), as nccl-tests reports it.
//  - Timed operations run on zero-filled buffers, so that the in-place all_reduce stays finite
//    for every dtype; the checked operation runs on rank-dependent integers that every dtype
//    represents exactly (also after summing over the ranks). #wrong is the number of output
//    elements differing from the locally computed expectation, summed over the ranks.
//  - broadcast uses root 0; the reductions use Sum.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/comm/backend.hpp"
#include "runtime/comm/types.hpp"

namespace stretch::tools {

using stretch::comm::Backend;
using stretch::comm::DataType;
using stretch::comm::OpType;

// The operations the benchmark measures, in the order a default sweep runs them.
inline constexpr OpType kBenchOps[] = {OpType::AllReduce, OpType::AllGather, OpType::ReduceScatter,
                                       OpType::Broadcast};

// "8", "64K", "256M", "1G" (binary multiples, as nccl-tests reads -b/-e; K/M/G/T in either case,
// optionally followed by "B" or "iB"). nullopt for anything else, zero or overflow.
std::optional<std::uint64_t> parseByteSize(std::string_view text) noexcept;
// 65536 -> "64K", 3 -> "3", 1536 -> "1536": the shortest exact form parseByteSize reads back.
std::string formatByteSize(std::uint64_t bytes);

// minBytes, 2 minBytes, ... while <= maxBytes. Empty when minBytes is 0 or above maxBytes.
std::vector<std::uint64_t> sweepSizes(std::uint64_t minBytes, std::uint64_t maxBytes);

// The bytes `op` really moves for a requested `size` on `ranks` ranks of `dtype` (see above).
std::uint64_t opBytes(OpType op, std::uint64_t size, int ranks, DataType dtype) noexcept;

struct IterationPlan {
  int warmup = 5;
  int iters = 20;
};
// nccl-tests' -w 5 -n 20, reduced for large sizes to keep a sweep short: at most 512 MiB timed
// and 128 MiB of warm-up traffic per row (at least 2 timed iterations and 1 warm-up), so 20 and
// 5 up to 16 MiB, 2 and 1 at 256 MiB. Explicit values apply to every size unchanged.
IterationPlan iterationPlan(std::uint64_t bytes, std::optional<int> warmup,
                            std::optional<int> iters) noexcept;

struct SweepOptions {
  std::vector<OpType> ops{std::begin(kBenchOps), std::end(kBenchOps)};
  std::uint64_t minBytes = 8;
  std::uint64_t maxBytes = 256ull << 20;
  DataType dtype = DataType::Float32;
  std::optional<int> warmup;  // nullopt: iterationPlan's default
  std::optional<int> iters;
  // The clock the timed operations are measured with (this rank's); empty: std::steady_clock.
  // The simulated sweep (sim_comm_bench.hpp) passes each rank's simulated clock.
  std::function<std::chrono::nanoseconds()> clock;
};

// One result line, identical on every rank once the sweep has reduced it.
struct BenchRow {
  OpType op = OpType::AllReduce;
  int ranks = 0;
  std::uint64_t bytes = 0;
  double timeUs = 0.0;  // average per operation, maximum over the ranks
  double algbwGBps = 0.0;
  double busbwGBps = 0.0;
  std::int64_t wrong = 0;  // summed over the ranks
};

// {"op", "ranks", "bytes", "time_us", "algbw_gbps", "busbw_gbps", "wrong"}.
nlohmann::ordered_json toJson(const BenchRow& row);
// The inverse of toJson; throws stretch::Error naming the field when `json` is not such a row.
BenchRow rowFromJson(const nlohmann::json& json);

// The integer the checked operation puts at element `index` of `rank`'s input: in [1, modulus].
constexpr std::int64_t inputValue(int rank, std::uint64_t index, std::int64_t modulus) noexcept {
  return static_cast<std::int64_t>((static_cast<std::uint64_t>(rank) * 5u + index) %
                                   static_cast<std::uint64_t>(modulus)) +
         1;
}
// The largest modulus whose values, summed over `ranks` ranks, `dtype` holds exactly (capped at
// 61, at least 1).
std::int64_t inputModulus(DataType dtype, int ranks) noexcept;

// Runs the sweep on this rank. Every rank of `backend` calls it with the same options, from one
// thread per rank; it blocks until the sweep is done. `onRow` is called after each row with the
// reduced row (on every rank). Throws the backend's CommError on a failed operation and
// ConfigError when `options` cannot be run (no sizes, a non-CPU backend).
std::vector<BenchRow> runSweep(Backend& backend, const SweepOptions& options,
                               const std::function<void(const BenchRow&)>& onRow = {});

}  // namespace stretch::tools
