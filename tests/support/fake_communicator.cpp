#include "tests/support/fake_communicator.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/comm/errors.hpp"
#include "runtime/comm/reduce.hpp"

namespace stretch::test {

using comm::BufferView;
using comm::CommAbortedError;
using comm::CommError;
using comm::CommPeerError;
using comm::CommTimeoutError;
using comm::CommUnsupportedError;
using comm::DataType;
using comm::DeviceType;
using comm::Duration;
using comm::Interrupt;
using comm::OpType;
using comm::ReduceOp;

namespace {

using Clock = std::chrono::steady_clock;

// How often blocking calls look at their Interrupt, their deadline and whether their process
// died: NCCL's non-blocking calls are polled the same way (communicator.hpp).
constexpr auto kPollInterval = std::chrono::milliseconds(2);
// Deadlines are computed as now + timeout; a timeout of Duration::max() would overflow.
constexpr Duration kLongestTimeout = std::chrono::hours(24 * 365);

// What ncclCommGetAsyncError reports on a rank whose peer's process is gone (ncclRemoteError).
constexpr std::string_view kRemoteError =
    "NCCL error: remote process exited or there was a network error (ncclRemoteError)";

Clock::time_point deadlineAfter(Duration timeout) {
  return Clock::now() + std::clamp(timeout, Duration::zero(), kLongestTimeout);
}

class FakeWork;
struct Rank;

// One rank's part in a collective that not every rank has issued yet.
struct Entry {
  bool issued = false;
  BufferView buffer;
  std::shared_ptr<FakeWork> work;
};

// Collective #seq of a communicator, until its last rank issues it.
struct Slot {
  OpType op = OpType::Barrier;
  ReduceOp reduce = ReduceOp::Sum;
  int root = 0;
  std::size_t count = 0;
  DataType dtype = DataType::Float32;
  int firstRank = -1;
  std::vector<Entry> entries;
  int issued = 0;
};

// What the ranks of one communicator share: its name and the collectives in flight.
struct Group {
  std::string id;
  std::vector<std::string> processes;  // the process of each rank
  std::map<std::uint64_t, Slot> slots;

  int size() const noexcept { return static_cast<int>(processes.size()); }
};

// A collective management call (init, shrink, grow with its joins) until every rank arrived.
struct Rendezvous {
  std::string what;                    // "init of uid-0001", for messages
  std::vector<std::string> processes;  // per rank, "" until it arrived
  int arrived = 0;
  bool needsGrowId = false;  // grow: the root's id is needed too
  std::optional<std::string> rootGrowId;
  std::set<std::string> growIds;  // every grow id brought, used up once complete
  std::shared_ptr<Group> group;   // set when complete

  int size() const noexcept { return static_cast<int>(processes.size()); }
  bool complete() const noexcept {
    return arrived == size() && (!needsGrowId || rootGrowId.has_value());
  }
};

}  // namespace

struct FakeNccl::State {
  explicit State(comm::CommunicatorFeatures f) : features(std::move(f)) {}

  const comm::CommunicatorFeatures features;
  mutable std::mutex mutex;
  std::condition_variable changed;
  std::set<std::string> dead;
  std::vector<std::string> traps;
  Counts counts;
  std::uint64_t nextId = 1;
  std::map<std::string, std::shared_ptr<Rendezvous>> rendezvous;
  // Every group made, for kill() to withdraw a dead process's part in their collectives.
  std::vector<std::weak_ptr<Group>> groups;
  // One per communicator made, in order: its process, and false once aborted or destroyed.
  // Kept apart from the communicators so that one dropped without destroy() still counts.
  struct Record {
    std::string process;
    bool live = true;
  };
  std::vector<Record> records;
  struct GrowId {
    std::string group;
    int parentSize = 0;
    bool used = false;
  };
  std::map<std::string, GrowId> growIds;
  // library(name)'s objects; cleared by ~FakeNccl, as each holds this state.
  std::map<std::string, std::shared_ptr<comm::CommunicatorLibrary>> libraries;

  std::string freshId(std::string_view kind) { return fmt::format("{}-{:08x}", kind, nextId++); }
  bool isDead(const std::string& process) const { return dead.count(process) > 0; }
};

namespace {

using State = FakeNccl::State;
using Counts = FakeNccl::Counts;

// One rank's communicator, shared by every Communicator object adopt() hands out for it and by
// its Backend. Guarded by State::mutex.
struct Rank {
  std::shared_ptr<Group> group;
  int rank = 0;
  std::string process;
  std::size_t record = 0;  // index into State::records
  Duration timeout{};      // the management call's: the backend's default collective timeout
  std::uint64_t nextSeq = 0;
  std::optional<std::string> revoked;
  std::optional<std::string> aborted;
  bool destroyed = false;
  // Device work a revoke without ncclCommRevoke (before 2.28) left queued: only an abortive
  // shrink or abort() ends it.
  bool workInFlight = false;
  bool abortiveShrinkParent = false;
  std::weak_ptr<comm::Backend> backend;

  int size() const noexcept { return group->size(); }
  // "process p1, rank 1 of comm-00000003": where a trap or an error happened.
  std::string where() const {
    return fmt::format("process {}, rank {} of {}", process, rank, group->id);
  }
};

using ErrorFor = std::function<std::exception_ptr(const FakeWork&)>;

class FakeWork final : public comm::Work {
 public:
  FakeWork(std::shared_ptr<State> state, std::weak_ptr<Rank> rank, std::uint64_t seq, OpType op,
           Duration timeout, std::string description)
      : Work(op, timeout, std::move(description)),
        state_(std::move(state)),
        rank_(std::move(rank)),
        seq_(seq),
        deadline_(deadlineAfter(timeout)) {}

  bool isCompleted() override {
    std::lock_guard lock(state_->mutex);
    return done_;
  }

  // Waits for the collective; at its own deadline the communicator is aborted as NCCL's
  // watchdog does, so that every pending Work of the rank fails with CommTimeoutError.
  void wait(std::optional<Duration> timeout = std::nullopt) override;

  std::exception_ptr exception() override {
    std::lock_guard lock(state_->mutex);
    return error_;
  }

  // Under State::mutex; the caller notifies State::changed.
  void finishLocked(std::exception_ptr error) {
    done_ = true;
    error_ = std::move(error);
  }

 private:
  std::shared_ptr<State> state_;
  std::weak_ptr<Rank> rank_;
  std::uint64_t seq_;
  Clock::time_point deadline_;
  bool done_ = false;
  std::exception_ptr error_;
};

template <typename E>
ErrorFor errorQuoting(std::string why) {
  return [why = std::move(why)](const FakeWork& work) {
    return std::make_exception_ptr(E(fmt::format("{}: {}", work.description(), why)));
  };
}

bool hasPendingWorkLocked(const Rank& rank) {
  return std::any_of(rank.group->slots.begin(), rank.group->slots.end(), [&](const auto& s) {
    return s.second.entries[static_cast<std::size_t>(rank.rank)].issued;
  });
}

// Takes rank `r`'s part out of every collective of `group` in flight, failing its Works: that
// rank no longer takes part, so those collectives never complete for its peers either.
bool withdrawLocked(Group& group, int r, const ErrorFor& error) {
  bool any = false;
  for (auto it = group.slots.begin(); it != group.slots.end();) {
    Slot& slot = it->second;
    Entry& entry = slot.entries[static_cast<std::size_t>(r)];
    if (entry.issued) {
      entry.work->finishLocked(error(*entry.work));
      entry = Entry{};
      --slot.issued;
      any = true;
    }
    it = slot.issued == 0 ? group.slots.erase(it) : std::next(it);
  }
  return any;
}

void recordTrapLocked(State& st, const std::string& what, const std::string& where) {
  st.traps.push_back(fmt::format("{} ({})", what, where));
}

// abort() and the watchdog: frees the rank at once; its pending Works fail with `error`.
void abortLocked(State& st, Rank& rank, const std::string& reason, const ErrorFor& error) {
  if (rank.aborted || rank.destroyed)
    return;
  rank.aborted = reason;
  rank.workInFlight = false;
  st.records[rank.record].live = false;
  ++st.counts.abort;
  withdrawLocked(*rank.group, rank.rank, error);
  st.changed.notify_all();
}

void FakeWork::wait(std::optional<Duration> timeout) {
  const Duration limit =
      std::clamp(timeout.value_or(this->timeout()), Duration::zero(), kLongestTimeout);
  std::unique_lock lock(state_->mutex);
  const auto until = std::min(Clock::now() + limit, deadline_);
  state_->changed.wait_until(lock, until, [&] { return done_; });
  if (!done_ && Clock::now() >= deadline_) {
    if (auto rank = rank_.lock()) {
      std::vector<int> missing;
      if (auto slot = rank->group->slots.find(seq_); slot != rank->group->slots.end()) {
        for (int r = 0; r < rank->size(); ++r) {
          if (!slot->second.entries[static_cast<std::size_t>(r)].issued)
            missing.push_back(r);
        }
      }
      const std::string why =
          fmt::format("collective #{} timed out after {} (ranks that never issued it: {})", seq_,
                      formatDuration(this->timeout()), fmt::join(missing, ", "));
      abortLocked(*state_, *rank, why,
                  errorQuoting<CommTimeoutError>("the watchdog aborted the communicator: " + why));
    }
  }
  if (!done_)
    throwTimeout(limit);
  if (error_)
    std::rethrow_exception(error_);
}

std::shared_ptr<Rank> makeRankLocked(State& st, std::shared_ptr<Group> group, int rank,
                                     const std::string& process, Duration timeout) {
  auto made = std::make_shared<Rank>();
  made->group = std::move(group);
  made->rank = rank;
  made->process = process;
  made->record = st.records.size();
  made->timeout = timeout;
  st.records.push_back({process, true});
  return made;
}

// One blocking management call's arrival at its rendezvous.
struct Arrival {
  std::string key;   // the rendezvous: every rank of the call passes the same
  std::string what;  // "init of uid-00000001", for messages
  int size = 0;      // ranks of the communicator being made
  int rank = 0;      // this caller's rank in it
  std::string process;
  Duration timeout{};
  const Interrupt* interrupt = nullptr;
  bool needsGrowId = false;
  std::optional<std::string> rootGrowId;    // grow: the id the root passes
  std::optional<std::string> joinerGrowId;  // join: the id the joiner came with
};

Arrival arrivalOf(std::string key, std::string what, int size, int rank, const std::string& process,
                  Duration timeout, const Interrupt& interrupt) {
  Arrival arrival;
  arrival.key = std::move(key);
  arrival.what = std::move(what);
  arrival.size = size;
  arrival.rank = rank;
  arrival.process = process;
  arrival.timeout = timeout;
  arrival.interrupt = &interrupt;
  return arrival;
}

// Existing ranks (grow) and joiners (join) of `group` meet at the same rendezvous.
Arrival growArrival(const std::string& group, int newSize, int rank, const std::string& process,
                    Duration timeout, const Interrupt& interrupt) {
  Arrival arrival = arrivalOf(fmt::format("grow {}", group), fmt::format("grow of {}", group),
                              newSize, rank, process, timeout, interrupt);
  arrival.needsGrowId = true;
  return arrival;
}

enum class Polled { Ready, Dead, Interrupted, TimedOut };

// Waits until ready() or the process died, the interrupt said so or the deadline passed,
// looking every kPollInterval. The interrupt is called without the lock (it may take its own).
Polled pollUntil(State& st, std::unique_lock<std::mutex>& lock, Clock::time_point deadline,
                 const std::string& process, const Interrupt* interrupt,
                 const std::function<bool()>& ready) {
  while (true) {
    if (ready())
      return Polled::Ready;
    if (st.isDead(process))
      return Polled::Dead;
    if (interrupt != nullptr && *interrupt) {
      lock.unlock();
      const bool stop = (*interrupt)();
      lock.lock();
      if (stop)
        return Polled::Interrupted;
    }
    if (Clock::now() >= deadline)
      return Polled::TimedOut;
    st.changed.wait_for(lock, kPollInterval);
  }
}

[[noreturn]] void throwPolled(Polled polled, const std::string& call, const std::string& process,
                              Duration timeout, const std::string& missing) {
  switch (polled) {
    case Polled::Dead:
      throw CommPeerError(fmt::format("{}: process {} was killed", call, process));
    case Polled::Interrupted:
      throw CommAbortedError(fmt::format("{}: interrupted by its caller", call));
    default:
      throw CommTimeoutError(
          fmt::format("{} timed out after {}{}", call, formatDuration(timeout), missing));
  }
}

// The collective part of init, shrink, grow and join: blocks until every rank arrived, then
// returns the group they make. Throws as the management calls do (communicator.hpp).
std::shared_ptr<Group> meetLocked(State& st, std::unique_lock<std::mutex>& lock,
                                  const Arrival& me) {
  const std::string call = fmt::format("fake nccl {} (rank {} of {}, process {})", me.what, me.rank,
                                       me.size, me.process);
  auto& slot = st.rendezvous[me.key];
  if (!slot) {
    slot = std::make_shared<Rendezvous>();
    slot->what = me.what;
    slot->processes.resize(static_cast<std::size_t>(me.size));
    slot->needsGrowId = me.needsGrowId;
  }
  const std::shared_ptr<Rendezvous> rv = slot;
  if (rv->size() != me.size) {
    throw CommError(fmt::format("{}: size = {}, but the ranks that arrived first passed {}", call,
                                me.size, rv->size()));
  }
  auto& mine = rv->processes[static_cast<std::size_t>(me.rank)];
  if (!mine.empty()) {
    throw CommError(
        fmt::format("{}: rank {} already arrived from process {}", call, me.rank, mine));
  }
  mine = me.process;
  ++rv->arrived;
  if (me.rootGrowId)
    rv->rootGrowId = me.rootGrowId;
  for (const auto* id : {&me.rootGrowId, &me.joinerGrowId}) {
    if (*id)
      rv->growIds.insert(**id);
  }
  if (rv->complete()) {
    rv->group = std::make_shared<Group>();
    rv->group->id = st.freshId("comm");
    rv->group->processes = rv->processes;
    st.groups.push_back(rv->group);
    for (const auto& id : rv->growIds)
      st.growIds[id].used = true;
    st.rendezvous.erase(me.key);
    st.changed.notify_all();
  }

  const Polled polled = pollUntil(st, lock, deadlineAfter(me.timeout), me.process, me.interrupt,
                                  [&] { return rv->group != nullptr; });
  if (polled == Polled::Ready)
    return rv->group;
  // Leaves the rendezvous (kill() may have taken this arrival out already).
  if (mine == me.process) {
    mine.clear();
    --rv->arrived;
    if (rv->arrived == 0) {
      auto it = st.rendezvous.find(me.key);
      if (it != st.rendezvous.end() && it->second == rv)
        st.rendezvous.erase(it);
    }
  }
  std::vector<int> missing;
  for (int r = 0; r < rv->size(); ++r) {
    if (rv->processes[static_cast<std::size_t>(r)].empty() && r != me.rank)
      missing.push_back(r);
  }
  std::string why;
  if (!missing.empty())
    why = fmt::format(" (ranks that never arrived: {})", fmt::join(missing, ", "));
  if (rv->needsGrowId && !rv->rootGrowId)
    why += " (no existing rank passed the id from growId())";
  throwPolled(polled, call, me.process, me.timeout, why);
}

// Meets the other ranks of `arrival`, counts the communicator made in `made` and returns it.
std::unique_ptr<comm::Communicator> meetAndMakeLocked(const std::shared_ptr<State>& st,
                                                      std::unique_lock<std::mutex>& lock,
                                                      const Arrival& arrival, int Counts::*made);

class FakeBackend final : public comm::Backend {
 public:
  FakeBackend(std::shared_ptr<State> state, std::shared_ptr<Rank> rank)
      : state_(std::move(state)), rank_(std::move(rank)) {}

  // "nccl", as the real backend, so that logs and error messages read the same in tests.
  std::string_view name() const noexcept override { return "nccl"; }
  int rank() const noexcept override { return rank_->rank; }
  int size() const noexcept override { return rank_->size(); }
  Duration defaultTimeout() const noexcept override { return rank_->timeout; }
  // Buffers are host memory whatever they say (fake_communicator.hpp).
  bool supportsDevice(DeviceType) const noexcept override { return true; }

  std::shared_ptr<comm::Work> allReduce(BufferView buffer, ReduceOp op,
                                        const comm::CollectiveOptions& options) override {
    checkBuffer(OpType::AllReduce, buffer, "");
    const DataType t = buffer.dtype;
    if (t != DataType::Float32 && t != DataType::Float64 && t != DataType::Int32 &&
        t != DataType::Int64) {
      throwUnsupported(
          OpType::AllReduce,
          fmt::format("{} elements: expected fp32, fp64, int32 or int64", comm::toString(t)));
    }
    return issue(OpType::AllReduce, buffer, op, 0, options);
  }

  std::shared_ptr<comm::Work> broadcast(BufferView buffer, int root,
                                        const comm::CollectiveOptions& options) override {
    checkBuffer(OpType::Broadcast, buffer, "");
    checkRoot(OpType::Broadcast, root);
    return issue(OpType::Broadcast, buffer, ReduceOp::Sum, root, options);
  }

  std::shared_ptr<comm::Work> barrier(const comm::CollectiveOptions& options) override {
    return issue(OpType::Barrier, BufferView{}, ReduceOp::Sum, 0, options);
  }

  void abort(std::string_view reason) override;

  const std::shared_ptr<Rank>& fakeRank() const noexcept { return rank_; }

 private:
  std::shared_ptr<comm::Work> issue(OpType op, BufferView buffer, ReduceOp reduce, int root,
                                    const comm::CollectiveOptions& options) {
    const BufferView* described = op == OpType::Barrier ? nullptr : &buffer;
    const std::string description = describe(op, described);
    std::lock_guard lock(state_->mutex);
    Rank& me = *rank_;
    if (state_->isDead(me.process))
      throw CommPeerError(fmt::format("{}: process {} was killed", description, me.process));
    auto work =
        std::make_shared<FakeWork>(state_, rank_, me.nextSeq, op, timeoutOf(options), description);
    if (me.destroyed || me.aborted || me.revoked) {
      // Later Works fail as the pending ones did (fake_communicator.hpp).
      if (me.revoked && !me.aborted && !me.destroyed) {
        work->finishLocked(errorQuoting<CommPeerError>(
            fmt::format("the communicator was revoked: {}", *me.revoked))(*work));
      } else {
        work->finishLocked(errorQuoting<CommError>(
            me.destroyed ? std::string("the communicator was destroyed")
                         : fmt::format("the communicator was aborted: {}", *me.aborted))(*work));
      }
      return work;
    }
    Group& group = *me.group;
    const std::uint64_t seq = me.nextSeq++;
    Slot& slot = group.slots[seq];
    if (slot.entries.empty()) {
      slot.op = op;
      slot.reduce = reduce;
      slot.root = root;
      slot.count = buffer.count;
      slot.dtype = buffer.dtype;
      slot.firstRank = me.rank;
      slot.entries.resize(static_cast<std::size_t>(group.size()));
    } else if (slot.op != op || slot.reduce != reduce || slot.root != root ||
               slot.count != buffer.count || slot.dtype != buffer.dtype) {
      const std::string why = fmt::format(
          "collective #{} mismatch: rank {} issued {} of {} x {} (root {}), rank {} {} of {} x {} "
          "(root {})",
          seq, me.rank, comm::toString(op), buffer.count, comm::toString(buffer.dtype), root,
          slot.firstRank, comm::toString(slot.op), slot.count, comm::toString(slot.dtype),
          slot.root);
      for (auto& entry : slot.entries) {
        if (entry.issued)
          entry.work->finishLocked(errorQuoting<CommError>(why)(*entry.work));
      }
      group.slots.erase(seq);
      work->finishLocked(errorQuoting<CommError>(why)(*work));
      state_->changed.notify_all();
      return work;
    }
    slot.entries[static_cast<std::size_t>(me.rank)] = Entry{true, buffer, work};
    if (++slot.issued == group.size()) {
      complete(slot, group.size());
      group.slots.erase(seq);
      state_->changed.notify_all();
    }
    return work;
  }

  // Every rank issued the collective: the result, reduced in rank order so that every rank
  // gets the same bits, lands in each rank's buffer.
  static void complete(Slot& slot, int size) {
    std::string result;
    const std::size_t bytes = slot.count * comm::elementSize(slot.dtype);
    if (slot.op == OpType::AllReduce) {
      result.assign(static_cast<const char*>(slot.entries[0].buffer.data), bytes);
      for (std::size_t r = 1; r < slot.entries.size(); ++r) {
        comm::reduceInto(slot.dtype, slot.reduce, result.data(), slot.entries[r].buffer.data,
                         slot.count);
      }
      if (slot.reduce == ReduceOp::Avg)
        comm::finishAverage(slot.dtype, result.data(), slot.count, size);
    } else if (slot.op == OpType::Broadcast) {
      result.assign(
          static_cast<const char*>(slot.entries[static_cast<std::size_t>(slot.root)].buffer.data),
          bytes);
    }
    for (auto& entry : slot.entries) {
      if (!result.empty())
        std::memcpy(entry.buffer.data, result.data(), result.size());
      entry.work->finishLocked(nullptr);
    }
  }

  std::shared_ptr<State> state_;
  std::shared_ptr<Rank> rank_;
};

void abortRank(State& st, Rank& rank, std::string_view reason) {
  std::lock_guard lock(st.mutex);
  abortLocked(st, rank, std::string(reason),
              errorQuoting<CommError>(fmt::format("the communicator was aborted: {}", reason)));
}

void FakeBackend::abort(std::string_view reason) {
  abortRank(*state_, *rank_, reason);
}

class FakeCommunicator final : public comm::Communicator {
 public:
  FakeCommunicator(std::shared_ptr<State> state, std::shared_ptr<Rank> rank,
                   std::shared_ptr<comm::Backend> backend = nullptr)
      : state_(std::move(state)), rank_(std::move(rank)), backend_(std::move(backend)) {}

  int rank() const noexcept override { return rank_->rank; }
  int size() const noexcept override { return rank_->size(); }

  std::shared_ptr<comm::Backend> backend() override {
    std::lock_guard lock(state_->mutex);
    if (!backend_)
      backend_ = rank_->backend.lock();
    if (!backend_) {
      backend_ = std::make_shared<FakeBackend>(state_, rank_);
      rank_->backend = backend_;
    }
    return backend_;
  }

  std::optional<std::string> asyncError() override {
    std::lock_guard lock(state_->mutex);
    // NCCL says nothing about a silent peer until the rank stops waiting for it.
    if (!rank_->revoked && !rank_->aborted)
      return std::nullopt;
    for (int r = 0; r < size(); ++r) {
      const auto& process = rank_->group->processes[static_cast<std::size_t>(r)];
      if (r != rank_->rank && state_->isDead(process))
        return fmt::format("{}: rank {} (process {}) of {} is gone", kRemoteError, r, process,
                           rank_->group->id);
    }
    return std::nullopt;
  }

  bool aborted() const override {
    std::lock_guard lock(state_->mutex);
    return rank_->aborted.has_value();
  }

  void revoke(std::string_view reason) override {
    std::lock_guard lock(state_->mutex);
    Rank& me = *rank_;
    if (me.revoked || me.aborted || me.destroyed)
      return;
    me.revoked = std::string(reason);
    ++state_->counts.revoke;
    const bool pending = withdrawLocked(
        *me.group, me.rank,
        errorQuoting<CommPeerError>(fmt::format("the communicator was revoked: {}", reason)));
    // ncclCommRevoke stops the device work; without it the kernels stay queued on the stream.
    me.workInFlight = !state_->features.revoke && (me.workInFlight || pending);
    state_->changed.notify_all();
  }

  void abort(std::string_view reason) override { abortRank(*state_, *rank_, reason); }

  void destroy() override {
    std::lock_guard lock(state_->mutex);
    Rank& me = *rank_;
    if (me.destroyed)
      return;
    if (me.aborted) {
      me.destroyed = true;  // ncclCommDestroy after ncclCommAbort frees nothing more
      return;
    }
    std::string hang;
    if (me.abortiveShrinkParent && state_->features.abortParentAfterAbortiveShrink) {
      hang = "destroy of the parent of an abortive shrink (hangs on NCCL 2.31+)";
    } else if (me.workInFlight || hasPendingWorkLocked(me)) {
      hang = "destroy of a communicator with a collective pending (hangs until it completes)";
    }
    if (!hang.empty()) {
      recordTrapLocked(*state_, hang, me.where());
      throw CommTimeoutError(fmt::format("fake nccl {} on NCCL {} ({}): abort it instead", hang,
                                         state_->features.version(), me.where()));
    }
    me.destroyed = true;
    state_->records[me.record].live = false;
    ++state_->counts.destroy;
  }

  std::unique_ptr<comm::Communicator> shrink(const std::vector<int>& excluded, bool abortInFlight,
                                             Duration timeout,
                                             const Interrupt& interrupt) override {
    std::unique_lock lock(state_->mutex);
    Rank& me = *rank_;
    const std::string call = fmt::format("fake nccl shrink ({})", me.where());
    checkUsableLocked(call);
    if (!state_->features.shrink)
      unsupportedLocked("shrink", "ncclCommShrink", "2.27");
    for (std::size_t i = 0; i < excluded.size(); ++i) {
      const int r = excluded[i];
      if (r < 0 || r >= size() || r == me.rank || (i > 0 && r <= excluded[i - 1])) {
        throw CommError(
            fmt::format("{}: excluded[{}] = {}: expected ascending ranks in [0, {}) other than {}",
                        call, i, r, size(), me.rank));
      }
    }
    if (abortInFlight) {
      // NCCL_SHRINK_ABORT ends the parent's in-flight work first; the parent is done with.
      withdrawLocked(
          *me.group, me.rank,
          errorQuoting<CommPeerError>("ended by an abortive shrink (NCCL_SHRINK_ABORT)"));
      me.workInFlight = false;
      me.abortiveShrinkParent = true;
      if (!me.revoked)
        me.revoked = "ended by an abortive shrink (NCCL_SHRINK_ABORT)";
      state_->changed.notify_all();
    } else if (me.workInFlight || hasPendingWorkLocked(me)) {
      // A non-abortive ncclCommShrink waits for the parent's queued work, which waits for the
      // dead peer: it never arrives, and its peers time out waiting for it.
      recordTrapLocked(*state_,
                       "shrink of a communicator with work in flight, without NCCL_SHRINK_ABORT",
                       me.where());
      const Polled polled = pollUntil(*state_, lock, deadlineAfter(timeout), me.process, &interrupt,
                                      [] { return false; });
      throwPolled(polled, call, me.process, timeout,
                  " (its work in flight never finishes without NCCL_SHRINK_ABORT)");
    }
    const int newRank =
        me.rank - static_cast<int>(std::count_if(excluded.begin(), excluded.end(),
                                                 [&](int r) { return r < me.rank; }));
    return meetAndMakeLocked(
        state_, lock,
        arrivalOf(
            fmt::format("shrink {} excluding [{}] abort {}", me.group->id, fmt::join(excluded, ","),
                        abortInFlight),
            fmt::format("shrink of {} excluding [{}]", me.group->id, fmt::join(excluded, ", ")),
            size() - static_cast<int>(excluded.size()), newRank, me.process, timeout, interrupt),
        &Counts::shrink);
  }

  std::string growId() override {
    std::lock_guard lock(state_->mutex);
    Rank& me = *rank_;
    checkUsableLocked(fmt::format("fake nccl growId ({})", me.where()));
    if (!state_->features.grow)
      unsupportedLocked("growId", "ncclCommGrow", "2.29");
    std::string id = state_->freshId("nccl-grow");
    state_->growIds[id] = {me.group->id, size(), false};
    return id;
  }

  std::unique_ptr<comm::Communicator> grow(int newSize, const std::optional<std::string>& id,
                                           Duration timeout, const Interrupt& interrupt) override {
    std::unique_lock lock(state_->mutex);
    Rank& me = *rank_;
    const std::string call = fmt::format("fake nccl grow to {} ranks ({})", newSize, me.where());
    checkUsableLocked(call);
    if (!state_->features.grow)
      unsupportedLocked("grow", "ncclCommGrow", "2.29");
    if (me.revoked)
      throw CommError(
          fmt::format("{}: the communicator was revoked ({}): shrink it first", call, *me.revoked));
    if (newSize <= size())
      throw CommError(
          fmt::format("{}: newSize = {}: expected more than {}", call, newSize, size()));
    if (id) {
      auto it = state_->growIds.find(*id);
      if (it == state_->growIds.end() || it->second.group != me.group->id)
        throw CommError(
            fmt::format("{}: id \"{}\" was not made by growId() of {}", call, *id, me.group->id));
      if (it->second.used)
        throw CommError(fmt::format("{}: id \"{}\" was used already", call, *id));
    }
    Arrival arrival = growArrival(me.group->id, newSize, me.rank, me.process, timeout, interrupt);
    arrival.rootGrowId = id;
    return meetAndMakeLocked(state_, lock, arrival, &Counts::grow);
  }

 private:
  void checkUsableLocked(const std::string& call) const {
    if (state_->isDead(rank_->process))
      throw CommPeerError(fmt::format("{}: process {} was killed", call, rank_->process));
    if (rank_->destroyed)
      throw CommError(fmt::format("{}: the communicator was destroyed", call));
    if (rank_->aborted)
      throw CommError(fmt::format("{}: the communicator was aborted: {}", call, *rank_->aborted));
  }

  [[noreturn]] void unsupportedLocked(std::string_view call, std::string_view nccl,
                                      std::string_view since) const {
    const std::string what = fmt::format("{} on NCCL {}, which has no {} (NCCL {})", call,
                                         state_->features.version(), nccl, since);
    recordTrapLocked(*state_, what, rank_->where());
    throw CommUnsupportedError(fmt::format("fake nccl {} ({})", what, rank_->where()));
  }

  std::shared_ptr<State> state_;
  std::shared_ptr<Rank> rank_;
  std::shared_ptr<comm::Backend> backend_;
};

std::unique_ptr<comm::Communicator> meetAndMakeLocked(const std::shared_ptr<State>& st,
                                                      std::unique_lock<std::mutex>& lock,
                                                      const Arrival& arrival, int Counts::*made) {
  auto group = meetLocked(*st, lock, arrival);
  ++(st->counts.*made);
  return std::make_unique<FakeCommunicator>(
      st, makeRankLocked(*st, std::move(group), arrival.rank, arrival.process, arrival.timeout));
}

class FakeLibrary final : public comm::CommunicatorLibrary {
 public:
  FakeLibrary(std::shared_ptr<State> state, std::string process)
      : state_(std::move(state)), process_(std::move(process)) {}

  const comm::CommunicatorFeatures& features() const noexcept override { return state_->features; }

  std::string uniqueId() override {
    std::lock_guard lock(state_->mutex);
    checkAliveLocked("uniqueId");
    return state_->freshId("nccl-uid");
  }

  std::unique_ptr<comm::Communicator> init(const std::string& id, int rank, int size,
                                           Duration timeout, const Interrupt& interrupt) override {
    std::unique_lock lock(state_->mutex);
    const std::string call = fmt::format("fake nccl init of \"{}\" (process {})", id, process_);
    checkAliveLocked(call);
    if (size < 1 || rank < 0 || rank >= size)
      throw CommError(
          fmt::format("{}: rank = {} of size = {}: expected 0 <= rank < size", call, rank, size));
    if (id.empty() || id.find(' ') != std::string::npos)
      throw CommError(fmt::format("{}: expected an id from uniqueId()", call));
    return meetAndMakeLocked(state_, lock,
                             arrivalOf("init " + id, fmt::format("init of {}", id), size, rank,
                                       process_, timeout, interrupt),
                             &Counts::init);
  }

  std::unique_ptr<comm::Communicator> join(const std::string& growId, int rank, int newSize,
                                           Duration timeout, const Interrupt& interrupt) override {
    std::unique_lock lock(state_->mutex);
    const std::string call = fmt::format("fake nccl join of \"{}\" as rank {} of {} (process {})",
                                         growId, rank, newSize, process_);
    checkAliveLocked(call);
    if (!state_->features.grow) {
      const std::string what = fmt::format("join on NCCL {}, which has no ncclCommGrow (NCCL 2.29)",
                                           state_->features.version());
      recordTrapLocked(*state_, what, fmt::format("process {}, joiner rank {}", process_, rank));
      throw CommUnsupportedError(fmt::format("{}: {}", call, what));
    }
    auto it = state_->growIds.find(growId);
    if (it == state_->growIds.end())
      throw CommError(fmt::format("{}: no communicator made that id with growId()", call));
    if (it->second.used)
      throw CommError(fmt::format("{}: the id was used already", call));
    if (rank < it->second.parentSize || rank >= newSize) {
      throw CommError(fmt::format("{}: rank = {}: expected a joiner's rank in [{}, {})", call, rank,
                                  it->second.parentSize, newSize));
    }
    Arrival arrival = growArrival(it->second.group, newSize, rank, process_, timeout, interrupt);
    arrival.joinerGrowId = growId;
    return meetAndMakeLocked(state_, lock, arrival, &Counts::join);
  }

  std::shared_ptr<comm::Communicator> adopt(
      const std::shared_ptr<comm::Backend>& backend) override {
    auto fake = std::dynamic_pointer_cast<FakeBackend>(backend);
    if (!fake || fake->fakeRank()->process != process_)
      return nullptr;
    return std::make_shared<FakeCommunicator>(state_, fake->fakeRank(), fake);
  }

 private:
  void checkAliveLocked(std::string_view call) const {
    if (state_->isDead(process_))
      throw CommPeerError(fmt::format("{}: process {} was killed", call, process_));
  }

  std::shared_ptr<State> state_;
  std::string process_;
};

}  // namespace

FakeNccl::FakeNccl(comm::CommunicatorFeatures features)
    : state_(std::make_shared<State>(std::move(features))) {}

FakeNccl::~FakeNccl() {
  std::lock_guard lock(state_->mutex);
  state_->libraries.clear();
}

const comm::CommunicatorFeatures& FakeNccl::features() const noexcept {
  return state_->features;
}

std::shared_ptr<comm::CommunicatorLibrary> FakeNccl::library(const std::string& process) {
  std::lock_guard lock(state_->mutex);
  auto& library = state_->libraries[process];
  if (!library)
    library = std::make_shared<FakeLibrary>(state_, process);
  return library;
}

void FakeNccl::kill(const std::string& process) {
  std::lock_guard lock(state_->mutex);
  if (!state_->dead.insert(process).second)
    return;
  const auto killed = errorQuoting<CommPeerError>(fmt::format("process {} was killed", process));
  for (const auto& weak : state_->groups) {
    auto group = weak.lock();
    if (!group)
      continue;
    for (int r = 0; r < group->size(); ++r) {
      if (group->processes[static_cast<std::size_t>(r)] == process)
        withdrawLocked(*group, r, killed);
    }
  }
  for (auto it = state_->rendezvous.begin(); it != state_->rendezvous.end();) {
    Rendezvous& rv = *it->second;
    for (auto& arrived : rv.processes) {
      if (arrived == process) {
        arrived.clear();
        --rv.arrived;
      }
    }
    it = rv.arrived == 0 ? state_->rendezvous.erase(it) : std::next(it);
  }
  state_->changed.notify_all();
}

std::vector<std::string> FakeNccl::traps() const {
  std::lock_guard lock(state_->mutex);
  return state_->traps;
}

int FakeNccl::liveCommunicators(const std::string& process) const {
  std::lock_guard lock(state_->mutex);
  return static_cast<int>(
      std::count_if(state_->records.begin(), state_->records.end(), [&](const auto& record) {
        return record.live && !state_->isDead(record.process) &&
               (process.empty() || record.process == process);
      }));
}

FakeNccl::Counts FakeNccl::counts() const {
  std::lock_guard lock(state_->mutex);
  return state_->counts;
}

}  // namespace stretch::test
