// Random event sequences against AgentStateMachine (rapidcheck; the seed is printed and can be
// replayed with RC_PARAMS="seed=N"). Invariants: no invalid world size is ever started, every
// start trains the elastic final batch, the restart count never exceeds max_restarts and only
// failures and departures count, generations advance one by one, nothing happens after the end.

#include <algorithm>
#include <rapidcheck.h>
#include <set>

#include <fmt/format.h>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/agent/state_machine.hpp"

namespace stretch::agent {
namespace {

using namespace std::chrono_literals;

config::DsConfig trainingFor(int which) {
  config::DsConfig ds;
  auto& e = ds.elasticity;
  switch (which) {
    case 0:  // v0.1: batch 16, sizes 1, 2, 4, 8
      e.enabled = true;
      e.version = config::ElasticityVersion::V0_1;
      e.maxTrainBatchSize = 16;
      e.microBatchSizes = {2, 4};
      e.maxGpus = 64;
      break;
    case 1:  // v0.1 with DeepSpeed's default micro batches
      e.enabled = true;
      e.version = config::ElasticityVersion::V0_1;
      e.maxTrainBatchSize = 2000;
      e.microBatchSizes = {2, 4, 6};
      e.maxGpus = 48;
      break;
    case 2:  // v0.2, 4 GPUs per node
      e.enabled = true;
      e.version = config::ElasticityVersion::V0_2;
      e.maxTrainBatchSize = 100;
      e.microBatchSizes = {2, 4};
      e.numGpusPerNode = 4;
      e.minGpus = 4;
      e.maxGpus = 64;
      break;
    case 3:  // exact, model parallel 2
      e.enabled = true;
      e.version = config::ElasticityVersion::Exact;
      e.maxTrainBatchSize = 240;
      e.microBatchSizes = {2, 3, 4};
      e.numGpusPerNode = 2;
      e.modelParallelSize = 2;
      e.maxGpus = 48;
      break;
    default:  // elasticity disabled, a fixed global batch
      ds.batch.trainBatchSize = 48;
      ds.batch.microBatchPerGpu = 2;
      break;
  }
  return ds;
}

struct Step {
  int kind = 0;    // 0 join, 1 leave, 2 keep-alive lost, 3 clean exit, 4 failed exit,
                   // 5 tick, 6 stale exit, 7 keep-alive
  int node = 0;    // 0..7
  int worker = 0;  // picks a worker of the running generation
  int code = 1;    // exit code of a failed exit (negative: signal)
  int dtMs = 0;
};

rc::Gen<Step> genStep() {
  return rc::gen::build<Step>(
      rc::gen::set(&Step::kind,
                   rc::gen::weightedElement<int>(
                       {{3, 0}, {1, 1}, {1, 2}, {4, 3}, {2, 4}, {4, 5}, {1, 6}, {1, 7}})),
      rc::gen::set(&Step::node, rc::gen::inRange(0, 8)),
      rc::gen::set(&Step::worker, rc::gen::inRange(0, 1000)),
      rc::gen::set(&Step::code, rc::gen::element(1, 2, 127, -9, -15)),
      rc::gen::set(&Step::dtMs, rc::gen::inRange(0, 20000)));
}

void showValue(const Step& s, std::ostream& os) {
  os << "{kind " << s.kind << ", node " << s.node << ", worker " << s.worker << ", code " << s.code
     << ", dt " << s.dtMs << " ms}";
}

RC_GTEST_PROP(AgentStateMachineProperty, RandomEventSequencesKeepTheInvariants, ()) {
  AgentConfig c;
  c.minNodes = *rc::gen::inRange<std::int64_t>(1, 4);
  c.maxNodes = *rc::gen::inRange<std::int64_t>(c.minNodes, 7);
  c.maxRestarts = *rc::gen::inRange<std::int64_t>(0, 6);
  c.selection = *rc::gen::element(NodeSelection::WholeNodes, NodeSelection::PartialNodes);
  c.lastCall = std::chrono::milliseconds(*rc::gen::inRange(0, 15000));
  c.waitTimeout = std::chrono::milliseconds(*rc::gen::inRange(20000, 200000));
  if (*rc::gen::arbitrary<bool>()) {
    c.keepAliveTimeout = std::chrono::milliseconds(*rc::gen::inRange(5000, 60000));
  }
  if (*rc::gen::arbitrary<bool>()) {
    c.exitBarrierTimeout = std::chrono::milliseconds(*rc::gen::inRange(0, 60000));
  }
  const int training = *rc::gen::inRange(0, 5);
  c.training = trainingFor(training);
  const std::vector<std::int64_t> slots = *rc::gen::container<std::vector<std::int64_t>>(
      8, rc::gen::weightedElement<std::int64_t>({{4, 4}, {2, 8}, {1, 1}, {1, 2}, {1, 3}, {1, 6}}));
  const std::vector<Step> steps = *rc::gen::container<std::vector<Step>>(genStep());

  AgentStateMachine m(c);
  const WorldSizeRules& rules = m.rules();
  Time now{0};
  std::uint64_t lastGeneration = 0;
  const auto applyAndCheck = [&](const Event& event) {
    const bool wasFinished = m.finished();
    const Phase phaseBefore = m.phase();
    const std::int64_t restartsBefore = m.restartCount();
    const std::uint64_t generationBefore = m.generation();
    const std::vector<Action> actions = m.handle(now, event);

    if (wasFinished) {
      RC_ASSERT(actions.empty());
      return;
    }
    RC_ASSERT(m.restartCount() <= c.maxRestarts);
    RC_ASSERT(m.restartCount() >= restartsBefore);
    const bool quietTick =
        (std::holds_alternative<Tick>(event) || std::holds_alternative<KeepAlive>(event)) &&
        !c.keepAliveTimeout && !c.exitBarrierTimeout;
    if (quietTick) {
      RC_ASSERT(m.restartCount() == restartsBefore);
    }
    RC_ASSERT((m.phase() == Phase::Running) == m.current().has_value());

    // The generation running at each point of the action list.
    std::optional<std::uint64_t> running;
    if (phaseBefore == Phase::Running) {
      running = generationBefore;
    }
    bool stopped = false;
    std::int64_t stops = 0;
    for (const Action& action : actions) {
      if (const auto* s = std::get_if<StartWorkers>(&action)) {
        RC_ASSERT(rules.isValid(s->worldSize));
        RC_ASSERT(rules.batchFor(s->worldSize) == std::optional(s->batch));
        if (rules.elastic()) {
          RC_ASSERT(s->batch.trainBatchSize == *rules.finalBatch());
        }
        RC_ASSERT(s->dataParallelSize * rules.modelParallelSize() == s->worldSize);
        RC_ASSERT(s->batch.microBatchPerGpu * s->batch.gradientAccumulation * s->dataParallelSize ==
                  s->batch.trainBatchSize);
        RC_ASSERT(!running.has_value());  // the previous generation was stopped first
        running = s->generation;
        RC_ASSERT(s->generation == lastGeneration + 1);
        lastGeneration = s->generation;
        RC_ASSERT(s->restartCount >= restartsBefore);
        RC_ASSERT(s->restartCount <= m.restartCount());
        RC_ASSERT(static_cast<std::int64_t>(s->nodes.size() + s->spareNodes.size()) <= c.maxNodes);
        RC_ASSERT(static_cast<std::int64_t>(s->nodes.size() + s->spareNodes.size()) >= c.minNodes);
        std::int64_t rank = 0;
        std::set<std::string> ids;
        for (std::size_t i = 0; i < s->nodes.size(); ++i) {
          const NodeAssignment& n = s->nodes[i];
          RC_ASSERT(n.nodeRank == static_cast<std::int64_t>(i));
          RC_ASSERT(n.firstRank == rank);
          RC_ASSERT(n.localWorldSize >= 1);
          RC_ASSERT(n.localWorldSize <= n.slots);
          if (c.selection == NodeSelection::WholeNodes) {
            RC_ASSERT(n.localWorldSize == n.slots);
          }
          RC_ASSERT(ids.insert(n.nodeId).second);
          rank += n.localWorldSize;
        }
        for (const std::string& spare : s->spareNodes.ids()) {
          RC_ASSERT(ids.insert(spare).second);
        }
        RC_ASSERT(rank == s->worldSize);
      } else if (const auto* stop = std::get_if<StopWorkers>(&action)) {
        RC_ASSERT(running.has_value());  // only running workers are stopped
        RC_ASSERT(stop->generation == *running);
        running.reset();
        stopped = true;
        ++stops;
      } else if (const auto* fail = std::get_if<Fail>(&action)) {
        RC_ASSERT(m.phase() == Phase::Failed);
        RC_ASSERT(fail->exitCode >= 1 && fail->exitCode <= 255);
        if (stopped) {
          // A failure of running workers fails the job only when the restarts are used up.
          RC_ASSERT(m.restartCount() == c.maxRestarts);
          RC_ASSERT(fail->message.find("max_restarts (" + std::to_string(c.maxRestarts) + ")") !=
                    std::string::npos);
        }
      } else if (std::holds_alternative<Finish>(action)) {
        RC_ASSERT(m.phase() == Phase::Succeeded);
      }
    }
    if (m.current()) {
      RC_ASSERT(m.current()->restartCount == m.restartCount());
    }
    // Each counted restart stopped running workers (a stop may also be a scale up).
    RC_ASSERT(m.restartCount() - restartsBefore <= stops);
  };
  for (const Step& step : steps) {
    now += std::chrono::milliseconds(step.dtMs);
    const std::string id = fmt::format("n{}", step.node);
    Event event = Tick{};
    const std::optional<StartWorkers> running = m.current();
    switch (step.kind) {
      case 0:
        event = NodeJoined{id, slots[static_cast<std::size_t>(step.node)]};
        break;
      case 1:
        event = NodeLeft{id, "test"};
        break;
      case 2:
        event = KeepAliveLost{{id}};
        break;
      case 3:
      case 4:
        if (running) {
          const auto& nodes = running->nodes;
          const auto& node = nodes[static_cast<std::size_t>(step.worker) % nodes.size()];
          event =
              WorkerExited{running->generation, node.nodeId,
                           (step.worker / 7) % node.localWorldSize, step.kind == 3 ? 0 : step.code};
        }
        break;
      case 6:
        event = WorkerExited{m.generation() == 0 ? 0 : m.generation() - 1, id, 0, step.code};
        break;
      case 7:
        event = KeepAlive{id};
        break;
      default:
        break;
    }
    if (std::holds_alternative<NodeJoined>(event)) {
      // Let deadlines that expired by now act first, so the join alone is judged below.
      applyAndCheck(Tick{});
      const std::int64_t restartsBefore = m.restartCount();
      applyAndCheck(event);
      RC_ASSERT(m.restartCount() == restartsBefore);  // joins never count
    } else {
      applyAndCheck(event);
    }
  }
  RC_CLASSIFY(m.generation() >= 2, "several generations");
  RC_CLASSIFY(m.restartCount() > 0, "counted restarts");
  RC_CLASSIFY(m.phase() == Phase::Failed, "failed");
  RC_CLASSIFY(m.phase() == Phase::Succeeded, "succeeded");
}

}  // namespace
}  // namespace stretch::agent
