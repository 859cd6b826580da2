#include "sim/timeline.hpp"

#include <fmt/format.h>

#include "runtime/common/error.hpp"
#include "runtime/common/strings.hpp"
#include "sim/csv.hpp"

namespace stretch::sim {

namespace {

// Trace thread ids: one row per kind of activity in the viewer.
int threadOf(TimelineKind kind) {
  switch (kind) {
    case TimelineKind::Compute:
    case TimelineKind::MicroStep:
    case TimelineKind::Checkpoint:
    case TimelineKind::Startup:
    case TimelineKind::Idle:
    case TimelineKind::Blocked:
      return 1;
    case TimelineKind::Collective:
      return 2;
    case TimelineKind::Failure:
    case TimelineKind::Preemption:
    case TimelineKind::NodeReturn:
    case TimelineKind::Scale:
    case TimelineKind::Script:
      return 3;
    case TimelineKind::Agent:
    case TimelineKind::WorldSize:
      return 4;
  }
  return 1;
}

// Microseconds with the nanoseconds as three decimals, exactly (no floating point).
std::string micros(SimTime ns) {
  const SimTime whole = ns / 1000;
  const SimTime frac = ns % 1000;
  return fmt::format("{}.{:03d}", whole, frac < 0 ? -frac : frac);
}

}  // namespace

std::string_view toString(TimelineKind kind) noexcept {
  switch (kind) {
    case TimelineKind::Compute:
      return "compute";
    case TimelineKind::MicroStep:
      return "micro_step";
    case TimelineKind::Collective:
      return "collective";
    case TimelineKind::Checkpoint:
      return "checkpoint";
    case TimelineKind::Startup:
      return "startup";
    case TimelineKind::Idle:
      return "idle";
    case TimelineKind::Blocked:
      return "blocked";
    case TimelineKind::Failure:
      return "failure";
    case TimelineKind::Preemption:
      return "preemption";
    case TimelineKind::NodeReturn:
      return "node_return";
    case TimelineKind::Scale:
      return "scale";
    case TimelineKind::Script:
      return "script";
    case TimelineKind::Agent:
      return "agent";
    case TimelineKind::WorldSize:
      return "world_size";
  }
  return "?";
}

ChromeTraceWriter::ChromeTraceWriter(const std::filesystem::path& path, std::uint64_t maxEvents)
    : path_(path), out_(path, std::ios::binary | std::ios::trunc), maxEvents_(maxEvents) {
  if (!out_) {
    throw IoError(ErrorDetail{path.string(), "cannot be opened for writing", "a writable path"});
  }
  out_ << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  const char* names[] = {"", "training", "collectives", "failures and scale events", "agent"};
  for (int tid = 1; tid <= 4; ++tid) {
    out_ << (tid == 1 ? "" : ",\n")
         << fmt::format(
                "{{\"ph\":\"M\",\"pid\":1,\"tid\":{},\"name\":\"thread_name\",\"args\":{{\"name\":"
                "\"{}\"}}}}",
                tid, names[tid]);
  }
  out_ << ",\n{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":\"stretch "
          "sim\"}}";
}

ChromeTraceWriter::~ChromeTraceWriter() {
  try {
    finish();
  } catch (...) {
  }
}

void ChromeTraceWriter::writeEvent(const std::string& json) {
  out_ << ",\n" << json;
}

void ChromeTraceWriter::record(const TimelineRecord& r) {
  if (finished_) {
    return;
  }
  if (written_ >= maxEvents_) {
    ++dropped_;
    return;
  }
  ++written_;
  const std::string args = fmt::format(
      "{{\"generation\":{},\"world_size\":{},\"step\":{}{}}}", r.generation, r.worldSize, r.step,
      r.detail.empty() ? std::string() : ",\"detail\":" + jsonQuote(r.detail));
  const int tid = threadOf(r.kind);
  const std::string name = jsonQuote(r.name.empty() ? std::string(toString(r.kind)) : r.name);
  const std::string cat = jsonQuote(toString(r.kind));
  if (r.kind == TimelineKind::WorldSize) {
    writeEvent(fmt::format(
        "{{\"ph\":\"C\",\"pid\":1,\"tid\":{},\"name\":\"world_size\",\"ts\":{},\"args\":{{\"gpus\":"
        "{}}}}}",
        tid, micros(r.time), r.worldSize));
    return;
  }
  const bool span = r.kind == TimelineKind::Compute || r.kind == TimelineKind::MicroStep ||
                    r.kind == TimelineKind::Collective || r.kind == TimelineKind::Checkpoint ||
                    r.kind == TimelineKind::Startup || r.kind == TimelineKind::Idle ||
                    r.kind == TimelineKind::Blocked;
  if (span) {
    writeEvent(fmt::format(
        "{{\"ph\":\"X\",\"pid\":1,\"tid\":{},\"name\":{},\"cat\":{},\"ts\":{},\"dur\":{},"
        "\"args\":{}}}",
        tid, name, cat, micros(r.time), micros(r.duration), args));
  } else {
    writeEvent(fmt::format(
        "{{\"ph\":\"i\",\"s\":\"p\",\"pid\":1,\"tid\":{},\"name\":{},\"cat\":{},\"ts\":{},"
        "\"args\":{}}}",
        tid, name, cat, micros(r.time), args));
  }
}

void ChromeTraceWriter::finish() {
  if (finished_) {
    return;
  }
  finished_ = true;
  if (dropped_ > 0) {
    out_ << fmt::format(
        ",\n{{\"ph\":\"M\",\"pid\":1,\"name\":\"dropped_records\",\"args\":{{\"count\":{},"
        "\"kept\":{}}}}}",
        dropped_, written_);
  }
  out_ << "\n]}\n";
  out_.flush();
  if (!out_) {
    throw IoError(ErrorDetail{path_.string(), "write failed", "a writable file"});
  }
}

CsvTimelineWriter::CsvTimelineWriter(const std::filesystem::path& path, std::uint64_t maxRows)
    : path_(path), out_(path, std::ios::binary | std::ios::trunc), maxRows_(maxRows) {
  if (!out_) {
    throw IoError(ErrorDetail{path.string(), "cannot be opened for writing", "a writable path"});
  }
  out_ << "time_ns,time_hours,duration_ns,kind,generation,world_size,step,name,detail\n";
}

void CsvTimelineWriter::record(const TimelineRecord& r) {
  if (rows_ >= maxRows_) {
    ++dropped_;
    return;
  }
  ++rows_;
  out_ << fmt::format("{},{:.9f},{},{},{},{},{},{},{}\n", r.time, nanosToHours(r.time), r.duration,
                      toString(r.kind), r.generation, r.worldSize, r.step, csvField(r.name),
                      csvField(r.detail));
}

void CsvTimelineWriter::finish() {
  out_.flush();
  if (!out_) {
    throw IoError(ErrorDetail{path_.string(), "write failed", "a writable file"});
  }
}

}  // namespace stretch::sim
