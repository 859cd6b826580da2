// LiveRecovery's watch while a worker trains over a generation's communicator (the fake NCCL,
// ranks as threads): when the agent's signal comes with a generation that leaves out part of
// the worker's group, the communicator is revoked and a collective blocked on the dead peer
// fails at once; a generation that keeps the whole group (a node joining) revokes nothing, and
// the worker takes it at its next step boundary. The survivor then recovers (LiveRecovery::recover)
// by shrinking the launch's own communicator, which has no live record, and trains on. Every
// wait is bounded.

#include <chrono>
#include <csignal>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "runtime/comm/builtin/builtin_backends.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/in_process_backend.hpp"
#include "runtime/comm/store.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/engine/live_recovery.hpp"
#include "runtime/live/generation.hpp"
#include "tests/runtime/engine/engine_test_util.hpp"
#include "tests/support/fake_communicator.hpp"

namespace stretch::engine {
namespace {

using namespace std::chrono_literals;

constexpr const char* kConfig = R"({"train_batch_size": 8, "gradient_accumulation_steps": 1,
    "optimizer": {"type": "SGD", "params": {"lr": 0.01}}})";

live::LiveGeneration generationOf(std::uint64_t n, std::int64_t world) {
  std::vector<std::pair<std::string, std::int64_t>> members;
  for (std::int64_t local = 0; local < world; ++local)
    members.emplace_back("n", local);
  return live::makeLiveGeneration(n, n, members, 8, 8 / world, 1);
}

// Two workers of node "n" trained by the launch's group, whose CUDA buffers go over the fake
// NCCL (as initDistributed's NCCL backend), each with its LiveRecovery started.
class LiveRecoveryDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    comm::registerBuiltinBackends();  // the generations' Gloo groups
    nccl_ = std::make_unique<stretch::test::FakeNccl>(comm::ncclFeatures(2, minor_, 0));
    groups_ = test::makeGroups(2);
    const std::string id = nccl_->library("w0")->uniqueId();
    std::vector<std::unique_ptr<comm::Communicator>> made(2);
    comm::runRankThreads(2, [&](int r) {
      made[static_cast<std::size_t>(r)] =
          nccl_->library(fmt::format("w{}", r))->init(id, r, 2, 5s, [] { return false; });
    });
    for (int r = 0; r < 2; ++r) {
      auto& comm = made[static_cast<std::size_t>(r)];
      groups_.groups[static_cast<std::size_t>(r)]->setBackend(comm::DeviceType::Cuda,
                                                              comm->backend());
      communicators_.push_back(std::move(comm));
    }
    for (int r = 0; r < 2; ++r) {
      torch::manual_seed(0);
      models_.emplace_back(6, 12, 3);
    }
    engines_.resize(2);
    workers_.resize(2);
    comm::runRankThreads(2, [&](int r) {
      const auto i = static_cast<std::size_t>(r);
      InitOptions options;
      options.device = torch::Device(torch::kCPU);
      options.processGroup = groups_.groups[i];
      engines_[i] =
          initialize(torch::nn::AnyModule(models_[i]), test::parse(kConfig), options).engine;
      workers_[i] = std::make_unique<LiveRecovery>(store_, "127.0.0.1", "n", r, 0, false, 10s);
      workers_[i]->setDeviceComm({"nccl", nullptr, ""}, nccl_->library(fmt::format("w{}", r)));
      workers_[i]->start(*engines_[i]);
    });
  }

  // Rank r's all-reduce of one float over the group's CUDA backend.
  std::shared_ptr<comm::Work> deviceAllReduce(int r, std::vector<float>& value) {
    return groups_.groups[static_cast<std::size_t>(r)]->allReduce(
        comm::BufferView::of(std::span(value), comm::Device::cuda(0)));
  }

  std::shared_ptr<comm::Store> store_ = std::make_shared<comm::HashStore>(30s);
  // NCCL 2.28 unless a test says otherwise (nccl(minor) before SetUp).
  int minor_ = 28;
  std::unique_ptr<stretch::test::FakeNccl> nccl_;
  test::Groups groups_;
  std::vector<std::unique_ptr<comm::Communicator>> communicators_;
  std::vector<test::Mlp> models_;
  std::vector<std::shared_ptr<Engine>> engines_;
  std::vector<std::unique_ptr<LiveRecovery>> workers_;
};

TEST_F(LiveRecoveryDevice, TheAgentsSignalRevokesTheCommunicatorASurvivorIsBlockedOn) {
  // Worker 1 dies; worker 0 waits in a collective with it.
  nccl_->kill("w1");
  std::vector<float> value = {1.0f};
  auto work = deviceAllReduce(0, value);
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(work->isCompleted());
  // The agent publishes the survivors' generation and signals them.
  const auto signalled = std::chrono::steady_clock::now();
  live::publishLiveGeneration(*store_, generationOf(1, 1));
  std::raise(SIGUSR1);
  EXPECT_THROW(work->wait(5s), comm::CommPeerError);
  const auto released = std::chrono::steady_clock::now() - signalled;
  EXPECT_LT(released, 1s) << "the survivor waited for NCCL's own timeout";
  EXPECT_GE(nccl_->counts().revoke, 1);
  EXPECT_EQ(nccl_->counts().abort, 0) << "revoked, so that it stays the parent of a shrink";
  EXPECT_TRUE(workers_[0]->announced());
}

TEST_F(LiveRecoveryDevice, TheSurvivorShrinksTheLaunchsCommunicatorAndTrainsOn) {
  nccl_->kill("w1");
  std::vector<float> value = {1.0f};
  auto work = deviceAllReduce(0, value);
  live::publishLiveGeneration(*store_, generationOf(1, 1));
  std::raise(SIGUSR1);
  EXPECT_THROW(work->wait(5s), comm::CommPeerError);
  const auto before = nccl_->counts();
  workers_[0]->recover(*engines_[0]);
  EXPECT_EQ(workers_[0]->generation(), 1u);
  // The launch's communicator (generation 0, which has no record) was shrunk, not rebuilt.
  const auto after = nccl_->counts();
  EXPECT_EQ(after.shrink, before.shrink + 1);
  EXPECT_EQ(after.init, before.init);
  EXPECT_TRUE(nccl_->traps().empty()) << nccl_->traps().front();
  const auto& group = engines_[0]->processGroup();
  ASSERT_EQ(group->size(), 1);
  std::vector<float> alone = {4.0f};
  group->allReduce(comm::BufferView::of(std::span(alone), comm::Device::cuda(0)))->wait(5s);
  EXPECT_EQ(alone[0], 4.0f);
}

// After the survivor's recovery, a replacement joins (LiveRecovery::joinGroup, then start): with
// NCCL 2.29 it grows into the survivor's communicator, with 2.28 both build a new one.
class LiveRecoveryDeviceJoin : public LiveRecoveryDevice,
                               public ::testing::WithParamInterface<int> {
 protected:
  void SetUp() override {
    minor_ = GetParam();
    LiveRecoveryDevice::SetUp();
  }
};

TEST_P(LiveRecoveryDeviceJoin, AReplacementJoinsTheSurvivorsCommunicator) {
  nccl_->kill("w1");
  live::publishLiveGeneration(*store_, generationOf(1, 1));
  std::raise(SIGUSR1);
  workers_[0]->recover(*engines_[0]);
  ASSERT_EQ(workers_[0]->generation(), 1u);
  const auto before = nccl_->counts();

  // The replacement of local rank 1, started into the running job for generation 2.
  auto joiner = std::make_unique<LiveRecovery>(store_, "127.0.0.1", "n", 1, 2, true, 10s);
  joiner->setDeviceComm({"nccl", nullptr, ""}, nccl_->library("w2"));
  torch::manual_seed(42);
  test::Mlp joinerModel(6, 12, 3);
  std::shared_ptr<Engine> joinerEngine;
  std::thread join([&] {
    InitOptions options;
    options.device = torch::Device(torch::kCPU);
    options.processGroup = joiner->joinGroup();
    options.liveJoin = true;
    joinerEngine =
        initialize(torch::nn::AnyModule(joinerModel), test::parse(kConfig), options).engine;
    joiner->start(*joinerEngine);
  });
  // Once it is ready, the agent publishes generation 2 and signals the survivor, which takes it
  // at its step boundary.
  while (store_->add(live::live_keys::ready(2), 0) < 1)
    std::this_thread::sleep_for(5ms);
  live::publishLiveGeneration(*store_, generationOf(2, 2));
  std::raise(SIGUSR1);
  ASSERT_TRUE(workers_[0]->announced());
  workers_[0]->recover(*engines_[0]);
  join.join();
  ASSERT_TRUE(joinerEngine);
  EXPECT_EQ(joiner->generation(), 2u);

  const auto after = nccl_->counts();
  if (GetParam() >= 29) {
    EXPECT_EQ(after.shrink, before.shrink + 1);
    EXPECT_EQ(after.grow, before.grow + 1);
    EXPECT_EQ(after.join, before.join + 1);
    EXPECT_EQ(after.init, before.init);
  } else {
    EXPECT_EQ(after.init, before.init + 2);
    EXPECT_EQ(after.shrink, before.shrink);
  }
  EXPECT_TRUE(nccl_->traps().empty()) << nccl_->traps().front();
  std::vector<float> a = {1.0f};
  std::vector<float> b = {2.0f};
  auto first = engines_[0]->processGroup()->allReduce(
      comm::BufferView::of(std::span(a), comm::Device::cuda(0)));
  auto second = joinerEngine->processGroup()->allReduce(
      comm::BufferView::of(std::span(b), comm::Device::cuda(0)));
  first->wait(5s);
  second->wait(5s);
  EXPECT_EQ(a[0], 3.0f);
  EXPECT_EQ(b[0], 3.0f);
}

INSTANTIATE_TEST_SUITE_P(Nccl, LiveRecoveryDeviceJoin, ::testing::Values(28, 29),
                         [](const auto& version) { return fmt::format("v2_{}", version.param); });

TEST_F(LiveRecoveryDevice, AGenerationThatKeepsTheWholeGroupRevokesNothing) {
  // A node joins: the new generation keeps both workers (and adds one); they finish their step.
  std::vector<std::pair<std::string, std::int64_t>> members = {{"n", 0}, {"n", 1}, {"m", 0}};
  live::publishLiveGeneration(*store_, live::makeLiveGeneration(1, 1, members, 6, 2, 1));
  std::raise(SIGUSR1);
  std::this_thread::sleep_for(200ms);  // ten of the watch's looks
  EXPECT_EQ(nccl_->counts().revoke, 0);
  std::vector<float> a = {1.0f};
  std::vector<float> b = {2.0f};
  auto first = deviceAllReduce(0, a);
  auto second = deviceAllReduce(1, b);
  first->wait(5s);
  second->wait(5s);
  EXPECT_EQ(a[0], 3.0f);
  EXPECT_EQ(b[0], 3.0f);
}

}  // namespace
}  // namespace stretch::engine
