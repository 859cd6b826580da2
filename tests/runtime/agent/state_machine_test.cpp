// The elastic agent's rules, one scripted event sequence each (runtime/agent/state_machine.hpp).

#include "runtime/agent/state_machine.hpp"

#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "runtime/common/worker_variables.hpp"
#include "tests/runtime/agent/agent_test_util.hpp"

namespace stretch::agent {
namespace {

using namespace std::chrono_literals;
using test::agentConfig;
using test::kinds;
using test::only;
using test::single;
using Kinds = std::vector<std::string>;

// Joins the nodes (4 slots each) at t=0 and, when needed, passes the last call.
std::vector<Action> startWith(AgentStateMachine& m, const std::vector<std::string>& ids,
                              std::int64_t slots = 4) {
  std::vector<Action> all;
  for (const std::string& id : ids) {
    auto a = m.handle(0s, NodeJoined{id, slots});
    all.insert(all.end(), a.begin(), a.end());
  }
  if (m.phase() != Phase::Running) {
    auto a = m.tick(m.config().lastCall);
    all.insert(all.end(), a.begin(), a.end());
  }
  return all;
}

TEST(AgentStateMachine, InitialStartWaitsForMinNodesThenTheLastCall) {
  AgentStateMachine m(agentConfig(2, 4));
  EXPECT_EQ(m.phase(), Phase::Rendezvous);

  auto a = m.handle(0s, NodeJoined{"a", 4});
  ASSERT_EQ(kinds(a), (Kinds{"wait"}));
  EXPECT_NE(single<Wait>(a).reason.find("1 of min_nodes 2"), std::string::npos);

  a = m.handle(1s, NodeJoined{"b", 4});
  ASSERT_EQ(kinds(a), (Kinds{"wait"}));
  EXPECT_NE(single<Wait>(a).reason.find("last call"), std::string::npos);
  EXPECT_TRUE(m.tick(10s).empty());  // same reason: no second Wait

  a = m.tick(11s);  // last call from 1 s (min_nodes reached) + 10 s
  ASSERT_EQ(kinds(a), (Kinds{"start"}));
  const StartWorkers s = single<StartWorkers>(a);
  EXPECT_EQ(s.generation, 1u);
  EXPECT_EQ(s.worldSize, 8);
  EXPECT_EQ(s.dataParallelSize, 8);
  EXPECT_EQ(s.restartCount, 0);
  EXPECT_TRUE(s.resumeFromLatest);
  EXPECT_EQ(s.batch, (config::BatchTriple{16, 2, 1}));
  ASSERT_EQ(s.nodes.size(), 2u);
  EXPECT_EQ(s.nodes[0], (NodeAssignment{"a", 0, 0, 4, 4}));
  EXPECT_EQ(s.nodes[1], (NodeAssignment{"b", 1, 4, 4, 4}));
  EXPECT_TRUE(s.spareNodes.empty());
  EXPECT_EQ(m.phase(), Phase::Running);
  EXPECT_EQ(m.generation(), 1u);
  ASSERT_TRUE(m.current().has_value());
  EXPECT_EQ(*m.current(), s);
}

TEST(AgentStateMachine, StartsAtOnceWhenMaxNodesHaveJoined) {
  AgentStateMachine m(agentConfig(1, 2));
  EXPECT_EQ(kinds(m.handle(0s, NodeJoined{"a", 4})), (Kinds{"wait"}));
  const auto a = m.handle(1s, NodeJoined{"b", 4});
  ASSERT_EQ(kinds(a), (Kinds{"start"}));
  EXPECT_EQ(single<StartWorkers>(a).worldSize, 8);
}

TEST(AgentStateMachine, WorkerFailureRestartsTheSameMembershipAndCounts) {
  AgentStateMachine m(agentConfig(2, 2));
  const StartWorkers first = single<StartWorkers>(startWith(m, {"a", "b"}));

  const auto a = m.handle(20s, WorkerExited{1, "b", 2, 1});
  ASSERT_EQ(kinds(a), (Kinds{"stop", "start"}));
  const StopWorkers stop = single<StopWorkers>(a);
  EXPECT_EQ(stop.generation, 1u);
  EXPECT_NE(stop.reason.find("worker rank 6 (node b local rank 2) exited with code 1"),
            std::string::npos)
      << stop.reason;
  const StartWorkers s = single<StartWorkers>(a);
  EXPECT_EQ(s.generation, 2u);
  EXPECT_EQ(s.restartCount, 1);
  EXPECT_EQ(s.nodes, first.nodes);
  EXPECT_EQ(s.batch, first.batch);
  EXPECT_NE(s.reason.find("restart 1 of 3"), std::string::npos) << s.reason;
  EXPECT_EQ(m.restartCount(), 1);
  EXPECT_EQ(m.remainingRestarts(), 2);
}

// A crash loop: generations that fail before their first step with the same exit code restart
// after 1 s, then 2 s; the third in a row fails the job with the program's status, whatever
// max_restarts still allows.
TEST(AgentStateMachine, ACrashLoopBacksOffThenFailsAtTheLimit) {
  AgentStateMachine m(agentConfig(1, 1, /*maxRestarts=*/100));
  startWith(m, {"a"});
  auto a = m.handle(10s, WorkerExited{1, "a", 0, 3, /*early=*/true});
  ASSERT_EQ(kinds(a, true), (Kinds{"stop", "log:restart_backoff", "wait"}));
  EXPECT_NE(single<StopWorkers>(a).reason.find("exited with code 3 in generation 1 before its "
                                               "first step"),
            std::string::npos)
      << single<StopWorkers>(a).reason;
  EXPECT_NE(single<Wait>(a).reason.find("backing off 1 s before the restart 1 of 100"),
            std::string::npos)
      << single<Wait>(a).reason;
  EXPECT_TRUE(kinds(m.tick(10500ms)).empty());  // still backing off
  a = m.tick(11s);
  ASSERT_EQ(kinds(a), (Kinds{"start"}));
  EXPECT_EQ(single<StartWorkers>(a).generation, 2u);
  EXPECT_NE(single<StartWorkers>(a).reason.find("restart 1 of 100"), std::string::npos);

  a = m.handle(12s, WorkerExited{2, "a", 0, 3, true});
  ASSERT_EQ(kinds(a), (Kinds{"stop", "wait"}));
  EXPECT_NE(single<Wait>(a).reason.find("backing off 2 s"), std::string::npos);
  EXPECT_TRUE(kinds(m.tick(13900ms)).empty());
  ASSERT_EQ(kinds(m.tick(14s)), (Kinds{"start"}));

  a = m.handle(15s, WorkerExited{3, "a", 0, 3, true});
  ASSERT_EQ(kinds(a), (Kinds{"stop", "fail"}));
  const Fail fail = single<Fail>(a);
  EXPECT_EQ(fail.exitCode, 3);
  EXPECT_NE(fail.message.find("crash loop: 3 generations in a row failed the same way before "
                              "their first step (crash_loop_limit 3)"),
            std::string::npos)
      << fail.message;
  EXPECT_EQ(m.restartCount(), 2);
}

// Only the same early failure in a row counts: a different exit code starts the streak again,
// and a failure after the first step restarts at once and clears it.
// A worker that says the job cannot run as launched (another job holds its checkpoint directory)
// ends the job at once, whether or not it trained first: no restart, no backoff, exit status 2.
TEST(AgentStateMachine, AWorkerThatSaysTheJobCannotRunEndsItWithoutARestart) {
  for (const bool early : {true, false}) {
    AgentStateMachine m(agentConfig(1, 1, /*maxRestarts=*/100));
    startWith(m, {"a"});
    const auto a = m.handle(10s, WorkerExited{1, "a", 0, worker_env::kExitCannotRun, early});
    ASSERT_EQ(kinds(a), (Kinds{"stop", "fail"})) << "early " << early;
    const Fail fail = single<Fail>(a);
    EXPECT_EQ(fail.exitCode, 2);
    EXPECT_NE(fail.message.find("exited with code 78"), std::string::npos) << fail.message;
    EXPECT_NE(fail.message.find("the job cannot run as launched (exit status 78), so it is not "
                                "restarted"),
              std::string::npos)
        << fail.message;
  }
}

// A job whose checkpoint saves fail (a full disk) trained, failed at its save, restarted and
// trained to the same save again, up to max_restarts: a failed save counts toward the crash-loop
// rule like a failure before the first step, though the workers trained first.
TEST(AgentStateMachine, FailedCheckpointSavesInARowAreACrashLoop) {
  AgentStateMachine m(agentConfig(1, 1, /*maxRestarts=*/100));
  startWith(m, {"a"});
  const int saveFailed = worker_env::kExitSaveFailed;
  auto a = m.handle(10s, WorkerExited{1, "a", 0, saveFailed, /*early=*/false});
  ASSERT_EQ(kinds(a, true), (Kinds{"stop", "log:restart_backoff", "wait"}));
  EXPECT_NE(single<StopWorkers>(a).reason.find("at a checkpoint save"), std::string::npos)
      << single<StopWorkers>(a).reason;
  ASSERT_EQ(kinds(m.tick(11s)), (Kinds{"start"}));
  ASSERT_EQ(kinds(m.handle(20s, WorkerExited{2, "a", 0, saveFailed, false})),
            (Kinds{"stop", "wait"}));
  ASSERT_EQ(kinds(m.tick(22s)), (Kinds{"start"}));
  a = m.handle(30s, WorkerExited{3, "a", 0, saveFailed, false});
  ASSERT_EQ(kinds(a), (Kinds{"stop", "fail"}));
  EXPECT_EQ(single<Fail>(a).exitCode, saveFailed);
  EXPECT_NE(single<Fail>(a).message.find("crash loop: 3 generations in a row failed the same way "
                                         "at a checkpoint save"),
            std::string::npos)
      << single<Fail>(a).message;
}

TEST(AgentStateMachine, OnlyTheSameEarlyFailureInARowCountsAsACrashLoop) {
  AgentStateMachine m(agentConfig(1, 1, /*maxRestarts=*/100));
  startWith(m, {"a"});
  ASSERT_EQ(kinds(m.handle(1s, WorkerExited{1, "a", 0, 3, true})), (Kinds{"stop", "wait"}));
  ASSERT_EQ(kinds(m.tick(2s)), (Kinds{"start"}));
  auto a = m.handle(3s, WorkerExited{2, "a", 0, 4, true});  // another code: 1 s again
  ASSERT_EQ(kinds(a), (Kinds{"stop", "wait"}));
  EXPECT_NE(single<Wait>(a).reason.find("backing off 1 s"), std::string::npos);
  ASSERT_EQ(kinds(m.tick(4s)), (Kinds{"start"}));
  ASSERT_EQ(kinds(m.handle(5s, WorkerExited{3, "a", 0, 4, false})), (Kinds{"stop", "start"}));
  for (int generation = 4; generation <= 5; ++generation) {  // a new streak of 2: no failure
    ASSERT_EQ(
        kinds(m.handle(Duration(std::chrono::seconds(10 * generation)),
                       WorkerExited{static_cast<std::uint64_t>(generation), "a", 0, 4, true})),
        (Kinds{"stop", "wait"}));
    ASSERT_EQ(kinds(m.tick(Duration(std::chrono::seconds(10 * generation + 5)))), (Kinds{"start"}));
  }
  EXPECT_EQ(m.phase(), Phase::Running);
}

TEST(AgentStateMachine, ACrashLoopLimitOfZeroOnlyBacksOff) {
  AgentConfig config = agentConfig(1, 1, /*maxRestarts=*/10);
  config.crashLoopLimit = 0;
  config.backoffCap = 4s;
  AgentStateMachine m(config);
  startWith(m, {"a"});
  Duration now = 0s;
  for (std::uint64_t generation = 1; generation <= 5; ++generation) {
    now += 1s;
    const auto a = m.handle(now, WorkerExited{generation, "a", 0, 3, true});
    ASSERT_EQ(kinds(a), (Kinds{"stop", "wait"})) << generation;
    const Duration expected = std::min<Duration>(Duration(1s) * (1 << (generation - 1)), 4s);
    EXPECT_NE(single<Wait>(a).reason.find("backing off " + formatDuration(expected)),
              std::string::npos)
        << single<Wait>(a).reason;
    now += expected;
    ASSERT_EQ(kinds(m.tick(now)), (Kinds{"start"})) << generation;
  }
}

TEST(AgentStateMachine, MaxRestartsExhaustedFailsNamingTheCount) {
  AgentStateMachine m(agentConfig(1, 1, /*maxRestarts=*/2));
  startWith(m, {"a"});
  EXPECT_EQ(kinds(m.handle(1s, WorkerExited{1, "a", 0, 3})), (Kinds{"stop", "start"}));
  EXPECT_EQ(kinds(m.handle(2s, WorkerExited{2, "a", 1, 3})), (Kinds{"stop", "start"}));
  EXPECT_EQ(m.restartCount(), 2);

  const auto a = m.handle(3s, WorkerExited{3, "a", 3, 7});
  ASSERT_EQ(kinds(a), (Kinds{"stop", "fail"}));
  const Fail f = single<Fail>(a);
  EXPECT_EQ(f.exitCode, 7);
  EXPECT_NE(f.message.find("max_restarts (2) exhausted"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("restarted 2 time(s)"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("exited with code 7"), std::string::npos) << f.message;
  EXPECT_EQ(m.phase(), Phase::Failed);
  EXPECT_EQ(m.restartCount(), 2);
  EXPECT_TRUE(m.handle(4s, NodeJoined{"b", 4}).empty());  // terminal
}

TEST(AgentStateMachine, ZeroRestartsFailsOnTheFirstFailureWithTheSignalStatus) {
  AgentStateMachine m(agentConfig(1, 1, /*maxRestarts=*/0));
  startWith(m, {"a"});
  const auto a = m.handle(1s, WorkerExited{1, "a", 0, -9});
  ASSERT_EQ(kinds(a), (Kinds{"stop", "fail"}));
  EXPECT_EQ(single<Fail>(a).exitCode, 128 + 9);
  EXPECT_NE(single<Fail>(a).message.find("killed by signal 9"), std::string::npos);
}

TEST(AgentStateMachine, NodeLeavingRestartsWithFewerNodesAndCounts) {
  AgentStateMachine m(agentConfig(1, 2));
  startWith(m, {"a", "b"});
  const auto a = m.handle(5s, NodeLeft{"a", "scheduler took it"});
  ASSERT_EQ(kinds(a), (Kinds{"stop", "start"}));
  EXPECT_NE(single<StopWorkers>(a).reason.find("node a of generation 1 scheduler took it"),
            std::string::npos)
      << single<StopWorkers>(a).reason;
  const StartWorkers s = single<StartWorkers>(a);
  EXPECT_EQ(s.restartCount, 1);
  EXPECT_EQ(s.worldSize, 4);
  EXPECT_EQ(s.batch, (config::BatchTriple{16, 4, 1}));  // same global batch
  ASSERT_EQ(s.nodes.size(), 1u);
  EXPECT_EQ(s.nodes[0], (NodeAssignment{"b", 0, 0, 4, 4}));
}

TEST(AgentStateMachine, KeepAliveLostIsADeparture) {
  AgentStateMachine m(agentConfig(1, 2));
  startWith(m, {"a", "b"});
  const auto a = m.handle(5s, KeepAliveLost{{"b"}});
  ASSERT_EQ(kinds(a), (Kinds{"stop", "start"}));
  EXPECT_NE(single<StopWorkers>(a).reason.find("keep-alive lost"), std::string::npos);
  EXPECT_EQ(single<StartWorkers>(a).restartCount, 1);
}

// Nodes lost together (one keep-alive check, or found gone before a start) are one restart.
TEST(AgentStateMachine, NodesLostInOneEventCostOneRestart) {
  AgentStateMachine m(agentConfig(1, 4));
  startWith(m, {"a", "b", "c", "d"}, 2);  // 8 GPUs, every node a member
  auto a = m.handle(5s, KeepAliveLost{{"b", "c"}});
  ASSERT_EQ(kinds(a), (Kinds{"stop", "start"}));
  EXPECT_NE(single<StopWorkers>(a).reason.find("nodes b, c of generation 1 keep-alive lost"),
            std::string::npos)
      << single<StopWorkers>(a).reason;
  EXPECT_EQ(single<StartWorkers>(a).restartCount, 1);
  EXPECT_EQ(single<StartWorkers>(a).nodes.size(), 2u);
  a = m.handle(6s, NodesLeft{{"a", "d"}, "gone before generation 2 started"});
  ASSERT_EQ(kinds(a), (Kinds{"stop", "wait"}));
  EXPECT_EQ(m.restartCount(), 2);
}

TEST(AgentStateMachine, KeepAliveTimeoutDetectsASilentNode) {
  AgentConfig c = agentConfig(1, 2);
  c.keepAliveTimeout = 30s;
  AgentStateMachine m(c);
  startWith(m, {"a", "b"});  // both heard at t=0
  EXPECT_TRUE(m.handle(20s, KeepAlive{"a"}).empty());
  EXPECT_TRUE(m.tick(30s).empty());  // b: exactly 30 s, not older
  const auto a = m.tick(31s);
  ASSERT_EQ(kinds(a), (Kinds{"stop", "start"}));
  EXPECT_NE(single<StopWorkers>(a).reason.find("node b"), std::string::npos);
  EXPECT_EQ(single<StartWorkers>(a).nodes.size(), 1u);
  EXPECT_EQ(single<StartWorkers>(a).nodes[0].nodeId, "a");
}

TEST(AgentStateMachine, JoinWhileRunningScalesUpAfterTheLastCallWithoutCounting) {
  AgentStateMachine m(agentConfig(1, 4));
  startWith(m, {"a"});
  ASSERT_EQ(m.current()->worldSize, 4);

  auto a = m.handle(20s, NodeJoined{"b", 4});
  EXPECT_EQ(kinds(a, true), (Kinds{"log:node_joined"}));
  EXPECT_EQ(m.nodes()[1].status, NodeStatus::Waiting);
  EXPECT_TRUE(m.tick(29s).empty());

  a = m.tick(30s);
  ASSERT_EQ(kinds(a), (Kinds{"stop", "start"}));
  EXPECT_NE(single<StopWorkers>(a).reason.find("scale up from 4 to 8 GPUs"), std::string::npos);
  const StartWorkers s = single<StartWorkers>(a);
  EXPECT_EQ(s.generation, 2u);
  EXPECT_EQ(s.worldSize, 8);
  EXPECT_EQ(s.restartCount, 0);  // joins never count
  EXPECT_EQ(s.batch.trainBatchSize, 16);
  EXPECT_EQ(m.restartCount(), 0);
}

TEST(AgentStateMachine, JoinThatCannotGrowTheWorldMakesASpare) {
  AgentStateMachine m(agentConfig(1, 4));
  startWith(m, {"a", "b"});
  m.handle(20s, NodeJoined{"c", 4});
  const auto a = m.tick(30s);  // 12 GPUs is not valid; 8 stays the largest
  EXPECT_EQ(kinds(a, true), (Kinds{"log:node_spare"}));
  EXPECT_EQ(m.generation(), 1u);
  EXPECT_EQ(m.nodes()[2].status, NodeStatus::Spare);
  EXPECT_TRUE(m.tick(100s).empty());

  // A spare leaving changes nothing running.
  EXPECT_EQ(kinds(m.handle(101s, NodeLeft{"c", ""}), true), (Kinds{"log:node_left"}));
  EXPECT_EQ(m.restartCount(), 0);
}

TEST(AgentStateMachine, WholeNodesDropsANodeToReachAValidSize) {
  AgentStateMachine m(agentConfig(2, 3));
  const StartWorkers s = single<StartWorkers>(startWith(m, {"a", "b", "c"}));
  EXPECT_EQ(s.worldSize, 8);
  ASSERT_EQ(s.nodes.size(), 2u);
  EXPECT_EQ(s.spareNodes.ids(), (std::vector<std::string>{"c"}));

  // A spare replaces a departed member (still a counted restart: the member left).
  const auto a = m.handle(1s, NodeLeft{"a", ""});
  const StartWorkers r = single<StartWorkers>(a);
  EXPECT_EQ(r.worldSize, 8);
  EXPECT_EQ(r.nodes[0].nodeId, "b");
  EXPECT_EQ(r.nodes[1].nodeId, "c");
  EXPECT_EQ(r.restartCount, 1);
}

TEST(AgentStateMachine, NoValidSizeWaitsThenFailsListingSlotsAndValidSizes) {
  AgentConfig c = agentConfig(2, 2);
  c.waitTimeout = 60s;
  AgentStateMachine m(c);
  m.handle(0s, NodeJoined{"a", 3});
  const auto a = m.handle(1s, NodeJoined{"b", 3});  // 3 or 6 GPUs: neither valid
  ASSERT_EQ(kinds(a), (Kinds{"wait"}));
  EXPECT_NE(single<Wait>(a).reason.find("no valid world size: 6 slot(s) available on 2 node(s)"),
            std::string::npos)
      << single<Wait>(a).reason;
  EXPECT_TRUE(m.tick(59s).empty());
  const auto f = m.tick(60s);
  ASSERT_EQ(kinds(f), (Kinds{"fail"}));
  const std::string message = single<Fail>(f).message;
  EXPECT_NE(message.find("a:3, b:3"), std::string::npos) << message;
  EXPECT_NE(message.find("[1, 2, 4, 8] GPUs"), std::string::npos) << message;
  EXPECT_NE(message.find("wait_timeout 1 min"), std::string::npos) << message;
  EXPECT_EQ(single<Fail>(f).exitCode, 1);
}

TEST(AgentStateMachine, PartialNodesUsePartOfANode) {
  AgentConfig c = agentConfig(2, 2);
  c.selection = NodeSelection::PartialNodes;
  AgentStateMachine m(c);
  m.handle(0s, NodeJoined{"a", 3});
  const StartWorkers s = single<StartWorkers>(m.handle(1s, NodeJoined{"b", 3}));
  EXPECT_EQ(s.worldSize, 4);
  EXPECT_EQ(s.nodes[0], (NodeAssignment{"a", 0, 0, 3, 3}));
  EXPECT_EQ(s.nodes[1], (NodeAssignment{"b", 1, 3, 1, 3}));
  EXPECT_EQ(s.batch, (config::BatchTriple{16, 4, 1}));
}

TEST(AgentStateMachine, TooFewNodesFailAfterTheWaitTimeout) {
  AgentConfig c = agentConfig(2, 2);
  c.waitTimeout = 100s;
  AgentStateMachine m(c, 5s);
  m.handle(5s, NodeJoined{"a", 4});
  EXPECT_TRUE(m.tick(104s).empty());
  const auto f = m.tick(105s);
  ASSERT_EQ(kinds(f), (Kinds{"fail"}));
  EXPECT_NE(single<Fail>(f).message.find("1 of min_nodes 2 node(s) joined"), std::string::npos)
      << single<Fail>(f).message;
}

TEST(AgentStateMachine, ExitBarrierWaitsForEveryWorker) {
  AgentStateMachine m(agentConfig(1, 1));
  startWith(m, {"a"});
  EXPECT_EQ(kinds(m.handle(1s, WorkerExited{1, "a", 0, 0}), true), (Kinds{"log:exit_barrier"}));
  EXPECT_TRUE(kinds(m.handle(2s, WorkerExited{1, "a", 1, 0})).empty());
  EXPECT_TRUE(kinds(m.handle(3s, WorkerExited{1, "a", 2, 0})).empty());
  EXPECT_EQ(m.succeededWorkers(), 3);
  const auto a = m.handle(4s, WorkerExited{1, "a", 3, 0});
  ASSERT_EQ(kinds(a), (Kinds{"finish"}));
  EXPECT_EQ(single<Finish>(a).generation, 1u);
  EXPECT_EQ(m.phase(), Phase::Succeeded);
  EXPECT_TRUE(m.finished());
  EXPECT_TRUE(m.tick(5s).empty());
}

TEST(AgentStateMachine, FailureAfterSomeWorkersSucceededIsAFailure) {
  AgentStateMachine m(agentConfig(1, 1));
  startWith(m, {"a"});
  m.handle(1s, WorkerExited{1, "a", 0, 0});
  m.handle(1s, WorkerExited{1, "a", 1, 0});
  const auto a = m.handle(2s, WorkerExited{1, "a", 2, 1});
  ASSERT_EQ(kinds(a), (Kinds{"stop", "start"}));
  EXPECT_EQ(single<StartWorkers>(a).restartCount, 1);
  EXPECT_EQ(m.succeededWorkers(), 0);  // the new generation starts from scratch
}

TEST(AgentStateMachine, ExitBarrierTimeoutCountsAsAFailure) {
  AgentConfig c = agentConfig(1, 1);
  c.exitBarrierTimeout = 60s;
  AgentStateMachine m(c);
  startWith(m, {"a"});
  m.handle(100s, WorkerExited{1, "a", 0, 0});
  EXPECT_TRUE(m.tick(159s).empty());
  const auto a = m.tick(160s);
  ASSERT_EQ(kinds(a), (Kinds{"stop", "start"}));
  EXPECT_NE(single<StopWorkers>(a).reason.find("exit barrier: 1 of 4 workers"), std::string::npos);
  EXPECT_EQ(m.restartCount(), 1);
}

TEST(AgentStateMachine, NoScaleUpOnceTheJobIsFinishing) {
  AgentStateMachine m(agentConfig(1, 2));
  startWith(m, {"a"});
  m.handle(11s, WorkerExited{1, "a", 0, 0});
  m.handle(12s, NodeJoined{"b", 4});
  EXPECT_TRUE(kinds(m.tick(100s)).empty());
  EXPECT_EQ(m.generation(), 1u);
}

TEST(AgentStateMachine, StaleAndUnknownExitsAreIgnored) {
  AgentStateMachine m(agentConfig(1, 1));
  startWith(m, {"a"});
  m.handle(1s, WorkerExited{1, "a", 0, 1});  // restart: generation 2
  EXPECT_EQ(kinds(m.handle(2s, WorkerExited{1, "a", 1, 1}), true), (Kinds{"log:stale_event"}));
  EXPECT_EQ(kinds(m.handle(2s, WorkerExited{2, "a", 9, 1}), true), (Kinds{"log:unknown_worker"}));
  EXPECT_EQ(kinds(m.handle(2s, WorkerExited{2, "zz", 0, 1}), true), (Kinds{"log:unknown_worker"}));
  EXPECT_EQ(m.restartCount(), 1);
  EXPECT_EQ(m.generation(), 2u);
}

TEST(AgentStateMachine, AFailedRestartWithoutAValidSizeWaitsAndResumesWithoutCounting) {
  AgentStateMachine n(agentConfig(2, 2));
  startWith(n, {"a", "b"});
  auto a = n.handle(1s, NodeLeft{"b", ""});  // 1 node < min_nodes 2
  ASSERT_EQ(kinds(a, true), (Kinds{"stop", "log:restart_deferred", "wait"}));
  EXPECT_EQ(n.phase(), Phase::Rendezvous);
  EXPECT_EQ(n.restartCount(), 1);
  a = n.handle(5s, NodeJoined{"c", 4});
  EXPECT_EQ(kinds(a), (Kinds{"start"}));  // max_nodes reached: at once
  EXPECT_EQ(single<StartWorkers>(a).restartCount, 1);
  EXPECT_EQ(single<StartWorkers>(a).generation, 2u);
  EXPECT_EQ(n.restartCount(), 1);
}

TEST(AgentStateMachine, AFailureAdmitsWaitingNodes) {
  AgentConfig c = agentConfig(1, 4);
  c.lastCall = 1000s;
  AgentStateMachine m(c);
  m.handle(0s, NodeJoined{"a", 4});
  m.tick(1000s);
  ASSERT_EQ(m.current()->worldSize, 4);
  m.handle(1001s, NodeJoined{"b", 4});
  const auto a = m.handle(1002s, WorkerExited{1, "a", 0, 2});
  const StartWorkers s = single<StartWorkers>(a);
  EXPECT_EQ(s.worldSize, 8);
  EXPECT_EQ(s.restartCount, 1);
}

TEST(AgentStateMachine, MaxNodesCapsThePoolAndLaterNodesWait) {
  AgentStateMachine m(agentConfig(1, 2));
  m.handle(0s, NodeJoined{"a", 4});
  m.handle(0s, NodeJoined{"b", 4});  // starts: pool full
  m.handle(1s, NodeJoined{"c", 4});
  ASSERT_EQ(m.nodes().size(), 3u);
  EXPECT_EQ(m.nodes()[2].status, NodeStatus::Waiting);
  EXPECT_TRUE(kinds(m.tick(100s)).empty());  // no room: no scale up

  const StartWorkers s = single<StartWorkers>(m.handle(101s, NodeLeft{"a", ""}));
  EXPECT_EQ(s.nodes[0].nodeId, "b");
  EXPECT_EQ(s.nodes[1].nodeId, "c");
  EXPECT_EQ(s.restartCount, 1);
}

TEST(AgentStateMachine, DepartureDuringRendezvousDoesNotCount) {
  AgentStateMachine m(agentConfig(2, 3));
  m.handle(0s, NodeJoined{"a", 4});
  m.handle(0s, NodeJoined{"b", 4});
  EXPECT_EQ(kinds(m.handle(1s, NodeLeft{"b", ""})), (Kinds{"wait"}));
  EXPECT_EQ(m.restartCount(), 0);
  EXPECT_EQ(kinds(m.handle(2s, NodeJoined{"bad", 0}), true), (Kinds{"log:node_rejected"}));
  EXPECT_EQ(kinds(m.handle(2s, NodeJoined{"a", 4}), true), (Kinds{"log:node_rejected"}));
  EXPECT_EQ(kinds(m.handle(2s, NodeLeft{"ghost", ""}), true), (Kinds{"log:stale_event"}));
}

TEST(AgentStateMachine, ElasticityDisabledRunsAnySizeTheBatchKeysAllow) {
  AgentConfig c = agentConfig(3, 3);
  c.training = config::DsConfig{};
  c.training.batch.microBatchPerGpu = 4;
  AgentStateMachine m(c);
  const StartWorkers s = single<StartWorkers>(startWith(m, {"a", "b", "c"}, 3));
  EXPECT_EQ(s.worldSize, 9);
  EXPECT_EQ(s.batch, (config::BatchTriple{36, 4, 1}));

  // train_batch_size 24 with micro batch 4: data-parallel sizes 1, 2, 3 and 6 only.
  c.training.batch.trainBatchSize = 24;
  AgentStateMachine fixed(c);
  const StartWorkers t = single<StartWorkers>(startWith(fixed, {"a", "b", "c"}, 3));
  EXPECT_EQ(t.worldSize, 6);
  EXPECT_EQ(t.batch, (config::BatchTriple{24, 4, 1}));
  EXPECT_EQ(t.spareNodes.ids(), (std::vector<std::string>{"c"}));
}

TEST(AgentStateMachine, ModelParallelSizeDividesTheWorld) {
  AgentConfig c = agentConfig(1, 1);
  c.training = config::DsConfig{};
  c.training.batch.microBatchPerGpu = 2;
  c.modelParallelSize = 2;
  AgentStateMachine m(c);
  const StartWorkers s = single<StartWorkers>(startWith(m, {"a"}, 8));
  EXPECT_EQ(s.worldSize, 8);
  EXPECT_EQ(s.dataParallelSize, 4);
  EXPECT_EQ(s.batch, (config::BatchTriple{8, 2, 1}));
}

TEST(AgentStateMachine, DescribeShowsPhaseWorldAndNodes) {
  AgentStateMachine m(agentConfig(1, 4));
  startWith(m, {"a"});
  m.handle(11s, NodeJoined{"b", 4});
  const std::string d = m.describe();
  EXPECT_NE(d.find("phase=running"), std::string::npos) << d;
  EXPECT_NE(d.find("generation=1"), std::string::npos) << d;
  EXPECT_NE(d.find("world=4 GPUs (batch 16 = micro 4 x gas 1 x dp 4)"), std::string::npos) << d;
  EXPECT_NE(d.find("restarts=0/3"), std::string::npos) << d;
  EXPECT_NE(d.find("a:4 member rank 0 (4 worker(s))"), std::string::npos) << d;
  EXPECT_NE(d.find("b:4 waiting"), std::string::npos) << d;
}

TEST(AgentStateMachine, TimeMustNotGoBackwards) {
  AgentStateMachine m(agentConfig(1, 1), 10s);
  EXPECT_THROW(m.tick(9s), InternalError);
}

TEST(AgentStateMachine, BadConfigsNameTheField) {
  const auto message = [](AgentConfig c) -> std::string {
    try {
      AgentStateMachine m(std::move(c));
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "no error";
  };
  AgentConfig c = agentConfig(2, 1);
  EXPECT_EQ(message(c), "agent.max_nodes = 1: expected an integer >= agent.min_nodes");
  c = agentConfig(0, 1);
  EXPECT_EQ(message(c), "agent.min_nodes = 0: expected a positive integer");
  c = agentConfig(1, 1, -1);
  EXPECT_EQ(message(c), "agent.max_restarts = -1: expected a non-negative integer");
  c = agentConfig(1, 1);
  c.waitTimeout = 0s;
  EXPECT_EQ(message(c), "agent.wait_timeout = 0 ns: expected a positive duration");
  c = agentConfig(1, 1);
  c.training = config::DsConfig{};  // no batch keys at all
  EXPECT_NE(message(c).find("train_batch_size or train_micro_batch_size_per_gpu"),
            std::string::npos);
}

TEST(AgentStateMachine, AnElasticConfigWithoutAPlanThrowsTheSolversError) {
  AgentConfig c = agentConfig(1, 1);
  c.training.elasticity.microBatchSizes = {32};  // larger than max_train_batch_size 16
  EXPECT_THROW(AgentStateMachine{c}, ElasticityConfigError);
}

}  // namespace
}  // namespace stretch::agent
