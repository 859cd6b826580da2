#pragma once
// The elastic agent's event log: one JSON object per line (JSON Lines), so a run can be replayed,
// plotted or compared with a simulated one. Every record has "time_ns" and "event"; the other
// keys appear when they apply:
//   {"time_ns":1500000000,"event":"start_workers","generation":2,"world_size":8,
//    "batch":{"train_batch_size":96,"train_micro_batch_size_per_gpu":4,
//             "gradient_accumulation_steps":3},
//    "restart_count":1,"resume_step":120,"recovery":"live","exit_code":1,"nodes":["n0","n1"],
//    "reason":"..."}
// Keys come in that order. Strings are written by stretch::jsonQuote (runtime/common/strings.hpp:
// RFC 8259 escapes, bytes that are not valid UTF-8 become U+FFFD), so any JSON parser reads every
// line. The encoder is written by hand: runtime/agent may not use the JSON library (layering).

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/agent/clock.hpp"
#include "runtime/agent/live_plan.hpp"
#include "runtime/agent/state_machine.hpp"
#include "runtime/common/strings.hpp"
#include "runtime/config/batch.hpp"

namespace stretch::agent {

struct EventRecord {
  Time time{0};
  // start_workers, stop_workers, live_plan, wait, finish, fail, or a LogEvent's name
  // (node_joined, ...).
  std::string event;
  std::optional<std::uint64_t> generation;
  std::optional<std::int64_t> worldSize;
  std::optional<config::BatchTriple> batch;
  std::optional<std::int64_t> restartCount;
  // The step the workers resume from (the latest checkpoint), when the caller knows it.
  std::optional<std::int64_t> resumeStep;
  // How a start after a stop recovers, when the caller knows: "live" (from the survivors' last
  // completed step) or "checkpoint" (from the latest checkpoint). Omitted when empty.
  std::string recovery;
  std::optional<int> exitCode;
  std::vector<std::string> nodes;  // node ids by node rank (start_workers)
  std::string reason;              // omitted when empty

  bool operator==(const EventRecord&) const = default;
};

// The record of an action returned by AgentStateMachine::handle at `now`.
EventRecord recordOf(const Action& action, Time now,
                     std::optional<std::int64_t> resumeStep = std::nullopt);

// The record of live recovery's decision for `next` (agent::planLiveRecovery, taken at the stop
// before it): "live_plan", the next generation, "recovery" live or checkpoint, the plan's reason,
// and for a live plan the world published at once (the next generation's, or the interim one
// of the survivors while joiners start) with its batch and its nodes in rank order.
EventRecord recordOf(const LivePlan& plan, const StartWorkers& next, Time now);

// One line of JSON for the record, without the trailing newline.
std::string toJsonLine(const EventRecord& record);

// Appends records to a stream or file, one line each, flushed at once. Thread-safe.
//
// A write that fails (a full disk, a quota, an I/O error) never throws: the record is lost,
// counted, and a file is cut back to its last whole line (so that a later record, once the disk
// has room again, still starts a line of its own). write() returns false for a lost record and
// the caller reports it (the agent loop once, loudly; the launcher's exit status says so).
class EventLog {
 public:
  // Writes to `out`, which must outlive the log.
  explicit EventLog(std::ostream& out);
  // Appends to the file (created when missing). Throws IoError naming the path when it cannot
  // be opened.
  explicit EventLog(const std::filesystem::path& path);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  bool write(const EventRecord& record);
  bool write(const Action& action, Time now,
             std::optional<std::int64_t> resumeStep = std::nullopt) {
    return write(recordOf(action, now, resumeStep));
  }

  // Records lost so far, and why the first was ("No space left on device").
  std::uint64_t lost() const;
  std::string error() const;
  // The file's path, or "" for a stream.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::ostream* out_ = nullptr;
  std::uint64_t lost_ = 0;
  std::string error_;
  mutable std::mutex mutex_;
};

}  // namespace stretch::agent
