#include "runtime/live/device_generations.hpp"

#include <algorithm>
#include <exception>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "runtime/comm/errors.hpp"
#include "runtime/common/check.hpp"
#include "runtime/live/detail/fields.hpp"

namespace stretch::live {

namespace live_keys {
std::string deviceAbort(std::uint64_t generation, const std::string& nodeId) {
  return fmt::format("live/device_abort/{}/{}", generation, nodeId);
}
}  // namespace live_keys

// The communicator this worker holds, for the live generation it was built for. Shared with the
// generation's backend (whose abort() revokes it) and the supersession watch's thread, which may
// reach it after enter() destroyed it as a shrunk parent: dispose() before destroying keeps
// every such late call away from a freed NCCL communicator.
class DeviceGenerations::Held {
 public:
  Held(std::uint64_t generation, std::shared_ptr<comm::Communicator> communicator)
      : generation_(generation), communicator_(std::move(communicator)) {}

  std::uint64_t generation() const noexcept { return generation_; }
  comm::Communicator& communicator() const noexcept { return *communicator_; }

  bool aborted() const {
    std::lock_guard lock(mutex_);
    return !disposed_ && communicator_->aborted();
  }
  void revoke(std::string_view reason) {
    std::lock_guard lock(mutex_);
    if (!disposed_ && !communicator_->aborted())
      communicator_->revoke(reason);
  }
  // Idempotent; nothing once disposed.
  void abort(std::string_view reason) {
    std::lock_guard lock(mutex_);
    if (!disposed_)
      communicator_->abort(reason);
  }
  // From now on only the caller reaches the communicator (to destroy or abort it).
  void dispose() {
    std::lock_guard lock(mutex_);
    disposed_ = true;
  }
  // The node knows of its abort (this rank published it, or it was aborted because another rank
  // of the node had): poll() has nothing more to do for it.
  bool published() const {
    std::lock_guard lock(mutex_);
    return published_;
  }
  void markPublished() {
    std::lock_guard lock(mutex_);
    published_ = true;
  }

 private:
  const std::uint64_t generation_;
  const std::shared_ptr<comm::Communicator> communicator_;
  mutable std::mutex mutex_;
  bool disposed_ = false;
  bool published_ = false;
};

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kPlanKey = "device/plan";
constexpr const char* kGrowIdKey = "device/grow_id";

// How often a wait in enter() looks at the interrupt: a superseded generation is left within
// this much (the engine's supersession watch polls as often).
constexpr auto kInterruptPoll = std::chrono::milliseconds(20);

std::string heldKey(std::int64_t rank) {
  return fmt::format("device/held/{}", rank);
}

// enter()'s one time budget, shared by its store waits and the library's management calls.
class Deadline {
 public:
  Deadline(std::uint64_t generation, comm::Duration timeout)
      : generation_(generation), timeout_(timeout), end_(Clock::now() + timeout) {}

  // What is left of the budget; throws CommTimeoutError naming `what` once it is spent.
  comm::Duration left(std::string_view what) const {
    const auto left = std::chrono::duration_cast<comm::Duration>(end_ - Clock::now());
    if (left <= comm::Duration::zero())
      throw comm::CommTimeoutError(expired(what));
    return left;
  }
  std::string expired(std::string_view what) const {
    return fmt::format("live generation {}: {} did not happen within {}", generation_, what,
                       formatDuration(timeout_));
  }

 private:
  std::uint64_t generation_;
  comm::Duration timeout_;
  Clock::time_point end_;
};

// Waits for `keys` in short slices, so that `interrupt` ends the wait at once (CommAbortedError)
// rather than after the whole timeout (CommTimeoutError naming the keys still missing).
void waitFor(comm::Store& store, const std::vector<std::string>& keys, const Deadline& deadline,
             const comm::Interrupt& interrupt, std::string_view what) {
  while (true) {
    if (interrupt && interrupt())
      throw comm::CommAbortedError(fmt::format("{} was interrupted", what));
    comm::Duration left;
    try {
      left = deadline.left(what);
    } catch (const comm::CommTimeoutError&) {
      std::vector<std::string> missing;
      for (const auto& key : keys) {
        if (!store.check({key}))
          missing.push_back(key);
      }
      throw comm::CommTimeoutError(
          fmt::format("{} (missing: {})", deadline.expired(what), fmt::join(missing, ", ")));
    }
    try {
      store.wait(keys, std::min<comm::Duration>(left, kInterruptPoll));
      return;
    } catch (const comm::StoreTimeoutError&) {
    }
  }
}

// What a member says it holds: "GENERATION RANK SIZE" (the live generation its communicator was
// built for, and its rank and size there), "0" for nothing, or kAbortedText when an abort took
// its communicator (it then holds nothing, and its node gives no survivor). The rank and size let
// rank 0 lay out the parent without its record: the launch's own group (generation 0, or the
// generation a restarted job starts in) has none, or an older one of other workers.
constexpr std::string_view kAbortedText = "aborted";

struct HeldEntry {
  std::uint64_t generation = 0;
  std::int64_t rank = -1;  // in that generation's communicator
  std::int64_t size = 0;
  bool aborted = false;
};

std::string formatHeld(const HeldEntry& entry) {
  if (entry.aborted)
    return std::string(kAbortedText);
  if (entry.generation == 0)
    return "0";
  return fmt::format("{} {} {}", entry.generation, entry.rank, entry.size);
}

HeldEntry parseHeld(const std::optional<std::string>& text, const std::string& key) {
  HeldEntry entry;
  if (text && *text == kAbortedText) {
    entry.aborted = true;
    return entry;
  }
  std::vector<std::int64_t> fields;
  if (text) {
    for (const std::string_view part : detail::split(*text, ' ')) {
      const auto value = detail::number<std::int64_t>(part);
      if (!value) {
        fields.clear();
        break;
      }
      fields.push_back(*value);
    }
  }
  const bool none = fields.size() == 1 && fields[0] == 0;
  const bool held = fields.size() == 3 && fields[0] > 0 && fields[1] < fields[2];
  if (!none && !held) {
    throw comm::CommError(
        fmt::format("{} = '{}': expected 'GENERATION RANK SIZE' (RANK below SIZE), '0' or '{}'",
                    key, text.value_or("(missing)"), kAbortedText));
  }
  if (held) {
    entry.generation = static_cast<std::uint64_t>(fields[0]);
    entry.rank = fields[1];
    entry.size = fields[2];
  }
  return entry;
}

// The parent's layout as the members holding generation `entries[0].generation`'s communicator
// report it: each such member of `record` at the rank it said, the parent's ranks nobody reports
// (dead, or left out of `record`) as stand-ins no worker matches. A member whose rank or size
// disagrees (another communicator under the same number) is taken as holding nothing.
LiveGeneration parentFromEntries(const LiveGeneration& record, std::vector<HeldEntry>& entries) {
  const HeldEntry first = entries[0];
  std::vector<std::pair<std::string, std::int64_t>> members(static_cast<std::size_t>(first.size));
  std::vector<bool> taken(members.size(), false);
  for (const LiveNode& node : record.nodes) {
    for (std::size_t i = 0; i < node.localRanks.size(); ++i) {
      auto& entry = entries[static_cast<std::size_t>(node.firstRank) + i];
      if (entry.generation != first.generation)
        continue;
      const auto at = static_cast<std::size_t>(entry.rank);
      if (entry.size != first.size || taken[at]) {
        entry = HeldEntry{};
        continue;
      }
      taken[at] = true;
      members[at] = {node.nodeId, node.localRanks[i]};
    }
  }
  for (std::size_t r = 0; r < members.size(); ++r) {
    if (!taken[r])
      members[r] = {fmt::format("(rank-{}-of-generation-{})", r, first.generation), 0};
  }
  return makeLiveGeneration(first.generation, 0, members, 0, 0, 0);
}

// Aborts `communicator` on a path that is already failing or leaving it: an abort that throws too
// (its process lost) must not hide why.
void abortQuietly(comm::Communicator& communicator, std::string_view reason) noexcept {
  try {
    communicator.abort(reason);
  } catch (const std::exception& e) {
    spdlog::warn("{}: aborting the communicator failed too: {}", reason, e.what());
  }
}

// Destroys a communicator whose work finished or was revoked; one that cannot be destroyed is
// aborted instead, so that nothing is left holding the device.
void destroyOrAbort(comm::Communicator& communicator, std::string_view what) {
  try {
    communicator.destroy();
  } catch (const std::exception& e) {
    spdlog::warn("{}: destroying it failed ({}); aborting it instead", what, e.what());
    abortQuietly(communicator, fmt::format("{}: destroying it failed: {}", what, e.what()));
  }
}

// The generation's device backend: the communicator's, except that abort() (the engine leaving
// the generation) revokes the communicator, which stays the parent of the next generation.
class GenerationBackend final : public comm::Backend {
 public:
  GenerationBackend(std::shared_ptr<comm::Backend> inner,
                    std::function<void(std::string_view)> revoke)
      : inner_(std::move(inner)), revoke_(std::move(revoke)) {}

  std::string_view name() const noexcept override { return inner_->name(); }
  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  comm::Duration defaultTimeout() const noexcept override { return inner_->defaultTimeout(); }
  bool supportsDevice(comm::DeviceType type) const noexcept override {
    return inner_->supportsDevice(type);
  }

  std::shared_ptr<comm::Work> allReduce(comm::BufferView buffer, comm::ReduceOp op,
                                        const comm::CollectiveOptions& options) override {
    return inner_->allReduce(buffer, op, options);
  }
  std::shared_ptr<comm::Work> broadcast(comm::BufferView buffer, int root,
                                        const comm::CollectiveOptions& options) override {
    return inner_->broadcast(buffer, root, options);
  }
  std::shared_ptr<comm::Work> allGather(comm::BufferView input, comm::BufferView output,
                                        const comm::CollectiveOptions& options) override {
    return inner_->allGather(input, output, options);
  }
  std::shared_ptr<comm::Work> reduceScatter(comm::BufferView input, comm::BufferView output,
                                            comm::ReduceOp op,
                                            const comm::CollectiveOptions& options) override {
    return inner_->reduceScatter(input, output, op, options);
  }
  std::shared_ptr<comm::Work> allToAll(comm::BufferView input, comm::BufferView output,
                                       const comm::CollectiveOptions& options) override {
    return inner_->allToAll(input, output, options);
  }
  std::shared_ptr<comm::Work> send(comm::BufferView buffer, int peer, int tag,
                                   const comm::CollectiveOptions& options) override {
    return inner_->send(buffer, peer, tag, options);
  }
  std::shared_ptr<comm::Work> recv(comm::BufferView buffer, int peer, int tag,
                                   const comm::CollectiveOptions& options) override {
    return inner_->recv(buffer, peer, tag, options);
  }
  std::shared_ptr<comm::Work> barrier(const comm::CollectiveOptions& options) override {
    return inner_->barrier(options);
  }

  void abort(std::string_view reason) override { revoke_(reason); }

  std::shared_ptr<comm::Backend> createSubgroup(const std::vector<int>& ranks,
                                                const std::string& groupName) override {
    return inner_->createSubgroup(ranks, groupName);
  }

 private:
  std::shared_ptr<comm::Backend> inner_;
  std::function<void(std::string_view)> revoke_;
};

// Rank 0's part: what every member holds, the parent's layout from it, the plan, published.
DevicePlan makePlan(comm::CommunicatorLibrary& library, const LiveGeneration& record,
                    comm::Store& group, const Deadline& deadline,
                    const comm::Interrupt& interrupt) {
  std::vector<std::string> keys;
  for (std::int64_t r = 0; r < record.worldSize; ++r)
    keys.push_back(heldKey(r));
  waitFor(group, keys, deadline, interrupt,
          fmt::format("rank 0 of live generation {}: waiting for every member's held "
                      "communicator",
                      record.generation));
  const auto values = group.tryMultiGet(keys);
  std::vector<HeldEntry> entries;
  for (std::size_t r = 0; r < keys.size(); ++r)
    entries.push_back(parseHeld(values[r], keys[r]));
  std::optional<LiveGeneration> parent;
  if (entries[0].generation != 0)
    parent = parentFromEntries(record, entries);
  std::vector<std::uint64_t> held;
  std::vector<bool> aborted;
  for (const HeldEntry& entry : entries) {
    held.push_back(entry.generation);
    aborted.push_back(entry.aborted);
  }
  DevicePlan plan = planDeviceGeneration(library.features(), parent, record, held, aborted);
  if (plan.path == DevicePath::Init)
    plan.uniqueId = library.uniqueId();
  group.set(kPlanKey, formatDevicePlan(plan));
  return plan;
}

}  // namespace

DeviceGenerations::DeviceGenerations(std::shared_ptr<comm::CommunicatorLibrary> library,
                                     std::string nodeId, std::int64_t localRank)
    : library_(std::move(library)), nodeId_(std::move(nodeId)), localRank_(localRank) {
  STRETCH_CHECK(library_ != nullptr, "DeviceGenerations of worker {} of node {}: no library",
                localRank_, nodeId_);
}

DeviceGenerations::~DeviceGenerations() {
  dropHeld("the worker left live recovery");
}

std::shared_ptr<comm::Backend> DeviceGenerations::adopt(
    std::uint64_t generation, const std::shared_ptr<comm::Backend>& backend) {
  std::shared_ptr<comm::Communicator> communicator = library_->adopt(backend);
  if (communicator == nullptr)
    return nullptr;
  dropHeld(fmt::format("live generation {}'s communicator was adopted instead", generation));
  auto held = std::make_shared<Held>(generation, std::move(communicator));
  {
    std::lock_guard lock(mutex_);
    held_ = held;
  }
  return std::make_shared<GenerationBackend>(
      backend, [held](std::string_view reason) { held->revoke(reason); });
}

std::shared_ptr<comm::Backend> DeviceGenerations::enter(const LiveGeneration& record,
                                                        comm::Store& group, comm::Store& root,
                                                        comm::Duration timeout,
                                                        const comm::Interrupt& interrupt) {
  const std::int64_t rank = record.rankOf(nodeId_, localRank_);
  STRETCH_CHECK_GE(rank, 0, "worker {} of node {} is not a member of live generation {}",
                   localRank_, nodeId_, record.generation);
  const Deadline deadline(record.generation, timeout);
  const int size = static_cast<int>(record.worldSize);
  const int r = static_cast<int>(rank);
  const auto what = [&](std::string_view step) {
    return fmt::format("rank {} of live generation {} ({} of node {}): {}", rank, record.generation,
                       localRank_, nodeId_, step);
  };
  // Communicators made here, aborted if a later step fails.
  std::vector<std::shared_ptr<comm::Communicator>> made;
  try {
    // A node-wide abort not seen yet takes this rank's communicator too, before it says what it
    // holds: a survivor shrinking beside an aborted rank of its node would hang.
    poll(root);
    const std::shared_ptr<Held> held = current();
    const std::uint64_t heldGeneration = generationOf(held);
    HeldEntry entry;
    entry.aborted = held != nullptr && held->aborted();
    if (heldGeneration != 0) {
      entry.generation = heldGeneration;
      entry.rank = held->communicator().rank();
      entry.size = held->communicator().size();
    }
    group.set(heldKey(rank), formatHeld(entry));

    DevicePlan plan;
    if (rank == 0) {
      plan = makePlan(*library_, record, group, deadline, interrupt);
      // The path follows from the library's version and the failure; saying it once (and when it
      // changes) tells a user which NCCL feature recovery relies on without a line per generation.
      if (loggedPath_ != plan.path) {
        spdlog::info("live generation {}: device communicator by {}: {}", record.generation,
                     toString(plan.path), plan.reason);
        loggedPath_ = plan.path;
      }
    } else {
      waitFor(group, {kPlanKey}, deadline, interrupt, what("waiting for rank 0's device plan"));
      plan = parseDevicePlan(group.get(kPlanKey));
    }
    {
      std::lock_guard lock(mutex_);
      lastPlan_ = plan;
    }

    if (rank < plan.survivors) {
      if (heldGeneration != plan.parent) {
        throw comm::CommError(
            what(fmt::format("holds generation {}'s communicator; the plan ({}) expected "
                             "generation {}'s",
                             heldGeneration, toString(plan.path), plan.parent)));
      }
      made.push_back(held->communicator().shrink(plan.excluded, plan.abortiveShrink,
                                                 deadline.left(what("shrink")), interrupt));
      disposeParent(held, plan.abortParent,
                    what(fmt::format("generation {}'s communicator, shrunk", plan.parent)));
      if (plan.path == DevicePath::ShrinkGrow) {
        std::optional<std::string> id;
        if (rank == 0) {
          id = made.back()->growId();
          group.set(kGrowIdKey, *id);
        }
        const std::shared_ptr<comm::Communicator> shrunk = made.back();
        made.push_back(shrunk->grow(size, id, deadline.left(what("grow")), interrupt));
        // The shrunk communicator only led to the grown one: nothing ever ran on it.
        made.erase(made.begin());
        destroyOrAbort(*shrunk, what("the shrunk communicator, grown"));
      }
    } else {
      // Never destroyed: a peer of the communicator it holds may be dead.
      dropHeld(what(fmt::format("leaves its communicator for {}", toString(plan.path))));
      if (plan.path == DevicePath::Init) {
        made.push_back(
            library_->init(plan.uniqueId, r, size, deadline.left(what("init")), interrupt));
      } else {
        waitFor(group, {kGrowIdKey}, deadline, interrupt, what("waiting for the grow id"));
        made.push_back(
            library_->join(group.get(kGrowIdKey), r, size, deadline.left(what("join")), interrupt));
      }
    }
  } catch (const std::exception& e) {
    for (const auto& communicator : made)
      abortQuietly(*communicator, what(fmt::format("failed: {}", e.what())));
    dropHeld(what(fmt::format("failed: {}", e.what())));
    throw;
  }

  auto held = std::make_shared<Held>(record.generation, made.back());
  {
    std::lock_guard lock(mutex_);
    held_ = held;
  }
  return std::make_shared<GenerationBackend>(
      held->communicator().backend(), [held](std::string_view reason) { held->revoke(reason); });
}

std::shared_ptr<DeviceGenerations::Held> DeviceGenerations::current() const {
  std::lock_guard lock(mutex_);
  return held_;
}

std::uint64_t DeviceGenerations::generationOf(const std::shared_ptr<Held>& held) {
  if (held == nullptr || held->aborted())
    return 0;
  return held->generation();
}

void DeviceGenerations::disposeParent(const std::shared_ptr<Held>& parent, bool abort,
                                      const std::string& what) {
  {
    std::lock_guard lock(mutex_);
    if (held_ == parent)
      held_.reset();
  }
  parent->dispose();
  if (abort)
    abortQuietly(parent->communicator(), fmt::format("{}: the parent of an abortive shrink", what));
  else
    destroyOrAbort(parent->communicator(), what);
}

void DeviceGenerations::dropHeld(std::string_view reason) {
  std::shared_ptr<Held> held;
  {
    std::lock_guard lock(mutex_);
    held = std::exchange(held_, nullptr);
  }
  if (held == nullptr)
    return;
  held->dispose();
  abortQuietly(held->communicator(), reason);
}

std::uint64_t DeviceGenerations::held() const {
  return generationOf(current());
}

std::optional<DevicePlan> DeviceGenerations::lastPlan() const {
  std::lock_guard lock(mutex_);
  return lastPlan_;
}

void DeviceGenerations::supersede(std::string_view reason) {
  if (const auto held = current())
    held->revoke(reason);
}

void DeviceGenerations::poll(comm::Store& root) {
  const std::shared_ptr<Held> held = current();
  if (held == nullptr || held->published())
    return;
  const std::string key = live_keys::deviceAbort(held->generation(), nodeId_);
  if (held->aborted()) {
    root.set(key, std::to_string(localRank_));
    spdlog::warn(
        "worker {} of node {}: live generation {}'s device communicator was aborted; the "
        "node's other ranks abort theirs",
        localRank_, nodeId_, held->generation());
    held->markPublished();
    return;
  }
  if (!root.check({key}))
    return;
  held->abort(
      fmt::format("live generation {}: another rank of node {} aborted its communicator ({})",
                  held->generation(), nodeId_, key));
  held->markPublished();
}

}  // namespace stretch::live
