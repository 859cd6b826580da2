#include "sim/monte_carlo.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>

#include <nlohmann/json.hpp>

#include "runtime/common/error.hpp"
#include "sim/parallel.hpp"

namespace stretch::sim {

MetricSummary summarize(const std::vector<double>& values) {
  MetricSummary s;
  if (values.empty()) {
    return s;
  }
  double sum = 0.0;
  s.min = values.front();
  s.max = values.front();
  for (double v : values) {
    sum += v;
    s.min = std::min(s.min, v);
    s.max = std::max(s.max, v);
  }
  const auto n = static_cast<double>(values.size());
  s.mean = sum / n;
  if (values.size() > 1) {
    double squares = 0.0;
    for (double v : values) {
      squares += (v - s.mean) * (v - s.mean);
    }
    s.ci95 = 1.96 * std::sqrt(squares / (n - 1.0)) / std::sqrt(n);
  }
  return s;
}

std::map<std::string, std::vector<double>> MonteCarloResult::metricValues() const {
  std::map<std::string, std::vector<double>> m;
  for (const RunResult& r : runs) {
    m["simulated_hours"].push_back(nanosToHours(r.simulatedNs));
    m["wall_seconds"].push_back(r.wallSeconds);
    m["agent_wall_seconds"].push_back(r.agentWallSeconds);
    m["agent_events"].push_back(static_cast<double>(r.agentEvents));
    m["events"].push_back(static_cast<double>(r.events));
    m["ettr"].push_back(r.ettr());
    m["samples"].push_back(static_cast<double>(r.samples));
    m["steps"].push_back(static_cast<double>(r.steps));
    m["failures"].push_back(static_cast<double>(r.failures));
    m["preemptions"].push_back(static_cast<double>(r.preemptions));
    m["restarts"].push_back(static_cast<double>(r.restarts));
    m["stops"].push_back(static_cast<double>(r.stops));
    m["generations"].push_back(static_cast<double>(r.generations));
    m["checkpoints"].push_back(static_cast<double>(r.checkpoints));
    m["useful_hours"].push_back(nanosToHours(r.usefulNs));
    m["lost_hours"].push_back(nanosToHours(r.lostNs));
    m["checkpoint_hours"].push_back(nanosToHours(r.checkpointNs));
    m["startup_hours"].push_back(nanosToHours(r.startupNs));
    m["idle_hours"].push_back(nanosToHours(r.idleNs));
  }
  return m;
}

std::map<std::int64_t, std::vector<double>> MonteCarloResult::worldSizeHours() const {
  std::map<std::int64_t, std::vector<double>> m;
  for (const RunResult& r : runs) {
    for (const auto& [size, ns] : r.worldSizeNs) {
      m[size];
    }
  }
  for (auto& [size, values] : m) {
    values.reserve(runs.size());
    for (const RunResult& r : runs) {
      const auto it = r.worldSizeNs.find(size);
      values.push_back(it == r.worldSizeNs.end() ? 0.0 : nanosToHours(it->second));
    }
  }
  return m;
}

std::map<std::string, std::int64_t> MonteCarloResult::outcomes() const {
  std::map<std::string, std::int64_t> m;
  for (const RunResult& r : runs) {
    ++m[std::string(toString(r.outcome))];
  }
  return m;
}

MonteCarloResult runMonteCarlo(const Scenario& scenario, const MonteCarloOptions& options) {
  if (options.seeds < 1) {
    throw ConfigError(ErrorDetail{"--seeds", std::to_string(options.seeds), "at least 1"});
  }
  const auto start = std::chrono::steady_clock::now();
  MonteCarloResult result;
  result.runs.resize(static_cast<std::size_t>(options.seeds));
  auto cancelled = [&] {
    return options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed);
  };
  auto replica = [&](std::int64_t i) {
    if (cancelled()) {
      throw SimulationCancelled();
    }
    RunOptions run;
    run.mode = options.mode;
    run.replica = static_cast<std::uint64_t>(i);
    std::function<void(double)> progress;
    if (i == 0) {
      run.eventLog = options.eventLog;
      run.timeline = options.timeline;
      if (options.seeds == 1) {
        progress = options.progress;
      }
    }
    if (options.cancel != nullptr || progress) {
      run.progress = [&cancelled, progress](double fraction) {
        if (cancelled()) {
          throw SimulationCancelled();
        }
        if (progress) {
          progress(fraction);
        }
      };
    }
    result.runs[static_cast<std::size_t>(i)] = simulate(scenario, run);
  };
  try {
    // A replicaDone that throws (a cancel, a full disk) ends the batch like a failed replica
    // instead of escaping a worker thread and terminating the program.
    result.threads = parallelFor(options.seeds, options.threads, replica, options.replicaDone);
  } catch (...) {
    if (cancelled()) {
      throw SimulationCancelled();
    }
    throw;
  }
  if (cancelled()) {
    throw SimulationCancelled();
  }
  result.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

nlohmann::json runToJson(const RunResult& r) {
  nlohmann::json j;
  j["outcome"] = std::string(toString(r.outcome));
  if (!r.message.empty()) {
    j["message"] = r.message;
  }
  j["simulated_hours"] = nanosToHours(r.simulatedNs);
  j["wall_seconds"] = r.wallSeconds;
  j["agent_wall_seconds"] = r.agentWallSeconds;
  j["events"] = r.events;
  j["agent_events"] = r.agentEvents;
  j["ettr"] = r.ettr();
  j["samples"] = r.samples;
  j["steps"] = r.steps;
  j["failures"] = r.failures;
  if (r.ignoredFailures > 0) {
    j["ignored_failures"] = r.ignoredFailures;
  }
  j["preemptions"] = r.preemptions;
  j["restarts"] = r.restarts;
  j["stops"] = r.stops;
  j["generations"] = r.generations;
  j["checkpoints"] = r.checkpoints;
  j["useful_hours"] = nanosToHours(r.usefulNs);
  j["lost_hours"] = nanosToHours(r.lostNs);
  j["checkpoint_hours"] = nanosToHours(r.checkpointNs);
  j["startup_hours"] = nanosToHours(r.startupNs);
  j["idle_hours"] = nanosToHours(r.idleNs);
  nlohmann::json sizes = nlohmann::json::object();
  for (const auto& [size, ns] : r.worldSizeNs) {
    sizes[std::to_string(size)] = nanosToHours(ns);
  }
  j["world_size_hours"] = sizes;
  if (!r.notes.empty()) {
    j["notes"] = r.notes;
  }
  return j;
}

nlohmann::json summaryToJson(const MonteCarloResult& result) {
  if (result.runs.size() == 1) {
    nlohmann::json j = runToJson(result.runs.front());
    j["seeds"] = 1;
    return j;
  }
  auto stat = [](const std::vector<double>& values) {
    const MetricSummary s = summarize(values);
    return nlohmann::json{{"mean", s.mean}, {"ci95", s.ci95}, {"min", s.min}, {"max", s.max}};
  };
  nlohmann::json j;
  j["seeds"] = result.runs.size();
  j["threads"] = result.threads;
  j["batch_wall_seconds"] = result.wallSeconds;
  nlohmann::json outcomes = nlohmann::json::object();
  for (const auto& [name, count] : result.outcomes()) {
    outcomes[name] = count;
  }
  j["outcomes"] = outcomes;
  for (const auto& [name, values] : result.metricValues()) {
    j[name] = stat(values);
  }
  nlohmann::json sizes = nlohmann::json::object();
  for (const auto& [size, values] : result.worldSizeHours()) {
    sizes[std::to_string(size)] = stat(values);
  }
  j["world_size_hours"] = sizes;
  return j;
}

}  // namespace stretch::sim
