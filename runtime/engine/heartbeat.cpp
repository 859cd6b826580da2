#include "runtime/engine/heartbeat.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runtime/common/worker_variables.hpp"

namespace stretch::engine {

std::unique_ptr<Heartbeat> Heartbeat::fromEnvironment() {
  const char* path = std::getenv(worker_env::kHeartbeatFile);
  if (path == nullptr || *path == '\0')
    return nullptr;
  return std::make_unique<Heartbeat>(path);
}

Heartbeat::Heartbeat(std::string path, std::chrono::milliseconds period)
    : path_(std::move(path)), beat_("heartbeat " + path_, period, [this] {
        std::int64_t step = 0;
        std::int64_t completed = 0;
        {
          std::lock_guard lock(mutex_);
          step = step_;
          completed = completed_;
        }
        return write(step, completed) ? PeriodicTask::Next::Continue : PeriodicTask::Next::Stop;
      }) {}

Heartbeat::~Heartbeat() {
  beat_.stop();
  // No more beats on purpose: the launcher stops watching (what the program does after
  // training, an evaluation, writing results, is not a hang).
  ::unlink(path_.c_str());
}

void Heartbeat::progress(std::int64_t step) {
  {
    std::lock_guard lock(mutex_);
    step_ = step;
    ++completed_;
  }
  // Every completed step goes out at once, from the beat's thread (steps that come faster than
  // it writes share one write): the launcher tells a worker that failed before its first step
  // (a crash loop) from one that trained, and a hung worker's message names the step it really
  // stopped after, not the one of the last periodic beat (which was "last step 1" for a worker
  // that had finished 42).
  beat_.runNow();
}

bool Heartbeat::write(std::int64_t step, std::int64_t completed) {
  const std::string text = fmt::format("{} {}\n", step, completed);
  // Written beside the file and renamed over it, so the launcher never reads a beat half
  // written (an empty or cut step, which it would take for the last one). Not
  // writeFileAtomically: a beat after every step needs no fsync, and its one writer needs no
  // unique temporary name.
  const std::string temporary = path_ + ".tmp";
  const int fd =
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  bool ok = fd >= 0;
  int error = ok ? 0 : errno;
  if (ok) {
    ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    error = ok ? 0 : errno;
    ok = ::close(fd) == 0 && ok;
    if (ok && ::rename(temporary.c_str(), path_.c_str()) != 0) {
      ok = false;
      error = errno;
    }
  }
  if (!ok) {
    ::unlink(temporary.c_str());
    ::unlink(path_.c_str());
    spdlog::warn(
        "heartbeat {}: write failed ({}); no further heartbeats, so the launcher will not see "
        "this worker hang",
        path_, error != 0 ? std::strerror(error) : "short write");
  }
  return ok;
}

}  // namespace stretch::engine
