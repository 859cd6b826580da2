#include "gui/simulation.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "runtime/common/error.hpp"
#include "sim/job_sim.hpp"
#include "sim/scheduler.hpp"

namespace stretch::gui {

sim::MonteCarloResult runReplicas(const sim::Scenario& scenario, std::int64_t seeds, int threads,
                                  const std::atomic<bool>& cancel, sim::TimelineSink* timeline,
                                  const ProgressFn& replicaDone) {
  if (seeds < 1) {
    throw ConfigError(ErrorDetail{"seeds", std::to_string(seeds), "at least 1"});
  }
  sim::MonteCarloOptions options;
  options.seeds = seeds;
  options.threads = threads;
  options.mode = sim::SimMode::Aggregate;
  options.timeline = timeline;
  options.replicaDone = replicaDone;
  options.cancel = &cancel;
  return sim::runMonteCarlo(scenario, options);
}

TimelineCollector::TimelineCollector(const std::atomic<bool>& cancel, std::size_t maxRecords)
    : cancel_(cancel), maxRecords_(maxRecords) {}

void TimelineCollector::record(const sim::TimelineRecord& record) {
  if (cancel_.load(std::memory_order_relaxed)) {
    throw SimulationCancelled();
  }
  switch (record.kind) {
    case sim::TimelineKind::WorldSize:
    case sim::TimelineKind::Failure:
    case sim::TimelineKind::Preemption:
    case sim::TimelineKind::Checkpoint:
    case sim::TimelineKind::Startup:
    case sim::TimelineKind::NodeReturn:
    case sim::TimelineKind::Scale:
    case sim::TimelineKind::Script:
      break;
    default:
      return;  // compute spans, agent actions: the chart does not draw them
  }
  if (records_.size() >= maxRecords_) {
    ++dropped_;
    return;
  }
  records_.push_back(record);
}

TimelineData TimelineCollector::data(double endHours) const {
  TimelineData out;
  out.endHours = endHours;
  out.dropped = dropped_;
  // Records arrive when they are known (spans at their end): sort by start for the chart.
  std::vector<sim::TimelineRecord> sorted = records_;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.time < b.time; });
  double size = 0.0;
  auto sizeAt = [&](double hours) {
    // The world size in force at `hours` (the step function built so far).
    double s = 0.0;
    for (auto it = out.worldSize.rbegin(); it != out.worldSize.rend(); ++it) {
      if (it->hours <= hours) {
        s = it->worldSize;
        break;
      }
    }
    return s;
  };
  // The world-size counter first, so the markers can sit on the line.
  for (const sim::TimelineRecord& r : sorted) {
    if (r.kind == sim::TimelineKind::WorldSize) {
      size = static_cast<double>(r.worldSize);
      out.worldSize.push_back({sim::nanosToHours(r.time), size, r.name});
    }
  }
  bool firstStart = true;
  for (const sim::TimelineRecord& r : sorted) {
    const double h = sim::nanosToHours(r.time);
    const std::string label = r.detail.empty() ? r.name : fmt::format("{}: {}", r.name, r.detail);
    switch (r.kind) {
      case sim::TimelineKind::Failure:
      case sim::TimelineKind::Preemption:
        out.failures.push_back({h, sizeAt(h), label});
        break;
      case sim::TimelineKind::Checkpoint:
        out.checkpoints.push_back({h, sizeAt(h), label});
        break;
      case sim::TimelineKind::Startup:
        if (!firstStart) {
          out.restarts.push_back({h, static_cast<double>(r.worldSize), label});
        }
        firstStart = false;
        break;
      default:
        break;
    }
    out.events.push_back(r);
  }
  return out;
}

SimulationResult runSimulation(const SimulationRequest& request, const std::atomic<bool>& cancel,
                               const StageProgressFn& progress) {
  constexpr double kSimulateShare = 0.3;  // of the progress bar; the plan takes the rest
  const auto start = std::chrono::steady_clock::now();
  SimulationResult out;
  const sim::Scenario& scenario = request.input.scenario;

  TimelineCollector collector(cancel, request.timelineRecords);
  out.monteCarlo = runReplicas(
      scenario, request.seeds, request.threads, cancel, &collector,
      [&](std::int64_t done, std::int64_t total) {
        if (progress) {
          progress(kSimulateShare * static_cast<double>(done) / static_cast<double>(total),
                   "simulate");
        }
      });
  out.timeline = collector.data(sim::nanosToHours(out.monteCarlo.runs.front().simulatedNs));

  if (request.plan) {
    const planner::PlanInput& input = request.input;  // its settings: the job's "plan" object
    planner::PlanOptions options;
    options.threads = request.threads;
    options.cancel = &cancel;
    options.progress = [&](const planner::PlanProgress& p) {
      if (progress) {
        progress(kSimulateShare + (1.0 - kSimulateShare) * p.fraction, p.stage);
      }
    };
    try {
      out.plan = planner::makePlan(input, options);
    } catch (const planner::PlanCancelled&) {
      throw SimulationCancelled();
    } catch (const Error& e) {
      out.planError = e.what();
    }
  }
  if (cancel.load()) {
    throw SimulationCancelled();
  }
  out.wallSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace stretch::gui
