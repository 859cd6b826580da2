#include "runtime/accel/cpu_accelerator.hpp"

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace stretch::accel {
namespace {

using ::testing::HasSubstr;

TEST(CpuAcceleratorTest, NamesAndBackendFollowDeepSpeed) {
  CpuAccelerator cpu;
  EXPECT_EQ(cpu.name(), "cpu");
  EXPECT_EQ(cpu.deviceType(), "cpu");
  EXPECT_EQ(cpu.deviceName(), "cpu");
  EXPECT_EQ(cpu.deviceName(3), "cpu");
  EXPECT_EQ(cpu.currentDeviceName(), "cpu");
  EXPECT_EQ(cpu.communicationBackendName(), "gloo");
  EXPECT_TRUE(cpu.isAvailable());
  EXPECT_EQ(cpu.deviceCount(), 1);
}

TEST(CpuAcceleratorTest, EveryLocalRankMayPickTheHost) {
  CpuAccelerator cpu;
  cpu.setDevice(0);
  cpu.setDevice(7);
  EXPECT_EQ(cpu.currentDevice(), 0);
  try {
    cpu.setDevice(-2);
    FAIL() << "setDevice(-2) was accepted";
  } catch (const AcceleratorError& e) {
    EXPECT_THAT(e.what(), HasSubstr("setDevice(-2)"));
  }
  cpu.synchronize();
  EXPECT_THROW(cpu.synchronize(1), AcceleratorError);
}

TEST(CpuAcceleratorTest, MemoryStatisticsAreConsistent) {
  CpuAccelerator cpu;
  const std::uint64_t total = cpu.totalMemory();
  ASSERT_GT(total, 0u);
  EXPECT_LE(cpu.availableMemory(), total);
  const std::uint64_t rss = cpu.memoryAllocated();
  EXPECT_GT(rss, 0u);
  EXPECT_GE(cpu.memoryReserved(), rss);
  EXPECT_EQ(cpu.deviceProperties(0).totalMemory, total);
  EXPECT_FALSE(cpu.deviceProperties(0).name.empty());
  EXPECT_THROW(cpu.deviceProperties(1), AcceleratorError);
}

TEST(CpuAcceleratorTest, ResidentMemoryGrowsWhenPagesAreTouched) {
  CpuAccelerator cpu;
  constexpr std::size_t kBytes = 64u << 20;
  const std::uint64_t before = cpu.memoryAllocated();
  auto block = std::make_unique<char[]>(kBytes);
  std::memset(block.get(), 1, kBytes);
  const std::uint64_t after = cpu.memoryAllocated();
  EXPECT_GE(after, before + kBytes / 2) << "before " << before << ", after " << after;
  EXPECT_EQ(block[kBytes - 1], 1);
}

TEST(CpuAcceleratorTest, PinnedMemoryIsPageAlignedAndWritable) {
  CpuAccelerator cpu;
  PinnedBuffer buffer = cpu.pinned(10'000);
  ASSERT_TRUE(buffer);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer.data()) % 4096, 0u);
  std::memset(buffer.data(), 0xab, buffer.bytes());
  EXPECT_EQ(static_cast<unsigned char*>(buffer.data())[9'999], 0xab);
  EXPECT_TRUE(cpu.onAccelerator(buffer.data()));
  EXPECT_FALSE(cpu.onAccelerator(nullptr));
  EXPECT_EQ(cpu.allocatePinned(0), nullptr);
  cpu.freePinned(nullptr);
}

TEST(MeminfoTest, ParsesKibibytesAndPlainCounts) {
  const std::string text =
      "MemTotal:       16318480 kB\n"
      "MemFree:         1000 kB\n"
      "MemAvailable:   8000000 kB\n"
      "HugePages_Total:       4\n"
      "VmRSS:\t  2048 kB\n";
  EXPECT_EQ(parseMeminfoValue(text, "MemTotal"), 16318480ull * 1024);
  EXPECT_EQ(parseMeminfoValue(text, "MemAvailable"), 8000000ull * 1024);
  EXPECT_EQ(parseMeminfoValue(text, "HugePages_Total"), 4u);
  EXPECT_EQ(parseMeminfoValue(text, "VmRSS"), 2048u * 1024);
  EXPECT_EQ(parseMeminfoValue(text, "Mem"), std::nullopt);  // a prefix is not a key
  EXPECT_EQ(parseMeminfoValue(text, "SwapTotal"), std::nullopt);
  EXPECT_EQ(parseMeminfoValue("MemTotal: lots\n", "MemTotal"), std::nullopt);
  EXPECT_EQ(parseMeminfoValue("", "MemTotal"), std::nullopt);
}

}  // namespace
}  // namespace stretch::accel
