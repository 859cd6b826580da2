#include "runtime/launcher/node_agent.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runtime/comm/errors.hpp"
#include "runtime/comm/tcp_store.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/common/periodic_task.hpp"
#include "runtime/common/worker_variables.hpp"
#include "runtime/launcher/host_address.hpp"
#include "runtime/launcher/node_workers.hpp"
#include "runtime/launcher/token.hpp"
#include "runtime/launcher/worker_env.hpp"

namespace stretch::launcher {

using namespace agent;
using std::chrono::milliseconds;

namespace {

struct Registration {
  std::uint64_t done = 0;  // the sequence of the command published last: not for this agent
  std::int64_t slot = 0;   // the index of its registration record: its keep-alive field
};

// Registers this node in the job's store.
Registration registerNode(comm::Store& store, const NodeAgentOptions& options) {
  const std::string& id = options.node.nodeId;
  Registration r;
  if (auto text = tryGet(store, "cmd"))
    r.done = decodeCommand(*text).sequence;
  store.set("ack/" + id, std::to_string(r.done));
  // A node that comes back under its old name runs nothing yet: the record its earlier agent
  // left (workers that are gone) must not reach the controller's live decisions.
  if (options.liveRecovery)
    store.set("workers/" + id, encode(NodeWorkersRecord{}));
  r.slot = appendRecord(store, "nodes", encode(options.node));
  spdlog::info("agent {}: registered with {} slot(s)", id, options.node.slots);
  return r;
}

using SteadyClock = std::chrono::steady_clock;

// When the job's store last answered any of the agent's threads (steady clock, nanoseconds
// since its epoch): the controller timeout counts from it.
class Contact {
 public:
  Contact() { touch(); }
  void touch() { last_.store(SteadyClock::now().time_since_epoch().count()); }
  SteadyClock::time_point last() const {
    return SteadyClock::time_point(SteadyClock::duration(last_.load()));
  }

 private:
  std::atomic<SteadyClock::rep> last_;
};

// The wait for the next command, on its own thread and store connection: it blocks on the key
// the controller sets once command `done + 1` is published (commandKey), so that an idle agent
// sends no request but this wait and its keep-alives. The agent's loop asks take() each turn;
// it says yes when the key appeared, when the wait failed (a dropped connection: the watch
// connects again) and when a wait ended without the key (kCommandWaitPeriod), so that the loop
// reads `cmd` and catches up with any command it missed, whose key may be gone by then.
// The thread is left to end on its own (it holds what it uses): the agent's end never waits for
// a wait in flight, a store that does not answer included.
class CommandWatch {
 public:
  CommandWatch(const NodeAgentOptions& options, std::uint64_t done,
               std::shared_ptr<Contact> contact)
      : state_(std::make_shared<State>()) {
    state_->done = done;
    std::thread(run, state_, options.connect, options.controllerTimeout, std::move(contact))
        .detach();
  }
  ~CommandWatch() {
    {
      std::lock_guard lock(state_->mutex);
      state_->stop = true;
    }
    state_->changed.notify_all();
  }
  CommandWatch(const CommandWatch&) = delete;
  CommandWatch& operator=(const CommandWatch&) = delete;

  // Waits at most `timeout` for a command newer than the last one carried out (or for the
  // watch to lose its store, when the loop should look itself), or for one of `workers` to end
  // (a pidfd each, opened before they are reaped); true when the loop should read `cmd`, once.
  // Without pidfds (a kernel before 5.3) it waits at most `fallback`.
  bool take(Duration timeout, const std::vector<std::pair<int, pid_t>>& workers,
            Duration fallback) {
    std::vector<pollfd> fds{{state_->wakeFd, POLLIN, 0}};
    for (const auto& [local, pid] : workers) {
      const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
      if (fd < 0) {
        timeout = std::min(timeout, fallback);
        continue;
      }
      fds.push_back({fd, POLLIN, 0});
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
    ::poll(fds.data(), fds.size(), static_cast<int>(ms));
    for (std::size_t i = 1; i < fds.size(); ++i)
      ::close(fds[i].fd);
    std::uint64_t count = 0;
    if (::read(state_->wakeFd, &count, sizeof count) < 0) {
      // nothing written since the last look
    }
    std::lock_guard lock(state_->mutex);
    return std::exchange(state_->fresh, false);
  }
  // The loop carried out (or skipped) every command up to `sequence`.
  void carriedOut(std::uint64_t sequence) {
    {
      std::lock_guard lock(state_->mutex);
      if (sequence <= state_->done)
        return;
      state_->done = sequence;
    }
    state_->changed.notify_all();
  }

 private:
  struct State {
    State() : wakeFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
      if (wakeFd < 0)
        throw Error(fmt::format("node agent: eventfd: {}", std::strerror(errno)));
    }
    ~State() { ::close(wakeFd); }
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    const int wakeFd;  // written when `fresh` turns true: wakes the loop's poll
    std::mutex mutex;
    std::condition_variable changed;
    std::uint64_t done = 0;
    bool fresh = false;
    bool stop = false;
  };

  static void run(std::shared_ptr<State> state, StoreFactory connect, Duration controllerTimeout,
                  std::shared_ptr<Contact> contact) {
    std::shared_ptr<comm::Store> store;
    std::unique_lock lock(state->mutex);
    while (!state->stop) {
      const std::uint64_t next = state->done + 1;
      lock.unlock();
      bool found = false;
      bool failed = false;
      try {
        if (!store)
          store = connect(std::min<Duration>(controllerTimeout, kCommandWaitPeriod));
        store->wait({commandKey(next)}, kCommandWaitPeriod);
        found = true;
        contact->touch();
      } catch (const comm::StoreTimeoutError&) {
        // No command, or no answer: the contact is not renewed (the keep-alive's answers are).
      } catch (const std::exception&) {
        store.reset();
        failed = true;
      }
      lock.lock();
      state->fresh = true;
      const std::uint64_t one = 1;
      if (::write(state->wakeFd, &one, sizeof one) < 0) {
        // the counter is full: the loop wakes anyway
      }
      // Until the loop has read the command (after a failure: a pause before connecting again).
      // After a wait that ended without the key, the loop's read of `cmd` is the catch-up, and
      // the next wait starts at once.
      if (found || failed) {
        state->changed.wait_for(
            lock, failed ? Duration(std::chrono::milliseconds(200)) : kCommandWaitPeriod,
            [&] { return state->stop || state->done >= next; });
      }
    }
  }

  std::shared_ptr<State> state_;
};

// Keep-alives from their own thread and connection, so that a worker stop that takes the grace
// period does not look like a dead node; they stop when this is destroyed.
class KeepAlive {
 public:
  KeepAlive(const NodeAgentOptions& options, std::int64_t slot, Contact& contact)
      : options_(options),
        key_(keepAliveKey(slot)),
        bit_(keepAliveBit(slot)),
        contact_(contact),
        task_("keep-alive of " + options.node.nodeId, options.keepAliveInterval, [this] {
          beat();
          return PeriodicTask::Next::Continue;
        }) {}

 private:
  // A failure drops the connection; the next beat connects again. A beat waits no longer than
  // the interval (kMinKeepAliveRequestTimeout at least): the agent's end waits for the beat in
  // flight, and a controller that does not answer must not hold it up.
  void beat() {
    try {
      if (!hb_) {
        hb_ = options_.connect(std::min<Duration>(
            options_.controllerTimeout,
            std::max<Duration>(kMinKeepAliveRequestTimeout, options_.keepAliveInterval)));
      }
      hb_->add(key_, bit_);
      contact_.touch();
    } catch (const std::exception&) {
      hb_.reset();
    }
  }

  const NodeAgentOptions& options_;
  const std::string key_;  // this node's keep-alive group (hb/<group>) and its field's unit
  const std::int64_t bit_;
  Contact& contact_;
  std::shared_ptr<comm::Store> hb_;  // the task's thread's only
  PeriodicTask task_;                // last: it starts once the others are set
};

// What the agent's loop carries from one turn to the next.
struct LoopState {
  std::int64_t slot = 0;       // this agent's registration slot (Command::expect)
  std::uint64_t done = 0;      // the sequence of the last command carried out (or skipped)
  std::string masterAddr;      // the last Start or Live command's (rank 0's host)
  std::int64_t nodeCount = 0;  // and its generation's node count
  std::uint64_t generation = 0;
  std::string published;  // the workers/<node> record last written
};

// Live recovery: what this node runs, for the controller's decisions.
void publishWorkers(const NodeAgentOptions& options, comm::Store& store, NodeWorkers& workers,
                    LoopState& state) {
  if (!options.liveRecovery)
    return;
  NodeWorkersRecord record;
  record.generation = state.generation;
  for (const auto& [local, pid] : workers.runningWorkers())
    record.workers.emplace_back(local, pid);
  for (const pid_t pid : workers.joiners())
    record.joiners.push_back(pid);
  std::string text = encode(record);
  if (text != state.published) {
    store.set("workers/" + options.node.nodeId, text);
    state.published = std::move(text);
  }
}

// This node's local ranks in a command's per-node map (none when the node is not in it).
std::vector<int> localRanksOf(const std::map<std::string, std::vector<int>>& m,
                              const std::string& id) {
  const auto it = m.find(id);
  return it == m.end() ? std::vector<int>() : it->second;
}

// Carries out command `c` with this node's workers (a Start: its part `assignment`); true when
// the agent must end (Exit), with `result` filled.
bool carryOut(const Command& c, const std::optional<NodeAssignment>& assignment,
              const NodeAgentOptions& options, comm::Store& store, NodeWorkers& workers,
              LoopState& state, NodeAgentResult& result) {
  const std::string& id = options.node.nodeId;
  switch (c.kind) {
    case CommandKind::Start:
      // Workers still running here missed the Stop before this Start (the agent caught up with
      // the latest command after a dropped connection): the new generation replaces them.
      if (workers.running() > 0)
        workers.stop();
      state.masterAddr = c.masterAddr;
      state.nodeCount = c.nodeCount;
      state.generation = c.start->generation;
      if (options.liveRecovery)
        workers.setLiveGeneration(c.liveGeneration);
      workers.start(*c.start, assignment);
      if (workers.running() > 0) {
        ++result.generationsRun;
        spdlog::info("agent {}: generation {}: {} worker(s) of world size {}", id,
                     c.start->generation, workers.running(), c.start->worldSize);
      }
      break;
    case CommandKind::Stop:
      workers.stop();
      break;
    case CommandKind::Live:
      state.masterAddr = c.masterAddr;
      state.nodeCount = c.nodeCount;
      state.generation = c.start->generation;
      workers.adoptLive(*c.start, localRanksOf(c.keep, id), localRanksOf(c.join, id),
                        c.liveGeneration);
      if (c.signal)
        workers.signalLive(localRanksOf(c.keep, id));
      spdlog::info("agent {}: generation {} continues live: {} worker(s) kept, {} started", id,
                   state.generation, localRanksOf(c.keep, id).size(),
                   localRanksOf(c.join, id).size());
      break;
    case CommandKind::Signal:
      workers.signalLive(localRanksOf(c.keep, id));
      spdlog::info("agent {}: told {} worker(s) of the new live generation", id,
                   localRanksOf(c.keep, id).size());
      break;
    case CommandKind::Exit:
      workers.stop();
      acknowledge(store, c, id, state.slot);
      result.exitCode = c.exitCode;
      result.message = c.reason;
      return true;
  }
  return false;
}

// Carries out the published command when it is new, then acknowledges it; true when the agent
// must end (Exit), with `result` filled.
bool followCommand(const NodeAgentOptions& options, comm::Store& store, NodeWorkers& workers,
                   LoopState& state, NodeAgentResult& result) {
  Command c;
  std::optional<NodeAssignment> assignment;
  while (true) {
    auto text = tryGet(store, "cmd");
    if (!text)
      return false;
    c = decodeCommand(*text);
    if (c.sequence <= state.done)
      return false;
    if (c.kind != CommandKind::Start)
      break;
    // This node's part only (assign/<group>, written before the command). A later generation's
    // there: a newer command replaced this one meanwhile, read it instead.
    const auto value = tryGet(store, assignmentKey(state.slot));
    const Assignment a =
        value ? decodeAssignment(*value, state.slot, options.node.nodeId) : Assignment{};
    if (a.generation > c.start->generation)
      continue;
    if (a.generation == c.start->generation)
      assignment = a.node;
    break;
  }
  if (carryOut(c, assignment, options, store, workers, state, result))
    return true;
  publishWorkers(options, store, workers, state);
  state.done = c.sequence;
  acknowledge(store, c, options.node.nodeId, state.slot);
  return false;
}

void reportExits(const NodeAgentOptions& options, comm::Store& store, NodeWorkers& workers,
                 LoopState& state) {
  // The record of what runs goes first: an exit the controller reads is then never of a
  // worker it still sees running.
  const auto exits = workers.poll();
  publishWorkers(options, store, workers, state);
  for (const auto& e : exits)
    appendRecord(store, "exits",
                 encode(ExitRecord{e.generation, e.nodeId, e.localRank, e.exitCode, e.early}));
}

// A stop signal: the departure first, for the other nodes' workers fail once ours stop (see
// "Order"); then this node's workers.
void leaveOnSignal(comm::Store* store, const std::string& id, NodeWorkers& workers, int sig,
                   NodeAgentResult& result) {
  try {
    if (store != nullptr)
      appendRecord(*store, "leaves",
                   fmt::format("{}\tits agent was stopped by signal {}", id, sig));
  } catch (const std::exception&) {
  }
  workers.stop();
  result.exitCode = 128 + sig;
  result.message = fmt::format("stopped by signal {}; this node's workers were stopped", sig);
}

}  // namespace

NodeAgentResult runNodeAgent(const NodeAgentOptions& options) {
  if (!options.connect || !options.environment)
    throw InternalError("runNodeAgent: no store factory or environment function");
  const std::string& id = options.node.nodeId;
  auto store = options.connect(options.controllerTimeout);
  LoopState state;
  const Registration registration = registerNode(*store, options);
  state.done = registration.done;
  state.slot = registration.slot;
  // The controller timeout counts from the store's last answer to any of the agent's threads.
  auto contactPtr = std::make_shared<Contact>();
  Contact& contact = *contactPtr;
  // Declared before the workers: their stop, when the agent ends, runs under keep-alives.
  KeepAlive keepAlive(options, state.slot, contact);

  NodeWorkers workers(
      id, options.command,
      [&](const StartWorkers& s, const NodeAssignment& n, std::int64_t local) {
        return options.environment(s, n, state.nodeCount, local, state.masterAddr);
      },
      options.logDir, options.stopGrace);
  workers.detectHangs(options.hang);
  NodeAgentResult result;
  result.nodeId = id;
  CommandWatch watch(options, state.done, contactPtr);
  // The loop reads `cmd` only when the watch saw the next command's key (or lost its store), or
  // after a failure of its own; it reaps its workers every turn (local: no store request unless
  // something changed). Its requests wait at most the timeout its connection was made with: the
  // whole timeout for the first, what was left of it for a reconnection.
  bool look = true;  // read `cmd` this turn
  // The hang checks' cadence: a thirtieth of the hang limit's floor, between 100 ms and 1 s (at
  // the default 30 s, once a second: 2,048 idle agents that looked every 100 ms woke the machine
  // 20,000 times a second).
  const Duration lookPeriod =
      options.hang.enabled()
          ? std::clamp<Duration>(options.hang.floor / 30, milliseconds(100), milliseconds(1000))
          : Duration(milliseconds(1000));
  std::string lastError = "no answer";
  while (true) {
    if (options.stopSignal != nullptr && options.stopSignal->load() != 0) {
      leaveOnSignal(store.get(), id, workers, options.stopSignal->load(), result);
      return result;
    }
    try {
      if (!store)
        throw comm::StoreError(lastError);
      if (look) {
        if (followCommand(options, *store, workers, state, result))
          return result;
        contact.touch();
        look = false;
        watch.carriedOut(state.done);
      }
      reportExits(options, *store, workers, state);
    } catch (const ProtocolError&) {
      throw;
    } catch (const std::exception& e) {
      lastError = e.what();
      look = true;
      const auto left = std::chrono::duration_cast<Duration>(
          contact.last() + options.controllerTimeout - SteadyClock::now());
      if (left > Duration(0)) {
        store.reset();  // a connection that failed is not tried again
        try {
          store = options.connect(left);
        } catch (const std::exception& again) {
          lastError = again.what();
        }
      }
    }
    if (SteadyClock::now() - contact.last() > options.controllerTimeout) {
      spdlog::error(
          "agent {}: no answer from the job controller's store for {} (--controller_timeout "
          "{}); stopping this node's workers",
          id, formatDuration(SteadyClock::now() - contact.last()),
          formatDuration(options.controllerTimeout));
      workers.stop();
      result.exitCode = 1;
      result.message = fmt::format(
          "lost the job controller's store: no answer for {} (--controller_timeout) ({}); "
          "this node's workers were stopped",
          formatDuration(options.controllerTimeout), lastError);
      return result;
    }
    // A new command or a worker's exit wakes the loop at once; it looks at its workers (hang
    // checks, no store request) at least every lookPeriod.
    // It also wakes when the controller timeout would pass, not a look period later.
    const auto untilTimeout = std::chrono::duration_cast<Duration>(
        contact.last() + options.controllerTimeout - SteadyClock::now() + milliseconds(1));
    if (watch.take(std::clamp<Duration>(untilTimeout, milliseconds(1), lookPeriod),
                   workers.runningWorkers(), milliseconds(10)))
      look = true;
  }
}

namespace {

std::pair<std::string, int> parseEndpoint(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon != std::string::npos && colon > 0) {
    try {
      std::size_t used = 0;
      const std::string portText = text.substr(colon + 1);
      const int port = std::stoi(portText, &used);
      if (used == portText.size() && port >= 1 && port <= 65535)
        return {text.substr(0, colon), port};
    } catch (...) {
    }
  }
  throw ConfigError(ErrorDetail{"--rdzv", text, "HOST:PORT of the launcher's store"});
}

}  // namespace

NodeAgentResult joinJob(const JoinRequest& r) {
  const auto [host, port] = parseEndpoint(r.rdzv);
  if (r.nodeRank.has_value() == !r.nodeId.empty()) {
    throw ConfigError(ErrorDetail{"--node_rank / --node_id", r.nodeId,
                                  "exactly one of them (--node_id needs --nproc)"});
  }
  if (!r.nodeId.empty() && !r.nproc)
    throw ConfigError(ErrorDetail{"--nproc", "(missing)", "the worker count of node " + r.nodeId});
  std::string token = r.token;
  if (!r.tokenFile.empty()) {
    try {
      const std::string text = readFile(r.tokenFile, "--token_file", 4096);
      token = text.substr(0, text.find('\n'));
    } catch (const IoError& e) {
      throw ConfigError(
          ErrorDetail{"--token_file", r.tokenFile.string(),
                      fmt::format("a readable file holding the job's token ({})", e.what())});
    }
    if (token.empty())
      throw ConfigError(ErrorDetail{"--token_file", r.tokenFile.string(),
                                    "a file whose first line is the job's token"});
  }
  if (!token.empty() && r.tokenFile.empty()) {
    checkTokenStrength(token, r.tokenSource);
  } else if (!token.empty()) {
    try {
      checkTokenStrength(token, "--token_file");
    } catch (const ConfigError& e) {
      // Named by the file, as the other --token_file errors are.
      const auto& d = e.detail();
      throw ConfigError(ErrorDetail{
          "--token_file", r.tokenFile.string(),
          d ? fmt::format("a file whose first line is the job's token, {} (it holds {})",
                          d->expected, d->value)
            : std::string(e.what())});
    }
  }
  comm::TcpStoreOptions storeOptions;
  storeOptions.host = host;
  storeOptions.port = port;
  storeOptions.token = token;
  storeOptions.timeout = fromSeconds(r.controllerTimeout);
  const StoreFactory connect = [storeOptions](Duration timeout) {
    comm::TcpStoreOptions o = storeOptions;
    o.timeout = timeout;
    return std::make_shared<comm::PrefixStore>(kJobPrefix, std::make_shared<comm::TcpStore>(o));
  };
  auto store = connect(storeOptions.timeout);
  JobSettings job = readJob(*store);
  job.token = token;

  NodeRecord node;
  if (r.nodeRank) {
    const LaunchHost launched = readLaunchHost(*store, *r.nodeRank);
    node.nodeId = launched.id;
    node.devices = launched.slots;
  } else {
    node.nodeId = r.nodeId;
    for (int i = 0; i < *r.nproc; ++i)
      node.devices.push_back(i);
  }
  node.slots = static_cast<std::int64_t>(node.devices.size());
  node.address = r.nodeAddr.empty() ? localAddressTowards(host) : r.nodeAddr;

  if (!r.logDir.empty()) {
    // Created afresh, never through a link planted at the path; a full disk is no reason to stop.
    const auto pidFile = r.logDir / fmt::format("agent_{}.pid", node.nodeId);
    try {
      std::filesystem::create_directories(r.logDir);
      writePrivateFile(pidFile.string(), fmt::format("{}\n", ::getpid()));
    } catch (const std::exception& e) {
      spdlog::error("agent: cannot write {}: {}; the agent goes on", pidFile.string(), e.what());
    }
  }

  NodeAgentOptions options;
  options.connect = connect;
  options.node = node;
  options.command = job.command;
  options.logDir = r.logDir;
  options.keepAliveInterval = fromSeconds(r.keepAliveInterval);
  if (job.keepAliveInterval) {
    // The controller reads the keep-alives at the job's interval, and a node's field holds 15
    // beats between two reads: the agent beats at most as slowly as the job says, at most 4
    // times as often.
    options.keepAliveInterval =
        std::clamp(options.keepAliveInterval, *job.keepAliveInterval / 4, *job.keepAliveInterval);
  }
  options.controllerTimeout = fromSeconds(r.controllerTimeout);
  options.stopSignal = r.stopSignal;
  const auto devices = devicesOfSlots(node.devices);
  std::shared_ptr<GenerationConfigs> configs;
  if (job.configJson)
    configs = std::make_shared<GenerationConfigs>(*job.configJson, r.logDir.string());
  options.liveRecovery = job.liveRecovery;
  options.hang.floor = agent::fromSeconds(job.hangTimeout);
  options.hang.fixed = job.hangTimeoutFixed;
  // Live recovery: the workers meet in the job's store (its live/... keys), which outlives them.
  const std::string liveStore = job.liveRecovery ? r.rdzv : std::string();
  options.environment = [job, devices, configs, liveStore](
                            const StartWorkers& s, const NodeAssignment& n, std::int64_t numNodes,
                            std::int64_t local, const std::string& masterAddr) {
    auto env = jobWorkerEnvironment(job, s, n, numNodes, local, masterAddr, devices, configs.get());
    if (!liveStore.empty()) {
      env[worker_env::kAgentStore] = liveStore;
      env[worker_env::kNodeId] = n.nodeId;
    }
    return env;
  };
  return runNodeAgent(options);
}

}  // namespace stretch::launcher
