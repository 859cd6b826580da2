// The in-process backend's own promises (the shared contract suite covers the operations):
// synchronous completion, eager sends, mismatch detection, poisoning after a timeout.

#include "runtime/comm/in_process_backend.hpp"

#include <chrono>
#include <numeric>

#include <gtest/gtest.h>

#include "runtime/comm/errors.hpp"

namespace stretch::comm {
namespace {

using namespace std::chrono_literals;

TEST(InProcessBackend, AllReduceIsCompleteOnReturnAndIdenticalOnEveryRank) {
  InProcessWorld world(4, 5s);
  std::vector<std::vector<float>> results(4);
  runRankThreads(4, [&](int rank) {
    auto backend = world.backend(rank);
    std::vector<float> v = {0.1f * static_cast<float>(rank + 1), 1.0f, -2.0f};
    auto work = backend->allReduce(BufferView::of(std::span(v)), ReduceOp::Sum);
    EXPECT_TRUE(work->isCompleted());
    work->wait();
    results[static_cast<std::size_t>(rank)] = v;
  });
  for (int r = 1; r < 4; ++r)
    EXPECT_EQ(results[0], results[static_cast<std::size_t>(r)]);  // bit-identical
  EXPECT_FLOAT_EQ(results[0][1], 4.0f);
  EXPECT_FLOAT_EQ(results[0][2], -8.0f);
}

TEST(InProcessBackend, SendsAreEagerSoPairsMayCrossSend) {
  InProcessWorld world(2, 5s);
  runRankThreads(2, [&](int rank) {
    auto backend = world.backend(rank);
    const int peer = 1 - rank;
    std::vector<std::int64_t> out = {rank * 10, rank * 10 + 1};
    std::vector<std::int64_t> in(2);
    backend->send(BufferView::of(std::span(out)), peer, 7)->wait();
    backend->recv(BufferView::of(std::span(in)), peer, 7)->wait();
    EXPECT_EQ(in[0], peer * 10);
    EXPECT_EQ(in[1], peer * 10 + 1);
  });
}

TEST(InProcessBackend, RecvOfTheWrongSizeFailsNamingBoth) {
  InProcessWorld world(2, 5s);
  runRankThreads(2, [&](int rank) {
    auto backend = world.backend(rank);
    std::vector<std::int32_t> buf(rank == 0 ? 3 : 4);
    if (rank == 0) {
      backend->send(BufferView::of(std::span(buf)), 1)->wait();
    } else {
      auto work = backend->recv(BufferView::of(std::span(buf)), 0);
      try {
        work->wait();
        ADD_FAILURE() << "size mismatch accepted";
      } catch (const CommError& e) {
        EXPECT_NE(std::string(e.what()).find("sent 12 bytes"), std::string::npos) << e.what();
      }
    }
  });
}

TEST(InProcessBackend, MismatchedCollectivesFailInsteadOfHanging) {
  InProcessWorld world(2, 5s);
  std::vector<std::string> messages(2);
  runRankThreads(2, [&](int rank) {
    auto backend = world.backend(rank);
    std::vector<float> v(4, 1.0f);
    auto work = rank == 0 ? backend->allReduce(BufferView::of(std::span(v)), ReduceOp::Sum)
                          : backend->broadcast(BufferView::of(std::span(v)), 0);
    try {
      work->wait();
    } catch (const CommError& e) {
      messages[static_cast<std::size_t>(rank)] = e.what();
    }
  });
  const std::string joined = messages[0] + messages[1];
  EXPECT_NE(joined.find("mismatch"), std::string::npos) << joined;
  EXPECT_NE(joined.find("all_reduce"), std::string::npos) << joined;
  EXPECT_NE(joined.find("broadcast"), std::string::npos) << joined;
}

TEST(InProcessBackend, AMissingRankTimesOutAndPoisonsTheWorld) {
  InProcessWorld world(3, 200ms);
  runRankThreads(3, [&](int rank) {
    if (rank == 2)
      return;  // never joins
    auto backend = world.backend(rank);
    std::vector<float> v(8, 1.0f);
    const auto start = std::chrono::steady_clock::now();
    auto work = backend->allReduce(BufferView::of(std::span(v)), ReduceOp::Sum);
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_LT(waited, 3s);
    try {
      work->wait();
      ADD_FAILURE() << "allReduce with a missing rank succeeded";
    } catch (const CommTimeoutError& e) {
      EXPECT_NE(std::string(e.what()).find("never joined: 2"), std::string::npos) << e.what();
    } catch (const CommError& e) {
      // The second rank may see the poison set by the first.
      EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
    }
    // Later operations fail at once.
    EXPECT_THROW(backend->barrier()->wait(), CommError);
  });
}

TEST(InProcessBackend, RejectsBadRanksAndSizes) {
  EXPECT_THROW(InProcessWorld(0), CommError);
  InProcessWorld world(2);
  EXPECT_THROW(world.backend(2), CommError);
  EXPECT_THROW(world.backend(-1), CommError);
  auto b = world.backend(0);
  std::vector<float> v(4);
  EXPECT_THROW(b->broadcast(BufferView::of(std::span(v)), 5), CommError);
  EXPECT_THROW(b->send(BufferView::of(std::span(v)), 0), CommError);  // to itself
  BufferView onGpu = BufferView::of(std::span(v));
  onGpu.device = Device::cuda(0);
  EXPECT_THROW(b->allReduce(onGpu, ReduceOp::Sum), CommUnsupportedError);
}

}  // namespace
}  // namespace stretch::comm
