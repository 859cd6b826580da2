// `stretch launch`: DeepSpeed's `deepspeed` launcher with an elastic agent (docs/launch.md).
//
//   stretch launch [--hostfile F] [--include S | --exclude S] [--num_nodes N] [--num_gpus G]
//                  [--master_addr A] [--master_port P] [--launcher local]
//                  [--elastic MIN:MAX] [--max_restarts R] [--monitor_interval S]
//                  [--log_dir D] [--event_log F] [--config DS_CONFIG] [--checkpoint_dir D]
//                  PROGRAM [ARGS...]
//
// This machine's slots run under one agent (runtime/agent/local_agent.hpp): it starts a worker
// per slot with RANK, LOCAL_RANK, WORLD_SIZE, ... (runtime/launcher/worker_env.hpp), restarts
// them after a failure (up to --max_restarts) with the batch the elastic solver gives the world
// size, and stops them all on Ctrl-C or SIGTERM. Exit status: 0 the job succeeded, 2 bad input,
// the failed worker's status (or 1) when the job failed, 128 + signal when interrupted.

#include <atomic>
#include <iostream>
#include <optional>
#include <random>
#include <signal.h>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "runtime/accel/accelerator.hpp"
#include "runtime/agent/local_agent.hpp"
#include "runtime/common/error.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/launcher/hostfile.hpp"
#include "runtime/launcher/launch_error.hpp"
#include "runtime/launcher/worker_env.hpp"

namespace stretch::cli {

namespace {

std::atomic<int> gStopSignal{0};

void onStopSignal(int sig) {
  gStopSignal.store(sig);
}

struct LaunchOptions {
  std::string hostfile;
  std::string include;
  std::string exclude;
  std::optional<int> numNodes;
  std::optional<int> numGpus;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  std::string launcher = "local";
  std::string elastic;
  std::optional<std::int64_t> maxRestarts;
  double monitorInterval = 1.0;
  std::string logDir;
  std::string eventLog;
  std::string config;
  std::string checkpointDir;
  std::vector<std::string> command;
};

std::string randomToken() {
  std::random_device rd;
  return fmt::format("{:016x}{:016x}", (static_cast<std::uint64_t>(rd()) << 32) | rd(),
                     (static_cast<std::uint64_t>(rd()) << 32) | rd());
}

// "MIN:MAX" node counts.
std::pair<std::int64_t, std::int64_t> parseElastic(const std::string& text) {
  const auto colon = text.find(':');
  try {
    if (colon != std::string::npos) {
      std::size_t used = 0;
      const auto lo = std::stoll(text.substr(0, colon), &used);
      if (used == colon) {
        const std::string rest = text.substr(colon + 1);
        const auto hi = std::stoll(rest, &used);
        if (used == rest.size() && lo >= 1 && hi >= lo)
          return {lo, hi};
      }
    }
  } catch (...) {
  }
  throw launcher::LaunchError(
      ErrorDetail{"--elastic", text, "MIN:MAX node counts, 1 <= MIN <= MAX"});
}

int run(const LaunchOptions& o) {
  try {
    if (o.launcher != "local") {
      throw launcher::LaunchError(ErrorDetail{
          "--launcher", o.launcher,
          "local (multi-node launch through ssh, pdsh and mpirun is not available in this "
          "release)"});
    }
    const int defaultSlots = [&] {
      if (o.numGpus)
        return *o.numGpus;
      const auto accel = accel::getAccelerator();
      return accel->deviceType() == "cpu" ? 1 : std::max(1, accel->deviceCount());
    }();
    const launcher::ResourcePool pool = o.hostfile.empty()
                                            ? launcher::localResourcePool(defaultSlots)
                                            : launcher::loadHostfile(o.hostfile);
    const launcher::ActiveResources active = launcher::applyFilters(
        pool, o.include, o.exclude, o.numNodes, o.hostfile.empty() ? std::nullopt : o.numGpus);
    if (active.hosts.size() != 1) {
      throw launcher::LaunchError(ErrorDetail{
          o.hostfile.empty() ? "--include" : "--hostfile",
          std::to_string(active.hosts.size()) + " hosts",
          "one host for --launcher local (multi-node launch is not available in this release)"});
    }
    const auto& [host, slotIndices] = active.hosts.front();

    agent::LocalAgentOptions options;
    options.nodeId = host;
    options.slots = static_cast<std::int64_t>(slotIndices.size());
    options.command = o.command;
    options.logDir = o.logDir;
    if (!o.eventLog.empty())
      options.eventLog = o.eventLog;
    if (!o.checkpointDir.empty())
      options.checkpointDir = o.checkpointDir;
    options.monitorInterval = std::chrono::duration_cast<agent::Duration>(
        std::chrono::duration<double>(o.monitorInterval));
    options.stopSignal = &gStopSignal;

    std::optional<std::string> elasticJson;
    if (!o.config.empty()) {
      const auto parsed = config::loadConfig(o.config);
      for (const auto& w : parsed.warnings)
        spdlog::warn("{}", w);
      options.config.training = parsed.config;
      if (parsed.config.elasticity.enabled) {
        // The workers' runtime checks it against its own (ensure_immutable_elastic_config).
        elasticJson = nlohmann::json::parse(config::toJson(parsed.config))["elasticity"].dump();
      }
    } else {
      // No config: every world size is valid (one sample per rank and step).
      options.config.training.batch.microBatchPerGpu = 1;
    }
    if (!o.elastic.empty()) {
      const auto [lo, hi] = parseElastic(o.elastic);
      options.config.minNodes = lo;
      options.config.maxNodes = hi;
    }
    options.config.maxRestarts = o.maxRestarts.value_or(o.elastic.empty() ? 0 : 100);
    options.config.lastCall = std::chrono::seconds(0);

    const std::string token = randomToken();
    const std::vector<int> cudaSlots = slotIndices;
    const bool gpus = accel::getAccelerator()->deviceType() != "cpu";
    options.environment = [&, elasticJson, token, cudaSlots, gpus](
                              const agent::StartWorkers& start, const agent::NodeAssignment& node,
                              std::int64_t localRank) {
      launcher::WorkerEnvSpec spec;
      spec.nodeRank = node.nodeRank;
      spec.numNodes = static_cast<std::int64_t>(start.nodes.size());
      spec.localRank = localRank;
      spec.localWorldSize = node.localWorldSize;
      spec.globalRank = node.firstRank + localRank;
      spec.worldSize = start.worldSize;
      spec.masterAddr = o.masterAddr;
      spec.masterPort = o.masterPort;
      spec.restartCount = start.restartCount;
      spec.maxRestarts = options.config.maxRestarts;
      spec.storeToken = token;
      if (gpus) {
        spec.cudaVisibleDevices =
            std::vector<int>(cudaSlots.begin(), cudaSlots.begin() + node.localWorldSize);
      }
      spec.elasticityConfigJson = elasticJson;
      return launcher::workerEnvironment(spec);
    };

    struct sigaction action {};
    action.sa_handler = onStopSignal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);

    const auto result = agent::runLocalAgent(options);
    for (const auto& d : result.recoveryTimes) {
      spdlog::info("agent: restart took {:.3f} s from the failure to the new workers",
                   std::chrono::duration<double>(d).count());
    }
    if (result.exitCode != 0)
      std::cerr << "stretch launch: error: " << result.message << "\n";
    return result.exitCode;
  } catch (const ConfigError& e) {
    std::cerr << "stretch launch: error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const IoError& e) {
    std::cerr << "stretch launch: error: " << e.what() << "\n";
    return kExitUsage;
  }
}

}  // namespace

Command addLaunchCommand(CLI::App& app) {
  auto options = std::make_shared<LaunchOptions>();
  CLI::App* sub = app.add_subcommand(
      "launch",
      "Run PROGRAM on this machine's slots under an elastic agent, as DeepSpeed's `deepspeed` "
      "launcher: one worker per slot with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, "
      "MASTER_ADDR, MASTER_PORT, STRETCH_RESTART_COUNT, ... set; failed workers are restarted "
      "(--max_restarts) with the batch the elastic solver gives the world size; Ctrl-C stops "
      "them all.");
  sub->add_option("--hostfile", options->hostfile, "hostfile: `host slots=N` per line");
  sub->add_option("--include", options->include, "hosts and slots to use: host:0,1@host2");
  sub->add_option("--exclude", options->exclude, "hosts and slots to leave out");
  sub->add_option("--num_nodes", options->numNodes, "use the first N hosts")
      ->check(CLI::PositiveNumber);
  sub->add_option("--num_gpus", options->numGpus,
                  "slots per host (default: the GPUs here, or 1 on a CPU-only machine)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--master_addr", options->masterAddr, "rank 0's address")->capture_default_str();
  sub->add_option("--master_port", options->masterPort, "rank 0's rendezvous port")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  sub->add_option("--launcher", options->launcher, "local (ssh, pdsh, mpirun: not yet)")
      ->capture_default_str();
  sub->add_option("--elastic", options->elastic,
                  "MIN:MAX nodes; enables restarts (100 by default)");
  sub->add_option("--max_restarts", options->maxRestarts,
                  "restarts after failures before giving up (default 0, elastic 100)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--monitor_interval", options->monitorInterval,
                  "seconds between the agent's checks")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--log_dir", options->logDir,
                  "write each worker's output to LOG_DIR/attempt_K/rank_R.log");
  sub->add_option("--event_log", options->eventLog, "append the agent's events as JSON lines");
  sub->add_option("--config", options->config,
                  "the job's DeepSpeed config: its elasticity section decides the valid world "
                  "sizes and batch");
  sub->add_option("--checkpoint_dir", options->checkpointDir,
                  "the job's checkpoint directory (the event log records the resume step)");
  // PROGRAM and everything after it belong to the workers.
  sub->prefix_command();
  sub->footer("PROGRAM [ARGS...]  the worker program and its arguments (required)");
  return {sub, [options, sub] {
            options->command = sub->remaining();
            if (options->command.empty()) {
              std::cerr << "stretch launch: error: no PROGRAM given (expected "
                           "`stretch launch [OPTIONS] PROGRAM [ARGS...]`)\n";
              return kExitUsage;
            }
            return run(*options);
          }};
}

}  // namespace stretch::cli
