// Value types: names round-trip, devices parse with clear errors, slices and bandwidth factors.

#include <vector>

#include <gtest/gtest.h>

#include "runtime/comm/bandwidth.hpp"
#include "runtime/comm/types.hpp"
#include "runtime/common/error.hpp"

namespace stretch::comm {
namespace {

TEST(CommTypes, DataTypeNamesRoundTripAndSizesMatchTheirCTypes) {
  for (DataType dtype : kAllDataTypes)
    EXPECT_EQ(parseDataType(toString(dtype)), dtype) << toString(dtype);
  EXPECT_EQ(elementSize(DataType::Float32), sizeof(float));
  EXPECT_EQ(elementSize(DataType::Float64), sizeof(double));
  EXPECT_EQ(elementSize(DataType::Float16), 2u);
  EXPECT_EQ(elementSize(DataType::BFloat16), 2u);
  EXPECT_EQ(elementSize(DataType::Int64), 8u);
  EXPECT_EQ(elementSize(DataType::UInt8), 1u);
  EXPECT_EQ(parseDataType("half"), DataType::Float16);
  EXPECT_EQ(parseDataType("bfloat16"), DataType::BFloat16);
  EXPECT_EQ(parseDataType("fp8"), std::nullopt);
  EXPECT_TRUE(isFloatingPoint(DataType::BFloat16));
  EXPECT_FALSE(isFloatingPoint(DataType::UInt8));
}

TEST(CommTypes, OpAndReduceNamesRoundTrip) {
  for (OpType op : kAllOpTypes)
    EXPECT_EQ(parseOpType(toString(op)), op);
  for (ReduceOp op : kAllReduceOps)
    EXPECT_EQ(parseReduceOp(toString(op)), op);
  EXPECT_EQ(toString(OpType::AllReduce), "all_reduce");
  EXPECT_EQ(parseReduceOp("prod"), ReduceOp::Product);
  EXPECT_EQ(parseOpType("allreduce"), std::nullopt);
}

TEST(CommTypes, DevicesParseAndPrintLikeDeepSpeed) {
  EXPECT_EQ(parseDevice("cpu", "--device"), Device::cpu());
  EXPECT_EQ(parseDevice("cuda", "--device"), Device::cuda());
  EXPECT_EQ(parseDevice("cuda:3", "--device"), Device::cuda(3));
  EXPECT_EQ(Device::cuda(1).toString(), "cuda:1");
  EXPECT_EQ(Device::cuda().toString(), "cuda");
  EXPECT_EQ(Device::cpu().toString(), "cpu");
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:1x", ""}) {
    try {
      parseDevice(bad, "STRETCH_DEVICE");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("STRETCH_DEVICE"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("cuda:N"), std::string::npos) << e.what();
    }
  }
}

TEST(CommTypes, BufferViewsSliceInElements) {
  std::vector<double> values(10);
  const BufferView view = BufferView::of(std::span(values));
  EXPECT_EQ(view.dtype, DataType::Float64);
  EXPECT_EQ(view.bytes(), 80u);
  const BufferView part = view.slice(3, 4);
  EXPECT_EQ(part.data, values.data() + 3);
  EXPECT_EQ(part.count, 4u);
  EXPECT_EQ(part.bytes(), 32u);
}

TEST(CommTypes, DurationsPrintInTheirNaturalUnit) {
  EXPECT_EQ(formatDuration(std::chrono::minutes(10)), "10 min");
  EXPECT_EQ(formatDuration(std::chrono::milliseconds(1500)), "1.5 s");
  EXPECT_EQ(formatDuration(std::chrono::milliseconds(250)), "250 ms");
}

TEST(Bandwidth, FactorsAreNcclTestsDefinitions) {
  EXPECT_DOUBLE_EQ(busBandwidthFactor(OpType::AllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(OpType::AllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(OpType::AllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(OpType::ReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(OpType::AllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(OpType::Broadcast, 16), 1.0);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(OpType::AllReduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(OpType::Barrier, 4), 0.0);

  // 1 GB all_reduce in 0.5 s on 4 ranks: algbw 2 GB/s, busbw 3 GB/s.
  const Bandwidth bw = computeBandwidth(OpType::AllReduce, 1'000'000'000, 0.5, 4);
  EXPECT_DOUBLE_EQ(bw.algbwGBps, 2.0);
  EXPECT_DOUBLE_EQ(bw.busbwGBps, 3.0);
  EXPECT_DOUBLE_EQ(computeBandwidth(OpType::AllReduce, 100, 0.0, 4).algbwGBps, 0.0);
}

}  // namespace
}  // namespace stretch::comm
