// The NCCL backend on real CUDA devices: every operation and data type at world size 1, real
// reductions across devices when two or more are visible, init timeouts, argument errors.
// Tests that need a device skip with the CUDA runtime's reason when none is visible.

#include "runtime/comm/nccl/nccl_backend.hpp"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <cuda_runtime_api.h>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/accel/accelerator.hpp"
#include "runtime/comm/backend_registry.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/store.hpp"

namespace stretch::comm::nccl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

int visibleDevices() {
  return accel::cudaStatus().deviceCount;
}

std::string noDeviceReason() {
  return "no CUDA device visible: " + accel::cudaStatus().unavailableReason;
}

#define SKIP_WITHOUT_DEVICES(n)                                                                \
  do {                                                                                         \
    if (visibleDevices() < (n))                                                                \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s), " << visibleDevices() << " visible" \
                   << (visibleDevices() == 0 ? ": " + noDeviceReason() : "");                  \
  } while (false)

// cudaMalloc'd bytes on one device, freed on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer(int device, std::size_t bytes) : device_(device), bytes_(bytes) {
    cudaSetDevice(device);
    EXPECT_EQ(cudaMalloc(&data_, std::max<std::size_t>(bytes, 1)), cudaSuccess);
    EXPECT_EQ(cudaMemset(data_, 0, std::max<std::size_t>(bytes, 1)), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void upload(const std::vector<std::uint8_t>& bytes) {
    ASSERT_EQ(bytes.size(), bytes_);
    cudaSetDevice(device_);
    ASSERT_EQ(cudaMemcpy(data_, bytes.data(), bytes_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<std::uint8_t> download() const {
    std::vector<std::uint8_t> out(bytes_);
    cudaSetDevice(device_);
    EXPECT_EQ(cudaMemcpy(out.data(), data_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  BufferView view(std::size_t count, DataType dtype) const {
    return {data_, count, dtype, Device::cuda(device_)};
  }

 private:
  int device_;
  std::size_t bytes_;
  void* data_ = nullptr;
};

// Distinct, exactly representable element patterns for every data type (fp16/bf16 as words).
std::vector<std::uint8_t> pattern(DataType dtype, std::size_t count, int seed) {
  std::vector<std::uint8_t> bytes(count * elementSize(dtype));
  for (std::size_t i = 0; i < count; ++i) {
    const int value = static_cast<int>(i % 13) + seed;
    std::uint8_t* at = bytes.data() + i * elementSize(dtype);
    switch (dtype) {
      case DataType::Float32: {
        const float v = static_cast<float>(value);
        std::memcpy(at, &v, sizeof v);
        break;
      }
      case DataType::Float64: {
        const double v = value;
        std::memcpy(at, &v, sizeof v);
        break;
      }
      case DataType::Float16: {  // small integers: exponent 15 + e, 10-bit mantissa
        std::uint32_t bits = 0;
        float f = static_cast<float>(value);
        std::memcpy(&bits, &f, sizeof bits);
        const auto half = static_cast<std::uint16_t>(
            value == 0 ? 0
                       : (((bits >> 16) & 0x8000u) | ((((bits >> 23) & 0xffu) - 112u) << 10) |
                          ((bits >> 13) & 0x3ffu)));
        std::memcpy(at, &half, sizeof half);
        break;
      }
      case DataType::BFloat16: {
        std::uint32_t bits = 0;
        float f = static_cast<float>(value);
        std::memcpy(&bits, &f, sizeof bits);
        const auto bf = static_cast<std::uint16_t>(bits >> 16);
        std::memcpy(at, &bf, sizeof bf);
        break;
      }
      case DataType::Int32: {
        const std::int32_t v = value;
        std::memcpy(at, &v, sizeof v);
        break;
      }
      case DataType::Int64: {
        const std::int64_t v = value;
        std::memcpy(at, &v, sizeof v);
        break;
      }
      case DataType::UInt8:
        *at = static_cast<std::uint8_t>(value);
        break;
    }
  }
  return bytes;
}

BackendInit initFor(std::shared_ptr<Store> store, int rank, int size, Duration timeout = 60s) {
  BackendInit init;
  init.store = std::move(store);
  init.rank = rank;
  init.size = size;
  init.timeout = timeout;
  init.localRank = rank;
  return init;
}

// ---- Without a device ---------------------------------------------------------------------

TEST(NcclBackendTest, MissingDeviceIsNamed) {
  const int devices = visibleDevices();
  BackendInit init = initFor(std::make_shared<HashStore>(5s), 0, 1);
  init.localRank = devices;  // one past the last device: never valid
  try {
    NcclBackend backend(init);
    FAIL() << "a backend on cuda:" << devices << " was created";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("cuda:" + std::to_string(devices)), HasSubstr("visible"),
                                HasSubstr("rank 0 of 1")));
  }
}

TEST(NcclBackendTest, RegistersAsTheCudaBackend) {
  registerNcclBackend();
  ASSERT_TRUE(isBackendRegistered("nccl"));
  bool found = false;
  for (const BackendInfo& info : registeredBackends()) {
    if (info.name == "nccl") {
      found = true;
      EXPECT_EQ(info.device, DeviceType::Cuda);
      EXPECT_THAT(info.description, HasSubstr("NCCL " + ncclVersion()));
    }
  }
  EXPECT_TRUE(found);
  EXPECT_THAT(ncclVersion(), ::testing::MatchesRegex("[0-9]+[.][0-9]+[.][0-9]+"));
  EXPECT_EQ(ncclBuildVersion().substr(0, 2), ncclVersion().substr(0, 2));
}

// ---- World size 1 on a real device --------------------------------------------------------

class NcclSingleRankTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_DEVICES(1);
    backend_ = std::make_unique<NcclBackend>(initFor(std::make_shared<HashStore>(30s), 0, 1));
  }
  std::unique_ptr<NcclBackend> backend_;
};

TEST_F(NcclSingleRankTest, ReportsItsShape) {
  EXPECT_EQ(backend_->name(), "nccl");
  EXPECT_EQ(backend_->rank(), 0);
  EXPECT_EQ(backend_->size(), 1);
  EXPECT_EQ(backend_->device(), 0);
  EXPECT_NE(backend_->stream(), nullptr);
  EXPECT_TRUE(backend_->supportsDevice(DeviceType::Cuda));
  EXPECT_FALSE(backend_->supportsDevice(DeviceType::Cpu));
  EXPECT_FALSE(backend_->isAborted());
}

TEST_F(NcclSingleRankTest, AllReduceEveryTypeAndOp) {
  constexpr std::size_t kCount = 1000;
  for (const DataType dtype : kAllDataTypes) {
    for (const ReduceOp op : kAllReduceOps) {
      SCOPED_TRACE(std::string(toString(dtype)) + " " + std::string(toString(op)));
      DeviceBuffer buffer(0, kCount * elementSize(dtype));
      const auto input = pattern(dtype, kCount, 1);
      buffer.upload(input);
      auto work = backend_->allReduce(buffer.view(kCount, dtype), op);
      work->wait();
      EXPECT_TRUE(work->isCompleted());
      EXPECT_EQ(work->exception(), nullptr);
      EXPECT_EQ(buffer.download(), input);  // one rank: every reduction is the identity
    }
  }
}

TEST_F(NcclSingleRankTest, BroadcastGatherScatterAndAllToAllMoveEveryType) {
  constexpr std::size_t kCount = 4096;
  for (const DataType dtype : kAllDataTypes) {
    SCOPED_TRACE(std::string(toString(dtype)));
    const std::size_t bytes = kCount * elementSize(dtype);
    const auto input = pattern(dtype, kCount, 3);
    DeviceBuffer in(0, bytes);
    in.upload(input);

    backend_->broadcast(in.view(kCount, dtype), 0)->wait();
    EXPECT_EQ(in.download(), input);

    DeviceBuffer gathered(0, bytes);
    backend_->allGather(in.view(kCount, dtype), gathered.view(kCount, dtype))->wait();
    EXPECT_EQ(gathered.download(), input);

    DeviceBuffer scattered(0, bytes);
    backend_->reduceScatter(in.view(kCount, dtype), scattered.view(kCount, dtype), ReduceOp::Sum)
        ->wait();
    EXPECT_EQ(scattered.download(), input);

    DeviceBuffer exchanged(0, bytes);
    backend_->allToAll(in.view(kCount, dtype), exchanged.view(kCount, dtype))->wait();
    EXPECT_EQ(exchanged.download(), input);
  }
}

TEST_F(NcclSingleRankTest, OperationsRunInIssueOrder) {
  constexpr std::size_t kCount = 1 << 20;
  DeviceBuffer a(0, kCount * sizeof(float));
  DeviceBuffer b(0, kCount * sizeof(float));
  const auto input = pattern(DataType::Float32, kCount, 5);
  a.upload(input);
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < 20; ++i) {
    works.push_back(backend_->allReduce(a.view(kCount, DataType::Float32), ReduceOp::Max));
    works.push_back(
        backend_->allGather(a.view(kCount, DataType::Float32), b.view(kCount, DataType::Float32)));
  }
  works.push_back(backend_->barrier());
  works.back()->wait();
  // The stream is in order: once the last one is done, all are.
  for (const auto& work : works)
    EXPECT_TRUE(work->isCompleted());
  EXPECT_EQ(b.download(), input);
}

TEST_F(NcclSingleRankTest, BarrierAndEmptyBuffersComplete) {
  backend_->barrier()->wait(10s);
  DeviceBuffer buffer(0, 16);
  auto empty = backend_->allReduce(buffer.view(0, DataType::Float32), ReduceOp::Sum);
  EXPECT_TRUE(empty->isCompleted());
  empty->wait();
}

TEST_F(NcclSingleRankTest, HostBuffersAreUnsupported) {
  std::vector<float> host(16, 1.0f);
  EXPECT_THROW(backend_->allReduce(BufferView::of(std::span<float>(host)), ReduceOp::Sum),
               CommUnsupportedError);
  // A host pointer whose view claims to be on the device is caught before NCCL sees it.
  BufferView lying{host.data(), host.size(), DataType::Float32, Device::cuda(0)};
  try {
    backend_->allReduce(lying, ReduceOp::Sum);
    FAIL() << "a host pointer was accepted as device memory";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), HasSubstr("host memory"));
  }
  EXPECT_FALSE(backend_->isAborted());
}

TEST_F(NcclSingleRankTest, BadArgumentsThrowBeforeAnythingIsSent) {
  DeviceBuffer a(0, 64 * sizeof(float));
  DeviceBuffer b(0, 64 * sizeof(float));
  EXPECT_THROW(backend_->allGather(a.view(16, DataType::Float32), b.view(32, DataType::Float32)),
               CommError);
  EXPECT_THROW(backend_->broadcast(a.view(16, DataType::Float32), 1), CommError);
  EXPECT_THROW(backend_->send(a.view(16, DataType::Float32), 0), CommError);  // to itself
  EXPECT_THROW(backend_->recv(a.view(16, DataType::Float32), 0), CommError);
  BufferView elsewhere = a.view(16, DataType::Float32);
  elsewhere.device = Device::cuda(7);
  try {
    backend_->allReduce(elsewhere, ReduceOp::Sum);
    FAIL() << "a buffer on cuda:7 was accepted by the backend of cuda:0";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cuda:7"));
  }
  backend_->barrier()->wait();  // still usable
}

TEST_F(NcclSingleRankTest, SubgroupIsANewCommunicator) {
  auto sub = backend_->createSubgroup({0}, "solo");
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->size(), 1);
  DeviceBuffer buffer(0, 8 * sizeof(std::int64_t));
  const auto input = pattern(DataType::Int64, 8, 2);
  buffer.upload(input);
  sub->allReduce(buffer.view(8, DataType::Int64), ReduceOp::Sum)->wait();
  EXPECT_EQ(buffer.download(), input);
  EXPECT_THROW(backend_->createSubgroup({1}, "others"), CommError);
}

TEST_F(NcclSingleRankTest, FactoryBuildsAWorkingBackend) {
  registerNcclBackend();
  auto backend = createBackend("nccl", initFor(std::make_shared<HashStore>(30s), 0, 1));
  EXPECT_EQ(backend->name(), "nccl");
  backend->barrier()->wait();
}

TEST(NcclInitTest, MissingPeerTimesOutAndSaysSo) {
  SKIP_WITHOUT_DEVICES(1);
  const auto start = std::chrono::steady_clock::now();
  try {
    NcclBackend backend(initFor(std::make_shared<HashStore>(30s), 0, 2, 2s));
    FAIL() << "initialisation of 2 ranks completed with one";
  } catch (const CommTimeoutError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("rank 0 of 2"), HasSubstr("2 s"),
                                HasSubstr("are all 2 ranks running?")));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

TEST(NcclInitTest, MissingUniqueIdTimesOut) {
  SKIP_WITHOUT_DEVICES(1);
  BackendInit init = initFor(std::make_shared<HashStore>(30s), 1, 2, 500ms);
  init.localRank = 0;
  try {
    NcclBackend backend(init);
    FAIL() << "rank 1 initialised without rank 0's unique id";
  } catch (const CommTimeoutError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("rank 1 of 2"), HasSubstr("unique id")));
  }
}

// ---- Several devices: ranks as threads, one device each -----------------------------------

TEST(NcclMultiDeviceTest, AllReduceSumsAcrossDevices) {
  SKIP_WITHOUT_DEVICES(2);
  const int world = std::min(visibleDevices(), 4);
  auto store = std::make_shared<HashStore>(60s);
  constexpr std::size_t kCount = 1 << 16;
  std::vector<std::vector<float>> results(static_cast<std::size_t>(world));
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      try {
        cudaSetDevice(r);
        NcclBackend backend(initFor(store, r, world));
        std::vector<float> host(kCount, static_cast<float>(r + 1));
        DeviceBuffer buffer(r, kCount * sizeof(float));
        ASSERT_EQ(cudaMemcpy(buffer.view(kCount, DataType::Float32).data, host.data(),
                             kCount * sizeof(float), cudaMemcpyHostToDevice),
                  cudaSuccess);
        backend.allReduce(buffer.view(kCount, DataType::Float32), ReduceOp::Sum)->wait();
        backend.barrier()->wait();
        const auto bytes = buffer.download();
        auto& out = results[static_cast<std::size_t>(r)];
        out.resize(kCount);
        std::memcpy(out.data(), bytes.data(), bytes.size());
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : ranks)
    t.join();
  const float expected = static_cast<float>(world * (world + 1) / 2);
  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(errors[static_cast<std::size_t>(r)], "");
    ASSERT_EQ(results[static_cast<std::size_t>(r)].size(), kCount);
    EXPECT_EQ(results[static_cast<std::size_t>(r)].front(), expected);
    EXPECT_EQ(results[static_cast<std::size_t>(r)].back(), expected);
  }
}

TEST(NcclMultiDeviceTest, AbsentPeerMakesTheCollectiveTimeOut) {
  SKIP_WITHOUT_DEVICES(2);
  auto store = std::make_shared<HashStore>(60s);
  std::unique_ptr<NcclBackend> backends[2];
  std::thread other([&] {
    cudaSetDevice(1);
    backends[1] = std::make_unique<NcclBackend>(initFor(store, 1, 2));
  });
  backends[0] = std::make_unique<NcclBackend>(initFor(store, 0, 2));
  other.join();
  DeviceBuffer buffer(0, 1024 * sizeof(float));
  // Rank 1 never joins this all-reduce. With lazy connection set-up the timeout may already hit
  // while NCCL enqueues it; otherwise the Work's wait reports it.
  std::shared_ptr<Work> work;
  try {
    work = backends[0]->allReduce(buffer.view(1024, DataType::Float32), ReduceOp::Sum,
                                  CollectiveOptions{1s});
    work->wait();
    FAIL() << "an all-reduce completed without rank 1";
  } catch (const CommTimeoutError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("rank 0 of 2"), HasSubstr("1 s")));
  }
  if (work) {
    EXPECT_TRUE(work->isCompleted());
    EXPECT_NE(work->exception(), nullptr);
  }
  EXPECT_TRUE(backends[0]->isAborted());
  try {
    backends[0]->barrier();
    FAIL() << "an aborted backend accepted a barrier";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), HasSubstr("aborted"));
  }
  backends[1]->abort("test over");
  EXPECT_TRUE(backends[1]->isAborted());
  backends[1].reset();
}

}  // namespace
}  // namespace stretch::comm::nccl
