// The simulator decides as the launcher does (rapidcheck; the seed is printed on failure and can be
// replayed with RC_PARAMS="seed=N"). For random elastic jobs (1-3 nodes of 1-4 workers, ZeRO 0/1/2
// with partition copies) and random fault scripts (single kills, kills at the same step, nodes
// lost whole, nodes joining), the same script runs
//  - through sim::simulate, whose worker group reports what its workers hold, and
//  - through launcher::runAgentLoop, the launcher's own loop, with a worker group that models the
//    launcher's workers (each poll is one training step; checkpoints every few steps);
// and both event logs must hold the same sequence of start_workers, stop_workers, live_plan,
// finish and fail records (world, batch, nodes, recovery, restarts, reason; times and resume steps
// aside). Either side deciding a recovery by a rule of its own changes a record.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <rapidcheck.h>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/agent/event_log.hpp"
#include "runtime/agent/worker_group.hpp"
#include "runtime/launcher/agent_loop.hpp"
#include "sim/job_sim.hpp"
#include "sim/scenario.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::sim {
namespace {

using agent::WorkerPlace;

struct Fault {
  std::int64_t atStep = 0;
  ScriptKind kind = ScriptKind::KillWorker;
  std::int64_t rank = 0;  // kill_worker
  int node = 0;           // leave: an initial node; join: the k-th new node
};

struct Job {
  int nodes = 1;
  int gpusPerNode = 1;
  int zeroStage = 0;
  int config = 0;  // one of kConfigs
  std::vector<Fault> faults;
};

constexpr std::int64_t kTotalSteps = 24;
constexpr std::int64_t kEverySteps = 5;

// Elastic batches with few valid world sizes (interim worlds and rescales) and with many.
constexpr const char* kConfigs[] = {
    R"("max_train_batch_size": 64, "micro_batch_sizes": [4, 8, 16])",
    R"("max_train_batch_size": 24, "micro_batch_sizes": [2, 3])",
    R"("max_train_batch_size": 60, "micro_batch_sizes": [1, 2, 3, 5])",
};

std::string scenarioText(const Job& job) {
  nlohmann::json script = nlohmann::json::array();
  for (const Fault& f : job.faults) {
    nlohmann::json e{{"at_step", f.atStep}};
    switch (f.kind) {
      case ScriptKind::KillWorker:
        e["kind"] = "kill_worker";
        e["rank"] = f.rank;
        break;
      case ScriptKind::Leave:
        e["kind"] = "leave";
        e["node"] = fmt::format("n{}", f.node);
        break;
      case ScriptKind::Join:
        e["kind"] = "join";
        e["node"] = fmt::format("j{}", f.node);
        break;
    }
    script.push_back(e);
  }
  nlohmann::json names = nlohmann::json::array();
  for (int i = 0; i < job.nodes; ++i) {
    names.push_back(fmt::format("n{}", i));
  }
  const int joins =
      static_cast<int>(std::count_if(job.faults.begin(), job.faults.end(),
                                     [](const Fault& f) { return f.kind == ScriptKind::Join; }));
  const int maxGpus = (job.nodes + joins) * job.gpusPerNode;
  return fmt::format(
      R"({{"name": "agreement",
  "cluster": {{"nodes": {}, "gpus_per_node": {}, "intra_node_GBps": 5, "inter_node_GBps": 1,
               "intra_latency_us": 10, "inter_latency_us": 50}},
  "node_names": {},
  "job": {{"config": {{"elasticity": {{"enabled": true, {}, "min_gpus": 1, "max_gpus": {},
                                      "version": 0.1}},
                       "zero_optimization": {{"stage": {}}}}},
           "seconds_per_sample_per_gpu": 0.01, "gradient_bytes": 40000,
           "total_steps": {},
           "checkpoint": {{"every_steps": {}, "save_seconds": 0.05, "load_seconds": 0.05}},
           "restart_overhead_seconds": 100000,
           "recovery": {{"mode": "live", "reconfigure_seconds": 0.1}}}},
  "agent": {{"min_nodes": 1, "max_restarts": 20, "last_call_seconds": 0,
             "monitor_interval_seconds": 0.001}},
  "script": {},
  "seed": 0}})",
      job.nodes, job.gpusPerNode, names.dump(), kConfigs[job.config], maxGpus, job.zeroStage,
      kTotalSteps, kEverySteps, script.dump());
}

// The launcher's workers as a model: a poll is one training step of the running generation; the
// script's faults fire one a poll, after the step they are due at (as the simulator fires them);
// a worker holds the job's state once its generation has completed a step, and a worker struck
// since has lost it. Joiners take restart_overhead_seconds (here longer than any job) to start:
// meanwhile the workers that run train on (the group that lost nobody, or the interim world) and
// their steps make nobody a holder; survivors with no interim world wait for the joiners, so
// their next generation trains at once.
class LauncherModel final : public agent::WorkerGroup {
 public:
  LauncherModel(const Scenario& scenario, bool partitionCopies)
      : script_(scenario.script), partitionCopies_(partitionCopies) {
    for (const std::string& id : scenario.nodeNames) {
      inJob_.insert(id);
    }
  }

  void start(const agent::StartWorkers& action) override {
    begin(action);
    progress_ = checkpoint_;
  }
  void continueLive(const agent::StartWorkers& action, const agent::LivePlan& plan) override {
    begin(action);  // the survivors' last completed step: progress_ stays
    joinersStarting_ = !plan.join.empty() && (plan.publish || plan.groupTrainsOn);
  }
  void stop() override {
    generation_.reset();
    alive_.clear();
  }

  std::vector<agent::WorkerExited> poll() override {
    std::vector<agent::WorkerExited> out;
    if (!generation_ || finished_) {
      return out;
    }
    const agent::StartWorkers& g = *generation_;
    if (progress_ >= kTotalSteps) {
      for (const WorkerPlace& p : placesOf(g)) {
        out.push_back({g.generation, p.nodeId, p.localRank, 0});
      }
      finished_ = true;
      return out;
    }
    if (next_ < script_.size() && script_[next_].atStep <= progress_) {
      const ScriptEvent& e = script_[next_++];
      if (e.kind == ScriptKind::KillWorker) {
        const auto places = placesOf(g);
        if (e.rank < static_cast<std::int64_t>(places.size())) {
          const WorkerPlace& p = places[static_cast<std::size_t>(e.rank)];
          strike(p);
          out.push_back({g.generation, p.nodeId, p.localRank, e.exitCode});
        }
      } else if (e.kind == ScriptKind::Leave) {
        if (inJob_.erase(e.node) > 0) {
          for (const WorkerPlace& p : placesOf(g)) {
            if (p.nodeId == e.node) {
              strike(p);
            }
          }
          nodeEvents_.push_back(agent::NodeLeft{e.node, "left"});
        }
      } else if (inJob_.insert(e.node).second) {
        nodeEvents_.push_back(agent::NodeJoined{e.node, g.nodes.front().slots});
      }
      return out;
    }
    ++progress_;
    if (!stepped_ && !joinersStarting_) {
      holders_ = placesOf(g);
      struck_.clear();
      stepped_ = true;
    }
    if (progress_ % kEverySteps == 0) {
      checkpoint_ = progress_;
    }
    return out;
  }

  std::optional<agent::LiveSituation> liveSituation(const agent::StartWorkers&) const override {
    agent::LiveSituation s;
    s.group = holders_;
    s.partitionCopies = partitionCopies_;
    s.copyDistance = 1;
    if (!holders_.empty()) {
      s.copyDistance = std::count_if(holders_.begin(), holders_.end(), [&](const WorkerPlace& p) {
        return p.nodeId == holders_.front().nodeId;
      });
    }
    if (!generation_) {
      return s;
    }
    for (const WorkerPlace& p : placesOf(*generation_)) {
      if (!alive_.contains(p)) {
        continue;
      }
      const bool holds =
          std::find(holders_.begin(), holders_.end(), p) != holders_.end() && !struck_.contains(p);
      s.running.push_back({p, 0, holds, !holds});
    }
    return s;
  }

  std::vector<agent::Event> takeNodeEvents() {
    std::vector<agent::Event> out;
    out.swap(nodeEvents_);
    return out;
  }

 private:
  void begin(const agent::StartWorkers& action) {
    generation_ = action;
    const auto places = placesOf(action);
    alive_ = std::set<WorkerPlace>(places.begin(), places.end());
    stepped_ = false;
    joinersStarting_ = false;
  }
  void strike(const WorkerPlace& p) {
    alive_.erase(p);
    struck_.insert(p);
  }

  std::vector<ScriptEvent> script_;
  bool partitionCopies_ = false;
  std::set<std::string> inJob_;
  std::optional<agent::StartWorkers> generation_;
  std::set<WorkerPlace> alive_;
  std::vector<WorkerPlace> holders_;  // the last generation that completed a step, rank order
  std::set<WorkerPlace> struck_;      // since holders_ was set
  bool stepped_ = false;
  bool joinersStarting_ = false;  // the generation's joiners are starting (see above)
  bool finished_ = false;
  std::int64_t progress_ = 0;
  std::int64_t checkpoint_ = 0;
  std::size_t next_ = 0;
  std::vector<agent::Event> nodeEvents_;
};

// The records both sides must agree on, without their times and resume steps.
std::vector<std::string> decisions(const std::string& log) {
  static const std::set<std::string> kCompared = {"start_workers", "stop_workers", "live_plan",
                                                  "finish", "fail"};
  std::vector<std::string> out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json record = nlohmann::json::parse(line);
    if (!kCompared.contains(record.at("event").get<std::string>())) {
      continue;
    }
    record.erase("time_ns");
    record.erase("resume_step");
    out.push_back(record.dump());
  }
  return out;
}

rc::Gen<Fault> faultGen(int nodes, int workers) {
  return rc::gen::oneOf(
      rc::gen::build<Fault>(rc::gen::set(&Fault::kind, rc::gen::just(ScriptKind::KillWorker)),
                            rc::gen::set(&Fault::rank, rc::gen::inRange<std::int64_t>(0, workers))),
      rc::gen::build<Fault>(rc::gen::set(&Fault::kind, rc::gen::just(ScriptKind::Leave)),
                            rc::gen::set(&Fault::node, rc::gen::inRange(0, nodes))),
      rc::gen::build<Fault>(rc::gen::set(&Fault::kind, rc::gen::just(ScriptKind::Join))));
}

RC_GTEST_PROP(DriverAgreement, SimulatorAndLauncherTakeTheSameDecisions, ()) {
  Job job;
  job.nodes = *rc::gen::inRange(1, 4);
  job.gpusPerNode = *rc::gen::inRange(1, 5);
  job.zeroStage = *rc::gen::inRange(0, 3);
  job.config = *rc::gen::inRange(0, 3);
  const int faults = *rc::gen::inRange(1, 4);
  std::int64_t step = 2;
  int joins = 0;
  for (int i = 0; i < faults; ++i) {
    Fault f = *faultGen(job.nodes, job.nodes * job.gpusPerNode);
    // Faults at the same step strike one after another (the second hits the generation the
    // first started); otherwise a few steps apart.
    step += *rc::gen::element<std::int64_t>(0, 2, 3, 4);
    f.atStep = std::min(step, kTotalSteps - 2);
    if (f.kind == ScriptKind::Join) {
      f.node = joins++;
    }
    job.faults.push_back(f);
  }
  // At least one node stays: a job with no node waits for ever, here as under the launcher.
  int leaves = 0;
  std::set<int> left;
  for (Fault& f : job.faults) {
    if (f.kind == ScriptKind::Leave && (!left.insert(f.node).second || ++leaves >= job.nodes)) {
      f.kind = ScriptKind::KillWorker;
      f.rank = 0;
    }
  }
  const std::string text = scenarioText(job);
  RC_TAG(job.nodes, job.gpusPerNode, job.zeroStage, job.config);
  const Scenario scenario = parseScenarioText(text, test::sourceDir());

  std::ostringstream simLog;
  agent::EventLog simEvents(simLog);
  RunOptions options;
  options.eventLog = &simEvents;
  const RunResult simulated = simulate(scenario, options);

  test::TempDir dir;
  LauncherModel workers(scenario, job.zeroStage == 1 || job.zeroStage == 2);
  launcher::AgentLoopOptions loop;
  loop.config = agentConfigFor(scenario);
  loop.liveRecovery = true;
  loop.eventLog = dir.path() / "events.jsonl";
  loop.monitorInterval = std::chrono::milliseconds(1);
  for (const std::string& id : scenario.nodeNames) {
    loop.initialEvents.push_back(agent::NodeJoined{id, scenario.cluster.gpusPerNode});
  }
  loop.nodeEvents = [&](agent::Time) { return workers.takeNodeEvents(); };
  // Bounded: a loop that does not end in 60 s is stopped (and the records then differ).
  std::atomic<int> stop{0};
  loop.stopSignal = &stop;
  std::atomic<bool> ended{false};
  std::thread watchdog([&] {
    for (int i = 0; i < 6000 && !ended; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!ended) {
      stop = 15;
    }
  });
  const launcher::AgentResult real = launcher::runAgentLoop(loop, workers);
  ended = true;
  watchdog.join();

  const auto expected = decisions(simLog.str());
  const auto actual = decisions(test::readFileIfAny(*loop.eventLog));
  RC_LOG() << "scenario: " << text << "\nsimulator:\n";
  for (const auto& line : expected) {
    RC_LOG() << "  " << line << "\n";
  }
  RC_LOG() << "launcher (exit " << real.exitCode << "):\n";
  for (const auto& line : actual) {
    RC_LOG() << "  " << line << "\n";
  }
  RC_ASSERT(stop.load() == 0);
  RC_ASSERT(expected == actual);
  RC_ASSERT((simulated.outcome == Outcome::Finished) == (real.exitCode == 0));
}

}  // namespace
}  // namespace stretch::sim
