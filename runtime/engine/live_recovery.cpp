#include "runtime/engine/live_recovery.hpp"

#include <csignal>
#include <cstdlib>
#include <functional>
#include <future>
#include <optional>
#include <string_view>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runtime/comm/backend_choice.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/init_distributed.hpp"
#include "runtime/comm/tcp_store.hpp"
#include "runtime/common/environment.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/periodic_task.hpp"
#include "runtime/common/worker_variables.hpp"
#include "runtime/live/agent_store.hpp"

namespace stretch::engine {

namespace {

volatile std::sig_atomic_t gAnnounced = 0;
// The signals so far, for watchTraining(), which must not consume announced()'s flag: each watch
// remembers the count it saw last.
volatile std::sig_atomic_t gSignals = 0;

void onAnnouncement(int) {
  gAnnounced = 1;
  gSignals = gSignals + 1;
}

// Throws once the job finished (JobFinishedElsewhere) or the agent published a generation newer
// than `generation` (CommTimeoutError saying `while`).
void throwIfSuperseded(comm::Store& root, std::uint64_t generation, std::string_view during) {
  if (root.check({live::live_keys::kFinished}))
    throw JobFinishedElsewhere("the job finished while this worker joined a generation");
  if (live::latestLiveGeneration(root) > generation) {
    throw comm::CommTimeoutError(
        fmt::format("live generation {} was superseded {}", generation, during));
  }
}

// Whether the job finished or a generation newer than `generation` was published; nullopt when
// the store cannot say (unreachable: what the caller waits on ends by its own timeout).
std::optional<bool> superseded(comm::Store& root, std::uint64_t generation) {
  try {
    throwIfSuperseded(root, generation, "");
    return false;
  } catch (const JobFinishedElsewhere&) {
    return true;
  } catch (const comm::CommTimeoutError&) {
    return true;
  } catch (const comm::CommError&) {
    return std::nullopt;
  }
}

// How often a worker joining a generation looks for a newer one.
constexpr auto kSupersessionPoll = std::chrono::milliseconds(20);

// For DeviceGenerations' blocking calls, which poll it every few milliseconds: true once the
// job finished or a generation newer than `generation` was published, asking the store at most
// every kSupersessionPoll.
comm::Interrupt supersededInterrupt(std::shared_ptr<comm::Store> root, std::uint64_t generation) {
  struct State {
    std::chrono::steady_clock::time_point asked{};
    bool superseded = false;
  };
  auto state = std::make_shared<State>();
  return [root = std::move(root), generation, state] {
    const auto now = std::chrono::steady_clock::now();
    if (state->superseded || now - state->asked < kSupersessionPoll)
      return state->superseded;
    state->asked = now;
    state->superseded = superseded(*root, generation).value_or(false);
    return state->superseded;
  };
}

// Generation N's rendezvous store: waits give up as soon as the agent publishes a newer
// generation (a member died before joining; the rendezvous would otherwise wait out its timeout).
class SupersedableStore final : public comm::ForwardingStore {
 public:
  SupersedableStore(std::shared_ptr<comm::Store> inner, std::shared_ptr<comm::Store> root,
                    std::uint64_t generation)
      : comm::ForwardingStore(std::move(inner), "live generation store"),
        root_(std::move(root)),
        generation_(generation) {}

  void wait(const std::vector<std::string>& keys, std::optional<comm::Duration> timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout.value_or(this->timeout());
    while (true) {
      const auto left = deadline - std::chrono::steady_clock::now();
      try {
        inner().wait(keys,
                     std::min<comm::Duration>(std::chrono::duration_cast<comm::Duration>(left),
                                              kSupersessionPoll));
        return;
      } catch (const comm::StoreTimeoutError&) {
        throwIfSuperseded(*root_, generation_, "before its group formed");
        if (std::chrono::steady_clock::now() >= deadline) {
          std::vector<std::string> missing;
          for (const auto& key : keys) {
            if (!inner().check({key}))
              missing.push_back(key);
          }
          throwTimeout("live generation store", missing, timeout.value_or(this->timeout()));
        }
      }
    }
  }

 private:
  std::shared_ptr<comm::Store> root_;
  std::uint64_t generation_;
};

// The batch the launcher planned for the record's generation; nullopt when it has none (a launch
// without --config: the worker's own config decides).
std::optional<config::BatchTriple> batchOf(const live::LiveGeneration& record) {
  if (record.trainBatchSize == 0)
    return std::nullopt;
  config::BatchTriple batch;
  batch.trainBatchSize = record.trainBatchSize;
  batch.microBatchPerGpu = record.microBatch;
  batch.gradientAccumulation = record.gradientAccumulation;
  return batch;
}

// While alive, looks at the agent's store every kSupersessionPoll; once the job finished or a
// generation newer than `generation` was published, calls `onSuperseded` (once, on its own
// thread) to abort what the worker waits on for the old generation: a collective that waits for
// a member that died or that is itself still leaving an older generation.
// `tick`, when set, runs first on every look (DeviceGenerations::poll).
std::unique_ptr<PeriodicTask> watchSupersession(std::shared_ptr<comm::Store> root,
                                                std::uint64_t generation,
                                                std::function<void()> onSuperseded,
                                                std::function<void()> tick = {}) {
  return std::make_unique<PeriodicTask>(
      fmt::format("live generation {}'s supersession watch", generation), kSupersessionPoll,
      [root = std::move(root), generation, onSuperseded = std::move(onSuperseded),
       tick = std::move(tick)] {
        try {
          if (tick)
            tick();
        } catch (const comm::CommError&) {
          return PeriodicTask::Next::Continue;  // the store is unreachable
        }
        if (superseded(*root, generation) != true)
          return PeriodicTask::Next::Continue;
        onSuperseded();
        return PeriodicTask::Next::Stop;
      });
}

// Aborts `record`'s groups when a newer generation supersedes it (a generation's communicator
// is revoked, not aborted: DeviceGenerations' backend keeps it as the next one's parent), and
// lets `device`, when set, see a node-wide abort meanwhile.
std::unique_ptr<PeriodicTask> watchGroups(std::shared_ptr<comm::Store> root,
                                          const live::LiveGeneration& record,
                                          std::shared_ptr<comm::ProcessGroup> group,
                                          std::shared_ptr<comm::ProcessGroup> transfer,
                                          live::DeviceGenerations* device = nullptr) {
  const auto generation = record.generation;
  std::function<void()> tick;
  if (device)
    tick = [device, root] { device->poll(*root); };
  return watchSupersession(
      root, generation,
      [=] {
        const auto reason = fmt::format("live generation {} was superseded", generation);
        if (group)
          group->abort(reason);
        if (transfer)
          transfer->abort(reason);
      },
      std::move(tick));
}

}  // namespace

std::unique_ptr<LiveRecovery> LiveRecovery::fromEnvironment() {
  std::optional<comm::TcpStoreOptions> found = live::agentStoreFromEnvironment();
  if (!found)
    return nullptr;
  comm::TcpStoreOptions options = std::move(*found);
  options.timeout = std::chrono::seconds(30);
  const char* node = std::getenv(worker_env::kNodeId);
  const auto generation = integerVariable(worker_env::kLiveGeneration, 0, 0);
  const char* join = std::getenv(worker_env::kLiveJoin);
  const auto timeout = integerVariable(worker_env::kLiveTimeout, 300, 1);
  return std::make_unique<LiveRecovery>(
      std::make_shared<comm::TcpStore>(options), options.host,
      node != nullptr && *node != '\0' ? node : "localhost", integerVariable("LOCAL_RANK", 0, 0),
      static_cast<std::uint64_t>(generation), join != nullptr && std::string(join) == "1",
      std::chrono::seconds(timeout));
}

LiveRecovery::LiveRecovery(std::shared_ptr<comm::Store> store, std::string storeHost,
                           std::string nodeId, std::int64_t localRank, std::uint64_t generation,
                           bool joining, std::chrono::milliseconds timeout,
                           std::chrono::milliseconds rendezvousTimeout)
    : store_(std::move(store)),
      storeHost_(std::move(storeHost)),
      nodeId_(std::move(nodeId)),
      localRank_(localRank),
      generation_(generation),
      joining_(joining),
      timeout_(timeout),
      rendezvousTimeout_(rendezvousTimeout) {}

LiveRecovery::~LiveRecovery() {
  trainingWatch_.reset();
}

void LiveRecovery::setDeviceComm(comm::DeviceComm device,
                                 std::shared_ptr<comm::CommunicatorLibrary> library) {
  deviceComm_ = std::move(device);
  if (!library && !deviceComm_.backend.empty())
    library = comm::communicatorLibrary(deviceComm_.backend);
  deviceGenerations_.reset();
  if (library) {
    deviceGenerations_ =
        std::make_unique<live::DeviceGenerations>(std::move(library), nodeId_, localRank_);
  }
}

live::LiveGeneration LiveRecovery::waitForGeneration(std::uint64_t after) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (true) {
    if (store_->check({live::live_keys::kFinished})) {
      throw JobFinishedElsewhere(
          fmt::format("live recovery: worker {} of node {}: the job finished while it waited for "
                      "a generation",
                      localRank_, nodeId_));
    }
    const auto latest = live::latestLiveGeneration(*store_);
    if (latest > after)
      return live::parseLiveGeneration(store_->get(live::live_keys::generation(latest)));
    if (std::chrono::steady_clock::now() > deadline) {
      throw comm::CommTimeoutError(fmt::format(
          "live recovery: worker {} of node {} waited {} s for a generation after {}; none came "
          "(STRETCH_LIVE_TIMEOUT)",
          localRank_, nodeId_, timeout_.count() / 1000, after));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::shared_ptr<comm::ProcessGroup> LiveRecovery::connect(const live::LiveGeneration& record,
                                                          const std::string& prefix,
                                                          std::int64_t rank, std::int64_t size,
                                                          bool deviceGroup) {
  const std::uint64_t generation = record.generation;
  auto groupStore = std::make_shared<SupersedableStore>(
      std::make_shared<comm::PrefixStore>(prefix, store_), store_, generation);
  // Phase 1: every member is here (or the generation was superseded, or the live timeout).
  groupStore->set(fmt::format("present/{}", rank), "1");
  std::vector<std::string> everyone;
  for (std::int64_t other = 0; other < size; ++other)
    everyone.push_back(fmt::format("present/{}", other));
  groupStore->wait(everyone, timeout_);
  // Phase 2: connect within the rendezvous timeout, on a thread of its own. Gloo's connect
  // cannot be interrupted: a member that dies after arriving leaves the others waiting for it
  // for the whole timeout, while the agent has long published the generation that replaces
  // this one. So this worker leaves the attempt behind as soon as that happens. The attempt's
  // thread is detached and owns all it uses; it ends by itself within the rendezvous timeout
  // (its store waits end at once: the generation is superseded), or with the process, which
  // must not wait for it: a job that finishes meanwhile ends at once.
  auto result = std::make_shared<std::promise<std::shared_ptr<comm::ProcessGroup>>>();
  auto attempt = result->get_future();
  // Device buffers go over the generation's communicator (DeviceGenerations) when this worker
  // has one and no two ranks of the group share a device (NCCL refuses them); else staged
  // through host memory on the generation's Gloo group, or not served at all.
  bool native = deviceGroup && deviceGenerations_ != nullptr;
  if (native && !deviceComm_.identity.empty() && size > 1) {
    comm::PrefixStore check("device_check", groupStore);
    native = !comm::anyDeviceShared(check, static_cast<int>(rank), static_cast<int>(size),
                                    deviceComm_.identity, rendezvousTimeout_);
  }
  comm::DeviceComm device;
  if (!native)
    device.staging = deviceComm_.staging;
  std::thread([result, groupStore, rank, size, timeout = rendezvousTimeout_, host = storeHost_,
               localRank = localRank_, device] {
    try {
      result->set_value(comm::buildGroup("gloo", groupStore, static_cast<int>(rank),
                                         static_cast<int>(size), timeout, host,
                                         static_cast<int>(localRank), device));
    } catch (...) {
      result->set_exception(std::current_exception());
    }
  }).detach();
  while (attempt.wait_for(kSupersessionPoll) != std::future_status::ready)
    throwIfSuperseded(*store_, generation, "while its group connected");
  auto group = attempt.get();
  if (native) {
    group->setBackend(comm::DeviceType::Cuda,
                      deviceGenerations_->enter(record, *groupStore, *store_, rendezvousTimeout_,
                                                supersededInterrupt(store_, generation)));
  }
  return group;
}

LiveRecovery::Joined LiveRecovery::joinRecord(const live::LiveGeneration& record) {
  const std::int64_t rank = record.rankOf(nodeId_, localRank_);
  const std::int64_t transferRank = record.transferRankOf(nodeId_, localRank_);
  if (transferRank < 0) {
    // No place in this generation (an interim one of fewer survivors, or this worker is being
    // stopped): the next one.
    spdlog::info("live recovery: worker {} of node {} waits out generation {}", localRank_, nodeId_,
                 record.generation);
    return {};
  }
  const auto build = [&](const std::string& prefix, std::int64_t r, std::int64_t size,
                         bool device) { return connect(record, prefix, r, size, device); };
  Joined joined;
  try {
    if (!record.donors.empty()) {
      joined.transfer = build(live::live_keys::transferPrefix(record.generation), transferRank,
                              record.transferSize(), false);
    }
    if (rank >= 0)
      joined.group =
          build(live::live_keys::groupPrefix(record.generation), rank, record.worldSize, true);
  } catch (const comm::CommError& e) {
    spdlog::warn("live recovery: generation {}'s group did not form ({}); waiting for the next",
                 record.generation, e.what());
    return {};
  }
  return joined;
}

void LiveRecovery::donate(Engine& engine, comm::ProcessGroup& transfer,
                          const live::LiveGeneration& record) {
  spdlog::info(
      "live recovery: worker {} of node {} gives its partition copies to generation {} (it "
      "trains in none of its {} rank(s))",
      localRank_, nodeId_, record.generation, record.worldSize);
  try {
    engine.donatePartitions(transfer, static_cast<int>(record.worldSize));
    store_->add(live::live_keys::donated(record.generation), 1);
  } catch (const PartitionsLostError& e) {
    spdlog::warn("live recovery: generation {}: {}", record.generation, e.what());
  } catch (const comm::CommError& e) {
    spdlog::warn("live recovery: giving generation {} its copies failed ({})", record.generation,
                 e.what());
  }
}

std::shared_ptr<comm::ProcessGroup> LiveRecovery::joinGroup() {
  // Ready: the agent publishes the generation that includes this worker once every worker it
  // started for it is ready (the survivors train on meanwhile).
  store_->add(live::live_keys::ready(generation_), 1);
  std::uint64_t after = generation_ > 0 ? generation_ - 1 : 0;
  while (true) {
    pending_ = waitForGeneration(after);
    // (The agent names survivors only as donors; a joiner has no copies to give.)
    if (auto joined = joinRecord(pending_); joined.group) {
      generation_ = pending_.generation;
      pendingTransfer_ = std::move(joined.transfer);
      comm::setDefaultGroup(joined.group);
      return joined.group;
    }
    after = pending_.generation;
  }
}

void LiveRecovery::partitionsLost(Engine& engine, const PartitionsLostError& e) {
  // Every member of the group decided alike: none can continue live. Each withdraws its offer
  // before any exits, so that the agent restarts the job from its checkpoint at the first exit.
  store_->deleteKey(live::live_keys::capable(nodeId_, live::workerProcessId()));
  try {
    engine.processGroup()->barrier()->wait();
  } catch (const comm::CommError&) {
  }
  spdlog::error("{}", e.what());
}

void LiveRecovery::start(Engine& engine) {
  if (!engine.device().is_cpu() && !deviceComm_.staging && !deviceGenerations_) {
    // A generation's device buffers need a communicator library (NCCL's, which generations
    // shrink and grow) or staging through host memory.
    liveCapable_ = false;
    if (engine.dpRank() == 0) {
      spdlog::warn(
          "live recovery: not available on {} with {} (no communicator library registered for "
          "it; set STRETCH_COMM_BACKEND=gloo to stage through host memory instead); a failure "
          "restarts every worker from the checkpoint",
          engine.device().str(),
          deviceComm_.backend.empty() ? std::string("no device backend") : deviceComm_.backend);
    }
    return;
  }
  // ZeRO 1/2: every completed step is copied to the buddy from now on (joiners start with the
  // state they receive, the others with the state they have).
  // The buddy is a node's worth of ranks away, on the next node of a multi-node job.
  engine.enablePartitionCopies(static_cast<int>(integerVariable("LOCAL_WORLD_SIZE", 1, 1)));
  if (!joining_)
    engine.copyPartitions();
  // The launch's own group over NCCL (initDistributed's): its communicator is the parent of the
  // first live generation, which its survivors then shrink instead of building anew. It has no
  // live record; it is held under a number of its own for this start of the job.
  if (deviceGenerations_ && !joining_) {
    const auto& group = engine.processGroup();
    if (auto device = group->sharedBackend(comm::DeviceType::Cuda)) {
      const auto start = static_cast<std::uint64_t>(integerVariable(worker_env::kGeneration, 0, 0));
      // Its abort (Engine::abandonStep) then revokes, keeping the communicator a parent.
      if (auto adopted = deviceGenerations_->adopt(live::launchGroupGeneration(start), device))
        group->setBackend(comm::DeviceType::Cuda, std::move(adopted));
    }
  }
  if (joining_) {
    try {
      auto transfer = std::exchange(pendingTransfer_, {});
      const auto watch =
          watchGroups(store_, pending_, engine.processGroup(), transfer, deviceGenerations_.get());
      engine.rejoin(engine.processGroup(), batchOf(pending_), transfer);
    } catch (const PartitionsLostError& e) {
      partitionsLost(engine, e);
      throw;
    } catch (const comm::CommError& e) {
      spdlog::warn(
          "live recovery: taking the job's state failed ({}); waiting for the next "
          "generation",
          e.what());
      recover(engine);
    }
    joining_ = false;
  }
  struct sigaction action {};
  action.sa_handler = onAnnouncement;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(worker_env::kLiveSignal, &action, nullptr);
  watchTraining(engine.processGroup()->size());
  if (engine.supportsLiveRecovery())
    store_->set(live::live_keys::capable(nodeId_, live::workerProcessId()),
                engine.partitionCopiesEnabled() ? live::live_keys::kCapableWithCopies : "1");
}

void LiveRecovery::finish() {
  store_->set(live::live_keys::kFinished, std::to_string(generation_));
}

bool LiveRecovery::announced() {
  if (gAnnounced == 0)
    return false;
  gAnnounced = 0;
  return live::latestLiveGeneration(*store_) > generation_;
}

void LiveRecovery::watchTraining(std::int64_t world) {
  if (!deviceGenerations_)
    return;
  // The watch stops before generation_ changes (recover()), so it keeps the value it started
  // with.
  trainingWatch_ = std::make_unique<PeriodicTask>(
      "live recovery's communicator watch", kSupersessionPoll,
      [this, world, generation = generation_, seen = static_cast<int>(gSignals)]() mutable {
        // No store request between signals: every worker of the job runs this watch, and the
        // agent's store serves them all. (A node-wide abort needs no look here: a member
        // whose communicator was aborted says so when it enters the next generation, and the
        // plan gives its node no survivor.)
        try {
          if (gSignals == seen)
            return PeriodicTask::Next::Continue;
          seen = gSignals;
          const auto latest = live::latestLiveGeneration(*store_);
          if (latest <= generation)
            return PeriodicTask::Next::Continue;
          const auto record =
              live::parseLiveGeneration(store_->get(live::live_keys::generation(latest)));
          // A generation that keeps this worker's whole group (joiners ready, a node added)
          // is taken at the next step boundary; one that leaves some of it out came from a
          // failure, and this worker may be waiting on the peer that failed.
          if (record.rankOf(nodeId_, localRank_) >= 0 && record.worldSize >= world)
            return PeriodicTask::Next::Continue;
          deviceGenerations_->supersede(fmt::format(
              "live generation {} superseded by {}, which leaves out some of its {} rank(s)",
              generation, latest, world));
          return PeriodicTask::Next::Stop;
        } catch (const comm::CommError&) {
          // The store is unreachable: the operation's own timeout ends it.
          return PeriodicTask::Next::Continue;
        }
      });
}

void LiveRecovery::recover(Engine& engine) {
  const auto began = std::chrono::steady_clock::now();
  // The generation changes under the watch from here on; it watches the next one.
  trainingWatch_.reset();
  engine.abandonStep();
  comm::setDefaultGroup(nullptr);
  std::uint64_t after = generation_;
  while (true) {
    const auto record = waitForGeneration(after);
    auto [group, transfer] = joinRecord(record);
    after = record.generation;
    if (!group) {
      if (transfer) {
        const auto watch = watchGroups(store_, record, nullptr, transfer);
        donate(engine, *transfer, record);
      }
      continue;
    }
    comm::setDefaultGroup(group);
    try {
      const auto watch = watchGroups(store_, record, group, transfer, deviceGenerations_.get());
      engine.rejoin(group, batchOf(record), transfer);
    } catch (const PartitionsLostError& e) {
      partitionsLost(engine, e);
      throw;
    } catch (const comm::CommError& e) {
      spdlog::warn(
          "live recovery: generation {} failed while taking the state ({}); waiting for "
          "the next",
          record.generation, e.what());
      engine.abandonStep();
      comm::setDefaultGroup(nullptr);
      continue;
    }
    generation_ = record.generation;
    watchTraining(group->size());
    if (engine.dpRank() == 0) {
      spdlog::info("live recovery: generation {} continues at step {} after {:.3f} s", generation_,
                   engine.globalSteps(),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
    }
    return;
  }
}

}  // namespace stretch::engine
