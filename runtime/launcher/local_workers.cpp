#include "runtime/launcher/local_workers.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runtime/common/error.hpp"
#include "runtime/common/worker_variables.hpp"

namespace stretch::launcher {

WorkerProcesses::~WorkerProcesses() {
  stop(std::chrono::seconds(2));
}

void WorkerProcesses::start(const std::vector<std::string>& argv,
                            const std::vector<WorkerProcessSpec>& workers,
                            const std::filesystem::path& logDir, int attempt) {
  if (argv.empty() && std::any_of(workers.begin(), workers.end(),
                                  [](const WorkerProcessSpec& w) { return w.argv.empty(); }))
    throw ConfigError("worker command: empty (expected a program and its arguments)");
  std::filesystem::path dir;
  if (!logDir.empty()) {
    dir = logDir / fmt::format("attempt_{}", attempt);
    makeAttemptDirectory(dir);
  }
  for (const auto& spec : workers) {
    SpawnOptions options;
    options.argv = spec.argv.empty() ? argv : spec.argv;
    options.env = spec.env;
    std::string heartbeat;
    if (!heartbeatDir_.empty()) {
      heartbeat = (heartbeatDir_ / fmt::format("attempt_{}_rank_{}_{}", attempt, spec.globalRank,
                                               ++heartbeatsMade_))
                      .string();
      options.env[worker_env::kHeartbeatFile] = heartbeat;
    }
    std::filesystem::path log;
    LogPump::Sink sink;
    if (!dir.empty()) {
      log = dir / fmt::format("rank_{}.log", spec.globalRank);
      if (!logs_)
        logs_ = std::make_unique<LogPump>();
      sink = logs_->add(log.string());
      if (!sink.problem.empty())
        problems_.push_back(sink.problem);
      options.outputFd = sink.writeFd;
    }
    options.execErrorPrefix = fmt::format("stretch: worker rank {}: ", spec.globalRank);
    options.groupDiesWithParent = true;
    options.ignoredSignal = worker_env::kLiveSignal;
    ChildProcess process;
    try {
      process = spawnProcess(options);
    } catch (...) {
      if (sink.writeFd >= 0)
        ::close(sink.writeFd);
      throw;
    }
    if (sink.writeFd >= 0)
      ::close(sink.writeFd);  // the worker holds it now: its end is the pipe's end
    Worker& w = workers_.emplace_back();
    w.spec = spec;
    w.process = std::move(process);
    w.heartbeat = heartbeat;
    w.log = log;
    w.logSink = sink.id;
  }
}

// The attempt's log directory, a real directory: a symbolic link planted in its place is
// removed (never followed) and the directory made. A directory that cannot be made (a full disk)
// is reported; the workers start all the same, their logs counted as lost (LogPump::add).
void WorkerProcesses::makeAttemptDirectory(const std::filesystem::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    std::string problem = fmt::format(
        "log directory {}: it was a symbolic link; removed it (never followed)", dir.string());
    if (::unlink(dir.c_str()) != 0)
      problem = fmt::format("log directory {}: it is a symbolic link that cannot be removed ({})",
                            dir.string(), std::strerror(errno));
    spdlog::warn("agent: {}", problem);
    problems_.push_back(std::move(problem));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!ec && ::lstat(dir.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    ec = std::make_error_code(std::errc::too_many_symbolic_link_levels);  // planted again
  if (ec) {
    std::string problem = fmt::format(
        "log directory {}: cannot create it: {}; the workers go on and their output is lost",
        dir.string(), ec.message());
    spdlog::error("agent: {}", problem);
    problems_.push_back(std::move(problem));
  }
}

std::vector<std::string> WorkerProcesses::takeProblems() {
  return std::exchange(problems_, {});
}

void WorkerProcesses::detectHangs(std::filesystem::path dir, agent::HangPolicy policy) {
  heartbeatDir_ = std::move(dir);
  hangPolicy_ = policy;
}

namespace {

// A heartbeat file's modification time (ns; nullopt while absent), the step it holds and the
// steps the process completed ("STEP [COMPLETED]").
struct Beat {
  std::optional<std::int64_t> stamp;
  std::optional<std::int64_t> step;
  std::optional<std::int64_t> completed;
};

Beat readHeartbeat(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0)
    return {};
  const std::int64_t stamp =
      static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec;
  Beat beat{stamp, {}, {}};
  std::ifstream in(path);
  std::int64_t value = 0;
  if (in >> value) {
    beat.step = value;
    if (in >> value)
      beat.completed = value;
  }
  return beat;
}

agent::Time steadyNow() {
  return std::chrono::duration_cast<agent::Time>(
      std::chrono::steady_clock::now().time_since_epoch());
}

}  // namespace

void WorkerProcesses::observe(Worker& w) {
  if (w.heartbeat.empty())
    return;
  const Beat beat = readHeartbeat(w.heartbeat);
  w.beats.observe(beat.stamp, beat.step, steadyNow(), beat.completed);
  w.beat = w.beat || w.beats.started();
  w.advanced = w.advanced || w.beats.advanced();
}

void WorkerProcesses::killHung(Worker& w) {
  if (w.heartbeat.empty() || !w.hung.empty() || !w.process.running())
    return;
  observe(w);
  const auto now = steadyNow();
  if (auto why = w.beats.hung(hangPolicy_, now)) {
    w.hung = *why;
    spdlog::warn("agent: worker rank {} (local rank {}, pid {}) is hung: {}; killing it",
                 w.spec.globalRank, w.spec.localRank, w.process.pid(), w.hung);
    w.process.signal(SIGKILL);
  }
}

std::vector<WorkerExit> WorkerProcesses::poll() {
  std::vector<WorkerExit> exits;
  // Heartbeats are read at most every kHangCheckPeriod: the limits are seconds.
  const bool checkHangs = hangPolicy_.enabled() &&
                          std::chrono::steady_clock::now() - lastHangCheck_ >= kHangCheckPeriod;
  if (checkHangs)
    lastHangCheck_ = std::chrono::steady_clock::now();
  std::vector<Worker*> ended;
  for (auto& w : workers_) {
    if (checkHangs)
      killHung(w);
    if (auto exit = w.process.poll()) {
      // Its last words in the log before anyone reads them (its children may hold the pipe).
      if (logs_ && w.logSink >= 0)
        logs_->settle(w.logSink, kLogSettle);
      ended.push_back(&w);
      exits.push_back({w.spec.localRank, w.spec.globalRank, *exit, w.hung, false, w.log});
    }
  }
  if (!ended.empty()) {
    // Early: this worker failed before completing a step, and no worker of the group completed
    // one either (live recovery's survivors trained on; a generation that trained is no crash
    // loop). Everyone's last beat first.
    bool anyAdvanced = false;
    for (auto& w : workers_) {
      observe(w);
      anyAdvanced = anyAdvanced || w.advanced;
    }
    // (With no worker advanced, a worker that beat is early; one that never beat, when quick.)
    for (std::size_t i = 0; i < ended.size(); ++i) {
      const Worker& w = *ended[i];
      exits[i].early = !anyAdvanced &&
                       (w.beat || std::chrono::steady_clock::now() - w.started < kEarlyExitWindow);
    }
  }
  return exits;
}

std::string WorkerExit::describe() const {
  return hung.empty() ? exit.describe() : fmt::format("hung ({}): killed", hung);
}

void WorkerProcesses::stop(std::chrono::milliseconds grace) {
  std::vector<ChildProcess*> processes;
  for (auto& w : workers_)
    processes.push_back(&w.process);
  stopAll(processes, grace);
  workers_.clear();
}

std::vector<std::pair<int, pid_t>> WorkerProcesses::runningWorkers() const {
  std::vector<std::pair<int, pid_t>> out;
  for (const auto& w : workers_) {
    if (w.process.running())
      out.emplace_back(w.spec.localRank, w.process.pid());
  }
  return out;
}

void WorkerProcesses::stopLocalRanks(const std::vector<int>& localRanks,
                                     std::chrono::milliseconds grace) {
  std::vector<ChildProcess*> processes;
  for (auto& w : workers_) {
    if (std::find(localRanks.begin(), localRanks.end(), w.spec.localRank) != localRanks.end())
      processes.push_back(&w.process);
  }
  stopAll(processes, grace);
  std::erase_if(workers_, [&](const Worker& w) {
    return std::find(localRanks.begin(), localRanks.end(), w.spec.localRank) != localRanks.end();
  });
}

void WorkerProcesses::signalLocalRanks(const std::vector<int>& localRanks, int signal) {
  for (auto& w : workers_) {
    if (w.process.running() &&
        std::find(localRanks.begin(), localRanks.end(), w.spec.localRank) != localRanks.end())
      w.process.signal(signal);  // its process group: the program behind a wrapper too
  }
}

std::vector<std::string> WorkerProcesses::lostOutput() const {
  return logs_ ? logs_->lost() : std::vector<std::string>{};
}

int WorkerProcesses::running() const {
  int n = 0;
  for (const auto& w : workers_)
    n += w.process.running() ? 1 : 0;
  return n;
}

std::vector<pid_t> WorkerProcesses::pids() const {
  std::vector<pid_t> out;
  for (const auto& w : workers_) {
    if (w.process.running())
      out.push_back(w.process.pid());
  }
  return out;
}

}  // namespace stretch::launcher
