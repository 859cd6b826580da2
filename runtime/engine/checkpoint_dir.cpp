#include "runtime/engine/checkpoint_dir.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <thread>
#include <unistd.h>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runtime/common/posix_files.hpp"
#include "runtime/common/worker_variables.hpp"
#include "runtime/engine/checkpoint_io.hpp"

namespace stretch::engine {

namespace {

// "<name>.tmp.<pid>.<k>": what stretch::writeFileAtomically leaves when it dies mid-write.
bool isTemporaryOf(std::string_view entry, std::string_view name) {
  const std::string prefix = std::string(name) + ".tmp.";
  return entry.size() > prefix.size() && entry.starts_with(prefix) &&
         entry.find_first_not_of("0123456789.", prefix.size()) == std::string_view::npos;
}

bool isTemporaryFile(std::string_view entry) {
  const std::size_t at = entry.find(".tmp.");
  return at != std::string_view::npos && isTemporaryOf(entry, entry.substr(0, at));
}

// A directory a failed save left: no manifest, and nothing a user could have put there.
bool isPartialCheckpoint(const std::string& path) {
  if (!isDirectory(path) || pathExists(joinPath(path, CheckpointManifest::kFileName)))
    return false;
  const std::vector<std::string> entries = listDirectory(path);
  return std::all_of(entries.begin(), entries.end(), [&](const std::string& e) {
    return isRegularFile(joinPath(path, e)) && (e.ends_with(".pt") || isTemporaryFile(e));
  });
}

std::string hostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0)
    return "unknown host";
  return buf;
}

// The job named in the lock file; "" while the holder has not written it yet.
std::string readHolder(int fd) {
  std::string text(512, '\0');
  const ssize_t got = ::pread(fd, text.data(), text.size(), 0);
  text.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  const std::size_t end = text.find('\n');
  return end == std::string::npos ? std::string() : text.substr(0, end);
}

}  // namespace

std::vector<std::string> removePartialCheckpoints(const std::string& dir, const std::string& keep) {
  std::vector<std::string> removed;
  try {
    for (const std::string& name : listDirectory(dir)) {
      const std::string path = joinPath(dir, name);
      const bool partial = name != keep && isPartialCheckpoint(path);
      if (partial || (isTemporaryOf(name, "latest") && isRegularFile(path))) {
        removeTree(path);
        removed.push_back(name);
      }
    }
  } catch (const IoError& e) {
    spdlog::warn("saveCheckpoint: could not tidy {}: {}", dir, e.what());
  }
  return removed;
}

std::string currentJobId() {
  if (const char* token = std::getenv(worker_env::kStoreToken); token != nullptr && *token != 0)
    return "job " + sha256Hex(token).substr(0, 12);
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  if (addr != nullptr && port != nullptr && *addr != 0 && *port != 0)
    return fmt::format("group {}:{}", addr, port);
  return fmt::format("process {} on {}", ::getpid(), hostName());
}

CheckpointDirLock::CheckpointDirLock(const std::string& dir, const std::string& job) : dir_(dir) {
  const std::string path = joinPath(dir, kFileName);
  try {
    makeDirectories(dir);
  } catch (const IoError& e) {
    throw CheckpointError(e.what());
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    throw CheckpointError(fmt::format("cannot open the lock of checkpoint directory {}: {}", path,
                                      std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
    const std::string line = job + "\n";
    if (::ftruncate(fd, 0) != 0 ||
        ::pwrite(fd, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) {
      spdlog::warn("checkpoint directory {}: cannot write {}: {}", dir, path, std::strerror(errno));
    }
    fd_ = fd;
    return;
  }
  // Held. The holder writes its job right after taking the lock: give it a moment.
  std::string holder;
  for (int attempt = 0; attempt < 100; ++attempt) {
    holder = readHolder(fd);
    if (holder == job) {
      ::close(fd);
      return;
    }
    if (!holder.empty() && attempt >= 2)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::close(fd);
  throw CheckpointDirInUseError(fmt::format(
      "checkpoint directory {} is in use by another job ({}; this one is {}): two jobs must not "
      "save into one directory. Stop the other job, or give this one another checkpoint "
      "directory",
      dir, holder.empty() ? "which did not say who it is" : holder, job));
}

CheckpointDirLock::~CheckpointDirLock() {
  if (fd_ >= 0)
    ::close(fd_);  // releases the flock
}

}  // namespace stretch::engine
