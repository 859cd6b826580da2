#include "sim/sim_backend.hpp"

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <tuple>

#include <climits>
#include <fmt/format.h>

#include "runtime/comm/errors.hpp"
#include "runtime/comm/in_process_backend.hpp"
#include "runtime/common/error.hpp"

namespace stretch::sim {

using comm::BufferView;
using comm::CollectiveOptions;
using comm::CommError;
using comm::OpType;
using comm::Work;

namespace {

// How an operation ends: shared by the Works of every rank taking part.
struct Completion {
  bool done = false;
  std::int64_t end = 0;  // simulated ns at which the operation finishes
  std::exception_ptr error;
};

// One collective of a group: created by the first member to issue it, completed by the last.
struct Slot {
  OpType op = OpType::Barrier;
  std::uint64_t bytes = 0;
  int firstRank = 0;
  int arrived = 0;
  std::int64_t latestArrival = 0;
  std::int64_t costNs = 0;
  std::shared_ptr<Completion> completion = std::make_shared<Completion>();
};

struct Message {
  std::int64_t arrival = 0;
  std::uint64_t bytes = 0;
};

struct Mailbox {
  std::deque<Message> sent;  // messages no receive has claimed yet
  std::deque<std::pair<std::shared_ptr<Completion>, std::uint64_t>> receives;  // waiting ones
};

std::int64_t nanosOf(double seconds) noexcept {
  return toSimDuration(seconds).count();
}

}  // namespace

SimDuration toSimDuration(double seconds) noexcept {
  if (!(seconds > 0))
    return SimDuration::zero();
  const double ns = std::nearbyint(seconds * 1e9);
  if (ns >= 9.2e18)
    return SimDuration(INT64_MAX);
  return SimDuration(static_cast<std::int64_t>(ns));
}

std::string_view toString(SimBackendMode mode) noexcept {
  return mode == SimBackendMode::Functional ? "functional" : "cost_only";
}

// ---------------------------------------------------------------------------------------------
// World state: the clocks.

struct SimWorld::State {
  State(const ClusterSpec& c, std::int64_t n, SimBackendMode m, SimWorldOptions o)
      : cluster(c),
        size(n),
        mode(m),
        options(o),
        placement(placeNodeByNode(c, n)),
        clocks(new std::atomic<std::int64_t>[static_cast<std::size_t>(n)]),
        backends(static_cast<std::size_t>(n)) {
    for (std::int64_t r = 0; r < n; ++r)
      clocks[static_cast<std::size_t>(r)].store(0, std::memory_order_relaxed);
  }

  const ClusterSpec cluster;
  const std::int64_t size;
  const SimBackendMode mode;
  const SimWorldOptions options;
  const Placement placement;

  // A rank's clock is max(raw[r], floor) + shift: the lockstep API raises every clock (floor) or
  // advances every clock (shift) in O(1). raw and floor are relative to shift.
  std::unique_ptr<std::atomic<std::int64_t>[]> clocks;
  std::atomic<std::int64_t> floor{0};
  std::atomic<std::int64_t> shift{0};
  std::atomic<std::int64_t> maxClock{0};  // absolute
  std::atomic<std::uint64_t> operations{0};
  std::atomic<std::int64_t> communicationNs{0};

  std::mutex mutex;  // backends
  std::vector<std::weak_ptr<SimBackend>> backends;
  std::shared_ptr<SimBackend::Group> worldGroup;
  std::shared_ptr<comm::InProcessWorld> inner;  // Functional mode: moves the data

  std::int64_t clock(std::int64_t r) const noexcept {
    const auto& raw = clocks[static_cast<std::size_t>(r)];
    return std::max(raw.load(std::memory_order_acquire), floor.load(std::memory_order_acquire)) +
           shift.load(std::memory_order_acquire);
  }
  void bumpMax(std::int64_t t) noexcept {
    std::int64_t cur = maxClock.load(std::memory_order_relaxed);
    while (cur < t && !maxClock.compare_exchange_weak(cur, t, std::memory_order_acq_rel)) {
    }
  }
  // clock(r) = max(clock(r), t)
  void raise(std::int64_t r, std::int64_t t) noexcept {
    auto& raw = clocks[static_cast<std::size_t>(r)];
    const std::int64_t rel = t - shift.load(std::memory_order_acquire);
    std::int64_t cur = raw.load(std::memory_order_relaxed);
    while (cur < rel && !raw.compare_exchange_weak(cur, rel, std::memory_order_acq_rel)) {
    }
    bumpMax(clock(r));
  }
  // clock(r) += d
  void add(std::int64_t r, std::int64_t d) noexcept {
    auto& raw = clocks[static_cast<std::size_t>(r)];
    std::int64_t cur = raw.load(std::memory_order_relaxed);
    std::int64_t next = 0;
    do {
      next = std::max(cur, floor.load(std::memory_order_acquire)) + d;
    } while (!raw.compare_exchange_weak(cur, next, std::memory_order_acq_rel));
    bumpMax(clock(r));
  }
  void count(std::int64_t costNs) noexcept {
    operations.fetch_add(1, std::memory_order_relaxed);
    communicationNs.fetch_add(costNs, std::memory_order_relaxed);
  }
};

// ---------------------------------------------------------------------------------------------
// A group: the world or a sub-group, with its in-flight collectives and mailboxes.

struct SimBackend::Group {
  std::shared_ptr<SimWorld::State> world;
  int size = 0;
  std::vector<std::int64_t> members;  // group rank -> world rank; empty for the world itself
  Placement placement;

  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::shared_ptr<Slot>> slots;  // in flight, by sequence number from firstSeq
  std::uint64_t firstSeq = 0;
  std::int64_t lastEnd = 0;  // when the group's previous collective finished
  std::string poison;        // set once the group is broken; every later operation fails
  std::map<std::tuple<int, int, int>, Mailbox> mailboxes;  // (src, dst, tag)
  std::map<std::string, std::shared_ptr<Group>> subgroups;

  std::int64_t worldRank(int r) const noexcept {
    return members.empty() ? r : members[static_cast<std::size_t>(r)];
  }
  bool sameNode(int a, int b) const noexcept {
    const auto g = world->cluster.gpusPerNode;
    return worldRank(a) / g == worldRank(b) / g;
  }
};

namespace {

// The Work of a sim operation: waits (in real time) for the operation to complete, then raises
// the rank's clock to the operation's end.
class SimWork final : public Work {
 public:
  SimWork(OpType op, comm::Duration timeout, std::string description,
          std::shared_ptr<SimBackend::Group> group, std::shared_ptr<Completion> completion,
          std::int64_t worldRank)
      : Work(op, timeout, std::move(description)),
        group_(std::move(group)),
        completion_(std::move(completion)),
        worldRank_(worldRank) {}

  bool isCompleted() override {
    std::lock_guard lock(group_->mutex);
    return completion_->done;
  }

  void wait(std::optional<comm::Duration> timeout = std::nullopt) override {
    const comm::Duration limit = timeout.value_or(this->timeout());
    std::int64_t end = 0;
    {
      std::unique_lock lock(group_->mutex);
      if (!group_->changed.wait_for(lock, limit, [&] { return completion_->done; }))
        throwTimeout(limit);
      if (completion_->error)
        std::rethrow_exception(completion_->error);
      end = completion_->end;
    }
    group_->world->raise(worldRank_, end);
  }

  std::exception_ptr exception() override {
    std::lock_guard lock(group_->mutex);
    return completion_->error;
  }

 private:
  std::shared_ptr<SimBackend::Group> group_;
  std::shared_ptr<Completion> completion_;
  std::int64_t worldRank_;
};

std::shared_ptr<Work> failedWork(OpType op, std::string description, std::exception_ptr error) {
  auto work =
      std::make_shared<comm::CompletionWork>(op, comm::Duration::zero(), std::move(description));
  work->markFailed(std::move(error));
  return work;
}

Placement placementOf(const ClusterSpec& cluster, const std::vector<std::int64_t>& worldRanks) {
  Placement p;
  p.ranks = static_cast<std::int64_t>(worldRanks.size());
  p.nodes = 0;
  p.ranksPerNode = 0;
  std::int64_t currentNode = -1;
  std::int64_t run = 0;
  for (std::int64_t r : worldRanks) {  // ascending, so a node's members are consecutive
    const std::int64_t node = r / cluster.gpusPerNode;
    if (node != currentNode) {
      currentNode = node;
      ++p.nodes;
      run = 0;
    }
    p.ranksPerNode = std::max(p.ranksPerNode, ++run);
  }
  return p;
}

// A non-null address for CostOnly buffers that have only a count (never dereferenced).
unsigned char kNoData = 0;

}  // namespace

// ---------------------------------------------------------------------------------------------
// SimWorld

SimWorld::SimWorld(std::shared_ptr<State> state) : state_(std::move(state)) {}
SimWorld::~SimWorld() = default;

std::shared_ptr<SimWorld> SimWorld::create(const ClusterSpec& cluster, std::int64_t ranks,
                                           SimBackendMode mode, SimWorldOptions options) {
  validateCluster(cluster);
  if (ranks < 1 || ranks > cluster.gpus() || ranks > INT_MAX) {
    throw ConfigError(
        ErrorDetail{"ranks", std::to_string(ranks),
                    fmt::format("an integer in [1, {}] (cluster \"{}\": {} nodes x {} GPUs)",
                                std::min<std::int64_t>(cluster.gpus(), INT_MAX), cluster.name,
                                cluster.nodes, cluster.gpusPerNode)});
  }
  auto state = std::make_shared<State>(cluster, ranks, mode, options);
  auto group = std::make_shared<SimBackend::Group>();
  group->world = state;
  group->size = static_cast<int>(ranks);
  group->placement = state->placement;
  state->worldGroup = group;
  if (mode == SimBackendMode::Functional)
    state->inner = std::make_shared<comm::InProcessWorld>(static_cast<int>(ranks), options.timeout);
  return std::shared_ptr<SimWorld>(new SimWorld(std::move(state)));
}

const ClusterSpec& SimWorld::cluster() const noexcept {
  return state_->cluster;
}
std::int64_t SimWorld::size() const noexcept {
  return state_->size;
}
SimBackendMode SimWorld::mode() const noexcept {
  return state_->mode;
}
const SimWorldOptions& SimWorld::options() const noexcept {
  return state_->options;
}

std::shared_ptr<SimBackend> SimWorld::backend(std::int64_t rank) {
  if (rank < 0 || rank >= state_->size)
    throw CommError(fmt::format("sim rank = {}: expected a rank in [0, {})", rank, state_->size));
  std::lock_guard lock(state_->mutex);
  auto& weak = state_->backends[static_cast<std::size_t>(rank)];
  if (auto existing = weak.lock())
    return existing;
  std::shared_ptr<comm::Backend> inner;
  if (state_->inner)
    inner = state_->inner->backend(static_cast<int>(rank));
  auto created =
      std::make_shared<SimBackend>(state_->worldGroup, static_cast<int>(rank), std::move(inner));
  weak = created;
  return created;
}

SimDuration SimWorld::time(std::int64_t rank) const {
  if (rank < 0 || rank >= state_->size)
    throw CommError(fmt::format("sim rank = {}: expected a rank in [0, {})", rank, state_->size));
  return SimDuration(state_->clock(rank));
}

SimDuration SimWorld::maxTime() const noexcept {
  return SimDuration(state_->maxClock.load(std::memory_order_acquire));
}

void SimWorld::advance(std::int64_t rank, SimDuration compute) {
  if (rank < 0 || rank >= state_->size)
    throw CommError(fmt::format("sim rank = {}: expected a rank in [0, {})", rank, state_->size));
  if (compute.count() < 0)
    throw CommError(fmt::format("sim advance of {} ns: expected a duration >= 0", compute.count()));
  state_->add(rank, compute.count());
}

void SimWorld::advanceAll(SimDuration compute) {
  if (compute.count() < 0)
    throw CommError(fmt::format("sim advance of {} ns: expected a duration >= 0", compute.count()));
  state_->shift.fetch_add(compute.count(), std::memory_order_acq_rel);
  state_->maxClock.fetch_add(compute.count(), std::memory_order_acq_rel);
}

CollectiveCost SimWorld::collective(comm::OpType op, std::uint64_t bytes) {
  auto& st = *state_;
  const CollectiveCost cost =
      collectiveCost(st.cluster, op, bytes, st.placement, st.options.algorithm);
  const std::int64_t costNs = nanosOf(cost.seconds);
  auto& group = *st.worldGroup;
  std::lock_guard lock(group.mutex);
  const std::int64_t start = std::max(st.maxClock.load(std::memory_order_acquire), group.lastEnd);
  const std::int64_t end = start + costNs;
  group.lastEnd = end;
  st.floor.store(end - st.shift.load(std::memory_order_acquire), std::memory_order_release);
  st.bumpMax(end);
  st.count(costNs);
  return cost;
}

std::uint64_t SimWorld::operations() const noexcept {
  return state_->operations.load(std::memory_order_relaxed);
}

SimDuration SimWorld::communicationTime() const noexcept {
  return SimDuration(state_->communicationNs.load(std::memory_order_relaxed));
}

// ---------------------------------------------------------------------------------------------
// SimBackend

SimBackend::SimBackend(std::shared_ptr<Group> group, int rank, std::shared_ptr<comm::Backend> inner)
    : group_(std::move(group)),
      rank_(rank),
      worldRank_(group_->worldRank(rank)),
      inner_(std::move(inner)) {}

SimBackend::~SimBackend() = default;

int SimBackend::rank() const noexcept {
  return rank_;
}
int SimBackend::size() const noexcept {
  return group_->size;
}
comm::Duration SimBackend::defaultTimeout() const noexcept {
  return group_->world->options.timeout;
}
bool SimBackend::supportsDevice(comm::DeviceType type) const noexcept {
  return group_->world->mode == SimBackendMode::CostOnly || type == comm::DeviceType::Cpu;
}
const Placement& SimBackend::placement() const noexcept {
  return group_->placement;
}
SimBackendMode SimBackend::mode() const noexcept {
  return group_->world->mode;
}

SimDuration SimBackend::simulatedTime() const {
  return SimDuration(group_->world->clock(worldRank_));
}

void SimBackend::advance(SimDuration compute) {
  if (compute.count() < 0) {
    throw CommError(fmt::format("sim advance of {} ns on rank {}: expected a duration >= 0",
                                compute.count(), rank_));
  }
  group_->world->add(worldRank_, compute.count());
}

BufferView SimBackend::forChecks(BufferView view) const noexcept {
  if (group_->world->mode == SimBackendMode::CostOnly && view.data == nullptr)
    view.data = &kNoData;
  return view;
}

std::shared_ptr<Work> SimBackend::collective(
    OpType op, const BufferView* described, std::uint64_t bytes, const CollectiveOptions& options,
    const std::function<std::shared_ptr<Work>()>& moveData) {
  auto& world = *group_->world;
  const comm::Duration limit = timeoutOf(options);
  const std::string description = describe(op, described);
  lastCost_ = collectiveCost(world.cluster, op, bytes, group_->placement, world.options.algorithm);
  const std::uint64_t seq = nextSeq_++;
  const std::int64_t arrival = world.clock(worldRank_);

  std::shared_ptr<Completion> completion;
  {
    std::lock_guard lock(group_->mutex);
    if (!group_->poison.empty())
      return failedWork(op, description, std::make_exception_ptr(CommError(group_->poison)));
    while (group_->firstSeq + group_->slots.size() <= seq)
      group_->slots.push_back(nullptr);
    auto& slot = group_->slots[static_cast<std::size_t>(seq - group_->firstSeq)];
    if (!slot) {
      slot = std::make_shared<Slot>();
      slot->op = op;
      slot->bytes = bytes;
      slot->firstRank = rank_;
      slot->costNs = nanosOf(lastCost_.seconds);
    } else if (slot->op != op || slot->bytes != bytes) {
      const std::string why = fmt::format(
          "sim collective #{} mismatch: rank {} called {} of {} bytes while rank {} called {} of "
          "{} bytes",
          seq, rank_, toString(op), bytes, slot->firstRank, toString(slot->op), slot->bytes);
      group_->poison = why;
      slot->completion->done = true;
      slot->completion->error = std::make_exception_ptr(CommError(why));
      group_->changed.notify_all();
      return failedWork(op, description, std::make_exception_ptr(CommError(why)));
    }
    completion = slot->completion;
    slot->latestArrival = std::max(slot->latestArrival, arrival);
    if (++slot->arrived == group_->size) {
      // Starts once every member has issued it and the previous collective has finished.
      const std::int64_t start = std::max(slot->latestArrival, group_->lastEnd);
      completion->end = start + slot->costNs;
      completion->done = true;
      group_->lastEnd = completion->end;
      world.count(slot->costNs);
      while (!group_->slots.empty() && group_->slots.front() &&
             group_->slots.front()->completion->done) {
        group_->slots.pop_front();
        ++group_->firstSeq;
      }
      group_->changed.notify_all();
    }
  }
  auto work =
      std::make_shared<SimWork>(op, limit, description, group_, std::move(completion), worldRank_);
  if (world.mode == SimBackendMode::CostOnly)
    return work;

  // Functional: wait for every member (this is where a missing peer times out), then move the
  // data with the in-process rank.
  try {
    work->wait(limit);
  } catch (const comm::CommTimeoutError&) {
    std::lock_guard lock(group_->mutex);
    if (group_->poison.empty())
      group_->poison = fmt::format("{} timed out after {}; the group is broken", description,
                                   comm::formatDuration(limit));
    group_->changed.notify_all();
    return failedWork(op, description, std::current_exception());
  } catch (...) {
    return failedWork(op, description, std::current_exception());
  }
  if (moveData) {
    try {
      moveData()->wait(limit);
    } catch (...) {
      return failedWork(op, description, std::current_exception());
    }
  }
  return work;
}

std::shared_ptr<Work> SimBackend::allReduce(BufferView buffer, comm::ReduceOp op,
                                            const CollectiveOptions& options) {
  checkBuffer(OpType::AllReduce, forChecks(buffer), "");
  return collective(OpType::AllReduce, &buffer, buffer.bytes(), options,
                    [&] { return inner_->allReduce(buffer, op, options); });
}

std::shared_ptr<Work> SimBackend::broadcast(BufferView buffer, int root,
                                            const CollectiveOptions& options) {
  checkBuffer(OpType::Broadcast, forChecks(buffer), "");
  checkRoot(OpType::Broadcast, root);
  return collective(OpType::Broadcast, &buffer, buffer.bytes(), options,
                    [&] { return inner_->broadcast(buffer, root, options); });
}

std::shared_ptr<Work> SimBackend::allGather(BufferView input, BufferView output,
                                            const CollectiveOptions& options) {
  checkAllGather(forChecks(input), forChecks(output));
  return collective(OpType::AllGather, &input, output.bytes(), options,
                    [&] { return inner_->allGather(input, output, options); });
}

std::shared_ptr<Work> SimBackend::reduceScatter(BufferView input, BufferView output,
                                                comm::ReduceOp op,
                                                const CollectiveOptions& options) {
  checkReduceScatter(forChecks(input), forChecks(output));
  return collective(OpType::ReduceScatter, &input, input.bytes(), options,
                    [&] { return inner_->reduceScatter(input, output, op, options); });
}

std::shared_ptr<Work> SimBackend::allToAll(BufferView input, BufferView output,
                                           const CollectiveOptions& options) {
  checkAllToAll(forChecks(input), forChecks(output));
  return collective(OpType::AllToAll, &input, input.bytes(), options,
                    [&] { return inner_->allToAll(input, output, options); });
}

std::shared_ptr<Work> SimBackend::barrier(const CollectiveOptions& options) {
  return collective(OpType::Barrier, nullptr, 0, options, {});
}

std::shared_ptr<Work> SimBackend::send(BufferView buffer, int peer, int tag,
                                       const CollectiveOptions& options) {
  checkBuffer(OpType::Send, forChecks(buffer), "");
  checkPeer(OpType::Send, peer);
  auto& world = *group_->world;
  const std::string description = describe(OpType::Send, &buffer);
  lastCost_ = pointToPointCost(world.cluster, buffer.bytes(), group_->sameNode(rank_, peer));
  const std::int64_t costNs = nanosOf(lastCost_.seconds);
  const std::int64_t arrival = world.clock(worldRank_) + costNs;
  {
    std::lock_guard lock(group_->mutex);
    if (!group_->poison.empty()) {
      return failedWork(OpType::Send, description,
                        std::make_exception_ptr(CommError(group_->poison)));
    }
    auto& box = group_->mailboxes[{rank_, peer, tag}];
    if (!box.receives.empty()) {
      auto [completion, expected] = box.receives.front();
      box.receives.pop_front();
      completion->done = true;
      completion->end = arrival;
      if (expected != buffer.bytes()) {
        completion->error = std::make_exception_ptr(CommError(fmt::format(
            "sim recv on rank {}: rank {} sent {} bytes with tag {}; the receive buffer holds {}",
            peer, rank_, buffer.bytes(), tag, expected)));
      }
      group_->changed.notify_all();
    } else {
      box.sent.push_back({arrival, buffer.bytes()});
    }
  }
  world.count(costNs);
  // The sender is busy until the message has left.
  world.raise(worldRank_, arrival);
  if (inner_) {
    try {
      inner_->send(buffer, peer, tag, options)->wait(timeoutOf(options));
    } catch (...) {
      return failedWork(OpType::Send, description, std::current_exception());
    }
  }
  return comm::completedWork(OpType::Send, description);
}

std::shared_ptr<Work> SimBackend::recv(BufferView buffer, int peer, int tag,
                                       const CollectiveOptions& options) {
  checkBuffer(OpType::Recv, forChecks(buffer), "");
  checkPeer(OpType::Recv, peer);
  const std::string description = describe(OpType::Recv, &buffer);
  const comm::Duration limit = timeoutOf(options);
  lastCost_ =
      pointToPointCost(group_->world->cluster, buffer.bytes(), group_->sameNode(rank_, peer));
  if (inner_) {
    // Functional: the data first (the sender records the arrival time before sending).
    try {
      inner_->recv(buffer, peer, tag, options)->wait(limit);
    } catch (const comm::CommTimeoutError&) {
      return failedWork(OpType::Recv, description, std::current_exception());
    } catch (...) {
      // The in-process rank consumed a message it rejected (wrong size): so does the clock.
      std::lock_guard lock(group_->mutex);
      auto& box = group_->mailboxes[{peer, rank_, tag}];
      if (!box.sent.empty())
        box.sent.pop_front();
      return failedWork(OpType::Recv, description, std::current_exception());
    }
  }
  auto completion = std::make_shared<Completion>();
  {
    std::lock_guard lock(group_->mutex);
    auto& box = group_->mailboxes[{peer, rank_, tag}];
    if (!box.sent.empty()) {
      const Message message = box.sent.front();
      box.sent.pop_front();
      completion->done = true;
      completion->end = message.arrival;
      if (message.bytes != buffer.bytes()) {
        completion->error = std::make_exception_ptr(CommError(
            fmt::format("{}: rank {} sent {} bytes with tag {}; the receive buffer holds {}",
                        description, peer, message.bytes, tag, buffer.bytes())));
      }
    } else if (!group_->poison.empty()) {
      return failedWork(OpType::Recv, description,
                        std::make_exception_ptr(CommError(group_->poison)));
    } else {
      box.receives.emplace_back(completion, buffer.bytes());
    }
  }
  auto work = std::make_shared<SimWork>(OpType::Recv, limit, description, group_,
                                        std::move(completion), worldRank_);
  if (inner_) {
    try {
      work->wait(limit);
    } catch (...) {
      return failedWork(OpType::Recv, description, std::current_exception());
    }
  }
  return work;
}

std::shared_ptr<comm::Backend> SimBackend::createSubgroup(const std::vector<int>& ranks,
                                                          const std::string& groupName) {
  int myIndex = -1;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= size()) {
      throw CommError(fmt::format("sim: sub-group \"{}\" names rank {}: expected ranks in [0, {})",
                                  groupName, ranks[i], size()));
    }
    if (i > 0 && ranks[i] <= ranks[i - 1]) {
      throw CommError(fmt::format(
          "sim: sub-group \"{}\": ranks[{}] = {} after {}: expected strictly ascending ranks",
          groupName, i, ranks[i], ranks[i - 1]));
    }
    if (ranks[i] == rank_)
      myIndex = static_cast<int>(i);
  }
  if (myIndex < 0) {
    throw CommError(
        fmt::format("sim: rank {} is not a member of sub-group \"{}\"", rank_, groupName));
  }
  std::shared_ptr<Group> sub;
  {
    std::lock_guard lock(group_->mutex);
    auto& slot = group_->subgroups[groupName];
    if (!slot) {
      slot = std::make_shared<Group>();
      slot->world = group_->world;
      slot->size = static_cast<int>(ranks.size());
      slot->members.reserve(ranks.size());
      for (int r : ranks)
        slot->members.push_back(group_->worldRank(r));
      slot->placement = placementOf(group_->world->cluster, slot->members);
    } else if (slot->size != static_cast<int>(ranks.size())) {
      throw CommError(fmt::format(
          "sim: sub-group \"{}\" created with {} members, now with {}: expected the same "
          "member list on every member",
          groupName, slot->size, ranks.size()));
    }
    sub = slot;
  }
  std::shared_ptr<comm::Backend> innerSub;
  if (inner_)
    innerSub = inner_->createSubgroup(ranks, groupName);
  return std::make_shared<SimBackend>(std::move(sub), myIndex, std::move(innerSub));
}

}  // namespace stretch::sim
