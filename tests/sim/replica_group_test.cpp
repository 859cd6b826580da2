// Monte Carlo over several processes (sim/replica_group.hpp), run here as threads
// (tests/support/thread_group.hpp): the blocks partition the replicas; K ranks return the very
// runs and summary one process does; an error on one rank reaches every rank without a hang;
// runs survive their wire format bit for bit. The real `mpirun -n 3` is in sim_cli_test.

#include "sim/replica_group.hpp"

#include <algorithm>
#include <array>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "sim/monte_carlo.hpp"
#include "tests/support/test_support.hpp"
#include "tests/support/thread_group.hpp"

namespace stretch::sim {
namespace {

TEST(ReplicaGroup, BlocksPartitionTheItemsInRankOrder) {
  for (std::int64_t total = 0; total <= 40; ++total) {
    for (int size = 1; size <= 7; ++size) {
      std::int64_t next = 0;
      std::int64_t smallest = total;
      std::int64_t largest = 0;
      for (int r = 0; r < size; ++r) {
        const ItemBlock b = itemBlock(total, r, size);
        EXPECT_EQ(b.first, next) << total << " items, rank " << r << " of " << size;
        next += b.count;
        smallest = std::min(smallest, b.count);
        largest = std::max(largest, b.count);
      }
      EXPECT_EQ(next, total) << total << " items over " << size;
      EXPECT_LE(largest - smallest, 1) << total << " items over " << size;
    }
  }
}

// The summary without the figures that are wall times or say how the work was spread.
nlohmann::json withoutWallTimes(nlohmann::json j) {
  for (const char* key :
       {"wall_seconds", "agent_wall_seconds", "batch_wall_seconds", "threads", "processes"}) {
    j.erase(key);
  }
  return j;
}

TEST(ReplicaGroup, RanksReturnWhatOneProcessReturns) {
  const Scenario s = loadScenario(test::fixturePath("scenarios/daly_exponential.json"));
  MonteCarloOptions one;
  one.seeds = 23;  // not a multiple of the ranks: blocks of 8, 8 and 7
  one.threads = 2;
  const MonteCarloResult alone = runMonteCarlo(s, one);
  ASSERT_GT(summarize(alone.metricValues().at("ettr")).ci95, 0.0);  // the replicas differ
  std::array<nlohmann::json, 3> summaries;
  std::array<std::vector<std::string>, 3> runs;
  std::array<int, 3> processes{};
  test::runRanks(3, [&](ReplicaGroup& group) {
    MonteCarloOptions o = one;
    o.threads = 1;
    o.group = &group;
    const MonteCarloResult r = runMonteCarlo(s, o);
    const auto me = static_cast<std::size_t>(group.rank());
    summaries[me] = summaryToJson(r);
    processes[me] = r.processes;
    for (RunResult run : r.runs) {
      run.wallSeconds = run.agentWallSeconds = 0.0;
      runs[me].push_back(encodeRun(run));
    }
  });
  std::vector<std::string> expected;
  for (RunResult run : alone.runs) {
    run.wallSeconds = run.agentWallSeconds = 0.0;
    expected.push_back(encodeRun(run));
  }
  for (std::size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(processes[r], 3);
    EXPECT_EQ(runs[r], expected) << "rank " << r;
    EXPECT_EQ(withoutWallTimes(summaries[r]).dump(), withoutWallTimes(summaryToJson(alone)).dump())
        << "rank " << r;
  }
}

TEST(ReplicaGroup, AnErrorOnOneRankReachesEveryRank) {
  std::array<std::string, 3> kinds;
  std::array<std::string, 3> messages;
  std::array<int, 3> failedRanks{-1, -1, -1};
  test::runRanks(3, [&](ReplicaGroup& group) {
    const auto me = static_cast<std::size_t>(group.rank());
    try {
      runSplit(group, 9, [&](std::int64_t first, std::int64_t) -> std::string {
        if (group.rank() == 1) {
          throw ConfigError(ErrorDetail{"job.x", "3", "a replica that runs"});
        }
        return std::to_string(first);
      });
      kinds[me] = "none";
    } catch (const ReplicaRankError& e) {
      kinds[me] = e.kind();
      messages[me] = e.what();
      failedRanks[me] = e.failedRank();
    } catch (const ConfigError& e) {
      kinds[me] = std::string("own ") + e.kind();
      messages[me] = e.what();
    }
  });
  EXPECT_EQ(kinds[1], "own ConfigError");
  for (const std::size_t r : {0u, 2u}) {
    EXPECT_EQ(kinds[r], "ConfigError") << r;
    EXPECT_EQ(failedRanks[r], 1) << r;
    EXPECT_NE(messages[r].find("rank 1"), std::string::npos) << messages[r];
    EXPECT_NE(messages[r].find("job.x"), std::string::npos) << messages[r];
  }
}

TEST(ReplicaGroup, RunsSurviveTheirWireFormat) {
  RunResult r;
  r.outcome = Outcome::Horizon;
  r.message = "a message\nwith a newline";
  r.simulatedNs = 123'456'789'012'345;
  r.wallSeconds = 0.1 + 0.2;
  r.usefulNs = 98'765'432'109;
  r.events = 18'000'000'000'000'000'000ULL;
  r.failures = 17;
  r.generations = 4;
  r.worldSizeNs = {{0, 5}, {8, 1'000'000'000'000}, {16, 7}};
  r.notes = {"one", "two"};
  const RunResult back = decodeRun(encodeRun(r));
  EXPECT_EQ(encodeRun(back), encodeRun(r));
  EXPECT_EQ(back.outcome, Outcome::Horizon);
  EXPECT_EQ(back.message, r.message);
  EXPECT_EQ(back.simulatedNs, r.simulatedNs);
  EXPECT_EQ(back.wallSeconds, r.wallSeconds);  // bit for bit
  EXPECT_EQ(back.events, r.events);
  EXPECT_EQ(back.worldSizeNs, r.worldSizeNs);
  EXPECT_EQ(back.notes, r.notes);
  EXPECT_THROW(decodeRun("not msgpack"), IoError);
}

}  // namespace
}  // namespace stretch::sim
