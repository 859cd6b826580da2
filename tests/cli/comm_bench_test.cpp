// The communication benchmark's library (tools/): size parsing and rounding, the iteration
// plan, the sweep's results and #wrong check over the in-process backend, and the rank launcher
// (with /bin/sh as the ranks, so that failures and timeouts are deterministic).

#include "tools/comm_bench.hpp"

#include <chrono>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/comm/bandwidth.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/in_process_backend.hpp"
#include "runtime/launcher/token.hpp"
#include "sim/collective_cost.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/sim_cluster.hpp"
#include "tools/rank_launcher.hpp"
#include "tools/sim_comm_bench.hpp"

namespace stretch::tools {
namespace {

using stretch::comm::DataType;
using stretch::comm::OpType;

TEST(CommBenchSizes, ParsesNcclTestsSizes) {
  EXPECT_EQ(parseByteSize("8"), 8u);
  EXPECT_EQ(parseByteSize("64K"), 65536u);
  EXPECT_EQ(parseByteSize("64k"), 65536u);
  EXPECT_EQ(parseByteSize("256M"), 256u << 20);
  EXPECT_EQ(parseByteSize("1G"), 1u << 30);
  EXPECT_EQ(parseByteSize("1GiB"), 1u << 30);
  EXPECT_EQ(parseByteSize("2KB"), 2048u);
  EXPECT_EQ(parseByteSize("100B"), 100u);
  for (const char* bad :
       {"", "0", "K", "-8", "8Q", "8 K", "1.5M", "64KX", "99999999999999999999", "17179869184T"})
    EXPECT_FALSE(parseByteSize(bad).has_value()) << bad;
}

TEST(CommBenchSizes, FormatReadsBack) {
  EXPECT_EQ(formatByteSize(65536), "64K");
  EXPECT_EQ(formatByteSize(3), "3");
  EXPECT_EQ(formatByteSize(1536), "1536");
  EXPECT_EQ(formatByteSize(256ull << 20), "256M");
  for (std::uint64_t b : {1ull, 1000ull, 4096ull, 3ull << 30})
    EXPECT_EQ(parseByteSize(formatByteSize(b)), b);
}

TEST(CommBenchSizes, SweepDoublesUpToMax) {
  EXPECT_EQ(sweepSizes(8, 64), (std::vector<std::uint64_t>{8, 16, 32, 64}));
  EXPECT_EQ(sweepSizes(8, 100), (std::vector<std::uint64_t>{8, 16, 32, 64}));
  EXPECT_EQ(sweepSizes(3, 3), (std::vector<std::uint64_t>{3}));
  EXPECT_TRUE(sweepSizes(0, 64).empty());
  EXPECT_TRUE(sweepSizes(128, 64).empty());
  EXPECT_EQ(sweepSizes(8, 64ull << 10).size(), 14u);
  const auto huge = sweepSizes(1, ~0ull);
  EXPECT_EQ(huge.size(), 64u);  // no overflow past 2^63
}

TEST(CommBenchSizes, OpBytesRoundLikeNcclTests) {
  EXPECT_EQ(opBytes(OpType::AllReduce, 8, 4, DataType::Float32), 8u);
  EXPECT_EQ(opBytes(OpType::AllReduce, 10, 4, DataType::Float32), 8u);
  EXPECT_EQ(opBytes(OpType::AllReduce, 2, 4, DataType::Float32), 4u);  // at least one element
  EXPECT_EQ(opBytes(OpType::Broadcast, 9, 3, DataType::Float64), 8u);
  EXPECT_EQ(opBytes(OpType::AllGather, 8, 4, DataType::Float32), 16u);  // one element per rank
  EXPECT_EQ(opBytes(OpType::AllGather, 64, 3, DataType::Float32), 60u);
  EXPECT_EQ(opBytes(OpType::ReduceScatter, 1024, 3, DataType::BFloat16), 1020u);
}

TEST(CommBenchSizes, IterationPlanFollowsNcclTestsAndShrinksForLargeSizes) {
  const IterationPlan small = iterationPlan(8, std::nullopt, std::nullopt);
  EXPECT_EQ(small.warmup, 5);
  EXPECT_EQ(small.iters, 20);
  const IterationPlan big = iterationPlan(256ull << 20, std::nullopt, std::nullopt);
  EXPECT_EQ(big.warmup, 1);
  EXPECT_EQ(big.iters, 2);
  const IterationPlan mid = iterationPlan(64ull << 20, std::nullopt, std::nullopt);
  EXPECT_EQ(mid.warmup, 2);
  EXPECT_EQ(mid.iters, 8);
  EXPECT_EQ(iterationPlan(16ull << 20, std::nullopt, std::nullopt).iters, 20);
  EXPECT_EQ(iterationPlan(16ull << 30, std::nullopt, std::nullopt).iters, 2);
  const IterationPlan given = iterationPlan(256ull << 20, 0, 7);
  EXPECT_EQ(given.warmup, 0);
  EXPECT_EQ(given.iters, 7);
}

TEST(CommBenchSizes, InputsStayExactAfterSumming) {
  for (DataType dtype : stretch::comm::kAllDataTypes) {
    for (int ranks : {1, 2, 3, 8, 64}) {
      const std::int64_t m = inputModulus(dtype, ranks);
      EXPECT_GE(m, 1);
      EXPECT_LE(m, 61);
      if (dtype == DataType::BFloat16 && ranks <= 4) {
        EXPECT_EQ(m, 61);
      }
      if (dtype == DataType::BFloat16 && ranks == 8) {
        EXPECT_LE(m * 8, 256);
      }
    }
  }
  EXPECT_EQ(inputValue(0, 0, 61), 1);
  EXPECT_EQ(inputValue(1, 0, 61), 6);
  EXPECT_EQ(inputValue(0, 60, 61), 61);
}

TEST(CommBenchRows, JsonRoundTripsWithTheDocumentedFields) {
  BenchRow row{OpType::ReduceScatter, 4, 1024, 12.5, 0.08, 0.06, 3};
  const auto j = toJson(row);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items())
    keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"op", "ranks", "bytes", "time_us", "algbw_gbps",
                                            "busbw_gbps", "wrong"}));
  EXPECT_EQ(j.at("op"), "reduce_scatter");
  const BenchRow back = rowFromJson(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(back.op, row.op);
  EXPECT_EQ(back.bytes, row.bytes);
  EXPECT_EQ(back.wrong, row.wrong);
  EXPECT_DOUBLE_EQ(back.timeUs, row.timeUs);
  EXPECT_THROW(rowFromJson(nlohmann::json::parse(R"({"op": "all_reduce"})")), Error);
  EXPECT_THROW(rowFromJson(nlohmann::json::parse(R"({"op": "fly", "ranks": 1, "bytes": 1,
      "time_us": 1, "algbw_gbps": 1, "busbw_gbps": 1, "wrong": 0})")),
               Error);
}

// Runs the sweep on `ranks` threads of the in-process backend; returns rank 0's rows.
std::vector<BenchRow> sweepInProcess(int ranks, const SweepOptions& options) {
  stretch::comm::InProcessWorld world(ranks, std::chrono::seconds(60));
  std::vector<std::vector<BenchRow>> rows(static_cast<std::size_t>(ranks));
  stretch::comm::runRankThreads(ranks, [&](int r) {
    rows[static_cast<std::size_t>(r)] = runSweep(*world.backend(r), options);
  });
  for (int r = 1; r < ranks; ++r) {
    EXPECT_EQ(rows[static_cast<std::size_t>(r)].size(), rows[0].size());
    for (std::size_t i = 0; i < rows[0].size() && i < rows[static_cast<std::size_t>(r)].size(); ++i)
      EXPECT_EQ(rows[static_cast<std::size_t>(r)][i].timeUs, rows[0][i].timeUs) << "max over ranks";
  }
  return rows[0];
}

TEST(CommBenchSweep, EveryOpAndDtypeChecksOutOnOddRankCounts) {
  for (DataType dtype : stretch::comm::kAllDataTypes) {
    SweepOptions options;
    options.minBytes = 8;
    options.maxBytes = 4096;
    options.dtype = dtype;
    options.warmup = 1;
    options.iters = 2;
    const auto rows = sweepInProcess(3, options);
    ASSERT_FALSE(rows.empty());
    std::set<OpType> ops;
    for (const BenchRow& row : rows) {
      ops.insert(row.op);
      EXPECT_EQ(row.wrong, 0) << stretch::comm::toString(row.op) << " " << row.bytes << " B "
                              << stretch::comm::toString(dtype);
      EXPECT_EQ(row.ranks, 3);
      EXPECT_GT(row.timeUs, 0.0);
      EXPECT_EQ(row.bytes, opBytes(row.op, row.bytes, 3, dtype)) << "bytes are whole units";
      const auto bw = stretch::comm::computeBandwidth(row.op, row.bytes, row.timeUs / 1e6, 3);
      EXPECT_NEAR(row.busbwGBps, bw.busbwGBps, 1e-12);
    }
    EXPECT_EQ(ops.size(), 4u);
  }
}

TEST(CommBenchSweep, SkipsSizesThatRoundToThePreviousRow) {
  SweepOptions options;
  options.ops = {OpType::AllGather};
  options.minBytes = 1;
  options.maxBytes = 64;
  options.iters = 1;
  options.warmup = 0;
  const auto rows = sweepInProcess(4, options);
  std::vector<std::uint64_t> bytes;
  for (const auto& row : rows)
    bytes.push_back(row.bytes);
  // 1, 2, 4, 8, 16 B all round to 16 B (one fp32 per rank of 4).
  EXPECT_EQ(bytes, (std::vector<std::uint64_t>{16, 32, 64}));
}

TEST(CommBenchSweep, RejectsAnEmptySweep) {
  stretch::comm::InProcessWorld world(1);
  SweepOptions options;
  options.minBytes = 64;
  options.maxBytes = 8;
  EXPECT_THROW(runSweep(*world.backend(0), options), ConfigError);
}

// ---- launcher, with /bin/sh as the ranks ----------------------------------------------------

RankLaunch shellRanks(int worldSize, const std::string& script) {
  RankLaunch launch;
  launch.executable = "/bin/sh";
  launch.args = {"-c", script};
  launch.worldSize = worldSize;
  launch.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  return launch;
}

TEST(RankLauncher, GivesEveryRankTheLauncherVariables) {
  RankLaunch launch = shellRanks(
      3, "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $MASTER_ADDR $MASTER_PORT $STRETCH_STORE_TOKEN\"");
  std::vector<std::string> lines(3);
  launch.onStdoutLine = [&](int rank, const std::string& line) {
    lines.at(static_cast<std::size_t>(rank)) = line;
  };
  runRanks(launch);
  std::set<std::string> ports;
  std::set<std::string> tokens;
  for (int r = 0; r < 3; ++r) {
    std::istringstream in(lines[static_cast<std::size_t>(r)]);
    int rank = -1, world = -1, local = -1;
    std::string addr, port, token;
    in >> rank >> world >> local >> addr >> port >> token;
    EXPECT_EQ(rank, r);
    EXPECT_EQ(world, 3);
    EXPECT_EQ(local, r);
    EXPECT_EQ(addr, "127.0.0.1");
    EXPECT_GT(std::stoi(port), 0);
    EXPECT_EQ(token.size(), 32u);
    ports.insert(port);
    tokens.insert(token);
  }
  EXPECT_EQ(ports.size(), 1u);
  EXPECT_EQ(tokens.size(), 1u);
}

TEST(RankLauncher, AFailedRankStopsTheOthersAndNamesItsError) {
  RankLaunch launch =
      shellRanks(3,
                 "if [ \"$RANK\" = 1 ]; then echo 'rank 1: disk on fire' >&2; exit 3; fi; "
                 "exec sleep 30");
  const auto start = std::chrono::steady_clock::now();
  const std::string what = test::errorOf<stretch::comm::CommError>([&] { runRanks(launch); });
  EXPECT_NE(what.find("rank 1 of 3"), std::string::npos) << what;
  EXPECT_NE(what.find("exit status 3"), std::string::npos) << what;
  EXPECT_NE(what.find("disk on fire"), std::string::npos) << what;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
}

TEST(RankLauncher, NamesTheSignalThatKilledARank) {
  RankLaunch launch = shellRanks(2, "if [ \"$RANK\" = 0 ]; then kill -9 $$; fi; exec sleep 30");
  const std::string what = test::errorOf<stretch::comm::CommError>([&] { runRanks(launch); });
  EXPECT_NE(what.find("rank 0 of 2"), std::string::npos) << what;
  EXPECT_NE(what.find("signal 9"), std::string::npos) << what;
}

TEST(RankLauncher, KillsEveryRankAtTheDeadline) {
  RankLaunch launch = shellRanks(2, "echo started >&2; exec sleep 30");
  launch.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(runRanks(launch), stretch::comm::CommTimeoutError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(RankLauncher, ACallbackErrorStillReapsTheRanks) {
  RankLaunch launch = shellRanks(2, "echo row; exec sleep 30");
  launch.onStdoutLine = [](int, const std::string&) { throw std::runtime_error("bad row"); };
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(runRanks(launch), std::runtime_error);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(RankLauncher, Tokens) {
  EXPECT_NE(launcher::randomToken(), launcher::randomToken());
  EXPECT_EQ(launcher::randomToken().size(), 32u);
}

// The simulated sweep times each row on simulated clocks: a row's time is exactly the cost model's
// for that collective and placement, and the data is really moved (no wrong elements).
TEST(SimulatedSweep, RowsAreTheCostModelsTimes) {
  const sim::ClusterSpec cluster = test::handCluster("test", 2, 2, 100, 10, 2, 5, 10);
  SweepOptions options;
  options.ops = {OpType::AllReduce, OpType::AllGather, OpType::Broadcast};
  options.minBytes = 1024;
  options.maxBytes = 1 << 20;
  options.warmup = 1;
  options.iters = 3;
  int delivered = 0;
  const auto rows = runSimulatedSweep(cluster, 4, options, [&](const BenchRow&) { ++delivered; });
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(delivered, static_cast<int>(rows.size()));
  for (const BenchRow& row : rows) {
    const auto cost = sim::collectiveCost(cluster, row.op, row.bytes, 4);
    EXPECT_NEAR(row.timeUs, cost.seconds * 1e6, 1e-3) << toString(row.op) << " " << row.bytes;
    EXPECT_NEAR(row.busbwGBps, cost.busbwGBps, cost.busbwGBps * 1e-4);
    EXPECT_EQ(row.wrong, 0);
    EXPECT_EQ(row.ranks, 4);
  }
  // More ranks than the cluster has GPUs is an error, not a hang.
  EXPECT_THROW(runSimulatedSweep(cluster, 5, options), ConfigError);
}

}  // namespace
}  // namespace stretch::tools
