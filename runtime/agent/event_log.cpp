#include "runtime/agent/event_log.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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
    : path_(path.string()),
      fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {
  if (fd_ < 0) {
    throw IoError(ErrorDetail{
        "event log", path.string(),
        fmt::format("a file that can be opened for appending ({})", std::strerror(errno))});
  }
}

EventLog::~EventLog() {
  if (fd_ >= 0)
    ::close(fd_);
}

bool EventLog::write(const EventRecord& record) {
  const std::string line = toJsonLine(record) + '\n';
  const std::lock_guard lock(mutex_);
  std::string failure;
  if (fd_ >= 0) {
    struct stat before {};
    const bool sized = ::fstat(fd_, &before) == 0 && S_ISREG(before.st_mode);
    std::size_t done = 0;
    while (done < line.size()) {
      const ssize_t put = ::write(fd_, line.data() + done, line.size() - done);
      if (put < 0 && errno == EINTR)
        continue;
      if (put <= 0) {
        failure = put < 0 ? std::strerror(errno) : "nothing written";
        break;
      }
      done += static_cast<std::size_t>(put);
    }
    if (!failure.empty() && done > 0 && sized) [[maybe_unused]]
      const int cut = ::ftruncate(fd_, before.st_size);  // drop the torn line
  } else {
    out_->write(line.data(), static_cast<std::streamsize>(line.size()));
    out_->flush();
    if (!*out_) {
      out_->clear();
      failure = "the stream refused the write";
    }
  }
  if (failure.empty())
    return true;
  if (error_.empty())
    error_ = failure;
  ++lost_;
  return false;
}

std::uint64_t EventLog::lost() const {
  const std::lock_guard lock(mutex_);
  return lost_;
}

std::string EventLog::error() const {
  const std::lock_guard lock(mutex_);
  return error_;
}

}  // namespace stretch::agent
