// The Simulate action without Qt widgets (gui/simulation.hpp): the replicas equal
// sim::runMonteCarlo's, cancellation stops them, the timeline and the world-size sweep.

#include "gui/simulation.hpp"

#include <QTest>

#include "planner/plan.hpp"
#include "planner/plan_input.hpp"
#include "sim/monte_carlo.hpp"
#include "sim/scenario.hpp"
#include "tests/gui/gui_test_support.hpp"

namespace stretch::gui {

namespace {

sim::Scenario example() {
  return sim::loadScenario(test::fixture("gui/example_job.json").toStdString());
}

}  // namespace

class SimulationTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void replicasEqualRunMonteCarlo() {
    const sim::Scenario s = example();
    const std::atomic<bool> cancel{false};
    std::vector<std::pair<std::int64_t, std::int64_t>> calls;
    const sim::MonteCarloResult mine = runReplicas(
        s, 6, 2, cancel, nullptr,
        [&](std::int64_t done, std::int64_t total) { calls.emplace_back(done, total); });
    sim::MonteCarloOptions o;
    o.seeds = 6;
    o.threads = 1;
    const sim::MonteCarloResult reference = sim::runMonteCarlo(s, o);
    QCOMPARE(mine.runs.size(), reference.runs.size());
    for (std::size_t i = 0; i < mine.runs.size(); ++i) {
      QCOMPARE(mine.runs[i].simulatedNs, reference.runs[i].simulatedNs);
      QCOMPARE(mine.runs[i].usefulNs, reference.runs[i].usefulNs);
      QCOMPARE(mine.runs[i].failures, reference.runs[i].failures);
      QCOMPARE(mine.runs[i].worldSizeNs, reference.runs[i].worldSizeNs);
    }
    QCOMPARE(calls.size(), std::size_t{6});
    QCOMPARE(calls.back(), std::make_pair(std::int64_t{6}, std::int64_t{6}));
    QVERIFY_THROWS_EXCEPTION(ConfigError, runReplicas(s, 0, 1, cancel, nullptr, {}));
  }

  void cancelStopsTheReplicas() {
    const sim::Scenario s = example();
    std::atomic<bool> cancel{true};
    QVERIFY_THROWS_EXCEPTION(SimulationCancelled, runReplicas(s, 4, 1, cancel, nullptr, {}));
    // Set while running (after the second replica): no further replica starts.
    cancel = false;
    std::int64_t seen = 0;
    QVERIFY_THROWS_EXCEPTION(SimulationCancelled, runReplicas(s, 1000, 1, cancel, nullptr,
                                                              [&](std::int64_t done, std::int64_t) {
                                                                seen = done;
                                                                if (done == 2) {
                                                                  cancel = true;
                                                                }
                                                              }));
    QCOMPARE(seen, std::int64_t{2});
  }

  void cancelInsideARunThroughTheTimeline() {
    const sim::Scenario s = example();
    std::atomic<bool> cancel{false};
    // A sink that cancels at its 10th record: the run stops right there.
    struct Cancelling final : sim::TimelineSink {
      explicit Cancelling(std::atomic<bool>& c) : cancel(c), inner(c, 1000) {}
      void record(const sim::TimelineRecord& r) override {
        if (++count == 10) {
          cancel = true;
        }
        inner.record(r);
      }
      std::atomic<bool>& cancel;
      TimelineCollector inner;
      int count = 0;
    } sink(cancel);
    QVERIFY_THROWS_EXCEPTION(SimulationCancelled, runReplicas(s, 1, 1, cancel, &sink, {}));
    QCOMPARE(sink.count, 10);
  }

  void timelineMatchesTheRun() {
    const sim::Scenario s = example();
    const std::atomic<bool> cancel{false};
    TimelineCollector collector(cancel, 100000);
    const sim::MonteCarloResult r = runReplicas(s, 1, 1, cancel, &collector, {});
    const sim::RunResult& run = r.runs.front();
    const TimelineData data = collector.data(sim::nanosToHours(run.simulatedNs));
    QCOMPARE(data.dropped, std::uint64_t{0});
    QVERIFY(!data.worldSize.empty());
    QCOMPARE(static_cast<std::int64_t>(data.failures.size()), run.failures + run.preemptions);
    QVERIFY(run.failures > 0);  // the example's seed fails nodes
    // Every completed save, plus any a failure aborted.
    QVERIFY(static_cast<std::int64_t>(data.checkpoints.size()) >= run.checkpoints);
    QCOMPARE(static_cast<std::uint64_t>(data.restarts.size()) + 1, run.generations);
    for (std::size_t i = 1; i < data.worldSize.size(); ++i) {
      QVERIFY(data.worldSize[i - 1].hours <= data.worldSize[i].hours);
    }
    QCOMPARE(data.endHours, sim::nanosToHours(run.simulatedNs));

    TimelineCollector capped(cancel, 5);
    (void)runReplicas(s, 1, 1, cancel, &capped, {});
    const TimelineData few = capped.data(1.0);
    QCOMPARE(few.events.size(), std::size_t{5});
    QVERIFY(few.dropped > 0);
  }

  void runSimulationRunsThePlanToo() {
    SimulationRequest request;
    request.input = planner::loadPlanInput(test::fixture("gui/example_job.json").toStdString());
    request.seeds = 3;
    request.threads = 2;
    const std::atomic<bool> cancel{false};
    double last = 0.0;
    bool monotonic = true;
    std::vector<std::string> stages;
    const SimulationResult r = runSimulation(request, cancel, [&](double f, const std::string& s) {
      monotonic = monotonic && f >= last - 1e-12;
      last = f;
      if (stages.empty() || stages.back() != s) {
        stages.push_back(s);
      }
    });
    QCOMPARE(r.monteCarlo.runs.size(), std::size_t{3});
    QVERIFY(monotonic);
    QVERIFY(last > 0.99 && last <= 1.0 + 1e-12);
    QCOMPARE(stages.front(), std::string("simulate"));
    QVERIFY(stages.size() >= 2);
    QVERIFY2(r.plan, r.planError.c_str());
    // The same plan `stretch plan` makes of this job (the planner is deterministic).
    const planner::Plan reference = planner::makePlan(request.input);
    QCOMPARE(r.plan->recommendation.gpus, reference.recommendation.gpus);
    QCOMPARE(r.plan->recommendation.intervalSteps, reference.recommendation.intervalSteps);
    QCOMPARE(r.plan->scale.rows.size(), reference.scale.rows.size());
    QVERIFY(r.plan->checkpoint.youngMinutes > 0.0);
    QVERIFY(r.plan->checkpoint.dalyMinutes > 0.0);
    QVERIFY(!r.plan->checkpoint.curve.empty());
  }

  void cancelStopsThePlan() {
    SimulationRequest request;
    request.input = planner::loadPlanInput(test::fixture("gui/example_job.json").toStdString());
    request.seeds = 2;
    std::atomic<bool> cancel{false};
    // Cancel as soon as the planner reports: the plan stops, nothing is returned.
    QVERIFY_THROWS_EXCEPTION(SimulationCancelled,
                             runSimulation(request, cancel, [&](double, const std::string& s) {
                               if (s != "simulate") {
                                 cancel = true;
                               }
                             }));
  }

  void plannerErrorsAreKeptNotThrown() {
    SimulationRequest request;
    request.input = planner::loadPlanInput(test::fixture("gui/example_job.json").toStdString());
    // No valid world size in the expected range (8 GPUs, below min_gpus 16): the planner
    // refuses, the simulation stands.
    request.input.scenario.job.config.elasticity.minGpus = 16;
    request.input.settings.expectedSizes = {{8, 1.0}};
    request.seeds = 2;
    const std::atomic<bool> cancel{false};
    SimulationResult r;
    try {
      r = runSimulation(request, cancel, {});
    } catch (const std::exception& e) {
      QFAIL(e.what());
    }
    QCOMPARE(r.monteCarlo.runs.size(), std::size_t{2});
    QVERIFY(!r.plan);
    QVERIFY2(r.planError.find("expected") != std::string::npos, r.planError.c_str());
  }
};

}  // namespace stretch::gui

QTEST_GUILESS_MAIN(stretch::gui::SimulationTest)
#include "simulation_test.moc"
