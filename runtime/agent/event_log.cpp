#include "runtime/agent/event_log.hpp"

#include <fmt/format.h>

#include "runtime/common/error.hpp"
#include "runtime/common/overloaded.hpp"
#include "runtime/common/strings.hpp"

namespace stretch::agent {

std::string toJsonLine(const EventRecord& r) {
  std::string out =
      fmt::format("{{\"time_ns\":{},\"event\":{}", r.time.count(), jsonQuote(r.event));
  if (r.generation) {
    out += fmt::format(",\"generation\":{}", *r.generation);
  }
  if (r.worldSize) {
    out += fmt::format(",\"world_size\":{}", *r.worldSize);
  }
  if (r.batch) {
    out += fmt::format(
        ",\"batch\":{{\"train_batch_size\":{},\"train_micro_batch_size_per_gpu\":{},"
        "\"gradient_accumulation_steps\":{}}}",
        r.batch->trainBatchSize, r.batch->microBatchPerGpu, r.batch->gradientAccumulation);
  }
  if (r.restartCount) {
    out += fmt::format(",\"restart_count\":{}", *r.restartCount);
  }
  if (r.resumeStep) {
    out += fmt::format(",\"resume_step\":{}", *r.resumeStep);
  }
  if (!r.recovery.empty()) {
    out += ",\"recovery\":";
    out += jsonQuote(r.recovery);
  }
  if (r.exitCode) {
    out += fmt::format(",\"exit_code\":{}", *r.exitCode);
  }
  if (!r.nodes.empty()) {
    out += ",\"nodes\":[";
    for (std::size_t i = 0; i < r.nodes.size(); ++i) {
      if (i > 0) {
        out += ',';
      }
      out += jsonQuote(r.nodes[i]);
    }
    out += ']';
  }
  if (!r.reason.empty()) {
    out += ",\"reason\":";
    out += jsonQuote(r.reason);
  }
  out += '}';
  return out;
}

EventRecord recordOf(const Action& action, Time now, std::optional<std::int64_t> resumeStep) {
  EventRecord r;
  r.time = now;
  std::visit(Overloaded{
                 [&](const StartWorkers& a) {
                   r.event = "start_workers";
                   r.generation = a.generation;
                   r.worldSize = a.worldSize;
                   r.batch = a.batch;
                   r.restartCount = a.restartCount;
                   r.resumeStep = resumeStep;
                   for (const NodeAssignment& node : a.nodes) {
                     r.nodes.push_back(node.nodeId);
                   }
                   r.reason = a.reason;
                 },
                 [&](const StopWorkers& a) {
                   r.event = "stop_workers";
                   r.generation = a.generation;
                   r.reason = a.reason;
                 },
                 [&](const Wait& a) {
                   r.event = "wait";
                   r.reason = a.reason;
                 },
                 [&](const Finish& a) {
                   r.event = "finish";
                   r.generation = a.generation;
                 },
                 [&](const Fail& a) {
                   r.event = "fail";
                   r.exitCode = a.exitCode;
                   r.reason = a.message;
                 },
                 [&](const LogEvent& a) {
                   r.event = a.event;
                   r.reason = a.reason;
                 },
             },
             action);
  return r;
}

EventRecord recordOf(const LivePlan& plan, const StartWorkers& next, Time now) {
  EventRecord r;
  r.time = now;
  r.event = "live_plan";
  r.generation = next.generation;
  r.recovery = plan.live ? "live" : "checkpoint";
  if (plan.live && plan.publish) {
    r.worldSize = static_cast<std::int64_t>(plan.publish->members.size());
    r.batch = plan.publish->batch;
    for (const WorkerPlace& member : plan.publish->members) {
      if (r.nodes.empty() || r.nodes.back() != member.nodeId) {
        r.nodes.push_back(member.nodeId);
      }
    }
  }
  r.reason = plan.reason;
  return r;
}

EventLog::EventLog(std::ostream& out) : out_(&out) {}

EventLog::EventLog(const std::filesystem::path& path)
    : file_(path, std::ios::out | std::ios::app | std::ios::binary), out_(&file_) {
  if (!file_) {
    throw IoError(
        ErrorDetail{"event log", path.string(), "a file that can be opened for appending"});
  }
}

void EventLog::write(const EventRecord& record) {
  const std::string line = toJsonLine(record) + '\n';
  const std::lock_guard lock(mutex_);
  out_->write(line.data(), static_cast<std::streamsize>(line.size()));
  out_->flush();
  if (!*out_) {
    throw IoError(ErrorDetail{"event log", record.event, "a stream that accepts writes"});
  }
}

}  // namespace stretch::agent
