// StagedBackend: a CPU backend serving "device" buffers through host memory, against a staging
// whose device memory is host memory (so it runs on any machine) that counts its copies. Every
// collective's result must equal the host backend's; copies happen only where the data must
// move; host buffers are reused; a failed operation's buffers are never reused; a ProcessGroup
// with a staged CUDA backend over its own CPU backend routes both and makes sub-groups.

#include "runtime/comm/staged_backend.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/comm/errors.hpp"
#include "runtime/comm/in_process_backend.hpp"
#include "runtime/comm/process_group.hpp"

namespace stretch::comm {
namespace {

using namespace std::chrono_literals;

// "CUDA" memory that is host memory: copies are memcpy, counted.
class HostMemoryStaging final : public DeviceStaging {
 public:
  DeviceType device() const noexcept override { return DeviceType::Cuda; }
  void* allocateHost(std::size_t bytes) override {
    ++allocations;
    return std::malloc(bytes);
  }
  void freeHost(void* host, std::size_t) noexcept override {
    ++frees;
    std::free(host);
  }
  void toHost(void* host, const BufferView& from) override {
    EXPECT_EQ(from.device.type, DeviceType::Cuda);
    ++toHostCopies;
    std::memcpy(host, from.data, from.bytes());
  }
  void toDevice(const BufferView& to, const void* host) override {
    EXPECT_EQ(to.device.type, DeviceType::Cuda);
    ++toDeviceCopies;
    std::memcpy(to.data, host, to.bytes());
  }

  std::atomic<int> allocations{0}, frees{0}, toHostCopies{0}, toDeviceCopies{0};
};

BufferView onDevice(std::vector<float>& values) {
  BufferView view = BufferView::of(std::span(values));
  view.device = Device::cuda(0);
  return view;
}

struct StagedWorld {
  explicit StagedWorld(int size, Duration timeout = 20s) : host(size, timeout) {
    for (int r = 0; r < size; ++r) {
      staging.push_back(std::make_shared<HostMemoryStaging>());
      ranks.push_back(std::make_shared<StagedBackend>(host.backend(r), staging.back()));
    }
  }
  InProcessWorld host;
  std::vector<std::shared_ptr<HostMemoryStaging>> staging;
  std::vector<std::shared_ptr<StagedBackend>> ranks;
};

TEST(StagedBackend, EveryCollectiveGivesTheHostBackendsResult) {
  for (int size : {1, 2, 3, 4}) {
    SCOPED_TRACE(size);
    StagedWorld world(size);
    runRankThreads(size, [&](int rank) {
      StagedBackend& b = *world.ranks[static_cast<std::size_t>(rank)];
      const auto n = static_cast<std::size_t>(size);
      std::vector<float> sum(5, static_cast<float>(rank + 1));
      b.allReduce(onDevice(sum), ReduceOp::Sum)->wait();
      EXPECT_EQ(sum, std::vector<float>(5, static_cast<float>(size * (size + 1) / 2)));

      std::vector<float> root(3, rank == size - 1 ? 7.0f : 0.0f);
      b.broadcast(onDevice(root), size - 1)->wait();
      EXPECT_EQ(root, std::vector<float>(3, 7.0f));

      std::vector<float> mine(2, static_cast<float>(rank)), all(2 * n, -1.0f);
      b.allGather(onDevice(mine), onDevice(all))->wait();
      for (std::size_t i = 0; i < all.size(); ++i)
        EXPECT_EQ(all[i], static_cast<float>(i / 2));

      std::vector<float> blocks(2 * n), block(2, -1.0f);
      std::iota(blocks.begin(), blocks.end(), 0.0f);
      b.reduceScatter(onDevice(blocks), onDevice(block), ReduceOp::Sum)->wait();
      EXPECT_EQ(block[0], static_cast<float>(size * 2 * rank));

      std::vector<float> out(n), in(n, -1.0f);
      for (std::size_t j = 0; j < n; ++j)
        out[j] = static_cast<float>(rank * 10 + static_cast<int>(j));
      b.allToAll(onDevice(out), onDevice(in))->wait();
      for (std::size_t i = 0; i < n; ++i)
        EXPECT_EQ(in[i], static_cast<float>(static_cast<int>(i) * 10 + rank));

      if (size > 1) {
        std::vector<float> message(4, static_cast<float>(rank + 100));
        const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
        auto sent = b.send(onDevice(message), next);
        std::vector<float> received(4, 0.0f);
        b.recv(onDevice(received), previous)->wait();
        sent->wait();
        EXPECT_EQ(received, std::vector<float>(4, static_cast<float>(previous + 100)));
      }
      b.barrier()->wait();
    });
  }
}

TEST(StagedBackend, CopiesOnlyWhatMustMove) {
  StagedWorld world(2);
  runRankThreads(2, [&](int rank) {
    std::vector<float> values(8, 1.0f);
    world.ranks[static_cast<std::size_t>(rank)]->broadcast(onDevice(values), 0)->wait();
  });
  // The root sends and keeps its buffer; the other rank only receives.
  EXPECT_EQ(world.staging[0]->toHostCopies, 1);
  EXPECT_EQ(world.staging[0]->toDeviceCopies, 0);
  EXPECT_EQ(world.staging[1]->toHostCopies, 0);
  EXPECT_EQ(world.staging[1]->toDeviceCopies, 1);
}

TEST(StagedBackend, HostBuffersAreReusedAcrossOperations) {
  StagedWorld world(2);
  runRankThreads(2, [&](int rank) {
    for (int step = 0; step < 10; ++step) {
      std::vector<float> bucket(1024, 1.0f);
      world.ranks[static_cast<std::size_t>(rank)]
          ->allReduce(onDevice(bucket), ReduceOp::Sum)
          ->wait();
      EXPECT_EQ(bucket[0], 2.0f);
    }
  });
  for (const auto& staging : world.staging)
    EXPECT_EQ(staging->allocations, 1);
  EXPECT_EQ(world.ranks[0]->pooledBytes(), 1024 * sizeof(float));
}

TEST(StagedBackend, IsCompletedCopiesTheResultBack) {
  StagedWorld world(1);
  std::vector<float> values(4, 3.0f);
  auto work = world.ranks[0]->allReduce(onDevice(values), ReduceOp::Sum);
  while (!work->isCompleted())
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(world.staging[0]->toDeviceCopies, 1);
  EXPECT_EQ(work->exception(), nullptr);
  work->wait();
  EXPECT_EQ(world.staging[0]->toDeviceCopies, 1);  // once
}

TEST(StagedBackend, AFailedOperationsBuffersAreNeverReused) {
  StagedWorld world(2, 200ms);
  std::vector<float> values(256, 1.0f);
  {
    auto work = world.ranks[0]->allReduce(onDevice(values), ReduceOp::Sum);  // rank 1 never comes
    EXPECT_THROW(work->wait(), CommError);
    EXPECT_EQ(world.staging[0]->toDeviceCopies, 0);  // the device buffer is left as it was
  }
  EXPECT_EQ(world.staging[0]->frees, 1);
  EXPECT_EQ(world.ranks[0]->pooledBytes(), 0U);
  EXPECT_EQ(values[0], 1.0f);
}

TEST(StagedBackend, BuffersOnAnotherDeviceAreRefusedNamingIt) {
  StagedWorld world(1);
  std::vector<float> values(4, 1.0f);
  try {
    world.ranks[0]->allReduce(BufferView::of(std::span(values)), ReduceOp::Sum);
    FAIL() << "a CPU buffer was accepted";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("buffer is on cpu: expected cuda"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(world.ranks[0]->name(), "in_process staged");
  EXPECT_TRUE(world.ranks[0]->supportsDevice(DeviceType::Cuda));
  EXPECT_FALSE(world.ranks[0]->supportsDevice(DeviceType::Cpu));
}

TEST(StagedBackend, AProcessGroupRoutesBothDevicesAndMakesSubgroupsOverOneHostGroup) {
  InProcessWorld host(4);
  runRankThreads(4, [&](int rank) {
    ProcessGroup group(rank, 4);
    auto cpu = host.backend(rank);
    group.setBackend(DeviceType::Cpu, cpu);
    group.setBackend(DeviceType::Cuda,
                     std::make_shared<StagedBackend>(cpu, std::make_shared<HostMemoryStaging>()));
    std::vector<float> flag(1, static_cast<float>(rank));
    group.allReduce(BufferView::of(std::span(flag)), ReduceOp::Max)->wait();
    EXPECT_EQ(flag[0], 3.0f);
    std::vector<float> grads(16, 1.0f);
    group.allReduce(onDevice(grads), ReduceOp::Sum)->wait();
    EXPECT_EQ(grads[15], 4.0f);

    auto low = group.newGroup({0, 1});  // every rank makes every group, in the same order
    auto high = group.newGroup({2, 3});
    auto half = rank < 2 ? low : high;
    ASSERT_NE(half, nullptr);
    auto& staged = dynamic_cast<StagedBackend&>(half->backend(DeviceType::Cuda));
    EXPECT_EQ(staged.host().get(), &half->backend(DeviceType::Cpu));
    std::vector<float> sub(2, 1.0f);
    half->allReduce(onDevice(sub), ReduceOp::Sum)->wait();
    EXPECT_EQ(sub[0], 2.0f);
    group.abort("test over");
  });
}

}  // namespace
}  // namespace stretch::comm
