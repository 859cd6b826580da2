#include "runtime/launcher/log_pump.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runtime/common/error.hpp"
#include "runtime/launcher/process.hpp"

namespace stretch::launcher {

namespace {

void wake(int fd) {
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto written = ::write(fd, &one, sizeof one);
}

}  // namespace

LogPump::LogPump() : wakeFd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (wakeFd_ < 0)
    throw Error(fmt::format("log pump: eventfd: {}", std::strerror(errno)));
  thread_ = std::thread([this] { run(); });
}

LogPump::~LogPump() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake(wakeFd_);
  thread_.join();
  for (auto& [id, s] : sources_)
    end(s);
  ::close(wakeFd_);
}

LogPump::Sink LogPump::add(const std::string& path) {
  int pipe[2] = {-1, -1};
  if (::pipe2(pipe, O_CLOEXEC) != 0)
    throw Error(fmt::format("{}: pipe: {}", path, std::strerror(errno)));
  ::fcntl(pipe[0], F_SETFL, O_NONBLOCK);
  const OpenedLog opened = openLogFile(path);
  Sink sink;
  std::string error;
  if (opened.fd < 0) {
    error = "cannot create the log file: " + opened.note;
    sink.problem =
        fmt::format("rank log {}: {}; the worker goes on and its output is lost", path, error);
    spdlog::error("agent: {}", sink.problem);
  } else if (!opened.note.empty()) {
    sink.problem = fmt::format("rank log {}: {}", path, opened.note);
    spdlog::warn("agent: {}", sink.problem);
  }
  {
    const std::lock_guard lock(mutex_);
    sink.id = nextId_++;
    sources_[sink.id] = Source{path, pipe[0], opened.fd, 0, error, false};
  }
  sink.writeFd = pipe[1];
  wake(wakeFd_);
  return sink;
}

bool LogPump::settle(int id, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return endedCv_.wait_for(lock, timeout, [&] {
    const auto it = sources_.find(id);
    return it == sources_.end() || it->second.ended;
  });
}

std::vector<std::string> LogPump::lost() const {
  const std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [id, s] : sources_) {
    if (!s.error.empty())
      out.push_back(fmt::format("{}: {}; {} bytes lost", s.path, s.error, s.lostBytes));
  }
  return out;
}

void LogPump::write(Source& s, const char* data, std::size_t size) {
  if (s.fileFd < 0) {  // never created: the error was reported at add()
    s.lostBytes += size;
    return;
  }
  while (size > 0) {
    const ssize_t put = ::write(s.fileFd, data, size);
    if (put < 0 && errno == EINTR)
      continue;
    if (put <= 0) {
      const std::string reason = put < 0 ? std::strerror(errno) : "nothing written";
      if (s.error.empty()) {
        s.error = "cannot write: " + reason;
        spdlog::error(
            "agent: rank log {}: cannot write: {}; the worker goes on and its output "
            "is lost until the file takes writes again",
            s.path, reason);
      }
      s.lostBytes += size;
      return;
    }
    data += put;
    size -= static_cast<std::size_t>(put);
  }
}

bool LogPump::drain(Source& s) {
  std::array<char, 65536> buffer{};
  for (;;) {
    const ssize_t got = ::read(s.readFd, buffer.data(), buffer.size());
    if (got > 0) {
      write(s, buffer.data(), static_cast<std::size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR)
      continue;
    return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

void LogPump::end(Source& s) {
  if (s.readFd >= 0) {
    drain(s);
    ::close(s.readFd);
    s.readFd = -1;
  }
  if (s.fileFd >= 0) {
    // NFS reports write errors at close.
    if (::close(s.fileFd) != 0 && s.error.empty()) {
      s.error = fmt::format("cannot write: {}", std::strerror(errno));
      spdlog::error("agent: rank log {}: {}", s.path, s.error);
    }
    s.fileFd = -1;
  }
  s.ended = true;
}

void LogPump::run() {
  std::vector<pollfd> fds;
  std::vector<int> ids;
  for (;;) {
    fds.assign(1, pollfd{wakeFd_, POLLIN, 0});
    ids.assign(1, -1);
    {
      const std::lock_guard lock(mutex_);
      if (stopping_)
        return;
      for (const auto& [id, s] : sources_) {
        if (!s.ended) {
          fds.push_back(pollfd{s.readFd, POLLIN, 0});
          ids.push_back(id);
        }
      }
    }
    if (::poll(fds.data(), fds.size(), -1) < 0)
      continue;  // EINTR
    if ((fds[0].revents & POLLIN) != 0) {
      std::uint64_t count = 0;
      [[maybe_unused]] const auto got = ::read(wakeFd_, &count, sizeof count);
    }
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0)
        continue;
      const std::lock_guard lock(mutex_);
      Source& s = sources_.at(ids[i]);
      if (!drain(s)) {
        end(s);
        endedCv_.notify_all();
      }
    }
  }
}

}  // namespace stretch::launcher
