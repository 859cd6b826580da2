// stretch-bench-planner: the planner's speed targets (issue 7) on the 16,384-GPU job
// (fixtures/plans/llama3_16k.json by default):
//  - a full plan with analytic estimates (the default of `stretch plan`): target <= 1 s;
//  - a full plan with 1,000 Monte Carlo seeds per scale-table row and per checkpoint interval:
//    target <= 10 s on 2 threads;
//  - the bundled example (what `stretch plan` with no argument does): target <= 1 s;
// and, to show where the time goes, one simulated replica of the job at full size against the
// equivalent reduced scenario the planner simulates (planner/replicas.hpp).
// Wall times are the minimum over --repeat runs (the machine is shared); the median is printed too.
// --check makes the exit status 1 when a target is missed.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "planner/plan.hpp"
#include "planner/plan_input.hpp"
#include "planner/replicas.hpp"
#include "runtime/common/error.hpp"
#include "sim/job_sim.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Timing {
  double min = 0.0;
  double median = 0.0;
};

template <typename F>
Timing time(int repeat, F&& f) {
  std::vector<double> walls;
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = Clock::now();
    f();
    walls.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(walls.begin(), walls.end());
  return {walls.front(), walls[walls.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  using namespace stretch;
  CLI::App app{"Time `stretch plan` on a 16,384-GPU job against its targets",
               "stretch-bench-planner"};
  std::string job = std::string(STRETCH_SOURCE_DIR) + "/fixtures/plans/llama3_16k.json";
  int threads = 2;
  int repeat = 5;
  std::int64_t seeds = 1000;
  bool check = false;
  app.add_option("--job", job, "job file")->capture_default_str();
  app.add_option("--threads", threads, "worker threads")->capture_default_str();
  app.add_option("--repeat", repeat, "runs per figure (minimum and median reported)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--seeds", seeds, "Monte Carlo seeds of the second figure")->capture_default_str();
  app.add_flag("--check", check, "exit 1 when a target is missed");
  CLI11_PARSE(app, argc, argv);

  try {
    const planner::PlanInput input = planner::loadPlanInput(job);
    planner::PlanOptions options;
    options.threads = threads;
    std::printf("%s", fmt::format("stretch-bench-planner: {} ({} GPUs, {} nodes x {}), {} threads, "
                                  "minimum of {} runs\n",
                                  job, input.scenario.cluster.gpus(), input.scenario.cluster.nodes,
                                  input.scenario.cluster.gpusPerNode, threads, repeat)
                          .c_str());
    bool ok = true;
    auto report = [&](const std::string& name, const Timing& t, double target,
                      const std::string& detail) {
      const bool met = t.min <= target;
      ok = ok && met;
      std::printf("%s", fmt::format("  {:<34} {:8.3f} s (median {:.3f} s)  target <= {:g} s: {}  "
                                    "[{:.1f}x under]  {}\n",
                                    name, t.min, t.median, target, met ? "met" : "MISSED",
                                    target / t.min, detail)
                            .c_str());
    };

    planner::Plan analytic;
    const Timing a = time(repeat, [&] { analytic = planner::makePlan(input, options); });
    report("analytic plan", a, 1.0,
           fmt::format("{} scale rows, checkpoint sweep {} replicas x {} intervals",
                       analytic.scale.rows.size(), analytic.checkpoint.seeds,
                       analytic.checkpoint.curve.size() + 3));

    planner::PlanInput mc = input;
    mc.settings.seeds = seeds;
    mc.settings.sweepSeeds = 0;
    planner::Plan monteCarlo;
    const Timing m =
        time(std::max(1, repeat / 2), [&] { monteCarlo = planner::makePlan(mc, options); });
    std::int64_t rows = 0;
    for (const auto& r : monteCarlo.scale.rows) {
      rows += r.simulated ? 1 : 0;
    }
    const std::int64_t runs =
        seeds * (rows + static_cast<std::int64_t>(monteCarlo.checkpoint.curve.size()) + 3);
    report(
        fmt::format("plan with {} seeds", seeds), m, 10.0,
        fmt::format("{} simulated runs ({} rows + {} intervals + 3 hold-out), {:.0f} runs/s", runs,
                    rows, monteCarlo.checkpoint.curve.size(), static_cast<double>(runs) / m.min));

    const planner::PlanInput example = planner::bundledExample();
    const Timing e = time(repeat, [&] { planner::makePlan(example, options); });
    report("bundled example (stretch plan)", e, 1.0, "the no-argument plan");

    // One replica of the full-size job: what the planner avoids by simulating the equivalent
    // reduced scenario (exact for stationary failures).
    const auto& rec = analytic.scale.rows.at(analytic.recommendation.row);
    sim::Scenario full = input.scenario;
    full.cluster.nodes = rec.nodes;
    full.job.checkpoint.intervalMinutes = rec.intervalMinutes;
    full.job.checkpoint.everySteps.reset();
    full.job.horizonHours = 50.0 * rec.jobMtbfHours;
    const planner::ReducedScenario reduced = planner::reduceForMonteCarlo(full, rec.gpus);
    sim::RunResult fr;
    sim::RunResult rr;
    const Timing tf = time(3, [&] { fr = sim::simulate(full); });
    const Timing tr = time(3, [&] { rr = sim::simulate(reduced.scenario); });
    std::printf(
        "%s", fmt::format("  one replica at {} GPUs, {:.0f} h ({} failures): {:.4f} s with "
                          "{} nodes, {:.5f} s reduced {}:1 to {} nodes ({:.0f}x); ETTR "
                          "{:.4f} vs {:.4f}\n",
                          rec.gpus, *full.job.horizonHours, fr.failures, tf.min, full.cluster.nodes,
                          tr.min, reduced.factor, reduced.scenario.cluster.nodes, tf.min / tr.min,
                          fr.ettr(), rr.ettr())
                  .c_str());
    return check && !ok ? 1 : 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "stretch-bench-planner: %s\n", e.what());
    return 2;
  }
}
