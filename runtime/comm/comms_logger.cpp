#include "runtime/comm/comms_logger.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runtime/comm/bandwidth.hpp"

namespace stretch::comm {

CommsLogger::CommsLogger(CommsLoggerOptions options) : options_(std::move(options)) {}

bool CommsLogger::shouldRecord(OpType op) const {
  if (!options_.enabled)
    return false;
  if (options_.profAll)
    return true;
  const std::string_view name = toString(op);
  return std::find(options_.profOps.begin(), options_.profOps.end(), name) !=
         options_.profOps.end();
}

void CommsLogger::record(OpType op, std::size_t messageBytes, int ranks,
                         std::chrono::nanoseconds latency) {
  const double us = static_cast<double>(latency.count()) / 1000.0;
  {
    std::lock_guard lock(mutex_);
    Stats& s = stats_[Key{op, messageBytes, ranks}];
    if (s.count == 0) {
      s.minUs = us;
      s.maxUs = us;
    } else {
      s.minUs = std::min(s.minUs, us);
      s.maxUs = std::max(s.maxUs, us);
    }
    ++s.count;
    s.sumUs += us;
  }
  if (options_.verbose) {
    const Bandwidth bw = computeBandwidth(op, messageBytes, us / 1e6, ranks);
    spdlog::info(
        "comm op: {} | time (ms): {:.3f} | msg size: {} | algbw (GB/s): {:.2f} | "
        "busbw (GB/s): {:.2f}",
        toString(op), us / 1000.0, formatBytes(messageBytes), bw.algbwGBps, bw.busbwGBps);
  }
}

std::vector<CommsRecord> CommsLogger::summary() const {
  std::lock_guard lock(mutex_);
  std::vector<CommsRecord> out;
  out.reserve(stats_.size());
  for (const auto& [key, s] : stats_) {
    CommsRecord r;
    r.op = key.op;
    r.messageBytes = key.bytes;
    r.ranks = key.ranks;
    r.count = s.count;
    r.totalBytes = static_cast<std::uint64_t>(key.bytes) * static_cast<std::uint64_t>(s.count);
    r.minLatencyUs = s.minUs;
    r.maxLatencyUs = s.maxUs;
    r.avgLatencyUs = s.count > 0 ? s.sumUs / static_cast<double>(s.count) : 0.0;
    const Bandwidth bw = computeBandwidth(key.op, key.bytes, r.avgLatencyUs / 1e6, key.ranks);
    r.algbwGBps = bw.algbwGBps;
    r.busbwGBps = bw.busbwGBps;
    out.push_back(r);
  }
  return out;
}

std::string CommsLogger::formatSummary() const {
  const auto rows = summary();
  if (rows.empty())
    return {};
  std::string out =
      fmt::format("{:<15} {:>6} {:>12} {:>8} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}\n",
                  "Comm. Op", "Ranks", "Message Size", "Count", "Total Bytes", "Min Lat(us)",
                  "Avg Lat(us)", "Max Lat(us)", "algbw GB/s", "busbw GB/s");
  for (const auto& r : rows) {
    out += fmt::format(
        "{:<15} {:>6} {:>12} {:>8} {:>12} {:>12.1f} {:>12.1f} {:>12.1f} {:>10.3f} {:>10.3f}\n",
        toString(r.op), r.ranks, formatBytes(r.messageBytes), r.count,
        formatBytes(static_cast<std::size_t>(r.totalBytes)), r.minLatencyUs, r.avgLatencyUs,
        r.maxLatencyUs, r.algbwGBps, r.busbwGBps);
  }
  return out;
}

void CommsLogger::reset() {
  std::lock_guard lock(mutex_);
  stats_.clear();
}

std::string formatBytes(std::size_t bytes) {
  static constexpr std::array<const char*, 6> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024)
    return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

}  // namespace stretch::comm
