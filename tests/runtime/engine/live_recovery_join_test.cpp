// LiveRecovery joining a generation's group over Gloo on loopback, ranks as threads sharing the
// agent's store: a member that arrives long after the others (a survivor still leaving a
// generation that broke) still forms the group with them; a member that never arrives, or that
// arrives and then never connects, ends the others' wait as soon as the agent publishes a newer
// generation. Every wait is bounded. With a communicator library for the device buffers (the
// fake NCCL), a generation's group carries a communicator of its own, unless its ranks share a
// device.

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/accel/accelerator.hpp"
#include "runtime/comm/backend_registry.hpp"
#include "runtime/comm/builtin/builtin_backends.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/init_distributed.hpp"
#include "runtime/comm/store.hpp"
#include "runtime/engine/device_staging.hpp"
#include "runtime/engine/live_recovery.hpp"
#include "runtime/live/generation.hpp"
#include "tests/runtime/comm/store_test_util.hpp"
#include "tests/support/fake_communicator.hpp"

namespace stretch::engine {
namespace {

using namespace std::chrono_literals;

constexpr auto kLiveTimeout = 10s;
constexpr auto kRendezvous = 500ms;

// A joiner of live generation `generation` on node "n" (local rank = its rank in the records).
std::unique_ptr<LiveRecovery> joiner(const std::shared_ptr<comm::Store>& store,
                                     std::int64_t localRank, std::uint64_t generation) {
  return std::make_unique<LiveRecovery>(store, "127.0.0.1", "n", localRank, generation,
                                        /*joining=*/true, kLiveTimeout, kRendezvous);
}

live::LiveGeneration generationOf(std::uint64_t n, std::int64_t world) {
  std::vector<std::pair<std::string, std::int64_t>> members;
  for (std::int64_t local = 0; local < world; ++local)
    members.emplace_back("n", local);
  return live::makeLiveGeneration(n, n, members, 8, 8 / world, 1);
}

struct Joined {
  std::shared_ptr<comm::ProcessGroup> group;
  std::chrono::steady_clock::duration took{};
  std::string error;
};

Joined join(LiveRecovery& worker) {
  Joined out;
  const auto start = std::chrono::steady_clock::now();
  try {
    out.group = worker.joinGroup();
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  out.took = std::chrono::steady_clock::now() - start;
  return out;
}

class LiveJoin : public ::testing::Test {
 protected:
  void SetUp() override { comm::registerBuiltinBackends(); }
  void TearDown() override { comm::destroyProcessGroup(); }
  std::shared_ptr<comm::Store> store_ = std::make_shared<comm::HashStore>(30s);
};

TEST_F(LiveJoin, AMemberArrivingLongAfterTheOthersStillFormsTheGroup) {
  live::publishLiveGeneration(*store_, generationOf(1, 2));
  auto early = joiner(store_, 0, 1);
  auto late = joiner(store_, 1, 1);
  Joined first;
  std::thread t([&] { first = join(*early); });
  // Three rendezvous timeouts late: the early member must not have given the group up.
  std::this_thread::sleep_for(3 * kRendezvous);
  const Joined second = join(*late);
  t.join();
  ASSERT_TRUE(first.group) << first.error;
  ASSERT_TRUE(second.group) << second.error;
  EXPECT_EQ(first.group->size(), 2);
  EXPECT_EQ(first.group->rank() + second.group->rank(), 1);
  EXPECT_EQ(early->generation(), 1u);
  EXPECT_EQ(late->generation(), 1u);
  std::thread barrier([&] { first.group->barrier()->wait(); });
  second.group->barrier()->wait();
  barrier.join();
}

TEST_F(LiveJoin, AMemberThatNeverArrivesEndsTheWaitWhenTheAgentPublishesANewerGeneration) {
  live::publishLiveGeneration(*store_, generationOf(1, 2));
  auto worker = joiner(store_, 0, 1);
  Joined joined;
  std::thread t([&] { joined = join(*worker); });
  std::this_thread::sleep_for(3 * kRendezvous);
  // Member 1 died before joining: the agent's next generation leaves it out.
  live::publishLiveGeneration(*store_, generationOf(2, 1));
  t.join();
  ASSERT_TRUE(joined.group) << joined.error;
  EXPECT_EQ(joined.group->size(), 1);
  EXPECT_EQ(worker->generation(), 2u);
  EXPECT_LT(joined.took, kLiveTimeout / 2);
}

TEST_F(LiveJoin, AMemberThatArrivesButNeverConnectsIsLeftBehindForANewerGeneration) {
  // Member 1 arrives (present) and publishes its Gloo address from 127.0.0.2, then stalls:
  // member 0, on 127.0.0.1, is the side that waits for it to connect. Gloo's connect cannot be
  // interrupted; the worker must not wait out the rendezvous timeout once the agent has
  // published the generation that replaces this one.
  live::publishLiveGeneration(*store_, generationOf(1, 2));
  constexpr auto kLongRendezvous = 10s;
  auto worker = std::make_unique<LiveRecovery>(store_, "127.0.0.1", "n", 0, 1, true, kLiveTimeout,
                                               kLongRendezvous);
  std::thread stalled([&] {
    auto groupStore = std::make_shared<comm::PrefixStore>(live::live_keys::groupPrefix(1), store_);
    groupStore->set("present/1", "1");
    comm::BackendInit init;
    init.store = std::make_shared<comm::test::StallingStore>(groupStore, 2s);
    init.rank = 1;
    init.size = 2;
    init.timeout = kLongRendezvous;
    init.host = "127.0.0.2";
    EXPECT_THROW(comm::createBackend("gloo", init), comm::CommError);
  });
  Joined joined;
  std::thread t([&] { joined = join(*worker); });
  std::this_thread::sleep_for(1s);  // member 0 waits in Gloo's connect by now
  live::publishLiveGeneration(*store_, generationOf(2, 1));
  t.join();
  stalled.join();
  ASSERT_TRUE(joined.group) << joined.error;
  EXPECT_EQ(worker->generation(), 2u);
  EXPECT_LT(joined.took, 3s) << "the worker waited for the connect it should have left";
}

TEST_F(LiveJoin, AMemberThatNeverArrivesAndNoNewerGenerationEndWithinTheLiveTimeout) {
  live::publishLiveGeneration(*store_, generationOf(1, 2));
  auto worker =
      std::make_unique<LiveRecovery>(store_, "127.0.0.1", "n", 0, 1, true, 1s, kRendezvous);
  const Joined joined = join(*worker);
  EXPECT_FALSE(joined.group);
  EXPECT_NE(joined.error.find("STRETCH_LIVE_TIMEOUT"), std::string::npos) << joined.error;
  EXPECT_LT(joined.took, 5s);
}

// Two joiners of generation 1 whose device buffers are served by `nccl`'s libraries (one per
// worker, as one per process), each with device identity `identity` ("" for none), and their
// groups. The workers hold their generation's communicators while they live.
struct DeviceJoin {
  std::unique_ptr<LiveRecovery> w0;
  std::unique_ptr<LiveRecovery> w1;
  Joined a;
  Joined b;
};

DeviceJoin joinWithDevice(const std::shared_ptr<comm::Store>& store, test::FakeNccl& nccl,
                          const std::string& identity0, const std::string& identity1) {
  live::publishLiveGeneration(*store, generationOf(1, 2));
  DeviceJoin out{joiner(store, 0, 1), joiner(store, 1, 1), {}, {}};
  const auto staging =
      std::make_shared<TorchDeviceStaging>(accel::createAccelerator("cpu"), torch::kCPU);
  out.w0->setDeviceComm({"nccl", staging, identity0}, nccl.library("w0"));
  out.w1->setDeviceComm({"nccl", staging, identity1}, nccl.library("w1"));
  std::thread t([&] { out.a = join(*out.w0); });
  out.b = join(*out.w1);
  t.join();
  return out;
}

// An all-reduce of each rank's rank + 1 over the groups' CUDA backends ("CUDA" buffers are host
// memory in these tests): 3 on both.
void expectDeviceAllReduce(const Joined& a, const Joined& b) {
  std::vector<float> x = {static_cast<float>(a.group->rank() + 1)};
  std::vector<float> y = {static_cast<float>(b.group->rank() + 1)};
  std::thread t([&] {
    a.group->allReduce(comm::BufferView::of(std::span(x), comm::Device::cuda(0)))->wait();
  });
  b.group->allReduce(comm::BufferView::of(std::span(y), comm::Device::cuda(0)))->wait();
  t.join();
  EXPECT_EQ(x[0], 3.0f);
  EXPECT_EQ(y[0], 3.0f);
}

TEST_F(LiveJoin, AGenerationsDeviceBuffersGoOverACommunicatorOfItsOwn) {
  test::FakeNccl nccl(comm::ncclFeatures(2, 28, 9));
  const auto joined = joinWithDevice(store_, nccl, "GPU-a", "GPU-b");
  const Joined& a = joined.a;
  const Joined& b = joined.b;
  ASSERT_TRUE(a.group) << a.error;
  ASSERT_TRUE(b.group) << b.error;
  ASSERT_TRUE(a.group->hasBackend(comm::DeviceType::Cuda));
  EXPECT_EQ(a.group->backend(comm::DeviceType::Cuda).name(), "nccl");
  EXPECT_EQ(nccl.liveCommunicators(), 2);
  expectDeviceAllReduce(a, b);
  // Leaving the generation (Engine::abandonStep, the supersession watch) revokes the
  // communicator: it stays, the parent of the next generation's.
  a.group->abort("test: generation 1 superseded");
  EXPECT_EQ(nccl.counts().revoke, 1);
  EXPECT_EQ(nccl.counts().abort, 0);
  EXPECT_EQ(nccl.liveCommunicators("w0"), 1);
  EXPECT_TRUE(nccl.traps().empty()) << nccl.traps().front();
}

TEST_F(LiveJoin, RanksSharingADeviceStageThroughHostMemoryInstead) {
  test::FakeNccl nccl(comm::ncclFeatures(2, 28, 9));
  const auto joined = joinWithDevice(store_, nccl, "GPU-same", "GPU-same");
  const Joined& a = joined.a;
  const Joined& b = joined.b;
  ASSERT_TRUE(a.group) << a.error;
  ASSERT_TRUE(b.group) << b.error;
  EXPECT_NE(a.group->backend(comm::DeviceType::Cuda).name(), "nccl");
  EXPECT_EQ(nccl.counts().init, 0);
  expectDeviceAllReduce(a, b);
}

}  // namespace
}  // namespace stretch::engine
