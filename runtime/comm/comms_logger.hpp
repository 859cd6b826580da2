#pragma once
// DeepSpeed's comms logger for Stretch: per operation and message size, the count, total bytes,
// latency (min / avg / max) and algbw/busbw with the nccl-tests definitions
// (runtime/comm/bandwidth.hpp), and a summary table at the end of a run.
//
// Configured from the DeepSpeed config's "comms_logger" block (translated by the caller, since
// this core module does not read configs). As in DeepSpeed, an operation is recorded when the
// logger is enabled and either prof_all is on or the operation's name is in prof_ops.
// Thread-safe.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/comm/types.hpp"

namespace stretch::comm {

struct CommsLoggerOptions {
  bool enabled = false;
  bool verbose = false;  // log every recorded operation as it completes
  bool profAll = true;
  bool debug = false;                // accepted for DeepSpeed compatibility; no caller names
  std::vector<std::string> profOps;  // operation names ("all_reduce") when profAll is off
};

struct CommsRecord {
  OpType op = OpType::AllReduce;
  std::size_t messageBytes = 0;  // bytes as nccl-tests counts them for the op
  int ranks = 1;
  std::int64_t count = 0;
  std::uint64_t totalBytes = 0;
  double minLatencyUs = 0.0;
  double avgLatencyUs = 0.0;
  double maxLatencyUs = 0.0;
  double algbwGBps = 0.0;  // from the average latency
  double busbwGBps = 0.0;
};

class CommsLogger {
 public:
  explicit CommsLogger(CommsLoggerOptions options = {});

  const CommsLoggerOptions& options() const noexcept { return options_; }
  // Whether an operation named `op` is recorded under the current options.
  bool shouldRecord(OpType op) const;

  void record(OpType op, std::size_t messageBytes, int ranks, std::chrono::nanoseconds latency);

  // One row per (op, message size, ranks), ordered by op then size.
  std::vector<CommsRecord> summary() const;
  // The table DeepSpeed's log_summary prints, with our columns; "" when nothing was recorded.
  std::string formatSummary() const;
  void reset();

 private:
  struct Key {
    OpType op;
    std::size_t bytes;
    int ranks;
    auto operator<=>(const Key&) const = default;
  };
  struct Stats {
    std::int64_t count = 0;
    double sumUs = 0.0;
    double minUs = 0.0;
    double maxUs = 0.0;
  };

  CommsLoggerOptions options_;
  mutable std::mutex mutex_;
  std::map<Key, Stats> stats_;
};

// "0 B", "8 B", "1.0 KiB", "256.0 MiB": message sizes in tables.
std::string formatBytes(std::size_t bytes);

}  // namespace stretch::comm
