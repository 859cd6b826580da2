#include "tools/rank_launcher.hpp"

#include <csignal>
#include <cstring>
#include <poll.h>
#include <random>
#include <thread>
#include <unistd.h>

#include <fmt/format.h>

#include "runtime/comm/errors.hpp"
#include "runtime/common/ports.hpp"
#include "runtime/launcher/process.hpp"
#include "runtime/launcher/token.hpp"
#include "runtime/common/worker_variables.hpp"

namespace stretch::tools {

namespace {

constexpr auto kTermGrace = std::chrono::seconds(2);
constexpr std::size_t kStderrKept = 16 * 1024;

[[noreturn]] void throwErrno(const std::string& what) {
  throw stretch::comm::CommError(fmt::format("{}: {}", what, std::strerror(errno)));
}

struct Child {
  int rank = 0;
  launcher::ChildProcess process;
  std::string outPending;  // partial stdout line
  std::string errPending;  // partial stderr line (forwarding)
  std::string errKept;     // the end of stderr
  bool outputDone() const { return process.stdoutFd() < 0 && process.stderrFd() < 0; }
};

// The last `maxLines` non-empty lines of `text`, indented for an error message.
std::string tailLines(const std::string& text, std::size_t maxLines) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos)
      end = text.size();
    if (end > start)
      lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  std::string out;
  const std::size_t first = lines.size() > maxLines ? lines.size() - maxLines : 0;
  for (std::size_t i = first; i < lines.size(); ++i)
    out += "\n  " + lines[i];
  return out;
}

class Launch {
 public:
  explicit Launch(const RankLaunch& spec) : spec_(spec) {}
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  ~Launch() {
    // Whatever happened (an exception from a callback included), nothing outlives the call:
    // ChildProcess kills and reaps a child that still runs.
    children_.clear();
  }

  void run() {
    // Below the ephemeral range: rank 0 binds it a process start later, and an outgoing
    // connection could take a port of that range meanwhile (runtime/common/ports.hpp).
    const std::string port =
        std::to_string(freePortOutsideEphemeralRange(1, std::random_device{}()));
    const std::string token = launcher::randomToken();
    for (int rank = 0; rank < spec_.worldSize; ++rank)
      spawn(rank, port, token);
    pump();
  }

 private:
  void spawn(int rank, const std::string& port, const std::string& token) {
    launcher::SpawnOptions options;
    options.argv = {spec_.executable};
    options.argv.insert(options.argv.end(), spec_.args.begin(), spec_.args.end());
    options.env = spec_.env;
    options.env["RANK"] = std::to_string(rank);
    options.env["WORLD_SIZE"] = std::to_string(spec_.worldSize);
    options.env["LOCAL_RANK"] = std::to_string(rank);
    options.env["LOCAL_WORLD_SIZE"] = std::to_string(spec_.worldSize);
    options.env["MASTER_ADDR"] = "127.0.0.1";
    options.env["MASTER_PORT"] = port;
    options.env[worker_env::kStoreToken] = token;
    options.pipeOutput = true;
    options.stdinNull = true;
    options.execErrorPrefix = "bench: ";
    try {
      children_.push_back(Child{rank, launcher::spawnProcess(options), {}, {}, {}});
    } catch (const std::exception& e) {
      throw stretch::comm::CommError(
          fmt::format("bench: cannot start rank {} ({}): {}", rank, spec_.executable, e.what()));
    }
  }

  void killAll(int signal) {
    for (Child& c : children_)
      c.process.signal(signal);
  }

  // Reads whatever is ready (up to `waitMs`), then reaps children that have exited.
  void readAndReap(int waitMs) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Child*, bool>> owners;  // (child, is stdout)
    for (Child& c : children_) {
      if (c.process.stdoutFd() >= 0) {
        fds.push_back({c.process.stdoutFd(), POLLIN, 0});
        owners.emplace_back(&c, true);
      }
      if (c.process.stderrFd() >= 0) {
        fds.push_back({c.process.stderrFd(), POLLIN, 0});
        owners.emplace_back(&c, false);
      }
    }
    if (!fds.empty()) {
      const int ready = ::poll(fds.data(), fds.size(), waitMs);
      if (ready < 0 && errno != EINTR)
        throwErrno("bench: poll on the ranks' output");
      for (std::size_t i = 0; ready > 0 && i < fds.size(); ++i) {
        if (fds[i].revents == 0)
          continue;
        auto [child, isOut] = owners[i];
        char buf[65536];
        const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
        if (n > 0) {
          consume(*child, isOut, std::string_view(buf, static_cast<std::size_t>(n)));
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          consume(*child, isOut, {}, /*eof=*/true);
          isOut ? child->process.closeStdout() : child->process.closeStderr();
        }
      }
    } else if (waitMs > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(waitMs));
    }
    for (Child& c : children_) {
      if (const auto exit = c.process.poll(); exit && !exit->ok() && !failure_)
        failure_ = &c;
    }
  }

  void consume(Child& c, bool isOut, std::string_view data, bool eof = false) {
    std::string& pending = isOut ? c.outPending : c.errPending;
    pending.append(data);
    if (!isOut) {
      c.errKept.append(data);
      if (c.errKept.size() > kStderrKept)
        c.errKept.erase(0, c.errKept.size() - kStderrKept);
    }
    std::size_t start = 0;
    for (std::size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1)
      deliver(c, isOut, pending.substr(start, nl - start));
    pending.erase(0, start);
    if (eof && !pending.empty()) {
      deliver(c, isOut, pending);
      pending.clear();
    }
  }

  void deliver(Child& c, bool isOut, const std::string& line) {
    if (isOut) {
      if (spec_.onStdoutLine)
        spec_.onStdoutLine(c.rank, line);
    } else if (spec_.forwardStderr) {
      std::fprintf(stderr, "[rank %d] %s\n", c.rank, line.c_str());
    }
  }

  bool allDone() const {
    for (const Child& c : children_) {
      if (c.process.running() || !c.outputDone())
        return false;
    }
    return true;
  }

  // Waits for the remaining children after a failure or timeout, escalating to SIGKILL.
  void stopOthers(int firstSignal) {
    killAll(firstSignal);
    const auto killAt = std::chrono::steady_clock::now() + kTermGrace;
    bool killed = firstSignal == SIGKILL;
    while (!allDone()) {
      if (!killed && std::chrono::steady_clock::now() >= killAt) {
        killAll(SIGKILL);
        killed = true;
      }
      readAndReap(50);
    }
  }

  void pump() {
    using Clock = std::chrono::steady_clock;
    while (!allDone()) {
      const auto now = Clock::now();
      if (now >= spec_.deadline) {
        stopOthers(SIGKILL);
        throw stretch::comm::CommTimeoutError(
            fmt::format("bench: {} ranks did not finish before the deadline (--timeout); "
                        "killed them all{}",
                        spec_.worldSize, stderrOfAll()));
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(spec_.deadline - now).count();
      readAndReap(static_cast<int>(std::clamp<long long>(left, 1, 100)));
      if (failure_) {
        // The first rank to fail is the cause; the others usually fail because it went away.
        const Child* first = failure_;
        stopOthers(SIGTERM);
        throw stretch::comm::CommError(fmt::format(
            "bench: rank {} of {} failed ({}){}{}", first->rank, spec_.worldSize,
            first->process.exit()->describe(), first->errKept.empty() ? " with no output" : ":",
            tailLines(first->errKept, 12)));
      }
    }
  }

  std::string stderrOfAll() const {
    std::string out;
    for (const Child& c : children_) {
      if (!c.errKept.empty())
        out += fmt::format("\nrank {}:{}", c.rank, tailLines(c.errKept, 4));
    }
    return out;
  }

  const RankLaunch& spec_;
  std::vector<Child> children_;
  Child* failure_ = nullptr;
};

}  // namespace

void runRanks(const RankLaunch& launch) {
  if (launch.worldSize < 1)
    throw stretch::comm::CommError(
        fmt::format("bench: world size {}: expected at least 1 rank", launch.worldSize));
  Launch l(launch);
  l.run();
}

}  // namespace stretch::tools
