// Comms logger: DeepSpeed's record/skip rules, statistics, nccl-tests bandwidths, the summary.

#include "runtime/comm/comms_logger.hpp"

#include <chrono>

#include <gtest/gtest.h>

#include "runtime/comm/bandwidth.hpp"

namespace stretch::comm {
namespace {

using namespace std::chrono_literals;

TEST(CommsLogger, RecordsOnlyWhenEnabledAndSelected) {
  EXPECT_FALSE(CommsLogger(CommsLoggerOptions{}).shouldRecord(OpType::AllReduce));
  CommsLoggerOptions all;
  all.enabled = true;
  EXPECT_TRUE(CommsLogger(all).shouldRecord(OpType::Broadcast));
  CommsLoggerOptions some;
  some.enabled = true;
  some.profAll = false;
  some.profOps = {"all_reduce"};
  CommsLogger logger(some);
  EXPECT_TRUE(logger.shouldRecord(OpType::AllReduce));
  EXPECT_FALSE(logger.shouldRecord(OpType::AllGather));
}

TEST(CommsLogger, AggregatesPerOpSizeAndRanks) {
  CommsLoggerOptions options;
  options.enabled = true;
  CommsLogger logger(options);
  logger.record(OpType::AllReduce, 1 << 20, 4, 100us);
  logger.record(OpType::AllReduce, 1 << 20, 4, 300us);
  logger.record(OpType::AllReduce, 1 << 20, 4, 200us);
  logger.record(OpType::AllReduce, 8, 4, 10us);
  logger.record(OpType::AllGather, 4096, 4, 50us);
  const auto rows = logger.summary();
  ASSERT_EQ(rows.size(), 3u);
  // Ordered by op, then size.
  EXPECT_EQ(rows[0].op, OpType::AllReduce);
  EXPECT_EQ(rows[0].messageBytes, 8u);
  const CommsRecord& big = rows[1];
  EXPECT_EQ(big.count, 3);
  EXPECT_EQ(big.totalBytes, 3u << 20);
  EXPECT_DOUBLE_EQ(big.minLatencyUs, 100.0);
  EXPECT_DOUBLE_EQ(big.maxLatencyUs, 300.0);
  EXPECT_DOUBLE_EQ(big.avgLatencyUs, 200.0);
  const Bandwidth expected = computeBandwidth(OpType::AllReduce, 1 << 20, 200e-6, 4);
  EXPECT_DOUBLE_EQ(big.algbwGBps, expected.algbwGBps);
  EXPECT_DOUBLE_EQ(big.busbwGBps, expected.algbwGBps * 1.5);
  EXPECT_EQ(rows[2].op, OpType::AllGather);

  const std::string table = logger.formatSummary();
  EXPECT_NE(table.find("all_reduce"), std::string::npos);
  EXPECT_NE(table.find("1.0 MiB"), std::string::npos);
  EXPECT_NE(table.find("busbw"), std::string::npos);
  logger.reset();
  EXPECT_TRUE(logger.summary().empty());
  EXPECT_EQ(logger.formatSummary(), "");
}

TEST(CommsLogger, FormatsBytesInBinaryUnits) {
  EXPECT_EQ(formatBytes(0), "0 B");
  EXPECT_EQ(formatBytes(1023), "1023 B");
  EXPECT_EQ(formatBytes(1024), "1.0 KiB");
  EXPECT_EQ(formatBytes(std::size_t{256} << 20), "256.0 MiB");
  EXPECT_EQ(formatBytes(std::size_t{3} << 30), "3.0 GiB");
}

}  // namespace
}  // namespace stretch::comm
