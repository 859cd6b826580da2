// The collective algorithms of runtime/comm/collectives over an in-memory Channel (ranks as
// threads), so they are checked without Gloo; the backend contract suite checks them again over
// Gloo's transport. Sends are buffered here, which a real transport need not do: the algorithms
// may not rely on it, and the Gloo runs of the contract suite would catch one that did.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/comm/collectives/algorithms.hpp"
#include "runtime/comm/in_process_backend.hpp"

namespace stretch::comm::collectives {
namespace {

// Mailboxes between every pair of ranks, keyed by (source, destination, slot).
class MemoryWorld {
 public:
  class Buffer final : public Channel::Buffer {
   public:
    Buffer(MemoryWorld& world, int rank, void* data, std::size_t bytes)
        : world_(world), rank_(rank), data_(static_cast<std::byte*>(data)), bytes_(bytes) {}

    void send(int peer, std::uint64_t slot, std::size_t offset, std::size_t bytes) override {
      check(offset, bytes);
      world_.send(*this, peer, slot, data_ + offset, bytes);
    }
    void recv(int peer, std::uint64_t slot, std::size_t offset, std::size_t bytes) override {
      check(offset, bytes);
      world_.recv(*this, peer, slot, data_ + offset, bytes);
    }

   private:
    friend class MemoryWorld;
    void check(std::size_t offset, std::size_t bytes) const {
      if (offset + bytes > bytes_)
        throw std::logic_error("message outside its buffer");
    }

    MemoryWorld& world_;
    int rank_;
    std::byte* data_;
    std::size_t bytes_;
    int sendsDone_ = 0;  // guarded by the world's mutex
    int recvsDone_ = 0;
  };

  // One rank's side of one operation.
  class RankChannel final : public Channel {
   public:
    RankChannel(MemoryWorld& world, int rank) : world_(world), rank_(rank) {}

    int rank() const noexcept override { return rank_; }
    int size() const noexcept override { return world_.size_; }
    Buffer* buffer(void* data, std::size_t bytes) override {
      buffers_.push_back(std::make_unique<MemoryWorld::Buffer>(world_, rank_, data, bytes));
      return buffers_.back().get();
    }
    std::byte* scratch(std::size_t bytes) override {
      auto& memory = world_.scratch_[static_cast<std::size_t>(rank_)];
      if (memory.size() < bytes)
        memory.resize(bytes);
      return memory.data();
    }
    std::uint64_t nextSlot() override {
      return ++world_.sequence_[static_cast<std::size_t>(rank_)] << 8;
    }
    void post(std::function<void()> fn) override { fn(); }
    void waitSend(Channel::Buffer* buffer) override {
      world_.wait(static_cast<MemoryWorld::Buffer&>(*buffer), &MemoryWorld::Buffer::sendsDone_);
    }
    void waitRecv(Channel::Buffer* buffer) override {
      world_.wait(static_cast<MemoryWorld::Buffer&>(*buffer), &MemoryWorld::Buffer::recvsDone_);
    }

   private:
    MemoryWorld& world_;
    int rank_;
    std::vector<std::unique_ptr<MemoryWorld::Buffer>> buffers_;
  };

  explicit MemoryWorld(int size)
      : size_(size),
        scratch_(static_cast<std::size_t>(size)),
        sequence_(static_cast<std::size_t>(size)) {}

 private:
  using Key = std::tuple<int, int, std::uint64_t>;  // source, destination, slot
  struct PendingRecv {
    Buffer* buffer;
    std::byte* data;
    std::size_t bytes;
  };

  void send(Buffer& from, int peer, std::uint64_t slot, const std::byte* data, std::size_t bytes) {
    std::lock_guard lock(mutex_);
    const Key key{from.rank_, peer, slot};
    auto& waiting = recvs_[key];
    if (!waiting.empty()) {
      deliver(waiting.front(), data, bytes);
      waiting.pop_front();
    } else {
      messages_[key].emplace_back(data, data + bytes);
    }
    ++from.sendsDone_;
    wake_.notify_all();
  }

  void recv(Buffer& into, int peer, std::uint64_t slot, std::byte* data, std::size_t bytes) {
    std::lock_guard lock(mutex_);
    const Key key{peer, into.rank_, slot};
    auto& queued = messages_[key];
    if (queued.empty()) {
      recvs_[key].push_back({&into, data, bytes});
      return;
    }
    deliver({&into, data, bytes}, queued.front().data(), queued.front().size());
    queued.pop_front();
    wake_.notify_all();
  }

  void deliver(const PendingRecv& recv, const std::byte* data, std::size_t bytes) {
    if (bytes != recv.bytes)
      throw std::logic_error("a receive differs in size from its send");
    std::memcpy(recv.data, data, bytes);
    ++recv.buffer->recvsDone_;
  }

  void wait(Buffer& buffer, int Buffer::*done) {
    std::unique_lock lock(mutex_);
    if (!wake_.wait_for(lock, std::chrono::seconds(20), [&] { return buffer.*done > 0; }))
      throw std::runtime_error("a wait did not complete: an algorithm posted too few messages");
    --(buffer.*done);
  }

  int size_;
  std::vector<std::vector<std::byte>> scratch_;
  std::vector<std::uint64_t> sequence_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::map<Key, std::deque<std::vector<std::byte>>> messages_;
  std::map<Key, std::deque<PendingRecv>> recvs_;
};

// Runs `body(channel, rank, out)` on every rank of a fresh world, one channel per rank; returns
// every rank's `out`.
template <typename T = std::int64_t, typename Body>
std::vector<std::vector<T>> runCollective(int size, Body body) {
  MemoryWorld world(size);
  std::vector<std::vector<T>> out(static_cast<std::size_t>(size));
  runRankThreads(size, [&](int rank) {
    MemoryWorld::RankChannel channel(world, rank);
    body(channel, rank, out[static_cast<std::size_t>(rank)]);
  });
  return out;
}

std::int64_t valueOf(int rank, std::size_t i) {
  return static_cast<std::int64_t>(rank + 1) * 1000 + static_cast<std::int64_t>(i % 997);
}

// valueOf(rank, i) for i < count.
std::vector<std::int64_t> rankValues(int rank, std::size_t count) {
  std::vector<std::int64_t> values(count);
  for (std::size_t i = 0; i < count; ++i)
    values[i] = valueOf(rank, i);
  return values;
}

class CollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesTest, AllReduceSumsOnBothPaths) {
  const int n = GetParam();
  // Small: recursive doubling; 1 Mi elements (8 MiB): direct reduce-scatter + all-gather.
  for (const std::size_t count : {std::size_t{1}, std::size_t{37}, std::size_t{1} << 20}) {
    const auto data = runCollective(n, [&](Channel& ch, int rank, auto& mine) {
      mine = rankValues(rank, count);
      allReduce(ch, mine.data(), count, DataType::Int64, ReduceOp::Sum);
    });
    for (const auto& result : data) {
      for (std::size_t i = 0; i < count; ++i) {
        std::int64_t expected = 0;
        for (int r = 0; r < n; ++r)
          expected += valueOf(r, i);
        ASSERT_EQ(result[i], expected) << "count " << count << ", element " << i;
      }
    }
  }
}

TEST_P(CollectivesTest, AllReduceAverageIsBitIdenticalOnEveryRank) {
  const int n = GetParam();
  for (const std::size_t count : {std::size_t{5}, std::size_t{300000}}) {
    const auto data = runCollective<float>(n, [&](Channel& ch, int rank, auto& mine) {
      mine.resize(count);
      for (std::size_t i = 0; i < count; ++i)
        mine[i] = 0.1f * static_cast<float>(rank + 1) + 1e-3f * static_cast<float>(i % 101);
      allReduce(ch, mine.data(), count, DataType::Float32, ReduceOp::Avg);
    });
    for (int r = 1; r < n; ++r)
      ASSERT_EQ(std::memcmp(data[0].data(), data[static_cast<std::size_t>(r)].data(),
                            count * sizeof(float)),
                0)
          << "rank " << r << " differs from rank 0";
    EXPECT_NEAR(data[0][0], 0.1f * static_cast<float>(n + 1) / 2.0f, 1e-5f);
  }
}

TEST_P(CollectivesTest, BroadcastFromEveryRootOnBothPaths) {
  const int n = GetParam();
  // 300 000 x int64 is past the 1 MiB scatter + all-gather threshold (3+ ranks).
  for (const std::size_t count : {std::size_t{3}, std::size_t{300001}}) {
    for (int root = 0; root < n; ++root) {
      const auto data = runCollective(n, [&](Channel& ch, int rank, auto& mine) {
        mine = rank == root ? rankValues(rank, count) : std::vector<std::int64_t>(count, -1);
        broadcast(ch, mine.data(), count, DataType::Int64, root);
      });
      for (const auto& result : data) {
        for (std::size_t i = 0; i < count; ++i)
          ASSERT_EQ(result[i], valueOf(root, i)) << "root " << root << ", element " << i;
      }
    }
  }
}

TEST_P(CollectivesTest, AllGatherPlacesRankBlocksInOrder) {
  const int n = GetParam();
  const std::size_t count = 11;
  const auto out = runCollective(n, [&](Channel& ch, int rank, auto& mine) {
    std::vector<std::int64_t> in = rankValues(rank, count);
    mine.assign(count * static_cast<std::size_t>(n), -1);
    allGather(ch, BufferView::of(std::span(in)), BufferView::of(std::span(mine)));
  });
  for (const auto& result : out) {
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < count; ++i)
        ASSERT_EQ(result[static_cast<std::size_t>(r) * count + i], valueOf(r, i));
    }
  }
}

TEST_P(CollectivesTest, ReduceScatterGivesRankItsReducedBlock) {
  const int n = GetParam();
  const std::size_t block = 13;
  const auto out = runCollective(n, [&](Channel& ch, int rank, auto& mine) {
    std::vector<std::int64_t> in = rankValues(rank, block * static_cast<std::size_t>(n));
    mine.assign(block, -1);
    reduceScatter(ch, BufferView::of(std::span(in)), BufferView::of(std::span(mine)),
                  ReduceOp::Max);
  });
  for (int r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < block; ++i) {
      // valueOf grows with the rank, so the maximum is the last rank's.
      ASSERT_EQ(out[static_cast<std::size_t>(r)][i],
                valueOf(n - 1, static_cast<std::size_t>(r) * block + i));
    }
  }
}

TEST_P(CollectivesTest, AllToAllTransposesBlocksAlsoInPlace) {
  const int n = GetParam();
  const std::size_t block = 4;
  for (const bool inPlace : {false, true}) {
    const auto out = runCollective(n, [&](Channel& ch, int rank, auto& mine) {
      std::vector<std::int64_t> in = rankValues(rank, block * static_cast<std::size_t>(n));
      if (inPlace) {
        mine = in;
        allToAll(ch, BufferView::of(std::span(mine)), BufferView::of(std::span(mine)));
      } else {
        mine.assign(in.size(), -1);
        allToAll(ch, BufferView::of(std::span(in)), BufferView::of(std::span(mine)));
      }
    });
    for (int r = 0; r < n; ++r) {
      for (int from = 0; from < n; ++from) {
        for (std::size_t i = 0; i < block; ++i) {
          ASSERT_EQ(out[static_cast<std::size_t>(r)][static_cast<std::size_t>(from) * block + i],
                    valueOf(from, static_cast<std::size_t>(r) * block + i))
              << (inPlace ? "in place" : "out of place");
        }
      }
    }
  }
}

TEST_P(CollectivesTest, BarrierCompletesOnEveryRank) {
  const int n = GetParam();
  std::atomic<int> done{0};
  runCollective(n, [&](Channel& ch, int, auto&) {
    barrier(ch);
    barrier(ch);
    ++done;
  });
  EXPECT_EQ(done.load(), n);
}

std::string groupSizeName(const ::testing::TestParamInfo<int>& size) {
  return "ranks" + std::to_string(size.param);
}

INSTANTIATE_TEST_SUITE_P(GroupSizes, CollectivesTest, ::testing::Values(2, 3, 4, 5, 8),
                         groupSizeName);

}  // namespace
}  // namespace stretch::comm::collectives
