#include "runtime/engine/step_timings.hpp"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runtime/common/error.hpp"
#include "runtime/common/worker_variables.hpp"

namespace stretch::engine {

std::string toJsonLine(const StepTiming& t) {
  return fmt::format(
      "{{\"rank\":{},\"world_size\":{},\"step\":{},\"micro_batch\":{},\"gas\":{},"
      "\"gradient_bytes\":{},\"forward_ms\":{:.4f},\"backward_ms\":{:.4f},"
      "\"allreduce_ms\":{:.4f},\"optimizer_ms\":{:.4f},\"step_ms\":{:.4f},"
      "\"period_ms\":{:.4f},\"unix_ns\":{}}}\n",
      t.rank, t.worldSize, t.step, t.microBatch, t.gas, t.gradientBytes, t.forwardMs, t.backwardMs,
      t.allreduceMs, t.optimizerMs, t.stepMs, t.periodMs, t.unixNs);
}

std::string toJsonLine(const CheckpointTiming& t) {
  return fmt::format(
      "{{\"rank\":{},\"event\":\"{}\",\"step\":{},\"seconds\":{:.6f},\"unix_ns\":{}}}\n", t.rank,
      t.event, t.step, t.seconds, t.unixNs);
}

std::int64_t unixNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::unique_ptr<StepTimingsFile> StepTimingsFile::fromEnvironment() {
  const char* path = std::getenv(worker_env::kTimingsFile);
  if (path == nullptr || *path == '\0') {
    return nullptr;
  }
  return std::make_unique<StepTimingsFile>(path);
}

StepTimingsFile::StepTimingsFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw ConfigError(
        ErrorDetail{worker_env::kTimingsFile, path,
                    fmt::format("a file this process can append to ({})", std::strerror(errno))});
  }
}

StepTimingsFile::~StepTimingsFile() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

void StepTimingsFile::record(const StepTiming& t) {
  append(toJsonLine(t));
}

void StepTimingsFile::record(const CheckpointTiming& t) {
  append(toJsonLine(t));
}

void StepTimingsFile::append(const std::string& line) {
  if (failed_) {
    return;
  }
  const ssize_t n = ::write(fd_, line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size())) {
    failed_ = true;
    spdlog::warn("STRETCH_TIMINGS_FILE {}: write failed ({}); no further step timings", path_,
                 n < 0 ? std::strerror(errno) : "short write");
  }
}

}  // namespace stretch::engine
