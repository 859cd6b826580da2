// stretch._stretch: the C++ behind the `stretch` Python package (docs/python.md). Every function
// takes JSON text and returns JSON text: the Python layer (python/stretch) turns dicts, strings
// and paths into one form, and the answers are the same C++ calls the CLI makes, with the CLI's
// output shapes. No second implementation of anything. Errors become the Python classes named
// after the C++ error kinds (stretch._errors: ElasticityConfigError, ConfigError, IoError, ...),
// with the same messages. Long calls release the GIL.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <optional>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "planner/plan.hpp"
#include "planner/plan_input.hpp"
#include "planner/report.hpp"
#include "runtime/agent/event_log.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/config/elasticity_config.hpp"
#include "runtime/elasticity/runtime_batch.hpp"
#include "runtime/elasticity/solver.hpp"
#include "sim/monte_carlo.hpp"
#include "sim/scenario.hpp"

namespace py = pybind11;

namespace stretch::python {

namespace {

using Json = nlohmann::ordered_json;

// Text handed over from Python is bounded as a file is (STRETCH_MAX_INPUT_BYTES, 64 MiB by
// default), and a path must not hold a NUL byte: the system would read a shorter path. The
// Python layer checks both first; these are the checks of last resort for direct callers.
void checkText(const std::string& text, std::string_view what) {
  const std::uint64_t limit = maxInputBytes();
  if (text.size() > limit) {
    throw ConfigError(ErrorDetail{std::string(what), fmt::format("{} bytes", text.size()),
                                  fmt::format("at most {} bytes (set {} to give larger ones)",
                                              limit, kMaxInputBytesVariable)});
  }
}

void checkPath(const std::string& path, std::string_view what) {
  if (path.find('\0') != std::string::npos) {
    throw ConfigError(ErrorDetail{std::string(what), path.substr(0, path.find('\0')) + "\\0...",
                                  "a file path without NUL characters"});
  }
}

// The answer of `stretch elastic --json`, and the config's warnings.
std::string elastic(const std::string& text, const std::string& source, std::int64_t worldSize,
                    bool returnMicroBatch, std::optional<std::string> envWorldSize,
                    const std::string& targetVersion, bool sectionOnly) {
  checkText(text, source);
  checkText(targetVersion, "version");
  Json out;
  {
    const py::gil_scoped_release release;
    std::vector<std::string> warnings;
    config::ElasticityConfig section;
    if (sectionOnly) {
      section = config::parseElasticitySection(text, source, warnings);
    } else {
      config::ParsedConfig parsed = config::parseConfig(text, source);
      section = parsed.config.elasticity;
      warnings = std::move(parsed.warnings);
    }
    elasticity::SolveRequest request;
    request.worldSize = worldSize;
    request.returnMicroBatch = returnMicroBatch;
    request.envWorldSize = std::move(envWorldSize);
    request.targetDeepspeedVersion = targetVersion;
    const elasticity::ElasticPlan plan = elasticity::computeElasticConfig(section, request);
    out["final_batch_size"] = plan.finalBatchSize;
    out["valid_gpus"] = plan.validWorldSizes;
    out["micro_batch"] = plan.microBatch ? Json(*plan.microBatch) : Json(nullptr);
    out["version"] = std::string(config::toString(plan.version));
    out["warnings"] = warnings;
  }
  return out.dump();
}

// The normalised config (every key, defaults included: `stretch config`'s form) and, for a
// world size, the batch a job of that many GPUs trains with.
std::string normalise(const std::string& text, const std::string& source,
                      std::optional<std::int64_t> worldSize) {
  checkText(text, source);
  Json out;
  {
    const py::gil_scoped_release release;
    const config::ParsedConfig parsed = config::parseConfig(text, source);
    out["config"] = Json::parse(config::toJson(parsed.config));
    out["warnings"] = parsed.warnings;
    if (worldSize) {
      if (*worldSize < 1) {
        throw ConfigError(
            ErrorDetail{"world_size", std::to_string(*worldSize), "a positive number of GPUs"});
      }
      const elasticity::TrainingBatch batch = elasticity::resolveTrainingBatch(
          parsed.config, *worldSize, elasticity::ElasticEnvironment::fromProcess());
      out["batch"] = {{"train_batch_size", batch.triple.trainBatchSize},
                      {"train_micro_batch_size_per_gpu", batch.triple.microBatchPerGpu},
                      {"gradient_accumulation_steps", batch.triple.gradientAccumulation},
                      {"data_parallel_size", batch.dataParallelSize}};
      for (const std::string& w : batch.warnings)
        out["warnings"].push_back(w);
    }
  }
  return out.dump();
}

// DeepSpeed's ensure_immutable_elastic_config over the runtime's elasticity section and the
// scheduler's (DEEPSPEED_ELASTICITY_CONFIG, nullopt when unset): the warning, or "".
std::string ensureImmutable(const std::string& runtimeSection,
                            std::optional<std::string> schedulerSection) {
  checkText(runtimeSection, "runtime_elastic_config_dict");
  if (schedulerSection)
    checkText(*schedulerSection, "DEEPSPEED_ELASTICITY_CONFIG");
  const config::ElasticityConfig runtime =
      config::parseElasticitySection(runtimeSection, "runtime_elastic_config_dict");
  elasticity::ElasticEnvironment env;
  env.schedulerConfig = std::move(schedulerSection);
  return elasticity::ensureImmutableElasticConfig(runtime, env).value_or("");
}

// Runs `work` (returning JSON text) on a thread of its own while the calling Python thread
// waits without the GIL. Every 50 ms it takes the GIL back to deliver signals (Ctrl-C sets
// `cancel`, the work stops at its next check, and the KeyboardInterrupt is raised here) and to
// pass the latest progress fraction to `callback` when it is callable (its exceptions cancel the
// work too and propagate).
template <typename Work>
std::string runInterruptibly(Work work, std::atomic<bool>& cancel,
                             const std::atomic<double>& progress, const py::object& callback) {
  std::string result;
  std::exception_ptr failure;
  std::atomic<bool> done{false};
  std::thread worker([&] {
    try {
      result = work();
    } catch (...) {
      failure = std::current_exception();
    }
    done.store(true);
  });
  double reported = -1.0;
  std::optional<py::error_already_set> pythonError;
  while (!done.load()) {
    {
      const py::gil_scoped_release release;
      for (int i = 0; i < 50 && !done.load(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!pythonError && PyErr_CheckSignals() != 0) {
      pythonError.emplace();  // the KeyboardInterrupt (or the signal handler's exception)
      cancel.store(true);
    }
    const double now = progress.load();
    if (!pythonError && !callback.is_none() && now != reported) {
      reported = now;
      try {
        callback(now);
      } catch (py::error_already_set& e) {
        pythonError.emplace(std::move(e));
        cancel.store(true);
      }
    }
  }
  {
    const py::gil_scoped_release release;
    worker.join();
  }
  if (pythonError)
    throw std::move(*pythonError);
  if (failure)
    std::rethrow_exception(failure);
  if (!callback.is_none() && reported != 1.0)
    callback(1.0);
  return result;
}

// The `stretch sim --json` result of a scenario (a file, or JSON text whose relative paths
// resolve from baseDir), and replica 0's agent events when asked.
std::string simulate(const std::string& scenarioText, const std::string& path,
                     const std::string& baseDir, std::int64_t seeds, int threads, bool events,
                     bool stepLevel, const py::object& callback) {
  checkText(scenarioText, "scenario");
  checkPath(path, "scenario");
  checkPath(baseDir, "base_dir");
  if (seeds < 1 || seeds > sim::kMaxSeeds) {
    throw ConfigError(ErrorDetail{"seeds", std::to_string(seeds),
                                  fmt::format("a number of replicas in [1, {}]", sim::kMaxSeeds)});
  }
  std::atomic<bool> cancel{false};
  std::atomic<double> progress{0.0};
  return runInterruptibly(
      [&] {
        sim::Scenario scenario =
            path.empty() ? sim::parseScenarioText(scenarioText, baseDir) : sim::loadScenario(path);
        std::ostringstream eventText;
        agent::EventLog eventLog(eventText);
        sim::MonteCarloOptions mc;
        mc.seeds = seeds;
        mc.threads = threads;
        mc.mode = stepLevel ? sim::SimMode::StepLevel : sim::SimMode::Aggregate;
        mc.eventLog = events ? &eventLog : nullptr;
        mc.cancel = &cancel;
        mc.replicaDone = [&](std::int64_t done, std::int64_t total) {
          progress.store(static_cast<double>(done) / static_cast<double>(total));
        };
        mc.progress = [&](double fraction) { progress.store(fraction); };
        const sim::MonteCarloResult result = sim::runMonteCarlo(scenario, mc);
        Json out = Json::parse(sim::summaryToJson(result).dump());
        out["scenario"] = scenario.name;
        out["mode"] = stepLevel ? "step-level" : "aggregate";
        out["seed"] = scenario.seed;
        out["gpus"] = scenario.cluster.gpus();
        out["nodes"] = scenario.cluster.nodes;
        out["warnings"] = scenario.warnings;
        if (events) {
          Json list = Json::array();
          std::istringstream lines(eventText.str());
          for (std::string line; std::getline(lines, line);)
            list.push_back(Json::parse(line));
          out["events"] = std::move(list);
        }
        return out.dump();
      },
      cancel, progress, callback);
}

// The stretch.plan/1 document of a job (a file, or JSON text; see simulate).
std::string plan(const std::string& jobText, const std::string& path, const std::string& baseDir,
                 std::optional<std::int64_t> seeds, int threads, const py::object& callback) {
  checkText(jobText, "job");
  checkPath(path, "job");
  checkPath(baseDir, "base_dir");
  if (seeds && (*seeds < 0 || *seeds > planner::kMaxSeeds)) {
    throw ConfigError(
        ErrorDetail{"seeds", std::to_string(*seeds),
                    fmt::format("a number of replicas in [0, {}] (0: analytic estimates)",
                                planner::kMaxSeeds)});
  }
  std::atomic<bool> cancel{false};
  std::atomic<double> progress{0.0};
  return runInterruptibly(
      [&] {
        planner::PlanInput input =
            path.empty() ? planner::parsePlanInput(jobText, baseDir) : planner::loadPlanInput(path);
        if (seeds)
          input.settings.seeds = *seeds;
        planner::PlanOptions options;
        options.threads = threads;
        options.cancel = &cancel;
        options.progress = [&](const planner::PlanProgress& p) { progress.store(p.fraction); };
        return planner::renderPlan(planner::makePlan(input, options), planner::ReportFormat::Json);
      },
      cancel, progress, callback);
}

// The launcher's batch contract of this process (docs/launch.md): the three variables, or null
// when they are absent; ConfigError when only some are set or one is not a number.
std::string workerBatch() {
  const elasticity::ElasticEnvironment env = elasticity::ElasticEnvironment::fromProcess();
  if (!env.launcherBatch)
    return "null";
  Json out;
  out["train_batch_size"] = env.launcherBatch->trainBatchSize;
  out["micro_batch_size"] = env.launcherBatch->microBatchPerGpu;
  out["gradient_accumulation_steps"] = env.launcherBatch->gradientAccumulation;
  return out.dump();
}

}  // namespace

// python/live.cpp: the store client and live recovery's protocol, for stretch.torch.
void registerLive(py::module_& m);

}  // namespace stretch::python

PYBIND11_MODULE(_stretch, m) {
  using namespace stretch::python;
  m.doc() = "The C++ behind the stretch package (JSON text in, JSON text out; see docs/python.md).";
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown)
        std::rethrow_exception(thrown);
    } catch (const stretch::Error& e) {
      const py::module_ errors = py::module_::import("stretch._errors");
      const char* kind = e.kind();
      const py::object type =
          py::hasattr(errors, kind) ? errors.attr(kind) : errors.attr("StretchError");
      PyErr_SetString(type.ptr(), e.what());
    }
  });
  m.def("elastic", &elastic, py::arg("config_text"), py::arg("source"), py::arg("world_size"),
        py::arg("return_microbatch"), py::arg("env_world_size"), py::arg("target_version"),
        py::arg("section_only"),
        "The elastic batch plan as JSON: final_batch_size, valid_gpus, micro_batch, version, "
        "warnings.");
  m.def("config", &normalise, py::arg("config_text"), py::arg("source"), py::arg("world_size"),
        "The normalised config as JSON: config, warnings and, for a world size, batch.");
  m.def("ensure_immutable", &ensureImmutable, py::arg("runtime_section"),
        py::arg("scheduler_section"),
        "DeepSpeed's ensure_immutable_elastic_config: the warning, or an empty string.");
  m.def(
      "read_file",
      [](const std::string& path, const std::string& what) {
        checkPath(path, what.empty() ? std::string_view("path") : std::string_view(what));
        std::string text;
        {
          const py::gil_scoped_release release;
          text = stretch::readFile(path, what);
        }
        return py::bytes(text);
      },
      py::arg("path"), py::arg("what"),
      "A file's bytes, bounded as every Stretch tool reads (regular files, at most "
      "STRETCH_MAX_INPUT_BYTES).");
  m.def("simulate", &simulate, py::arg("scenario_text"), py::arg("path"), py::arg("base_dir"),
        py::arg("seeds"), py::arg("threads"), py::arg("events"), py::arg("step_level"),
        py::arg("callback"),
        "The stretch sim --json result as JSON (events: replica 0's agent events as a list).");
  m.def("plan", &plan, py::arg("job_text"), py::arg("path"), py::arg("base_dir"), py::arg("seeds"),
        py::arg("threads"), py::arg("callback"), "The stretch.plan/1 document as JSON.");
  m.def("worker_batch", &workerBatch,
        "The launcher's batch contract of this process as JSON, or null outside stretch launch.");
  m.def(
      "max_input_bytes", [] { return stretch::maxInputBytes(); },
      "The most bytes of a document, a file or text (STRETCH_MAX_INPUT_BYTES, default 64 MiB).");
  m.attr("max_seeds") = stretch::sim::kMaxSeeds;
  m.attr("max_plan_seeds") = stretch::planner::kMaxSeeds;
  m.attr("compatible_deepspeed_version") =
      std::string(stretch::elasticity::kCompatibleDeepspeedVersion);
  registerLive(m);
}
