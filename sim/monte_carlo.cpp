#include "sim/monte_carlo.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/common/error.hpp"
#include "sim/parallel.hpp"

namespace stretch::sim {

double studentT975(double df) {
  if (!(df >= 1.0)) {
    throw std::invalid_argument("studentT975: degrees of freedom must be at least 1");
  }
  constexpr double kTwoSided = 0.05;  // P(|T| > t)
  constexpr double kHalfPi = 1.57079632679489661923;
  if (df == 1.0) {
    return 1.0 / std::tan(kTwoSided * kHalfPi);  // Cauchy
  }
  if (df == 2.0) {
    return std::sqrt(2.0 / (kTwoSided * (2.0 - kTwoSided)) - 2.0);
  }
  // Hill (1970), algorithm 396, for the two-sided probability kTwoSided.
  const double a = 1.0 / (df - 0.5);
  const double b = 48.0 / (a * a);
  double c = ((20700.0 * a / b - 98.0) * a - 16.0) * a + 96.36;
  const double d = ((94.5 / (b + c) - 3.0) / b + 1.0) * std::sqrt(a * kHalfPi) * df;
  double y = std::pow(d * kTwoSided, 2.0 / df);
  if (y > 0.05 + a) {
    // The asymptotic expansion about the normal quantile z(0.025).
    const double x = -1.959963984540054;
    y = x * x;
    if (df < 5.0) {
      c += 0.3 * (df - 4.5) * (x + 0.6);
    }
    c = (((0.05 * d * x - 5.0) * x - 7.0) * x - 2.0) * x + b + c;
    y = (((((0.4 * y + 6.3) * y + 36.0) * y + 94.5) / c - y - 3.0) / b + 1.0) * x;
    y = std::expm1(a * y * y);
  } else {
    y = ((1.0 / (((df + 6.0) / (df * y) - 0.089 * d - 0.822) * (df + 2.0) * 3.0) +
          0.5 / (df + 4.0)) *
             y -
         1.0) *
            (df + 1.0) / (df + 2.0) +
        1.0 / y;
  }
  return std::sqrt(df * y);
}

namespace {

double percentileOfSorted(const std::vector<double>& values, double q) {
  if (values.empty()) {
    return 0.0;
  }
  q = std::clamp(q, 0.0, 1.0);
  const double h = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (h - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

}  // namespace

double percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return percentileOfSorted(values, q);
}

MetricSummary summarize(const std::vector<double>& values) {
  MetricSummary s;
  if (values.empty()) {
    return s;
  }
  double sum = 0.0;
  for (double v : values) {
    sum += v;
  }
  const auto n = static_cast<double>(values.size());
  s.mean = sum / n;
  if (values.size() > 1) {
    double squares = 0.0;
    for (double v : values) {
      squares += (v - s.mean) * (v - s.mean);
    }
    s.ci95 = studentT975(n - 1.0) * std::sqrt(squares / (n - 1.0)) / std::sqrt(n);
  }
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  s.min = sorted.front();
  s.max = sorted.back();
  s.p1 = percentileOfSorted(sorted, 0.01);
  s.p10 = percentileOfSorted(sorted, 0.10);
  s.p50 = percentileOfSorted(sorted, 0.50);
  s.p90 = percentileOfSorted(sorted, 0.90);
  s.p99 = percentileOfSorted(sorted, 0.99);
  return s;
}

MetricSummary exactSummary(double value) {
  return MetricSummary{.mean = value,
                       .ci95 = 0.0,
                       .min = value,
                       .max = value,
                       .p1 = value,
                       .p10 = value,
                       .p50 = value,
                       .p90 = value,
                       .p99 = value};
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
    m["live_recoveries"].push_back(static_cast<double>(r.liveRecoveries));
    m["checkpoint_fallbacks"].push_back(static_cast<double>(r.checkpointFallbacks));
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
  if (options.seeds < 1 || options.seeds > kMaxSeeds) {
    throw ConfigError(ErrorDetail{"--seeds", std::to_string(options.seeds),
                                  fmt::format("a number of replicas in [1, {}]", kMaxSeeds)});
  }
  const auto start = std::chrono::steady_clock::now();
  MonteCarloResult result;
  result.runs.resize(static_cast<std::size_t>(options.seeds));
  auto cancelled = [&] {
    return options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed);
  };
  // Runs replicas [first, first + count) into runs[0 .. count).
  auto runBlock = [&](std::int64_t first, std::int64_t count, std::vector<RunResult>& runs) {
    auto replica = [&](std::int64_t k) {
      if (cancelled()) {
        throw SimulationCancelled();
      }
      const std::int64_t i = first + k;
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
      runs[static_cast<std::size_t>(k)] = simulate(scenario, run);
    };
    try {
      // A replicaDone that throws (a cancel, a full disk) ends the batch like a failed replica
      // instead of escaping a worker thread and terminating the program.
      result.threads = parallelFor(count, options.threads, replica, options.replicaDone);
    } catch (...) {
      if (cancelled()) {
        throw SimulationCancelled();
      }
      throw;
    }
  };
  if (options.group == nullptr || options.group->size() <= 1) {
    runBlock(0, options.seeds, result.runs);
  } else {
    result.processes = options.group->size();
    const std::vector<std::string> blocks =
        runSplit(*options.group, options.seeds, [&](std::int64_t first, std::int64_t count) {
          std::vector<RunResult> runs(static_cast<std::size_t>(count));
          runBlock(first, count, runs);
          std::string bytes;
          for (const RunResult& r : runs) {
            const std::string one = encodeRun(r);
            const auto size = static_cast<std::uint32_t>(one.size());
            bytes.append(reinterpret_cast<const char*>(&size), sizeof size);
            bytes += one;
          }
          return bytes;
        });
    std::size_t next = 0;
    for (const std::string& b : blocks) {
      for (std::size_t at = 0; at < b.size();) {
        std::uint32_t size = 0;
        if (b.size() - at < sizeof size) {
          throw IoError("Monte Carlo: a rank sent a truncated block of runs");
        }
        std::memcpy(&size, b.data() + at, sizeof size);
        at += sizeof size;
        if (b.size() - at < size || next >= result.runs.size()) {
          throw IoError("Monte Carlo: a rank sent a truncated block of runs");
        }
        result.runs[next++] = decodeRun(b.substr(at, size));
        at += size;
      }
    }
    if (next != result.runs.size()) {
      throw IoError(
          fmt::format("Monte Carlo: the ranks sent {} runs, not {}", next, result.runs.size()));
    }
  }
  if (cancelled()) {
    throw SimulationCancelled();
  }
  result.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::string encodeRun(const RunResult& r) {
  nlohmann::json sizes = nlohmann::json::array();
  for (const auto& [size, ns] : r.worldSizeNs) {
    sizes.push_back({size, ns});
  }
  const nlohmann::json j = {{"outcome", static_cast<int>(r.outcome)},
                            {"message", r.message},
                            {"simulated", r.simulatedNs},
                            {"wall", r.wallSeconds},
                            {"agent_wall", r.agentWallSeconds},
                            {"events", r.events},
                            {"agent_events", r.agentEvents},
                            {"useful", r.usefulNs},
                            {"lost", r.lostNs},
                            {"checkpoint", r.checkpointNs},
                            {"startup", r.startupNs},
                            {"idle", r.idleNs},
                            {"steps", r.steps},
                            {"samples", r.samples},
                            {"failures", r.failures},
                            {"ignored", r.ignoredFailures},
                            {"preemptions", r.preemptions},
                            {"restarts", r.restarts},
                            {"stops", r.stops},
                            {"live", r.liveRecoveries},
                            {"fallbacks", r.checkpointFallbacks},
                            {"generations", r.generations},
                            {"checkpoints", r.checkpoints},
                            {"script", r.scriptFired},
                            {"sizes", sizes},
                            {"notes", r.notes}};
  const std::vector<std::uint8_t> packed = nlohmann::json::to_msgpack(j);
  return {packed.begin(), packed.end()};
}

RunResult decodeRun(const std::string& bytes) {
  try {
    const nlohmann::json j = nlohmann::json::from_msgpack(bytes);
    RunResult r;
    r.outcome = static_cast<Outcome>(j.at("outcome").get<int>());
    r.message = j.at("message").get<std::string>();
    r.simulatedNs = j.at("simulated").get<SimTime>();
    r.wallSeconds = j.at("wall").get<double>();
    r.agentWallSeconds = j.at("agent_wall").get<double>();
    r.events = j.at("events").get<std::uint64_t>();
    r.agentEvents = j.at("agent_events").get<std::uint64_t>();
    r.usefulNs = j.at("useful").get<SimTime>();
    r.lostNs = j.at("lost").get<SimTime>();
    r.checkpointNs = j.at("checkpoint").get<SimTime>();
    r.startupNs = j.at("startup").get<SimTime>();
    r.idleNs = j.at("idle").get<SimTime>();
    r.steps = j.at("steps").get<std::int64_t>();
    r.samples = j.at("samples").get<std::int64_t>();
    r.failures = j.at("failures").get<std::int64_t>();
    r.ignoredFailures = j.at("ignored").get<std::int64_t>();
    r.preemptions = j.at("preemptions").get<std::int64_t>();
    r.restarts = j.at("restarts").get<std::int64_t>();
    r.stops = j.at("stops").get<std::int64_t>();
    r.liveRecoveries = j.at("live").get<std::int64_t>();
    r.checkpointFallbacks = j.at("fallbacks").get<std::int64_t>();
    r.generations = j.at("generations").get<std::uint64_t>();
    r.checkpoints = j.at("checkpoints").get<std::int64_t>();
    r.scriptFired = j.at("script").get<std::int64_t>();
    for (const auto& pair : j.at("sizes")) {
      r.worldSizeNs[pair.at(0).get<std::int64_t>()] = pair.at(1).get<SimTime>();
    }
    r.notes = j.at("notes").get<std::vector<std::string>>();
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw IoError(fmt::format("Monte Carlo: a rank sent a run that does not decode: {}", e.what()));
  }
}

nlohmann::json metricSummaryToJson(const MetricSummary& s) {
  // JSON has no infinity or NaN: null, as the planner's reports write them.
  auto number = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); };
  return nlohmann::json{{"mean", number(s.mean)}, {"ci95", number(s.ci95)}, {"min", number(s.min)},
                        {"max", number(s.max)},   {"p1", number(s.p1)},     {"p10", number(s.p10)},
                        {"p50", number(s.p50)},   {"p90", number(s.p90)},   {"p99", number(s.p99)}};
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
  j["live_recoveries"] = r.liveRecoveries;
  j["checkpoint_fallbacks"] = r.checkpointFallbacks;
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
    return metricSummaryToJson(summarize(values));
  };
  nlohmann::json j;
  j["seeds"] = result.runs.size();
  j["ci95_method"] = kCi95Method;
  j["threads"] = result.threads;
  if (result.processes > 1) {
    j["processes"] = result.processes;
  }
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
