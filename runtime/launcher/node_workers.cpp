#include "runtime/launcher/node_workers.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "runtime/common/error.hpp"
#include "runtime/common/posix_files.hpp"
#include "runtime/common/worker_variables.hpp"
#include "runtime/launcher/job_protocol.hpp"
#include "runtime/launcher/launch_defaults.hpp"

namespace stretch::launcher {

using agent::Duration;
using agent::NodeAssignment;
using agent::StartWorkers;
using agent::WorkerExited;

NodeWorkers::NodeWorkers(std::string nodeId, WorkerCommand command, EnvironmentFor environment,
                         std::filesystem::path logDir, Duration stopGrace,
                         std::optional<LiveRecoveryOptions> live)
    : nodeId_(std::move(nodeId)),
      command_(std::move(command)),
      environment_(std::move(environment)),
      logDir_(std::move(logDir)),
      stopGrace_(stopGrace),
      live_(std::move(live)) {
  if (command_.argv.empty())
    throw ConfigError("launch: no program to run (expected PROGRAM [ARGS...])");
  if (!environment_)
    throw InternalError("NodeWorkers: no environment function");
  if (live_ && !live_->store)
    throw InternalError("NodeWorkers: live recovery without a store");
  if (live_)
    executor_.emplace(*live_->store, static_cast<LiveTransport&>(*this), live_->clock, "agent",
                      live_->batchContract);
}

namespace {

// 0, 1, ..., n - 1.
std::vector<int> localRanksBelow(std::int64_t n) {
  std::vector<int> out;
  for (std::int64_t local = 0; local < n; ++local)
    out.push_back(static_cast<int>(local));
  return out;
}

}  // namespace

NodeWorkers::~NodeWorkers() {
  workers_.stop(grace());
  if (!heartbeatDir_.empty()) {
    try {
      removeTree(heartbeatDir_);
    } catch (const std::exception& e) {
      spdlog::warn("agent: cannot remove the heartbeat directory {}: {}", heartbeatDir_, e.what());
    }
  }
}

void NodeWorkers::detectHangs(const agent::HangPolicy& policy) {
  if (!policy.enabled())
    return;
  if (heartbeatDir_.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        joinPath(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "stretch-heartbeats-XXXXXX");
    if (::mkdtemp(pattern.data()) == nullptr) {
      spdlog::warn("agent: cannot create a heartbeat directory ({}: {}); hang detection is off",
                   pattern, std::strerror(errno));
      return;
    }
    heartbeatDir_ = pattern;
  }
  workers_.detectHangs(heartbeatDir_, policy);
}

namespace {

// ", its log L ends:\n  line\n  line" (the last kTailLines lines), or "" without a log file.
std::string logTail(const std::filesystem::path& log) {
  constexpr std::size_t kTailLines = 5;
  constexpr std::streamoff kTailBytes = 4096;
  if (log.empty())
    return {};
  std::ifstream in(log, std::ios::binary);
  if (!in)
    return fmt::format("; its log {} cannot be read", log.string());
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - kTailBytes));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> lines;
  std::size_t begin = 0;
  while (begin < text.size()) {
    const auto end = text.find('\n', begin);
    std::string line =
        text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    if (!line.empty())
      lines.push_back(std::move(line));
    begin = end == std::string::npos ? text.size() : end + 1;
  }
  if (lines.empty())
    return fmt::format("; its log {} is empty", log.string());
  const std::size_t from = lines.size() > kTailLines ? lines.size() - kTailLines : 0;
  std::string out = fmt::format("; its log {} ends:", log.string());
  for (std::size_t i = from; i < lines.size(); ++i)
    out += "\n    " + lines[i];
  return out;
}

}  // namespace

std::vector<std::string> NodeWorkers::lostOutput() const {
  std::vector<std::string> out = workers_.lostOutput();
  if (configs_) {
    for (std::string& line : configs_->lostOutput())
      out.push_back(std::move(line));
  }
  return out;
}

std::vector<std::string> NodeWorkers::takeProblems() {
  std::vector<std::string> out;
  if (configs_)
    out = configs_->takeProblems();  // written for the workers' environment, before their logs
  for (std::string& line : workers_.takeProblems())
    out.push_back(std::move(line));
  return out;
}

std::chrono::milliseconds NodeWorkers::grace() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(stopGrace_);
}

bool NodeWorkers::speaksLive(pid_t pid) const {
  return live_->store->check({live::live_keys::capable(nodeId_, pid)});
}

bool NodeWorkers::isJoiner(pid_t pid) const {
  return std::find(joiners_.begin(), joiners_.end(), pid) != joiners_.end();
}

std::vector<WorkerProcessSpec> NodeWorkers::specsFor(
    const StartWorkers& action, const NodeAssignment& node, const std::vector<int>& localRanks,
    const std::map<std::string, std::string>& extra) const {
  std::vector<WorkerProcessSpec> specs;
  for (const int local : localRanks) {
    WorkerProcessSpec spec;
    spec.localRank = local;
    spec.globalRank = static_cast<int>(node.firstRank + local);
    spec.env = environment_(action, node, local);
    for (const auto& [name, value] : extra)
      spec.env[name] = value;
    auto invocation = workerInvocation(command_, local, node.localWorldSize);
    for (auto& [name, value] : invocation.env)
      spec.env[name] = std::move(value);
    spec.argv = expandWorkerVariables(invocation.argv, invocation.programAt, spec.env);
    specs.push_back(std::move(spec));
  }
  return specs;
}

void NodeWorkers::start(const StartWorkers& action) {
  const auto node = std::find_if(action.nodes.begin(), action.nodes.end(),
                                 [&](const NodeAssignment& n) { return n.nodeId == nodeId_; });
  start(action, node == action.nodes.end() ? std::nullopt : std::optional(*node));
}

void NodeWorkers::start(const StartWorkers& action, const std::optional<NodeAssignment>& node) {
  generation_ = action.generation;
  joiners_.clear();
  if (executor_)
    executor_->started(action);
  if (!node)
    return;
  const std::vector<int> locals = localRanksBelow(node->localWorldSize);
  std::map<std::string, std::string> extra;
  if (executor_ || startLiveGeneration_)
    extra[worker_env::kLiveGeneration] =
        std::to_string(startLiveGeneration_.value_or(executor_ ? executor_->liveGeneration() : 0));
  workers_.start(command_.argv, specsFor(action, *node, locals, extra), logDir_,
                 static_cast<int>(action.generation));
}

std::optional<agent::LiveSituation> NodeWorkers::liveSituation(const StartWorkers& next) const {
  if (!executor_ || next.nodes.size() != 1 || next.nodes.front().nodeId != nodeId_)
    return std::nullopt;
  return executor_->situation();
}

void NodeWorkers::continueLive(const StartWorkers& action, const agent::LivePlan& plan) {
  if (!executor_)
    throw InternalError("NodeWorkers: a live plan without live recovery");
  executor_->carryOut(action, plan);
}

std::vector<RunningWorkerInfo> NodeWorkers::liveWorkers() const {
  std::vector<RunningWorkerInfo> out;
  for (const auto& [local, pid] : workers_.runningWorkers())
    out.push_back({{nodeId_, local}, pid, isJoiner(pid)});
  return out;
}

namespace {
std::vector<int> localsAt(const LocalsByNode& places, const std::string& nodeId) {
  const auto it = places.find(nodeId);
  return it == places.end() ? std::vector<int>{} : it->second;
}
}  // namespace

void NodeWorkers::adopt(const StartWorkers& target, const LocalsByNode& keep,
                        const LocalsByNode& join, std::uint64_t liveGeneration, bool signal) {
  adoptLive(target, localsAt(keep, nodeId_), localsAt(join, nodeId_), liveGeneration);
  if (signal)
    signalLive(localsAt(keep, nodeId_));
}

void NodeWorkers::signal(const LocalsByNode& workers) {
  signalLive(localsAt(workers, nodeId_));
}

void NodeWorkers::adoptLive(const StartWorkers& target, const std::vector<int>& keep,
                            const std::vector<int>& join, std::uint64_t liveGeneration) {
  generation_ = target.generation;
  std::vector<int> others;
  for (const auto& [local, pid] : workers_.runningWorkers()) {
    if (std::find(keep.begin(), keep.end(), local) == keep.end())
      others.push_back(local);
  }
  if (!others.empty())
    workers_.stopLocalRanks(others, grace());
  if (join.empty())
    return;  // (joiners started by an earlier command, kept, stay joiners until ready)
  joiners_.clear();
  const auto node = std::find_if(target.nodes.begin(), target.nodes.end(),
                                 [&](const NodeAssignment& n) { return n.nodeId == nodeId_; });
  if (node == target.nodes.end())
    throw ProtocolError(fmt::format(
        "live command: node {} is to start workers {} but has no place in generation {}", nodeId_,
        fmt::join(join, ","), target.generation));
  const std::map<std::string, std::string> extra = {
      {worker_env::kLiveJoin, "1"}, {worker_env::kLiveGeneration, std::to_string(liveGeneration)}};
  workers_.start(command_.argv, specsFor(target, *node, join, extra), logDir_,
                 static_cast<int>(target.generation));
  for (const auto& [local, pid] : workers_.runningWorkers()) {
    if (std::find(join.begin(), join.end(), local) != join.end())
      joiners_.push_back(pid);
  }
}

void NodeWorkers::signalLive(const std::vector<int>& locals) {
  workers_.signalLocalRanks(locals, worker_env::kLiveSignal);
}

void NodeWorkers::stop() {
  if (executor_)
    executor_->stopped();
  workers_.stop(grace());
}

std::vector<WorkerExited> NodeWorkers::poll() {
  std::vector<WorkerExited> out;
  if (executor_)
    executor_->poll();
  for (const auto& worker : workers_.poll()) {
    const int code = worker.exit.signaled ? -worker.exit.signal() : worker.exit.code;
    if (code != 0) {
      const std::string tail = logTail(worker.log);
      spdlog::warn("agent: worker {} (local rank {}) of generation {} on {} ended: {}{}",
                   worker.globalRank, worker.localRank, generation_, nodeId_, worker.describe(),
                   tail);
      // The generation's first failure: the one the agent names when the job fails (with two
      // workers failing alike, the message once named rank 0 and quoted rank 1's log).
      if (!tail.empty() && failureGeneration_ != generation_) {
        lastFailure_ = fmt::format("worker {}{}", worker.globalRank, tail);
        failureGeneration_ = generation_;
      }
    }
    out.push_back(
        WorkerExited{generation_, nodeId_, worker.localRank, code, worker.early && code != 0});
  }
  const bool finishing =
      std::any_of(out.begin(), out.end(), [](const WorkerExited& e) { return e.exitCode == 0; });
  if (finishing && !joiners_.empty() && executor_) {
    // The survivors finished the job before the replacements took part: they have nothing left
    // to do and end with it. (Across nodes the joiners see live/finished and end by themselves.)
    std::vector<int> waiting;
    for (const auto& [local, pid] : workers_.runningWorkers()) {
      if (isJoiner(pid) && !speaksLive(pid))
        waiting.push_back(local);
    }
    if (!waiting.empty()) {
      workers_.stopLocalRanks(waiting, grace());
      for (const int local : waiting)
        out.push_back(WorkerExited{generation_, nodeId_, local, 0});
      spdlog::info(
          "agent: the job finished before {} replacement worker(s) joined; they end with it",
          waiting.size());
    }
    executor_->abandonJoiners();
    joiners_.clear();
  }
  return out;
}

}  // namespace stretch::launcher
