// Runs the real `stretch bench comm`: the --json rows of a small Gloo sweep over two processes,
// readable errors for bad flags (exit 2), and the whole-run timeout (exit 1).

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "tests/support/test_support.hpp"

namespace stretch {
namespace {

struct Result {
  int exitCode;
  std::string out;  // stdout only
  std::string err;
};

Result runStretch(const std::string& args) {
  const auto errPath = std::filesystem::temp_directory_path() /
                       ("stretch-bench-comm-" + std::to_string(::getpid()) + ".err");
  const std::string command = std::string(STRETCH_CLI) + " " + args + " 2>" + errPath.string();
  const auto run = stretch::test::runShell(command);
  std::stringstream err;
  err << std::ifstream(errPath).rdbuf();
  std::filesystem::remove(errPath);
  return {run.exitCode, run.out, err.str()};
}

void expectRows(const Result& r, const std::string& op, int ranks, std::size_t count) {
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto rows = nlohmann::json::parse(r.out);  // stdout is exactly one JSON array
  ASSERT_TRUE(rows.is_array());
  ASSERT_EQ(rows.size(), count) << r.out;
  std::uint64_t expectBytes = 8;
  for (const auto& row : rows) {
    ASSERT_EQ(row.size(), 7u) << row;
    EXPECT_EQ(row.at("op"), op);
    EXPECT_EQ(row.at("ranks"), ranks);
    EXPECT_EQ(row.at("bytes").get<std::uint64_t>(), expectBytes);
    EXPECT_GT(row.at("time_us").get<double>(), 0.0);
    EXPECT_GT(row.at("algbw_gbps").get<double>(), 0.0);
    EXPECT_GE(row.at("busbw_gbps").get<double>(), 0.0);
    EXPECT_EQ(row.at("wrong"), 0) << row;
    expectBytes *= 2;
  }
}

TEST(BenchCommCli, GlooSweepOverTwoProcessesGivesJsonRows) {
#if !STRETCH_TEST_HAVE_GLOO
  GTEST_SKIP() << "this build has no Gloo backend";
#endif
  const Result r = runStretch(
      "bench comm --backend gloo --ranks 2 --op all_reduce --min-bytes 8 --max-bytes 64K "
      "--iters 5 --json");
  expectRows(r, "all_reduce", 2, 14);
  EXPECT_NE(r.err.find("2 ranks"), std::string::npos) << "progress goes to stderr: " << r.err;
}

TEST(BenchCommCli, InProcessThreadsRunEveryOp) {
  const Result r = runStretch(
      "bench comm --backend in_process --ranks 3 --min-bytes 8 --max-bytes 1K --iters 2 "
      "--dtype fp16");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "broadcast"})
    EXPECT_NE(r.out.find(std::string("# ") + op + ", 3 ranks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
}

TEST(BenchCommCli, SimBackendPrintsTheCostModelsRows) {
  // 16 ranks on two 8-GPU nodes: the model's rows, the data really moved and checked.
  const Result r = runStretch(
      "bench comm --backend sim --cluster dgx-h100 --nodes 2 --ranks 16 --op all_reduce "
      "--min-bytes 8 --max-bytes 64K --iters 2 --json");
  expectRows(r, "all_reduce", 16, 14);
  const Result table = runStretch(
      "bench comm --backend sim --cluster dgx-h100 --ranks 8 --op broadcast -b 1M -e 1M");
  ASSERT_EQ(table.exitCode, 0) << table.err;
  EXPECT_NE(table.out.find("simulated: the cost model of cluster dgx-h100"), std::string::npos)
      << table.out;
  // A preset that does not exist, and more ranks than the preset's one node holds.
  const Result noCluster = runStretch("bench comm --backend sim --cluster nope -e 1K");
  EXPECT_EQ(noCluster.exitCode, 2);
  EXPECT_NE(noCluster.err.find("--cluster"), std::string::npos) << noCluster.err;
  EXPECT_NE(noCluster.err.find("dgx-h100"), std::string::npos) << noCluster.err;
  const Result tooMany = runStretch("bench comm --backend sim --cluster dgx-h100 --ranks 9 -e 1K");
  EXPECT_EQ(tooMany.exitCode, 2);
  EXPECT_NE(tooMany.err.find("--ranks = 9: expected at most the 8 GPUs"), std::string::npos)
      << tooMany.err;
}

TEST(BenchCommCli, BadFlagsNameTheFlagTheValueAndWhatWasExpected) {
  struct Case {
    std::string args;
    std::string flag;
    std::string value;
  };
  const std::vector<Case> cases = {
      {"--max-bytes 12Q", "--max-bytes", "12Q"},
      {"--min-bytes 0", "--min-bytes", "0"},
      {"--min-bytes 1M --max-bytes 64K", "--max-bytes", "64K"},
      {"--ranks 2,0", "--ranks", "2,0"},
      {"--ranks two", "--ranks", "two"},
      {"--op all_reduce,all_to_one", "--op", "all_reduce,all_to_one"},
      {"--op broadcast,broadcast", "--op", "broadcast,broadcast"},
      {"--dtype fp8", "--dtype", "fp8"},
      {"--iters 0", "--iters", "0"},
      {"--warmup -1", "--warmup", "-1"},
      {"--timeout soon", "--timeout", "soon"},
      {"--backend carrier-pigeon", "--backend", "carrier-pigeon"},
  };
  for (const Case& c : cases) {
    const bool hasBackend = c.args.find("--backend") != std::string::npos;
    const Result r =
        runStretch("bench comm " + std::string(hasBackend ? "" : "--backend in_process ") + c.args);
    EXPECT_EQ(r.exitCode, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.flag + " = " + c.value + ": expected"), std::string::npos)
        << c.args << "\n"
        << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << "\n" << r.out;
  }
}

TEST(BenchCommCli, JsonErrorsAreTyped) {
  const Result r = runStretch("bench comm --backend in_process --json --max-bytes 12Q");
  EXPECT_EQ(r.exitCode, 2);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("error"), "ConfigError");
  EXPECT_NE(j.at("message").get<std::string>().find("12Q"), std::string::npos);
}

TEST(BenchCommCli, TheRunEndsAtItsTimeout) {
#if !STRETCH_TEST_HAVE_GLOO
  GTEST_SKIP() << "this build has no Gloo backend";
#endif
  const auto start = std::chrono::steady_clock::now();
  const Result r = runStretch("bench comm --backend gloo --ranks 2 --max-bytes 1G --timeout 2");
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_NE(r.err.find("deadline"), std::string::npos) << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

}  // namespace
}  // namespace stretch
