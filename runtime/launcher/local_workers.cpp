#include "runtime/launcher/local_workers.hpp"

#include <algorithm>
#include <csignal>

#include <fmt/format.h>

#include "runtime/common/error.hpp"

namespace stretch::launcher {

LocalWorkerGroup::~LocalWorkerGroup() {
  stop(std::chrono::seconds(2));
}

void LocalWorkerGroup::start(const std::vector<std::string>& argv,
                             const std::vector<WorkerProcessSpec>& workers,
                             const std::filesystem::path& logDir, int attempt) {
  if (argv.empty() && std::any_of(workers.begin(), workers.end(),
                                  [](const WorkerProcessSpec& w) { return w.argv.empty(); }))
    throw ConfigError("worker command: empty (expected a program and its arguments)");
  std::filesystem::path dir;
  if (!logDir.empty()) {
    dir = logDir / fmt::format("attempt_{}", attempt);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
      throw IoError(fmt::format("--log_dir {}: cannot create {}: {}", logDir.string(), dir.string(),
                                ec.message()));
  }
  for (const auto& spec : workers) {
    SpawnOptions options;
    options.argv = spec.argv.empty() ? argv : spec.argv;
    options.env = spec.env;
    if (!dir.empty())
      options.logFile = dir / fmt::format("rank_{}.log", spec.globalRank);
    options.execErrorPrefix = fmt::format("stretch: worker rank {}: ", spec.globalRank);
    workers_.push_back({spec, spawnProcess(options)});
  }
}

std::vector<WorkerExit> LocalWorkerGroup::poll() {
  std::vector<WorkerExit> exits;
  for (auto& w : workers_) {
    if (const auto exit = w.process.poll())
      exits.push_back({w.spec.localRank, w.spec.globalRank, *exit});
  }
  return exits;
}

void LocalWorkerGroup::stop(std::chrono::milliseconds grace) {
  std::vector<ChildProcess*> processes;
  for (auto& w : workers_)
    processes.push_back(&w.process);
  stopAll(processes, grace);
  workers_.clear();
}

std::vector<std::pair<int, pid_t>> LocalWorkerGroup::runningWorkers() const {
  std::vector<std::pair<int, pid_t>> out;
  for (const auto& w : workers_) {
    if (w.process.running())
      out.emplace_back(w.spec.localRank, w.process.pid());
  }
  return out;
}

void LocalWorkerGroup::stopLocalRanks(const std::vector<int>& localRanks,
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

void LocalWorkerGroup::signalLocalRanks(const std::vector<int>& localRanks, int signal) {
  for (auto& w : workers_) {
    if (w.process.running() &&
        std::find(localRanks.begin(), localRanks.end(), w.spec.localRank) != localRanks.end())
      ::kill(w.process.pid(), signal);
  }
}

int LocalWorkerGroup::running() const {
  int n = 0;
  for (const auto& w : workers_)
    n += w.process.running() ? 1 : 0;
  return n;
}

std::vector<pid_t> LocalWorkerGroup::pids() const {
  std::vector<pid_t> out;
  for (const auto& w : workers_) {
    if (w.process.running())
      out.push_back(w.process.pid());
  }
  return out;
}

}  // namespace stretch::launcher
