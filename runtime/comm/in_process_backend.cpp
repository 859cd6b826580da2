#include "runtime/comm/in_process_backend.hpp"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "runtime/comm/errors.hpp"
#include "runtime/comm/reduce.hpp"

namespace stretch::comm {

namespace {

// What one rank brought to a collective.
struct Contribution {
  const void* input = nullptr;
  std::size_t count = 0;
  DataType dtype = DataType::Float32;
  ReduceOp reduce = ReduceOp::Sum;
  int root = 0;
};

struct Slot {
  OpType op = OpType::Barrier;
  int firstRank = -1;
  std::vector<Contribution> contributions;
  std::vector<bool> arrived;
  int arrivedCount = 0;
  int computedCount = 0;
  int departedCount = 0;
};

using Clock = std::chrono::steady_clock;

}  // namespace

struct InProcessWorld::State : std::enable_shared_from_this<InProcessWorld::State> {
  State(int n, Duration t) : size(n), timeout(t), backends(static_cast<std::size_t>(n)) {}

  const int size;
  const Duration timeout;
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::uint64_t, Slot> slots;
  std::map<std::tuple<int, int, int>, std::deque<std::string>> mailboxes;  // (src, dst, tag)
  std::string poison;  // non-empty once a collective timed out
  std::vector<std::weak_ptr<Backend>> backends;
  std::map<std::string, std::shared_ptr<InProcessWorld>> subgroups;
};

namespace {

class InProcessBackend final : public Backend {
 public:
  InProcessBackend(std::shared_ptr<InProcessWorld::State> state, int rank)
      : state_(std::move(state)), rank_(rank) {}

  std::string_view name() const noexcept override { return "in_process"; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return state_->size; }
  Duration defaultTimeout() const noexcept override { return state_->timeout; }
  bool supportsDevice(DeviceType type) const noexcept override { return type == DeviceType::Cpu; }

  std::shared_ptr<Work> allReduce(BufferView buffer, ReduceOp op,
                                  const CollectiveOptions& options) override {
    checkBuffer(OpType::AllReduce, buffer, "");
    return collective(
        OpType::AllReduce, &buffer, options,
        Contribution{buffer.data, buffer.count, buffer.dtype, op, 0},
        [&](const std::vector<Contribution>& all, std::string& out) {
          out.assign(static_cast<const char*>(all[0].input), buffer.bytes());
          for (std::size_t r = 1; r < all.size(); ++r)
            reduceInto(buffer.dtype, op, out.data(), all[r].input, buffer.count);
          if (op == ReduceOp::Avg)
            finishAverage(buffer.dtype, out.data(), buffer.count, size());
        },
        buffer);
  }

  std::shared_ptr<Work> broadcast(BufferView buffer, int root,
                                  const CollectiveOptions& options) override {
    checkBuffer(OpType::Broadcast, buffer, "");
    checkRoot(OpType::Broadcast, root);
    return collective(
        OpType::Broadcast, &buffer, options,
        Contribution{buffer.data, buffer.count, buffer.dtype, ReduceOp::Sum, root},
        [&](const std::vector<Contribution>& all, std::string& out) {
          out.assign(static_cast<const char*>(all[static_cast<std::size_t>(root)].input),
                     buffer.bytes());
        },
        buffer);
  }

  std::shared_ptr<Work> allGather(BufferView input, BufferView output,
                                  const CollectiveOptions& options) override {
    checkAllGather(input, output);
    return collective(
        OpType::AllGather, &input, options,
        Contribution{input.data, input.count, input.dtype, ReduceOp::Sum, 0},
        [&](const std::vector<Contribution>& all, std::string& out) {
          const std::size_t block = input.bytes();
          out.resize(block * all.size());
          for (std::size_t r = 0; r < all.size(); ++r) {
            if (block > 0)
              std::memcpy(out.data() + r * block, all[r].input, block);
          }
        },
        output);
  }

  std::shared_ptr<Work> reduceScatter(BufferView input, BufferView output, ReduceOp op,
                                      const CollectiveOptions& options) override {
    checkReduceScatter(input, output);
    return collective(
        OpType::ReduceScatter, &input, options,
        Contribution{input.data, input.count, input.dtype, op, 0},
        [&](const std::vector<Contribution>& all, std::string& out) {
          const std::size_t blockBytes = output.bytes();
          const std::size_t offset = blockBytes * static_cast<std::size_t>(rank_);
          out.assign(static_cast<const char*>(all[0].input) + offset, blockBytes);
          for (std::size_t r = 1; r < all.size(); ++r) {
            reduceInto(input.dtype, op, out.data(), static_cast<const char*>(all[r].input) + offset,
                       output.count);
          }
          if (op == ReduceOp::Avg)
            finishAverage(input.dtype, out.data(), output.count, size());
        },
        output);
  }

  std::shared_ptr<Work> allToAll(BufferView input, BufferView output,
                                 const CollectiveOptions& options) override {
    checkAllToAll(input, output);
    return collective(
        OpType::AllToAll, &input, options,
        Contribution{input.data, input.count, input.dtype, ReduceOp::Sum, 0},
        [&](const std::vector<Contribution>& all, std::string& out) {
          const std::size_t blockBytes = input.bytes() / all.size();
          out.resize(input.bytes());
          for (std::size_t r = 0; r < all.size(); ++r) {
            if (blockBytes > 0) {
              std::memcpy(out.data() + r * blockBytes,
                          static_cast<const char*>(all[r].input) +
                              blockBytes * static_cast<std::size_t>(rank_),
                          blockBytes);
            }
          }
        },
        output);
  }

  std::shared_ptr<Work> barrier(const CollectiveOptions& options) override {
    BufferView none{};
    return collective(
        OpType::Barrier, nullptr, options, Contribution{},
        [](const std::vector<Contribution>&, std::string&) {}, none);
  }

  std::shared_ptr<Work> send(BufferView buffer, int peer, int tag,
                             const CollectiveOptions&) override {
    checkBuffer(OpType::Send, buffer, "");
    checkPeer(OpType::Send, peer);
    {
      std::lock_guard lock(state_->mutex);
      if (!state_->poison.empty())
        return failed(OpType::Send, &buffer, state_->poison);
      state_->mailboxes[{rank_, peer, tag}].emplace_back(static_cast<const char*>(buffer.data),
                                                         buffer.bytes());
    }
    state_->changed.notify_all();
    return completedWork(OpType::Send, describe(OpType::Send, &buffer));
  }

  std::shared_ptr<Work> recv(BufferView buffer, int peer, int tag,
                             const CollectiveOptions& options) override {
    checkBuffer(OpType::Recv, buffer, "");
    checkPeer(OpType::Recv, peer);
    const Duration limit = timeoutOf(options);
    std::string message;
    {
      std::unique_lock lock(state_->mutex);
      auto& box = state_->mailboxes[{peer, rank_, tag}];
      const bool arrived = state_->changed.wait_for(
          lock, limit, [&] { return !box.empty() || !state_->poison.empty(); });
      if (!box.empty()) {
        message = std::move(box.front());
        box.pop_front();
      } else if (!state_->poison.empty()) {
        return failed(OpType::Recv, &buffer, state_->poison);
      } else if (!arrived) {
        return failedWith<CommTimeoutError>(
            OpType::Recv, &buffer,
            fmt::format("{}: no message from rank {} with tag {} within {}",
                        describe(OpType::Recv, &buffer), peer, tag, formatDuration(limit)));
      }
    }
    if (message.size() != buffer.bytes()) {
      return failed(
          OpType::Recv, &buffer,
          fmt::format("{}: rank {} sent {} bytes with tag {}; the receive buffer holds {}",
                      describe(OpType::Recv, &buffer), peer, message.size(), tag, buffer.bytes()));
    }
    if (!message.empty())
      std::memcpy(buffer.data, message.data(), message.size());
    return completedWork(OpType::Recv, describe(OpType::Recv, &buffer));
  }

  std::shared_ptr<Backend> createSubgroup(const std::vector<int>& ranks,
                                          const std::string& groupName) override {
    int myIndex = -1;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] < 0 || ranks[i] >= size())
        throw CommError(fmt::format("{}: sub-group \"{}\" names rank {}: expected ranks in [0, {})",
                                    name(), groupName, ranks[i], size()));
      if (i > 0 && ranks[i] <= ranks[i - 1])
        throw CommError(
            fmt::format("{}: sub-group \"{}\": ranks[{}] = {} after {}: expected "
                        "strictly ascending ranks",
                        name(), groupName, i, ranks[i], ranks[i - 1]));
      if (ranks[i] == rank_)
        myIndex = static_cast<int>(i);
    }
    if (myIndex < 0)
      throw CommError(
          fmt::format("{}: rank {} is not a member of sub-group \"{}\"", name(), rank_, groupName));
    std::shared_ptr<InProcessWorld> sub;
    {
      std::lock_guard lock(state_->mutex);
      auto& slot = state_->subgroups[groupName];
      if (!slot)
        slot = std::make_shared<InProcessWorld>(static_cast<int>(ranks.size()), state_->timeout);
      sub = slot;
    }
    // The sub-world lives as long as the parent's state; its backends keep their own state.
    return sub->backend(myIndex);
  }

 private:
  std::shared_ptr<Work> failed(OpType op, const BufferView* buffer, const std::string& why) {
    return failedWith<CommError>(op, buffer, why);
  }
  template <typename E>
  std::shared_ptr<Work> failedWith(OpType op, const BufferView* buffer, const std::string& why) {
    auto work = std::make_shared<CompletionWork>(op, Duration::zero(), describe(op, buffer));
    work->markFailed(std::make_exception_ptr(E(why)));
    return work;
  }

  // Registers this rank's contribution to collective #seq, waits for every rank, computes this
  // rank's result into a private buffer, waits until every rank has read the inputs, then
  // writes the result into `output` (so in-place operations are safe).
  template <typename Compute>
  std::shared_ptr<Work> collective(OpType op, const BufferView* described,
                                   const CollectiveOptions& options, Contribution mine,
                                   Compute&& compute, const BufferView& output) {
    const Duration limit = timeoutOf(options);
    const auto deadline = Clock::now() + limit;
    const std::uint64_t seq = nextSeq_++;
    auto& st = *state_;
    std::string result;
    std::unique_lock lock(st.mutex);
    if (!st.poison.empty())
      return failed(op, described, st.poison);
    Slot& slot = st.slots[seq];
    if (slot.contributions.empty()) {
      slot.op = op;
      slot.firstRank = rank_;
      slot.contributions.resize(static_cast<std::size_t>(st.size));
      slot.arrived.assign(static_cast<std::size_t>(st.size), false);
    } else if (slot.op != op) {
      const std::string why =
          fmt::format("{}: collective #{} mismatch: rank {} called {} while rank {} called {}",
                      name(), seq, rank_, toString(op), slot.firstRank, toString(slot.op));
      st.poison = why;
      st.changed.notify_all();
      return failed(op, described, why);
    }
    slot.contributions[static_cast<std::size_t>(rank_)] = mine;
    slot.arrived[static_cast<std::size_t>(rank_)] = true;
    ++slot.arrivedCount;
    st.changed.notify_all();

    auto waitFor = [&](auto&& ready, std::string_view phase) -> std::shared_ptr<Work> {
      if (st.changed.wait_until(lock, deadline, [&] { return ready() || !st.poison.empty(); }) &&
          st.poison.empty())
        return nullptr;
      if (!st.poison.empty())
        return failed(op, described, st.poison);
      std::string missing;
      for (int r = 0; r < st.size; ++r) {
        if (!slot.arrived[static_cast<std::size_t>(r)])
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      const std::string why = fmt::format(
          "{} timed out after {} {}{}", describe(op, described), formatDuration(limit), phase,
          missing.empty() ? std::string() : fmt::format(" (ranks that never joined: {})", missing));
      st.poison = why;
      st.changed.notify_all();
      return failedWith<CommTimeoutError>(op, described, why);
    };

    if (auto bad = waitFor([&] { return slot.arrivedCount == st.size; }, "waiting for peers"))
      return bad;
    lock.unlock();
    compute(slot.contributions, result);
    lock.lock();
    ++slot.computedCount;
    st.changed.notify_all();
    if (auto bad =
            waitFor([&] { return slot.computedCount == st.size; }, "waiting for peers to read"))
      return bad;
    if (++slot.departedCount == st.size)
      st.slots.erase(seq);
    lock.unlock();
    if (!result.empty())
      std::memcpy(output.data, result.data(), result.size());
    return completedWork(op, describe(op, described));
  }

  std::shared_ptr<InProcessWorld::State> state_;
  int rank_;
  std::uint64_t nextSeq_ = 0;
};

}  // namespace

InProcessWorld::InProcessWorld(int size, Duration timeout)
    : state_(std::make_shared<State>(size, timeout)) {
  if (size < 1)
    throw CommError(fmt::format("in_process world size = {}: expected at least 1", size));
}

InProcessWorld::~InProcessWorld() = default;

int InProcessWorld::size() const noexcept {
  return state_->size;
}

std::shared_ptr<Backend> InProcessWorld::backend(int rank) {
  if (rank < 0 || rank >= state_->size)
    throw CommError(
        fmt::format("in_process rank = {}: expected a rank in [0, {})", rank, state_->size));
  std::lock_guard lock(state_->mutex);
  auto& weak = state_->backends[static_cast<std::size_t>(rank)];
  if (auto existing = weak.lock())
    return existing;
  auto created = std::make_shared<InProcessBackend>(state_, rank);
  weak = created;
  return created;
}

void runRankThreads(int ranks, const std::function<void(int rank)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (const auto& e : errors) {
    if (e)
      std::rethrow_exception(e);
  }
}

}  // namespace stretch::comm
