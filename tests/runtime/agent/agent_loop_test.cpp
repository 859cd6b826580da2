// The shape of the agent loop the launcher runs, with a scripted WorkerGroup: exits from poll()
// go into the state machine, its actions go to the group and the event log. Shows that the
// pieces fit; the real loop lives with the launcher.

#include <sstream>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "runtime/agent/event_log.hpp"
#include "runtime/agent/state_machine.hpp"
#include "runtime/agent/worker_group.hpp"
#include "tests/runtime/agent/agent_test_util.hpp"

namespace stretch::agent {
namespace {

using namespace std::chrono_literals;

// Workers that run for 3 polls; in generation 1 rank 5 fails, later every worker succeeds.
class ScriptedWorkers final : public WorkerGroup {
 public:
  void start(const StartWorkers& action) override {
    running_ = action;
    polls_ = 0;
    ++starts_;
  }
  void stop() override {
    running_.reset();
    ++stops_;
  }
  std::vector<WorkerExited> poll() override {
    std::vector<WorkerExited> out;
    if (!running_ || ++polls_ < 3) {
      return out;
    }
    for (const NodeAssignment& node : running_->nodes) {
      for (std::int64_t local = 0; local < node.localWorldSize; ++local) {
        const bool fail = running_->generation == 1 && node.firstRank + local == 5;
        out.push_back({running_->generation, node.nodeId, local, fail ? 1 : 0});
      }
    }
    running_.reset();
    return out;
  }

  int starts_ = 0;
  int stops_ = 0;

 private:
  std::optional<StartWorkers> running_;
  int polls_ = 0;
};

TEST(AgentLoop, ExitsInActionsOutUntilTheJobEnds) {
  AgentStateMachine machine(test::agentConfig(2, 2));
  ScriptedWorkers workers;
  std::ostringstream logText;
  EventLog log(logText);
  std::optional<int> exitCode;

  const auto execute = [&](const std::vector<Action>& actions, Time now) {
    for (const Action& action : actions) {
      log.write(action, now);
      if (const auto* start = std::get_if<StartWorkers>(&action)) {
        workers.start(*start);
      } else if (std::holds_alternative<StopWorkers>(action)) {
        workers.stop();
      } else if (std::holds_alternative<Finish>(action)) {
        exitCode = 0;
      } else if (const auto* fail = std::get_if<Fail>(&action)) {
        exitCode = fail->exitCode;
      }
    }
  };

  execute(machine.handle(0s, NodeJoined{"a", 4}), 0s);
  execute(machine.handle(0s, NodeJoined{"b", 4}), 0s);
  for (Time now = 1s; !machine.finished() && now < 100s; now += 1s) {
    for (const WorkerExited& exit : workers.poll()) {
      execute(machine.handle(now, exit), now);
    }
    execute(machine.tick(now), now);
  }
  ASSERT_EQ(exitCode, 0);
  EXPECT_EQ(machine.phase(), Phase::Succeeded);
  EXPECT_EQ(machine.restartCount(), 1);
  EXPECT_EQ(workers.starts_, 2);
  EXPECT_EQ(workers.stops_, 1);

  std::vector<std::string> events;
  std::istringstream in(logText.str());
  for (std::string line; std::getline(in, line);) {
    events.push_back(nlohmann::json::parse(line).at("event").get<std::string>());
  }
  // Ranks 0-4 exit 0 (the exit barrier waits), rank 5 fails (restart), ranks 6 and 7 of the
  // stopped generation report late and are ignored; generation 2 succeeds.
  EXPECT_EQ(events,
            (std::vector<std::string>{"node_joined", "wait", "node_joined", "start_workers",
                                      "exit_barrier", "stop_workers", "start_workers",
                                      "stale_event", "stale_event", "exit_barrier", "finish"}));
}

}  // namespace
}  // namespace stretch::agent
