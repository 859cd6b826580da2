// The CUDA accelerator on a real device. Built only when the CUDA toolkit was found; every test
// that needs a device skips with the runtime's reason when none is visible.

#include "runtime/accel/cuda_accelerator.hpp"

#include <cstdint>
#include <cuda_runtime_api.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace stretch::accel {
namespace {

using ::testing::HasSubstr;

class CudaAcceleratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_.deviceCount() == 0)
      GTEST_SKIP() << "no CUDA device visible: " << cudaStatus().unavailableReason;
  }
  CudaAccelerator cuda_;
};

TEST(CudaStatusTest, TheRuntimeVersionIsKnownWithoutADevice) {
  const CudaStatus status = cudaStatus();
  EXPECT_TRUE(status.built);
  EXPECT_FALSE(status.runtimeVersion.empty());
  EXPECT_EQ(status.deviceCount, CudaAccelerator().deviceCount());
  if (status.deviceCount == 0) {
    EXPECT_FALSE(status.unavailableReason.empty());
  }
}

TEST(CudaWithoutDeviceTest, CallsThatNeedADeviceSayThereIsNone) {
  CudaAccelerator cuda;
  if (cuda.deviceCount() > 0)
    GTEST_SKIP() << "a CUDA device is visible; this test covers machines without one";
  EXPECT_FALSE(cuda.isAvailable());
  EXPECT_FALSE(cuda.onAccelerator(&cuda));
  try {
    static_cast<void>(cuda.totalMemory());
    FAIL() << "totalMemory() without a device did not throw";
  } catch (const AcceleratorError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no cuda device is visible"));
  }
  EXPECT_THROW(cuda.setDevice(0), AcceleratorError);
}

TEST_F(CudaAcceleratorTest, NamesAndDevices) {
  EXPECT_EQ(cuda_.name(), "cuda");
  EXPECT_EQ(cuda_.communicationBackendName(), "nccl");
  EXPECT_EQ(cuda_.deviceName(), "cuda");
  EXPECT_EQ(cuda_.deviceName(1), "cuda:1");
  EXPECT_TRUE(cuda_.isAvailable());
  const int last = cuda_.deviceCount() - 1;
  cuda_.setDevice(last);
  EXPECT_EQ(cuda_.currentDevice(), last);
  EXPECT_EQ(cuda_.currentDeviceName(), "cuda:" + std::to_string(last));
  cuda_.setDevice(0);
  EXPECT_THROW(cuda_.setDevice(cuda_.deviceCount()), AcceleratorError);
  EXPECT_EQ(cuda_.currentDevice(), 0);
}

TEST_F(CudaAcceleratorTest, MemoryStatisticsSeeAnAllocation) {
  const DeviceProperties props = cuda_.deviceProperties(0);
  EXPECT_FALSE(props.name.empty());
  EXPECT_THAT(props.details, HasSubstr("compute capability"));
  // As nvidia-smi -L prints it: the identity ranks compare to find a shared device.
  EXPECT_THAT(props.uuid, ::testing::MatchesRegex(
                              "GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"));
  const std::uint64_t total = cuda_.totalMemory(0);
  EXPECT_EQ(total, props.totalMemory);
  EXPECT_LE(cuda_.availableMemory(0), total);

  const std::uint64_t before = cuda_.memoryAllocated(0);
  constexpr std::size_t kBytes = 512u << 20;
  void* block = nullptr;
  ASSERT_EQ(cudaMalloc(&block, kBytes), cudaSuccess);
  const std::uint64_t after = cuda_.memoryAllocated(0);
  EXPECT_GE(after, before + kBytes / 2) << "before " << before << ", after " << after;
  EXPECT_GE(cuda_.memoryReserved(0), after - kBytes / 4);
  EXPECT_TRUE(cuda_.onAccelerator(block));
  EXPECT_TRUE(cuda_.onAccelerator(static_cast<char*>(block) + 1000));
  ASSERT_EQ(cudaFree(block), cudaSuccess);
}

TEST_F(CudaAcceleratorTest, PinnedHostMemoryIsNotOnTheDevice) {
  PinnedBuffer pinned = cuda_.pinned(1 << 20);
  ASSERT_TRUE(pinned);
  cudaPointerAttributes attrs{};
  ASSERT_EQ(cudaPointerGetAttributes(&attrs, pinned.data()), cudaSuccess);
  EXPECT_EQ(attrs.type, cudaMemoryTypeHost);
  EXPECT_FALSE(cuda_.onAccelerator(pinned.data()));
  int onStack = 0;
  EXPECT_FALSE(cuda_.onAccelerator(&onStack));
  EXPECT_FALSE(cuda_.onAccelerator(nullptr));
}

TEST_F(CudaAcceleratorTest, SynchronizeWaitsForQueuedCopies) {
  constexpr std::size_t kBytes = 64u << 20;
  PinnedBuffer host = cuda_.pinned(kBytes);
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(device, 0x5a, kBytes, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(host.data(), device, kBytes, cudaMemcpyDeviceToHost, nullptr),
            cudaSuccess);
  cuda_.synchronize(0);
  const auto* bytes = static_cast<const unsigned char*>(host.data());
  EXPECT_EQ(bytes[0], 0x5a);
  EXPECT_EQ(bytes[kBytes - 1], 0x5a);
  ASSERT_EQ(cudaFree(device), cudaSuccess);
}

}  // namespace
}  // namespace stretch::accel
