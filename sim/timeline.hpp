#pragma once
// What a simulation run did, as a stream of timeline records, and the writers that turn the
// stream into files: a Chrome / Perfetto trace (chrome://tracing, ui.perfetto.dev) and CSV rows.
//
// Records come in the order the simulation produces them: by the time they are known, which is
// their end for spans (a compute span is recorded when it ends) and their time for instants.
// Writers stream: memory stays O(1) whatever the run's length.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <string_view>

#include "sim/scheduler.hpp"

namespace stretch::sim {

enum class TimelineKind {
  Compute,     // span: training steps (aggregate mode: a run of steps)
  MicroStep,   // span: one micro step (step-level mode)
  Collective,  // span: one bucket's all-reduce (step-level mode)
  Checkpoint,  // span: a checkpoint save (also when a failure aborts it)
  Startup,     // span: a start of the workers (rendezvous, process start, checkpoint load)
  Idle,        // span: no workers running (rendezvous, waiting for nodes)
  Blocked,     // span: the workers block on a node that failed silently, until the agent hears
               // of it (job.failure_detection_seconds)
  Failure,     // instant: a node failure
  Preemption,  // instant: a spot preemption
  NodeReturn,  // instant: a node back from repair or preemption
  Scale,       // instant: a scheduled join or leave
  Script,      // instant: a scripted fault
  Agent,       // instant: one of the agent's actions (start_workers, stop_workers, ...)
  WorldSize,   // counter: the world size from this moment on
};

std::string_view toString(TimelineKind kind) noexcept;

struct TimelineRecord {
  SimTime time = 0;      // start of a span, moment of an instant or counter
  SimTime duration = 0;  // spans only
  TimelineKind kind = TimelineKind::Compute;
  std::uint64_t generation = 0;
  std::int64_t worldSize = 0;
  std::int64_t step = 0;  // the job's step when the record was made
  std::string name;       // short label ("steps 10-20", "faulty gpu on n3", "start_workers")
  std::string detail;     // free text
};

class TimelineSink {
 public:
  virtual ~TimelineSink() = default;
  virtual void record(const TimelineRecord& record) = 0;
};

// Chrome trace-event JSON: {"traceEvents": [...], "displayTimeUnit": "ms"}. Spans are complete
// events ("X") on per-kind threads of one process, instants are "i" events, the world size is a
// counter track ("C"). Timestamps are microseconds with nanosecond decimals. After maxEvents
// records the rest are dropped and counted (the trace of a 54-day step-level run would be
// gigabytes); finish() writes the closing bracket and a metadata note about dropped records.
class ChromeTraceWriter final : public TimelineSink {
 public:
  // Writes to `path`; throws IoError naming it when it cannot be opened.
  ChromeTraceWriter(const std::filesystem::path& path, std::uint64_t maxEvents);
  ~ChromeTraceWriter() override;
  ChromeTraceWriter(const ChromeTraceWriter&) = delete;
  ChromeTraceWriter& operator=(const ChromeTraceWriter&) = delete;

  void record(const TimelineRecord& record) override;
  // Closes the JSON document; throws IoError when writing failed. Called by the destructor if
  // not called before (errors then are swallowed).
  void finish();
  std::uint64_t written() const noexcept { return written_; }
  std::uint64_t dropped() const noexcept { return dropped_; }

 private:
  void writeEvent(const std::string& json);
  std::filesystem::path path_;
  std::ofstream out_;
  std::uint64_t maxEvents_;
  std::uint64_t written_ = 0;
  std::uint64_t dropped_ = 0;
  bool finished_ = false;
};

// CSV, one row per record:
//   time_ns,time_hours,duration_ns,kind,generation,world_size,step,name,detail
// Text fields are quoted when they contain a comma, quote or newline (RFC 4180).
class CsvTimelineWriter final : public TimelineSink {
 public:
  CsvTimelineWriter(const std::filesystem::path& path, std::uint64_t maxRows);
  void record(const TimelineRecord& record) override;
  // Flushes; throws IoError when writing failed.
  void finish();
  std::uint64_t dropped() const noexcept { return dropped_; }

 private:
  std::filesystem::path path_;
  std::ofstream out_;
  std::uint64_t maxRows_;
  std::uint64_t rows_ = 0;
  std::uint64_t dropped_ = 0;
};

// Forwards every record to two sinks (either may be null).
class TimelineTee final : public TimelineSink {
 public:
  TimelineTee(TimelineSink* a, TimelineSink* b) : a_(a), b_(b) {}
  void record(const TimelineRecord& record) override {
    if (a_ != nullptr) {
      a_->record(record);
    }
    if (b_ != nullptr) {
      b_->record(record);
    }
  }

 private:
  TimelineSink* a_;
  TimelineSink* b_;
};

}  // namespace stretch::sim
