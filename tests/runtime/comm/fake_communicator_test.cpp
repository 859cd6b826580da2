// The fake NCCL's own contract (tests/support/fake_communicator.hpp): collectives across rank
// threads, a killed rank's peers blocked until revoke, shrink, grow and join, and the traps of
// each NCCL version, so that the device-generation tests built on it can trust what it reports.
// Every timeout that is expected to expire is a few hundred milliseconds.

#include "tests/support/fake_communicator.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "runtime/comm/errors.hpp"
#include "runtime/comm/in_process_backend.hpp"
#include "tests/support/error_of.hpp"

namespace stretch::test {
namespace {

using namespace std::chrono_literals;
using comm::BufferView;
using comm::Communicator;
using comm::ReduceOp;
using Clock = std::chrono::steady_clock;

// Long enough never to expire on a loaded 2-core VM when every rank takes part.
constexpr comm::Duration kGenerous = 10s;
// For calls that are expected to time out.
constexpr comm::Duration kShort = 200ms;

std::string process(int rank) {
  return "p" + std::to_string(rank);
}

using Comms = std::vector<std::unique_ptr<Communicator>>;

// Communicators of `size` ranks, rank r in process "p<r>", each made on a thread of its own.
Comms initAll(FakeNccl& nccl, int size) {
  const std::string id = nccl.library(process(0))->uniqueId();
  Comms comms(static_cast<std::size_t>(size));
  comm::runRankThreads(size, [&](int r) {
    comms[static_cast<std::size_t>(r)] =
        nccl.library(process(r))->init(id, r, size, kGenerous, nullptr);
  });
  return comms;
}

// Issues an allReduce of {value} on each of `comms` (non-null), from this thread: collectives
// are asynchronous, so issuing rank after rank completes the last one.
struct Issued {
  std::vector<std::int64_t> values;
  std::vector<std::shared_ptr<comm::Work>> works;
};
std::unique_ptr<Issued> allReduceEach(const std::vector<Communicator*>& comms,
                                      std::int64_t base = 1) {
  auto issued = std::make_unique<Issued>();
  issued->values.resize(comms.size());
  for (std::size_t i = 0; i < comms.size(); ++i) {
    issued->values[i] = base + static_cast<std::int64_t>(i);
    issued->works.push_back(comms[i]->backend()->allReduce(
        BufferView::of(std::span(&issued->values[i], 1)), ReduceOp::Sum));
  }
  return issued;
}

std::vector<Communicator*> pointers(const Comms& comms, std::vector<int> ranks = {}) {
  if (ranks.empty()) {
    for (int r = 0; r < static_cast<int>(comms.size()); ++r)
      ranks.push_back(r);
  }
  std::vector<Communicator*> out;
  for (int r : ranks)
    out.push_back(comms[static_cast<std::size_t>(r)].get());
  return out;
}

// Every rank of `comms` reduces its rank + 1: the sum is n(n+1)/2 on each.
void expectAllReduceWorks(const Comms& comms) {
  auto issued = allReduceEach(pointers(comms));
  const auto n = static_cast<std::int64_t>(comms.size());
  for (std::size_t i = 0; i < comms.size(); ++i) {
    issued->works[i]->wait(kGenerous);
    EXPECT_EQ(issued->values[i], n * (n + 1) / 2) << "rank " << i;
  }
}

// `dead`'s process dies while `survivors` wait in an allReduce it never joins; then they revoke.
std::unique_ptr<Issued> failDuringAllReduce(FakeNccl& nccl, const Comms& comms, int dead,
                                            const std::vector<int>& survivors) {
  nccl.kill(process(dead));
  auto issued = allReduceEach(pointers(comms, survivors));
  for (int r : survivors)
    comms[static_cast<std::size_t>(r)]->revoke(fmt::format("{} died", process(dead)));
  return issued;
}

bool hasTrap(const FakeNccl& nccl, const std::string& text) {
  for (const auto& trap : nccl.traps()) {
    if (trap.find(text) != std::string::npos)
      return true;
  }
  return false;
}

// Shrinks each of `ranks` of `comms` on a thread of its own; nullptr where that rank threw.
Comms shrinkEach(const Comms& comms, const std::vector<int>& ranks,
                 const std::vector<int>& excluded, bool abortInFlight,
                 comm::Duration timeout = kGenerous) {
  Comms shrunk(ranks.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        shrunk[i] = comms[static_cast<std::size_t>(ranks[i])]->shrink(excluded, abortInFlight,
                                                                      timeout, nullptr);
      } catch (const comm::CommError&) {
      }
    });
  }
  for (auto& t : threads)
    t.join();
  return shrunk;
}

TEST(FakeNccl, InitThenCollectivesAcrossThreeRanks) {
  FakeNccl nccl(comm::ncclFeatures(2, 28, 9));
  Comms comms = initAll(nccl, 3);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(comms[static_cast<std::size_t>(r)]->rank(), r);
    EXPECT_EQ(comms[static_cast<std::size_t>(r)]->size(), 3);
  }
  auto backend = comms[0]->backend();
  EXPECT_EQ(backend, comms[0]->backend()) << "the same Backend on every call";
  EXPECT_EQ(backend->name(), "nccl");
  EXPECT_TRUE(backend->supportsDevice(comm::DeviceType::Cuda));

  // Each rank on its own thread, as workers do.
  comm::runRankThreads(3, [&](int r) {
    auto b = comms[static_cast<std::size_t>(r)]->backend();
    std::vector<float> values{static_cast<float>(r + 1), 10.0f * static_cast<float>(r + 1)};
    b->allReduce(BufferView::of(std::span(values)), ReduceOp::Sum)->wait(kGenerous);
    EXPECT_EQ(values, (std::vector<float>{6.0f, 60.0f})) << "rank " << r;
    std::vector<double> broadcast{static_cast<double>(r)};
    b->broadcast(BufferView::of(std::span(broadcast)), 1)->wait(kGenerous);
    EXPECT_EQ(broadcast[0], 1.0) << "rank " << r;
    b->barrier()->wait(kGenerous);
  });

  EXPECT_EQ(nccl.liveCommunicators(), 3);
  for (auto& c : comms)
    c->destroy();
  EXPECT_EQ(nccl.liveCommunicators(), 0);
  EXPECT_EQ(nccl.counts().init, 3);
  EXPECT_EQ(nccl.counts().destroy, 3);
  EXPECT_TRUE(nccl.traps().empty());
}

TEST(FakeNccl, ReducesEveryOperatorOnEverySupportedType) {
  FakeNccl nccl(comm::ncclFeatures(2, 28, 9));
  Comms comms = initAll(nccl, 3);
  // Ranks hold 2, 3, 4: sum 9, average 3, min 2, max 4, product 24.
  const std::pair<ReduceOp, double> expected[] = {{ReduceOp::Sum, 9},
                                                  {ReduceOp::Avg, 3},
                                                  {ReduceOp::Min, 2},
                                                  {ReduceOp::Max, 4},
                                                  {ReduceOp::Product, 24}};
  auto check = [&]<typename T>(T) {
    for (const auto& [op, want] : expected) {
      std::vector<T> values{2, 3, 4};
      std::vector<std::shared_ptr<comm::Work>> works;
      for (std::size_t r = 0; r < 3; ++r)
        works.push_back(
            comms[r]->backend()->allReduce(BufferView::of(std::span(&values[r], 1)), op));
      for (std::size_t r = 0; r < 3; ++r) {
        works[r]->wait(kGenerous);
        EXPECT_EQ(values[r], static_cast<T>(want)) << comm::toString(op) << " rank " << r;
      }
    }
  };
  check(float{});
  check(double{});
  check(std::int32_t{});
  check(std::int64_t{});

  std::uint16_t half = 0;
  EXPECT_THROW(comms[0]->backend()->allReduce({&half, 1, comm::DataType::Float16}, ReduceOp::Sum),
               comm::CommUnsupportedError);
  float x = 0;
  EXPECT_THROW(comms[0]->backend()->allGather({&x, 1}, {&x, 1}), comm::CommUnsupportedError);
  for (auto& c : comms)
    c->destroy();
}

TEST(FakeNccl, UniqueIdsAreFreshWords) {
  FakeNccl nccl(comm::ncclFeatures(2, 28, 9));
  const auto a = nccl.library("p0")->uniqueId();
  const auto b = nccl.library("p1")->uniqueId();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.find(' '), std::string::npos) << a;
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(nccl.library("p0"), nccl.library("p0")) << "one library per process";
}

TEST(FakeNccl, KilledRankBlocksItsPeersUntilTheyRevoke) {
  FakeNccl nccl(comm::ncclFeatures(2, 28, 9));
  Comms comms = initAll(nccl, 3);
  nccl.kill("p2");
  auto issued = allReduceEach(pointers(comms, {0, 1}));
  EXPECT_THROW(issued->works[0]->wait(20ms), comm::CommTimeoutError) << "blocked on the dead rank";
  EXPECT_FALSE(issued->works[1]->isCompleted());
  EXPECT_EQ(comms[0]->asyncError(), std::nullopt) << "NCCL says nothing of a silent peer";
  EXPECT_THROW(comms[2]->backend()->barrier(), comm::CommPeerError) << "the dead process's call";

  // A waiter blocked in wait() on the peer's Work is released by a revoke from another thread.
  std::exception_ptr error;
  Clock::time_point released;
  std::thread waiter([&] {
    try {
      issued->works[0]->wait(kGenerous);
    } catch (...) {
      error = std::current_exception();
    }
    released = Clock::now();
  });
  std::this_thread::sleep_for(30ms);
  const auto revokedAt = Clock::now();
  comms[0]->revoke("generation 2 superseded");
  waiter.join();
  EXPECT_LT(released - revokedAt, 1s);
  ASSERT_NE(error, nullptr);
  const std::string message = errorOf<comm::CommPeerError>([&] { std::rethrow_exception(error); });
  EXPECT_NE(message.find("generation 2 superseded"), std::string::npos) << message;

  const auto async = comms[0]->asyncError();
  ASSERT_TRUE(async.has_value());
  EXPECT_NE(async->find("remote process exited or there was a network error"), std::string::npos)
      << *async;
  // Later Works fail at once; the other survivor's Work waits until it revokes too.
  EXPECT_THROW(comms[0]->backend()->barrier()->wait(kGenerous), comm::CommPeerError);
  EXPECT_FALSE(issued->works[1]->isCompleted());
  comms[1]->revoke("generation 2 superseded");
  EXPECT_THROW(issued->works[1]->wait(kGenerous), comm::CommPeerError);
  EXPECT_EQ(nccl.counts().revoke, 2);
  EXPECT_EQ(nccl.liveCommunicators(), 2) << "a killed process holds nothing";
  EXPECT_EQ(nccl.liveCommunicators("p2"), 0);
}

TEST(FakeNccl, ShrinkLeavesOutTheDeadRankAndKeepsTheParentsOrder) {
  FakeNccl nccl(comm::ncclFeatures(2, 28, 9));
  Comms comms = initAll(nccl, 3);
  failDuringAllReduce(nccl, comms, 1, {0, 2});
  Comms shrunk = shrinkEach(comms, {0, 2}, {1}, false);
  ASSERT_NE(shrunk[0], nullptr);
  ASSERT_NE(shrunk[1], nullptr);
  EXPECT_EQ(shrunk[0]->rank(), 0);
  EXPECT_EQ(shrunk[1]->rank(), 1) << "parent rank 2 is second of the survivors";
  EXPECT_EQ(shrunk[1]->size(), 2);
  expectAllReduceWorks(shrunk);

  // With ncclCommRevoke the revoked parents are destroyed cleanly.
  comms[0]->destroy();
  comms[2]->destroy();
  for (auto& c : shrunk)
    c->destroy();
  EXPECT_TRUE(nccl.traps().empty()) << nccl.traps().front();
  EXPECT_EQ(nccl.counts().shrink, 2);
  EXPECT_EQ(nccl.liveCommunicators(), 0);
}

TEST(FakeNccl, ShrinkWaitingOnADeadRankTimesOutOrIsInterrupted) {
  FakeNccl nccl(comm::ncclFeatures(2, 28, 9));
  Comms comms = initAll(nccl, 3);
  nccl.kill("p2");
  comms[0]->revoke("p2 died");
  comms[1]->revoke("p2 died");

  const auto start = Clock::now();
  const std::string message =
      errorOf<comm::CommTimeoutError>([&] { comms[0]->shrink({}, false, kShort, nullptr); });
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_NE(message.find("shrink"), std::string::npos) << message;
  EXPECT_NE(message.find("never arrived: 1, 2"), std::string::npos) << message;

  std::atomic<bool> superseded = false;
  std::thread publisher([&] {
    std::this_thread::sleep_for(30ms);
    superseded = true;
  });
  const auto interruptStart = Clock::now();
  EXPECT_THROW(comms[1]->shrink({}, false, kGenerous, [&] { return superseded.load(); }),
               comm::CommAbortedError);
  EXPECT_LT(Clock::now() - interruptStart, 1s);
  publisher.join();

  // Both left the rendezvous: excluding the dead rank still works afterwards.
  Comms shrunk = shrinkEach(comms, {0, 1}, {2}, false);
  ASSERT_NE(shrunk[0], nullptr);
  ASSERT_NE(shrunk[1], nullptr);
  expectAllReduceWorks(shrunk);
}

TEST(FakeNccl, AKilledProcessLeavesItsRendezvousAndItsCallsThrow) {
  FakeNccl nccl(comm::ncclFeatures(2, 28, 9));
  const std::string id = nccl.library("p0")->uniqueId();
  std::thread dying([&] {
    EXPECT_THROW(nccl.library("p1")->init(id, 1, 3, kGenerous, nullptr), comm::CommPeerError);
  });
  std::this_thread::sleep_for(20ms);
  nccl.kill("p1");
  dying.join();
  EXPECT_THROW(nccl.library("p1")->init(id, 1, 3, kGenerous, nullptr), comm::CommPeerError);
  // p1's arrival was taken back: the others wait for rank 1 until superseded.
  std::atomic<bool> superseded = false;
  std::thread other([&] {
    EXPECT_THROW(nccl.library("p2")->init(id, 2, 3, kGenerous, [&] { return superseded.load(); }),
                 comm::CommAbortedError);
  });
  const std::string message =
      errorOf<comm::CommTimeoutError>([&] { nccl.library("p0")->init(id, 0, 3, kShort, nullptr); });
  superseded = true;
  other.join();
  EXPECT_NE(message.find("never arrived: 1"), std::string::npos) << message;
  EXPECT_EQ(nccl.liveCommunicators(), 0);
}

TEST(FakeNccl, GrowAddsJoinersOnTwoTwentyNine) {
  FakeNccl nccl(comm::ncclFeatures(2, 29, 0));
  Comms comms = initAll(nccl, 3);
  const std::string id = comms[0]->growId();
  Comms grown(5);
  comm::runRankThreads(5, [&](int r) {
    auto& slot = grown[static_cast<std::size_t>(r)];
    if (r < 3) {
      slot = comms[static_cast<std::size_t>(r)]->grow(
          5, r == 0 ? std::optional<std::string>(id) : std::nullopt, kGenerous, nullptr);
    } else {
      slot = nccl.library(process(r))->join(id, r, 5, kGenerous, nullptr);
    }
  });
  for (int r = 0; r < 5; ++r) {
    EXPECT_EQ(grown[static_cast<std::size_t>(r)]->rank(), r);
    EXPECT_EQ(grown[static_cast<std::size_t>(r)]->size(), 5);
  }
  expectAllReduceWorks(grown);
  EXPECT_EQ(nccl.counts().grow, 3);
  EXPECT_EQ(nccl.counts().join, 2);
  EXPECT_EQ(nccl.liveCommunicators(), 8);
  EXPECT_THROW(nccl.library("p5")->join(id, 3, 5, kShort, nullptr), comm::CommError)
      << "a grow id is used once";
  EXPECT_TRUE(nccl.traps().empty());
}

TEST(FakeNccl, GrowWithoutTheRootsIdTimesOutNamingIt) {
  FakeNccl nccl(comm::ncclFeatures(2, 29, 0));
  Comms comms = initAll(nccl, 1);
  const std::string id = comms[0]->growId();
  std::thread joiner([&] {
    EXPECT_THROW(nccl.library("p1")->join(id, 1, 2, kShort, nullptr), comm::CommTimeoutError);
  });
  const std::string message =
      errorOf<comm::CommTimeoutError>([&] { comms[0]->grow(2, std::nullopt, kShort, nullptr); });
  joiner.join();
  EXPECT_NE(message.find("growId()"), std::string::npos) << message;
}

TEST(FakeNccl, CallsTheVersionLacksAreTrapped) {
  FakeNccl old(comm::ncclFeatures(2, 28, 9));
  Comms comms = initAll(old, 2);
  EXPECT_THROW(comms[0]->growId(), comm::CommUnsupportedError);
  EXPECT_THROW(comms[1]->grow(3, std::nullopt, kShort, nullptr), comm::CommUnsupportedError);
  EXPECT_THROW(old.library("p2")->join("nccl-grow-1", 2, 3, kShort, nullptr),
               comm::CommUnsupportedError);
  EXPECT_TRUE(hasTrap(old, "growId on NCCL 2.28.9")) << old.traps().front();
  EXPECT_EQ(old.traps().size(), 3u);

  FakeNccl older(comm::ncclFeatures(2, 26, 2));
  Comms olderComms = initAll(older, 2);
  EXPECT_THROW(olderComms[0]->shrink({1}, true, kShort, nullptr), comm::CommUnsupportedError);
  EXPECT_TRUE(hasTrap(older, "ncclCommShrink")) << older.traps().front();
}

TEST(FakeNccl, WithoutRevokeOnlyAnAbortiveShrinkEndsTheQueuedWork) {
  FakeNccl nccl(comm::ncclFeatures(2, 27, 7));
  Comms comms = initAll(nccl, 3);
  auto issued = failDuringAllReduce(nccl, comms, 2, {0, 1});
  EXPECT_THROW(issued->works[0]->wait(kGenerous), comm::CommPeerError);
  EXPECT_THROW(issued->works[1]->wait(kGenerous), comm::CommPeerError);

  const auto start = Clock::now();
  Comms hung = shrinkEach(comms, {0, 1}, {2}, false, kShort);
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(hung[0], nullptr);
  EXPECT_EQ(hung[1], nullptr);
  EXPECT_TRUE(hasTrap(nccl,
                      "shrink of a communicator with work in flight, without "
                      "NCCL_SHRINK_ABORT (process p0"));
  EXPECT_THROW(comms[0]->shrink({2}, false, kShort, nullptr), comm::CommTimeoutError);

  Comms shrunk = shrinkEach(comms, {0, 1}, {2}, true);
  ASSERT_NE(shrunk[0], nullptr);
  ASSERT_NE(shrunk[1], nullptr);
  expectAllReduceWorks(shrunk);
  // Before 2.31 the parent of an abortive shrink is destroyed as any other.
  const auto traps = nccl.traps().size();
  comms[0]->destroy();
  comms[1]->destroy();
  EXPECT_EQ(nccl.traps().size(), traps);
}

TEST(FakeNccl, DestroyingTheParentOfAnAbortiveShrinkIsTrappedOnTwoThirtyOne) {
  for (const int minor : {30, 31}) {
    SCOPED_TRACE("NCCL 2." + std::to_string(minor));
    FakeNccl nccl(comm::ncclFeatures(2, minor, 0));
    Comms comms = initAll(nccl, 3);
    nccl.kill("p2");
    Comms shrunk = shrinkEach(comms, {0, 1}, {2}, true);
    ASSERT_NE(shrunk[0], nullptr);
    ASSERT_NE(shrunk[1], nullptr);
    if (minor == 30) {
      comms[0]->destroy();
      EXPECT_TRUE(nccl.traps().empty());
    } else {
      EXPECT_THROW(comms[0]->destroy(), comm::CommTimeoutError) << "instead of hanging";
      EXPECT_TRUE(hasTrap(nccl,
                          "destroy of the parent of an abortive shrink (hangs on NCCL "
                          "2.31+) (process p0, rank 0"));
      comms[0]->abort("parent of an abortive shrink");
      EXPECT_TRUE(comms[0]->aborted());
      EXPECT_EQ(nccl.traps().size(), 1u) << "aborting it is clean";
    }
    comms[1]->abort("parent of an abortive shrink");
    comms[1]->abort("twice");
    EXPECT_EQ(nccl.liveCommunicators(), 2) << "the shrunk communicators";
    for (auto& c : shrunk)
      c->destroy();
    EXPECT_EQ(nccl.liveCommunicators(), 0);
  }
}

TEST(FakeNccl, DestroyWithACollectivePendingIsTrappedAndAbortFailsIt) {
  FakeNccl nccl(comm::ncclFeatures(2, 28, 9));
  Comms comms = initAll(nccl, 2);
  auto issued = allReduceEach(pointers(comms, {0}));
  EXPECT_THROW(comms[0]->destroy(), comm::CommTimeoutError);
  EXPECT_TRUE(hasTrap(nccl, "destroy of a communicator with a collective pending"));
  comms[0]->backend()->abort("leaving generation 3");
  EXPECT_TRUE(comms[0]->aborted());
  const std::string message = errorOf<comm::CommError>([&] { issued->works[0]->wait(kGenerous); });
  EXPECT_NE(message.find("leaving generation 3"), std::string::npos) << message;
  EXPECT_EQ(comms[0]->asyncError(), std::nullopt) << "no peer died";
  comms[0]->destroy();  // after abort: frees nothing more
  comms[1]->destroy();
  EXPECT_EQ(nccl.counts().abort, 1);
  EXPECT_EQ(nccl.counts().destroy, 1);
}

TEST(FakeNccl, AWorkPastItsTimeoutAbortsTheCommunicator) {
  FakeNccl nccl(comm::ncclFeatures(2, 28, 9));
  Comms comms = initAll(nccl, 2);
  float x = 1;
  auto work = comms[0]->backend()->allReduce({&x, 1}, ReduceOp::Sum, {kShort});
  const std::string message = errorOf<comm::CommTimeoutError>([&] { work->wait(); });
  EXPECT_TRUE(comms[0]->aborted()) << "as NCCL's watchdog does";
  EXPECT_EQ(nccl.liveCommunicators(), 1);
  EXPECT_NE(message.find("all_reduce"), std::string::npos) << message;
}

TEST(FakeNccl, AdoptFindsTheCommunicatorBehindItsOwnBackends) {
  FakeNccl nccl(comm::ncclFeatures(2, 28, 9));
  Comms comms = initAll(nccl, 2);
  auto backend = comms[0]->backend();
  auto adopted = nccl.library("p0")->adopt(backend);
  ASSERT_NE(adopted, nullptr);
  EXPECT_EQ(adopted->rank(), 0);
  EXPECT_EQ(adopted->backend(), backend);
  EXPECT_EQ(nccl.library("p1")->adopt(backend), nullptr) << "another process's backend";
  comm::InProcessWorld world(1);
  EXPECT_EQ(nccl.library("p0")->adopt(world.backend(0)), nullptr);
  adopted->abort("shared state");
  EXPECT_TRUE(comms[0]->aborted());
  comms[1]->destroy();
}

TEST(FakeNccl, CountsAndLiveCommunicatorsPerProcess) {
  FakeNccl nccl(comm::ncclFeatures(2, 28, 9));
  Comms comms = initAll(nccl, 3);
  EXPECT_EQ(nccl.liveCommunicators(), 3);
  EXPECT_EQ(nccl.liveCommunicators("p1"), 1);
  comms[0]->abort("a");
  comms[0]->abort("again");
  comms[1]->revoke("r");
  comms[1]->revoke("again");
  comms[1]->destroy();
  EXPECT_EQ(nccl.liveCommunicators(), 1);
  EXPECT_EQ(nccl.liveCommunicators("p0"), 0);
  nccl.kill("p2");
  EXPECT_EQ(nccl.liveCommunicators(), 0);
  const auto counts = nccl.counts();
  EXPECT_EQ(counts.init, 3);
  EXPECT_EQ(counts.abort, 1);
  EXPECT_EQ(counts.revoke, 1);
  EXPECT_EQ(counts.destroy, 1);
  EXPECT_EQ(counts.shrink, 0);
}

}  // namespace
}  // namespace stretch::test
