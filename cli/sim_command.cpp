// `stretch sim SCENARIO`: the discrete-event simulator (sim/) on a scenario file: the real elastic
// agent and elasticity solver on simulated time, with failures, spot preemptions, scale events,
// checkpoints and restarts. One run, or a Monte Carlo over --seeds replicas in parallel.
//
// Output: a summary on stdout (or one JSON object with --json); optional files: the agent's
// events as JSON lines (--events, the format of `stretch launch --event_log`), a Chrome/Perfetto
// trace (--trace) and per-record CSV (--csv), all of replica 0. Exit status: 0 when the
// simulation ran (whatever became of the simulated job: see "outcome"), 2 on bad input.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/mpi_group.hpp"
#include "cli/output.hpp"
#include "cli/progress_bar.hpp"
#include "runtime/agent/event_log.hpp"
#include "sim/allocator.hpp"
#include "sim/monte_carlo.hpp"
#include "sim/scenario.hpp"
#include "sim/step_model.hpp"
#include "sim/timeline.hpp"
#include "tools/sim_calibrate.hpp"

namespace stretch::cli {

namespace {

struct SimOptions {
  std::string scenario;
  std::int64_t seeds = 1;
  int threads = 0;
  bool json = false;
  std::string trace;
  std::string csv;
  std::string events;
  bool stepLevel = false;
  std::optional<std::uint64_t> seed;
  std::string presets;
  std::uint64_t traceLimit = 1'000'000;
  bool quiet = false;
  bool calibrate = false;
  std::string calibrationOut;
  std::string job;             // --job "PROGRAM ARGS..."
  std::string config;          // --config CFG
  int repeat = 3;              // --repeat N
  std::string checkpointArgs;  // --checkpoint-args "ARGS..."
  std::string controlPlane;    // --control-plane FILE
};

// "a b  c" -> {"a", "b", "c"}
std::vector<std::string> splitAtSpaces(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t start = text.find_first_not_of(" \t", pos);
    if (start == std::string::npos) {
      break;
    }
    const std::size_t end = std::min(text.find_first_of(" \t", start), text.size());
    out.push_back(text.substr(start, end - start));
    pos = end;
  }
  return out;
}

std::string hours(double h) {
  if (h >= 48.0) {
    return fmt::format("{:.1f} h ({:.2f} days)", h, h / 24.0);
  }
  return fmt::format("{:.3f} h", h);
}

void printHuman(const sim::Scenario& s, const sim::MonteCarloResult& r, const SimOptions& o) {
  const auto values = r.metricValues();
  const bool many = r.runs.size() > 1;
  auto show = [&](const std::string& name, const std::string& label, auto format) {
    const sim::MetricSummary m = sim::summarize(values.at(name));
    if (many) {
      std::cout << fmt::format("  {:<18} {} ± {}\n", label, format(m.mean), format(m.ci95));
    } else {
      std::cout << fmt::format("  {:<18} {}\n", label, format(m.mean));
    }
    return m;
  };
  auto count = [](double x) { return fmt::format("{:.1f}", x); };
  auto integer = [](double x) { return fmt::format("{:.0f}", x); };
  auto percent = [](double x) { return fmt::format("{:.2f} %", 100.0 * x); };
  auto h = [](double x) { return hours(x); };
  std::cout << fmt::format("stretch sim: {} — {} GPUs ({} nodes x {}, cluster {}), {} mode, {}\n",
                           s.name, s.cluster.gpus(), s.cluster.nodes, s.cluster.gpusPerNode,
                           s.cluster.name, o.stepLevel ? "step-level" : "aggregate",
                           many ? fmt::format("{} seeds (mean ± 95 % CI, Student's t with {} "
                                              "degrees of freedom)",
                                              r.runs.size(), r.runs.size() - 1)
                                : fmt::format("seed {}", s.seed));
  std::string outcomes;
  for (const auto& [name, n] : r.outcomes()) {
    outcomes += fmt::format("{}{} {}", outcomes.empty() ? "" : ", ", name, n);
  }
  std::cout << fmt::format("  {:<18} {}\n", "outcome",
                           many ? outcomes : outcomes.substr(0, outcomes.find(' ')));
  if (!many && !r.runs.front().message.empty()) {
    std::cout << fmt::format("  {:<18} {}\n", "message", r.runs.front().message);
  }
  const sim::MetricSummary t = show("simulated_hours", "simulated time", h);
  const sim::MetricSummary e = show("ettr", "ETTR", percent);
  if (many) {
    // The tails a mean hides: a long run is a high simulated time, a bad one a low ETTR.
    std::cout << fmt::format("  {:<18} p50 {}, p90 {}, p99 {}\n", "time percentiles", h(t.p50),
                             h(t.p90), h(t.p99));
    std::cout << fmt::format("  {:<18} p50 {}, p10 {}, p1 {}\n", "ETTR percentiles", percent(e.p50),
                             percent(e.p10), percent(e.p1));
  }
  show("useful_hours", "useful", h);
  show("lost_hours", "lost (rolled back)", h);
  show("checkpoint_hours", "checkpointing", h);
  show("startup_hours", "starting workers", h);
  show("idle_hours", "no workers", h);
  show("samples", "samples", integer);
  show("steps", "steps", integer);
  show("failures", "failures", many ? count : integer);
  if (s.spot) {
    show("preemptions", "preemptions", many ? count : integer);
  }
  show("restarts", "restarts", many ? count : integer);
  if (s.job.recovery.live) {
    show("live_recoveries", "live recoveries", many ? count : integer);
    show("checkpoint_fallbacks", "from checkpoint", many ? count : integer);
  }
  show("checkpoints", "checkpoints", many ? count : integer);
  show("events", "events", integer);
  std::cout << "  world size hours  ";
  bool first = true;
  for (const auto& [size, hs] : r.worldSizeHours()) {
    std::cout << fmt::format("{}{} GPUs: {:.2f} h", first ? "" : ", ", size,
                             sim::summarize(hs).mean);
    first = false;
  }
  std::cout << "\n";
  const double simWall = sim::summarize(values.at("wall_seconds")).mean;
  std::cout << fmt::format("  {:<18} {:.4f} s per run, {:.3f} s in all on {} thread(s){}\n",
                           "wall time", simWall, r.wallSeconds, r.threads,
                           r.processes > 1 ? fmt::format(" x {} MPI ranks", r.processes) : "");
  if (!many) {
    for (const std::string& n : r.runs.front().notes) {
      std::cout << fmt::format("  note: {}\n", n);
    }
  }
}

// The control-plane benchmark's costs as text: "on 2-core VM, 2026-11-29: kill_to_running_s 0.67
// s at 256 nodes (fit 0 s + 0.00262 s per node); stop_noticed_s not measured".
std::string controlPlaneText(const tools::ControlPlaneBench& b) {
  std::string text = fmt::format("on {}, {}", b.machine, b.date);
  for (const tools::ControlPlaneCost* cost : {&b.restart, &b.detection}) {
    if (cost->points.empty()) {
      text += fmt::format("; {} not measured", cost->field);
      continue;
    }
    std::string points;
    for (const sim::NodeCostPoint& p : cost->points) {
      points +=
          fmt::format("{}{:.3g} s at {} nodes", points.empty() ? "" : ", ", p.seconds, p.nodes);
    }
    text +=
        fmt::format("{} {} {} (fit {:.3g} s + {:.3g} s per node)", cost == &b.restart ? ":" : ";",
                    cost->field, points, cost->fit.fixedSeconds, cost->fit.perNodeSeconds);
  }
  return text;
}

// --calibrate --control-plane FILE SCENARIO: no runs; the benchmark's cost is added to the
// scenario's own restart and reconfiguration costs.
int addControlPlaneToScenario(const SimOptions& o) {
  return runCommand("sim", ErrorStyle{.kind = false}, [&] {
    const tools::ControlPlaneBench bench = tools::readControlPlane(o.controlPlane);
    std::vector<std::string> changed;
    const std::string scenario =
        tools::scenarioWithControlPlane(o.scenario, bench, o.presets, changed);
    if (!o.calibrationOut.empty()) {
      std::ofstream out(o.calibrationOut);
      out << scenario;
      if (!out.flush()) {
        throw IoError(fmt::format("{}: cannot write the scenario", o.calibrationOut));
      }
    }
    if (o.json || o.calibrationOut.empty()) {
      std::cout << scenario;
    } else {
      std::cout << fmt::format("stretch sim --calibrate: control plane {}\n",
                               controlPlaneText(bench));
      for (const std::string& key : changed) {
        std::cout << fmt::format("  {} now grows with the nodes\n", key);
      }
      for (const std::string& note : bench.notes) {
        std::cout << fmt::format("  note: {}\n", note);
      }
      std::cout << fmt::format("  scenario written   {}\n", o.calibrationOut);
    }
    return kExitOk;
  });
}

int runCalibrate(const SimOptions& o) {
  if (!o.scenario.empty()) {
    if (o.controlPlane.empty()) {
      std::cerr << "stretch sim: error: --calibrate runs a job and takes no SCENARIO, except with "
                   "--control-plane FILE (then it adds the benchmark's cost to that scenario's)\n";
      return kExitUsage;
    }
    return addControlPlaneToScenario(o);
  }
  return runCommand("sim", ErrorStyle{.kind = false}, [&] {
    tools::CalibrationOptions options;
    options.controlPlane = o.controlPlane;
    options.progress = !o.quiet;
    options.job = splitAtSpaces(o.job);
    options.checkpointArgs = splitAtSpaces(o.checkpointArgs);
    options.config = o.config;
    options.repeat = o.repeat;
    const nlohmann::json result = tools::runCalibration(options);
    const auto& c = result["calibration"];
    if (!o.calibrationOut.empty())
      std::ofstream(o.calibrationOut) << result.dump(2) << "\n";
    if (o.json) {
      std::cout << result.dump(2) << "\n";
    } else {
      std::cout << fmt::format(
          "stretch sim --calibrate: {} on this machine\n"
          "  compute            {:.3g} s per sample per worker ({:.3f} ms per step alone; at 2 "
          "workers {:.3f} ms per rank, the slower rank {:.3f} ms)\n"
          "  compute spread     {:.1f} % of it (the slower of 2 ranks: +{:.3f} ms)\n"
          "  Gloo all-reduce    {:.1f} us per collective + bytes at {:.3f} GB/s (2 ranks; the "
          "benchmark alone: {:.1f} us)\n"
          "  step overhead      {:.3f} ms (the optimizer after the reduction)\n",
          o.job.empty() ? std::string("the example job") : o.job,
          result["job"]["seconds_per_sample_per_gpu"].get<double>(),
          c["single_worker_compute_seconds_per_step"].get<double>() * 1e3,
          c["compute_seconds_per_step"].get<double>() * 1e3,
          c["slowest_rank_compute_seconds_per_step"].get<double>() * 1e3,
          c["compute_spread"].get<double>() * 100,
          c["compute_spread"].get<double>() *
              c["single_worker_compute_seconds_per_step"].get<double>() *
              sim::expectedMaxOfNormals(2) * 1e3,
          result["cluster"]["op_latency_us"].get<double>(),
          result["cluster"]["intra_node_GBps"].get<double>(),
          c["bench_op_latency_us"].get<double>(), c["step_overhead_seconds"].get<double>() * 1e3);
      if (c["costs_measured"].get<bool>()) {
        std::cout << fmt::format(
            "  restart            {:.3f} s from start_workers to training (median of {} starts)\n"
            "  checkpoint         save {:.3f} s (median of {}), load {:.3f} s\n",
            c["restart_overhead_seconds"].get<double>(), c["startup_seconds"].size(),
            result["job"]["checkpoint"]["save_seconds"].get<double>(), c["save_seconds"].size(),
            c["load_seconds"].get<double>());
      } else {
        std::cout << "  restart, checkpoint not measured (give --checkpoint-args)\n";
      }
      const auto& live = c["live_recovery"];
      std::cout << fmt::format("  live recovery      {}\n",
                               live["measured"].get<bool>()
                                   ? fmt::format("{:.3f} s to reconfigure ({})",
                                                 live["reconfigure_seconds"].get<double>(),
                                                 live["note"].get<std::string>())
                                   : live["note"].get<std::string>());
      for (const auto& run : c["runs"]) {
        std::cout << fmt::format(
            "  {} worker(s), accumulation {:<2} predicted {:.3f} ms, measured {:.3f} ms: error "
            "{:+.1f} % ({})\n",
            run["workers"].get<int>(), run["gradient_accumulation_steps"].get<int>(),
            run["predicted_step_seconds"].get<double>() * 1e3,
            run["measured_step_seconds"].get<double>() * 1e3,
            run["relative_error"].get<double>() * 100, run["role"].get<std::string>());
      }
      if (!o.controlPlane.empty()) {
        std::cout << fmt::format("  control plane      {}, added to {}\n",
                                 controlPlaneText(tools::readControlPlane(o.controlPlane)),
                                 c["control_plane"]["added_to"].dump());
        for (const auto& note : c["control_plane"]["notes"]) {
          std::cout << fmt::format("  note: {}\n", note.get<std::string>());
        }
      }
      if (!o.calibrationOut.empty()) {
        std::cout << fmt::format("  scenario written   {} (stretch sim {})\n", o.calibrationOut,
                                 o.calibrationOut);
      }
    }
    return kExitOk;
  });
}

int runSim(const SimOptions& o) {
  sim::tuneAllocatorForSimulation();
  if (o.calibrate)
    return runCalibrate(o);
  if (o.scenario.empty()) {
    std::cerr << "stretch sim: error: SCENARIO is required (a scenario file, e.g. "
                 "fixtures/scenarios/llama3_like.json), unless --calibrate\n";
    return kExitUsage;
  }
  // Under mpirun every rank runs its block of the replicas; rank 0 alone writes and prints.
  std::unique_ptr<sim::ReplicaGroup> group;
  bool root = true;
  ErrorStyle style{.json = o.json};
  return runCommand("sim", style, [&] {
    group = joinMpiWorld("sim");
    root = group == nullptr || group->rank() == 0;
    style.print = root;
    sim::ScenarioOptions so;
    so.presetDir = o.presets;
    sim::Scenario scenario = sim::loadScenario(o.scenario, so);
    if (o.seed) {
      scenario.seed = *o.seed;
    }
    if (root) {
      for (const std::string& w : scenario.warnings) {
        printWarning("sim", w);
      }
    }

    std::unique_ptr<agent::EventLog> events;
    if (root && !o.events.empty()) {
      std::error_code ec;
      std::filesystem::remove(o.events, ec);  // a fresh log, not appended to an old one
      events = std::make_unique<agent::EventLog>(std::filesystem::path(o.events));
    }
    std::unique_ptr<sim::ChromeTraceWriter> trace;
    if (root && !o.trace.empty()) {
      trace = std::make_unique<sim::ChromeTraceWriter>(o.trace, o.traceLimit);
    }
    std::unique_ptr<sim::CsvTimelineWriter> csv;
    if (root && !o.csv.empty()) {
      csv = std::make_unique<sim::CsvTimelineWriter>(o.csv, o.traceLimit);
    }
    sim::TimelineTee tee(trace.get(), csv.get());

    ProgressBar bar(root && !o.quiet, std::chrono::milliseconds(500));
    sim::MonteCarloOptions mc;
    mc.group = group.get();
    mc.seeds = o.seeds;
    mc.threads = o.threads;
    mc.mode = o.stepLevel ? sim::SimMode::StepLevel : sim::SimMode::Aggregate;
    mc.eventLog = events.get();
    mc.timeline = (trace || csv) ? &tee : nullptr;
    mc.replicaDone = [&](std::int64_t done, std::int64_t total) {
      bar.update(static_cast<double>(done) / static_cast<double>(total),
                 fmt::format("{}/{} seeds", done, total));
    };
    mc.progress = [&](double fraction) { bar.update(fraction, "simulated"); };
    const sim::MonteCarloResult result = sim::runMonteCarlo(scenario, mc);
    bar.clear();
    if (events && events->lost() > 0) {
      throw IoError(fmt::format("--events {}: cannot write: {}; {} record(s) lost", o.events,
                                events->error(), events->lost()));
    }
    if (!root) {
      return kExitOk;
    }
    if (trace) {
      trace->finish();
      if (trace->dropped() > 0) {
        printWarning("sim", fmt::format("--trace: kept the first {} records, dropped {} "
                                        "(raise --trace-limit)",
                                        trace->written(), trace->dropped()));
      }
    }
    if (csv) {
      csv->finish();
      if (csv->dropped() > 0) {
        printWarning("sim",
                     fmt::format("--csv: dropped {} rows past --trace-limit", csv->dropped()));
      }
    }

    if (o.json) {
      nlohmann::json out = sim::summaryToJson(result);
      out["scenario"] = scenario.name;
      out["mode"] = o.stepLevel ? "step-level" : "aggregate";
      out["seed"] = scenario.seed;
      out["gpus"] = scenario.cluster.gpus();
      out["nodes"] = scenario.cluster.nodes;
      out["warnings"] = scenario.warnings;
      std::cout << out.dump(2) << "\n";
    } else {
      printHuman(scenario, result, o);
    }
    return kExitOk;
  });
}

}  // namespace

Command addSimCommand(CLI::App& app) {
  auto o = std::make_shared<SimOptions>();
  CLI::App* sub = app.add_subcommand(
      "sim",
      "Simulate a training job on a scenario file (cluster, DeepSpeed config, compute and "
      "checkpoint costs, failures, spot preemptions, scale events, fault script): the real "
      "elastic agent and elasticity solver run on simulated time. Prints ETTR, time lost to "
      "failures, restarts, checkpoints and time at each world size; with --seeds N, their mean "
      "and 95 % confidence interval over N independent replicas. Schema: docs/simulator.md; "
      "examples: fixtures/scenarios/.");
  sub->add_option("SCENARIO", o->scenario,
                  "scenario file (JSON); with --calibrate only with --control-plane");
  sub->add_flag("--calibrate", o->calibrate,
                "run a training job (the example, or --job) on 1 and 2 workers with the engine's "
                "step timings, fit the step model (compute, its spread across ranks, all-reduce "
                "inside training, overhead), check the prediction on a 2-worker run at twice "
                "the accumulation, and measure live recovery (a worker killed by the fault "
                "script: kill to the survivors' next step) (the example: about 20 s)");
  sub->add_option("--job", o->job,
                  "with --calibrate: the program to calibrate and its arguments, one string "
                  "split at spaces (e.g. \"build/bin/stretch-train-gpt --steps 12\"); it must "
                  "train with the Stretch engine and take --config");
  sub->add_option("--repeat", o->repeat,
                  "with --calibrate: runs per configuration (the step is the median of their "
                  "medians; the fit pools their steps)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--checkpoint-args", o->checkpointArgs,
                  "with --calibrate --job: the job's arguments that make it save checkpoints into "
                  "the directory {dir}, one string (e.g. \"--checkpoint-dir {dir} --save-every "
                  "10\"); every run saves, one more run adds --resume, and the scenario gets the "
                  "measured save, load and restart costs (the example: --save-every 50)");
  sub->add_option("--config", o->config,
                  "with --calibrate --job: the job's DeepSpeed config; the runs keep its micro "
                  "batch and accumulation and drop train_batch_size and elasticity");
  sub->add_option("--calibration-out", o->calibrationOut,
                  "with --calibrate: write the fitted scenario (cluster, job, measurements)");
  sub->add_option("--control-plane", o->controlPlane,
                  "with --calibrate: a control-plane benchmark result (bench/control_plane.sh's "
                  "JSON: {machine, date, points: [{nodes, launch_s, kill_to_running_s, "
                  "stop_noticed_s, stop_to_running_s, failed, ...}]}); its kill_to_running_s per "
                  "node count is added to the restart and reconfiguration costs, its "
                  "stop_noticed_s to job.failure_detection_seconds, which then grow with the "
                  "nodes (a null time is left out, with a note) (docs/simulator.md). With a "
                  "SCENARIO: no runs, added to that scenario's costs (--calibration-out FILE, else "
                  "the scenario on stdout)");
  sub->add_option("--seeds", o->seeds,
                  "independent replicas (Monte Carlo); replica i is seeded from the scenario's "
                  "seed and i, so results do not depend on --threads, nor on the ranks of "
                  "`mpirun -n K stretch sim ...`, which split the replicas (rank 0 prints); at "
                  "most " +
                      std::to_string(sim::kMaxSeeds) +
                      " (the percentiles keep every replica's figures)")
      ->check(CLI::Range(std::int64_t{1}, sim::kMaxSeeds))
      ->capture_default_str();
  sub->add_option("--threads", o->threads, "threads for the replicas (default: every core)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--seed", o->seed, "override the scenario's seed");
  sub->add_flag("--json", o->json,
                "print one JSON object: simulated_hours, wall_seconds, events, ettr, samples, "
                "failures, restarts, lost_hours, checkpoints, world_size_hours, ... (each as "
                "{mean, ci95, min, max} with --seeds > 1), or {error, message}");
  sub->add_flag("--step-level", o->stepLevel,
                "schedule every micro step and every bucket's all-reduce as an event (default: "
                "jump analytically between checkpoints and failures; same times, far faster)");
  sub->add_option("--events", o->events,
                  "write the agent's decisions of replica 0 as JSON lines, the format of "
                  "`stretch launch --event_log` (with resume_step)");
  sub->add_option("--trace", o->trace,
                  "write a Chrome / Perfetto trace of replica 0 (compute, collectives in "
                  "step-level mode, checkpoints, failures, restarts, world size counter)");
  sub->add_option("--csv", o->csv, "write replica 0's timeline as CSV rows");
  sub->add_option("--trace-limit", o->traceLimit,
                  "most records written to --trace and --csv (the rest are counted)")
      ->capture_default_str();
  sub->add_option("--presets", o->presets,
                  "cluster preset folder (default: $STRETCH_CLUSTER_PRESETS, the scenario's "
                  "../clusters, or the source tree's fixtures/clusters)");
  sub->add_flag("-q,--quiet", o->quiet, "no progress bar");
  return {sub, [o] { return runSim(*o); }};
}

}  // namespace stretch::cli
