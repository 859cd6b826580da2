// `stretch plan [JOB]`: plan an elastic job before paying for GPUs (planner/, issue 7): which
// global batch and micro batches keep the most GPU counts valid, what each world size means for
// micro batch and accumulation, how often to checkpoint, and how much time failures cost at each
// scale. With no JOB it plans the bundled example (fixtures/plans/example.json, compiled in).
//
// Output: the report on stdout (or --out FILE) as a table, JSON (schema: docs/planner.md),
// CSV, Markdown or one self-contained HTML page; --emit-config writes the recommended DeepSpeed
// config. A progress bar on stderr when it is a terminal. Exit status: 0 on success, 2 on bad
// input (the message names the key, the value and what was expected).

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/mpi_group.hpp"
#include "cli/output.hpp"
#include "cli/progress_bar.hpp"
#include "planner/plan.hpp"
#include "planner/plan_input.hpp"
#include "planner/report.hpp"

namespace stretch::cli {

namespace {

struct PlanCliOptions {
  std::string job;
  std::string objective;
  std::optional<std::int64_t> seeds;
  std::optional<std::int64_t> sweepSeeds;
  std::optional<double> price;
  std::optional<std::uint64_t> seed;
  int threads = 0;
  std::string format = "table";
  std::string out;
  std::string emitConfig;
  std::string presets;
  bool quiet = false;
};

void writeFile(const std::string& path, const std::string& text, const std::string& flag) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    throw IoError(ErrorDetail{flag, path, "a file that can be written"});
  }
}

// Fails now, before a plan that may take minutes, when `path` cannot be written: the file is
// opened for writing as it is (an existing file keeps its bytes; a missing one is created and
// removed again), so a missing folder, a read-only place or a directory is found at once.
// Devices and pipes (/dev/stdout, a FIFO) are left to the write itself: opening one is not free.
void checkWritable(const std::string& path, const std::string& flag) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    return;
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  bool created = false;
  if (fd < 0 && errno == ENOENT) {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0644);
    created = fd >= 0;
  }
  if (fd < 0) {
    throw IoError(ErrorDetail{
        flag, path, fmt::format("a file that can be written ({})", std::strerror(errno))});
  }
  ::close(fd);
  if (created) {
    ::unlink(path.c_str());
  }
}

int runPlan(const PlanCliOptions& o) {
  const auto format = planner::parseReportFormat(o.format);
  const bool json = format == planner::ReportFormat::Json;
  // Under mpirun every rank plans, running its block of each batch of replicas; rank 0 alone
  // writes and prints.
  std::unique_ptr<sim::ReplicaGroup> group;
  bool root = true;
  ErrorStyle style{.json = json};
  return runCommand("plan", style, [&] {
    group = joinMpiWorld("plan");
    root = group == nullptr || group->rank() == 0;
    style.print = root;
    if (!format) {
      throw ConfigError(ErrorDetail{"--format", o.format, "table, json, csv, md or html"});
    }
    if (root && !o.out.empty()) {
      checkWritable(o.out, "--out");
    }
    if (root && !o.emitConfig.empty()) {
      checkWritable(o.emitConfig, "--emit-config");
    }
    sim::ScenarioOptions so;
    so.presetDir = o.presets;
    planner::PlanInput input =
        o.job.empty() ? planner::bundledExample() : planner::loadPlanInput(o.job, so);
    if (!o.objective.empty()) {
      const auto objective = planner::parseObjective(o.objective);
      if (!objective) {
        throw ConfigError(ErrorDetail{"--objective", o.objective, "time, cost or ettr"});
      }
      input.settings.objective = *objective;
    }
    if (o.seeds) {
      input.settings.seeds = *o.seeds;
    }
    if (o.sweepSeeds) {
      input.settings.sweepSeeds = *o.sweepSeeds;
    }
    if (o.price) {
      input.settings.pricePerGpuHour = *o.price;
    }
    if (o.seed) {
      input.scenario.seed = *o.seed;
    }
    if (!json && root) {
      for (const std::string& w : input.warnings) {
        printWarning("plan", w);
      }
    }

    ProgressBar bar(root && !o.quiet, std::chrono::milliseconds(250));
    planner::PlanOptions options;
    options.threads = o.threads;
    options.group = group.get();
    options.progress = [&](const planner::PlanProgress& p) { bar.update(p.fraction, p.stage); };
    const planner::Plan plan = planner::makePlan(input, options);
    bar.clear();
    if (!root) {
      return kExitOk;
    }

    const std::string text = planner::renderPlan(plan, *format);
    if (!o.emitConfig.empty()) {
      writeFile(o.emitConfig, plan.recommendation.configJson + "\n", "--emit-config");
    }
    if (o.out.empty()) {
      std::cout << text << std::flush;
    } else {
      writeFile(o.out, text, "--out");
      if (!o.quiet) {
        std::cerr << fmt::format("stretch plan: wrote {} ({} report, {:.2f} s)\n", o.out,
                                 planner::toString(*format), plan.wallSeconds);
      }
    }
    return kExitOk;
  });
}

}  // namespace

Command addPlanCommand(CLI::App& app) {
  auto o = std::make_shared<PlanCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "plan",
      "Plan an elastic job before paying for GPUs: the global batch and micro batches that keep "
      "the most GPU counts valid (DeepSpeed elasticity 0.1, 0.2 and Stretch's exact solver), the "
      "micro batch and accumulation at each world size, the checkpoint interval (Young, Daly and "
      "a Monte Carlo optimum from the simulator), and ETTR, time to train, GPU-hours and cost at "
      "each scale under failures; then a recommendation and its DeepSpeed config. With no JOB, "
      "plans the bundled example. Schema and formulas: docs/planner.md; examples: "
      "fixtures/plans/.");
  sub->add_option("JOB", o->job,
                  "job file: a simulator scenario (docs/simulator.md) with an optional \"plan\" "
                  "object (search ranges, objective, price); default: the bundled example");
  sub->add_option("--objective", o->objective,
                  "what the recommendation optimises: time (to train), cost, or ettr (default: "
                  "the job's plan.objective, else time)");
  sub->add_option("--seeds", o->seeds,
                  "Monte Carlo replicas per scale-table row (0: analytic Daly estimates, the "
                  "default) and per checkpoint interval")
      ->check(CLI::Range(std::int64_t{0}, planner::kMaxSeeds));
  sub->add_option("--sweep-seeds", o->sweepSeeds,
                  "replicas per checkpoint interval only (default: --seeds, or as many as fit "
                  "in about half a second)")
      ->check(CLI::Range(std::int64_t{1}, planner::kMaxSeeds));
  sub->add_option("--price", o->price, "price per GPU-hour (adds cost columns)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--threads", o->threads, "threads for the simulations (default: every core)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--seed", o->seed, "override the job's seed");
  sub->add_option("--format", o->format, "table, json, csv, md or html (one self-contained page)")
      ->capture_default_str();
  sub->add_option("--out", o->out, "write the report to this file instead of stdout");
  sub->add_option("--emit-config", o->emitConfig,
                  "write the recommended DeepSpeed config (JSON) to this file");
  sub->add_option("--presets", o->presets,
                  "cluster preset folder (default: $STRETCH_CLUSTER_PRESETS, the job's "
                  "../clusters, or the source tree's fixtures/clusters)");
  sub->add_flag("-q,--quiet", o->quiet, "no progress bar");
  return {sub, [o] { return runPlan(*o); }};
}

}  // namespace stretch::cli
