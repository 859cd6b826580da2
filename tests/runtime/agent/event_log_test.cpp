// The JSON-lines event log (runtime/agent/event_log.hpp), read back with nlohmann::json.

#include "runtime/agent/event_log.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "tests/runtime/agent/agent_test_util.hpp"

namespace stretch::agent {
namespace {

using namespace std::chrono_literals;

// The record a line describes, read with a real JSON parser.
EventRecord parse(const std::string& line) {
  const nlohmann::json j = nlohmann::json::parse(line);
  EventRecord r;
  r.time = Time{j.at("time_ns").get<std::int64_t>()};
  r.event = j.at("event").get<std::string>();
  if (j.contains("generation")) {
    r.generation = j["generation"].get<std::uint64_t>();
  }
  if (j.contains("world_size")) {
    r.worldSize = j["world_size"].get<std::int64_t>();
  }
  if (j.contains("batch")) {
    r.batch =
        config::BatchTriple{j["batch"].at("train_batch_size").get<std::int64_t>(),
                            j["batch"].at("train_micro_batch_size_per_gpu").get<std::int64_t>(),
                            j["batch"].at("gradient_accumulation_steps").get<std::int64_t>()};
  }
  if (j.contains("restart_count")) {
    r.restartCount = j["restart_count"].get<std::int64_t>();
  }
  if (j.contains("resume_step")) {
    r.resumeStep = j["resume_step"].get<std::int64_t>();
  }
  if (j.contains("recovery")) {
    r.recovery = j["recovery"].get<std::string>();
  }
  if (j.contains("exit_code")) {
    r.exitCode = j["exit_code"].get<int>();
  }
  if (j.contains("nodes")) {
    r.nodes = j["nodes"].get<std::vector<std::string>>();
  }
  if (j.contains("reason")) {
    r.reason = j["reason"].get<std::string>();
  }
  return r;
}

TEST(EventLog, AFullRecordHasItsKeysInOrder) {
  EventRecord r;
  r.time = 1500ms;
  r.event = "start_workers";
  r.generation = 2;
  r.worldSize = 8;
  r.batch = config::BatchTriple{96, 4, 3};
  r.restartCount = 1;
  r.resumeStep = 120;
  r.exitCode = 1;
  r.nodes = {"n0", "n1"};
  r.reason = "scale up";
  EXPECT_EQ(toJsonLine(r),
            "{\"time_ns\":1500000000,\"event\":\"start_workers\",\"generation\":2,"
            "\"world_size\":8,\"batch\":{\"train_batch_size\":96,"
            "\"train_micro_batch_size_per_gpu\":4,\"gradient_accumulation_steps\":3},"
            "\"restart_count\":1,\"resume_step\":120,\"exit_code\":1,\"nodes\":[\"n0\",\"n1\"],"
            "\"reason\":\"scale up\"}");
  EXPECT_EQ(parse(toJsonLine(r)), r);
}

TEST(EventLog, AMinimalRecordOmitsAbsentKeys) {
  EventRecord r;
  r.event = "wait";
  EXPECT_EQ(toJsonLine(r), "{\"time_ns\":0,\"event\":\"wait\"}");
  EXPECT_EQ(parse(toJsonLine(r)), r);
}

// The escaping itself is stretch::jsonQuote's (tests/runtime/common/strings_test.cpp); here: a
// record whose strings need it still reads back.
TEST(EventLog, StringsAreEscaped) {
  EventRecord r;
  r.event = "node_joined";
  r.reason = "node \"x\"\nsaid \\ hi \x02";
  r.nodes = {"we\"ird", "\ttab"};
  EXPECT_EQ(parse(toJsonLine(r)), r);
}

TEST(EventLog, ActionsBecomeRecords) {
  AgentStateMachine m(test::agentConfig(1, 1));
  const std::vector<Action> started = m.handle(0s, NodeJoined{"a", 4});
  ASSERT_TRUE(m.current().has_value());
  const EventRecord start = recordOf(started.back(), 2s, 40);
  EXPECT_EQ(start.event, "start_workers");
  EXPECT_EQ(start.generation, 1u);
  EXPECT_EQ(start.worldSize, 4);
  EXPECT_EQ(start.batch, (config::BatchTriple{16, 4, 1}));
  EXPECT_EQ(start.restartCount, 0);
  EXPECT_EQ(start.resumeStep, 40);
  EXPECT_EQ(start.nodes, (std::vector<std::string>{"a"}));
  EXPECT_EQ(start.time, 2s);

  std::ostringstream out;
  EventLog log(out);
  for (const Action& a : started) {
    log.write(a, 0s);
  }
  for (const Action& a : m.handle(3s, WorkerExited{1, "a", 0, 5})) {
    log.write(a, 3s);
  }
  std::istringstream in(out.str());
  std::vector<EventRecord> records;
  for (std::string line; std::getline(in, line);) {
    records.push_back(parse(line));
  }
  ASSERT_GE(records.size(), 3u);
  EXPECT_EQ(records[0].event, "node_joined");
  EXPECT_EQ(records.back().event, "start_workers");
  EXPECT_EQ(records.back().generation, 2u);
  EXPECT_EQ(records.back().restartCount, 1);
  EXPECT_EQ(records[records.size() - 2].event, "stop_workers");
  EXPECT_NE(records[records.size() - 2].reason.find("exited with code 5"), std::string::npos);

  EventRecord fail = recordOf(Fail{"boom", 3}, 9s);
  EXPECT_EQ(fail.event, "fail");
  EXPECT_EQ(fail.exitCode, 3);
  EXPECT_EQ(fail.reason, "boom");
  EXPECT_EQ(recordOf(Finish{4}, 9s).generation, 4u);
  EXPECT_EQ(recordOf(Wait{"nodes"}, 9s).reason, "nodes");
}

// Live recovery's decision (agent::planLiveRecovery) is a record of its own between the stop and
// the start it decides.
TEST(EventLog, ALivePlanBecomesARecord) {
  StartWorkers next;
  next.generation = 3;
  LivePlan plan;
  plan.live = true;
  plan.reason = "3 running worker(s) go on (2 of them in an interim world); 1 join generation 3";
  plan.publish = LiveMembers{{{"a", 0}, {"a", 1}, {"b", 1}}, config::BatchTriple{12, 2, 2}, {}};
  plan.awaitJoiners = true;
  const EventRecord live = parse(toJsonLine(recordOf(plan, next, 7s)));
  EXPECT_EQ(live.event, "live_plan");
  EXPECT_EQ(live.generation, 3u);
  EXPECT_EQ(live.recovery, "live");
  EXPECT_EQ(live.worldSize, 3);
  EXPECT_EQ(live.batch, (config::BatchTriple{12, 2, 2}));
  EXPECT_EQ(live.nodes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(live.reason, plan.reason);
  EXPECT_EQ(live.time, 7s);

  LivePlan lost;
  lost.reason = "ZeRO partition 1 was lost with its copy (ranks 1 and 2 of 4)";
  const EventRecord fallback = parse(toJsonLine(recordOf(lost, next, 8s)));
  EXPECT_EQ(fallback.event, "live_plan");
  EXPECT_EQ(fallback.recovery, "checkpoint");
  EXPECT_FALSE(fallback.worldSize.has_value());
  EXPECT_FALSE(fallback.batch.has_value());
  EXPECT_EQ(fallback.reason, lost.reason);
}

TEST(EventLog, AppendsToAFile) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      (std::string("stretch-event-log-") + std::to_string(::getpid()) + ".jsonl");
  std::filesystem::remove(path);
  EventRecord r;
  r.event = "wait";
  {
    EventLog log(path);
    log.write(r);
  }
  {
    EventLog log(path);
    r.event = "finish";
    log.write(r);
  }
  std::ifstream in(path);
  std::string first;
  std::string second;
  std::getline(in, first);
  std::getline(in, second);
  EXPECT_EQ(parse(first).event, "wait");
  EXPECT_EQ(parse(second).event, "finish");
  std::filesystem::remove(path);

  EXPECT_THROW(EventLog(std::filesystem::path("/nonexistent-dir/x/log.jsonl")), IoError);
}

// A full disk (here /dev/full: every write fails with ENOSPC) loses records, counted, and never
// throws: the job goes on. A stream that refuses writes is the same.
TEST(EventLog, AWriteThatFailsLosesTheRecordAndNeverThrows) {
  EventRecord r;
  r.event = "start_workers";
  EventLog full(std::filesystem::path("/dev/full"));
  EXPECT_FALSE(full.write(r));
  EXPECT_FALSE(full.write(r));
  EXPECT_EQ(full.lost(), 2u);
  EXPECT_EQ(full.error(), "No space left on device");
  EXPECT_EQ(full.path(), "/dev/full");

  std::ostringstream refusing;
  refusing.setstate(std::ios::badbit);
  EventLog stream(refusing);
  EXPECT_FALSE(stream.write(r));
  EXPECT_EQ(stream.lost(), 1u);
  std::ostringstream fine;
  EventLog ok(fine);
  EXPECT_TRUE(ok.write(r));
  EXPECT_EQ(ok.lost(), 0u);
}

}  // namespace
}  // namespace stretch::agent
