// `stretch launch`: DeepSpeed's `deepspeed` launcher with an elastic agent (docs/launch.md).
//
//   stretch launch [--hostfile F] [--include S | --exclude S] [--num_nodes N] [--num_gpus G]
//                  [--master_addr A] [--master_port P] [--launcher local|ssh|pdsh|openmpi|netns]
//                  [--rdzv_addr A] [--rdzv_port P] [--heartbeat_timeout S] [--last_call S]
//                  [--elastic MIN:MAX] [--max_restarts R] [--monitor_interval S]
//                  [--log_dir D] [--event_log F] [--config DS_CONFIG] [--checkpoint_dir D]
//                  PROGRAM [ARGS...]
//
// The flags become a launcher::LaunchRequest and runtime/launcher/launch.hpp runs the job.
// Exit status: 0 the job succeeded, 2 bad input, the failed worker's status (or 1) when the job
// failed, 128 + signal when interrupted.

#include <csignal>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "runtime/common/error.hpp"
#include "runtime/launcher/launch.hpp"
#include "runtime/launcher/stop_signal.hpp"

namespace stretch::cli {

namespace {

int run(launcher::LaunchRequest request) {
  try {
    request.stopSignal = &launcher::installStopSignals({SIGINT, SIGTERM});
    const auto result = launcher::runLaunch(request);
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
  auto options = std::make_shared<launcher::LaunchRequest>();
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
  sub->add_option("--master_addr", options->masterAddr,
                  "rank 0's address (MASTER_ADDR; multi-node default: the address node rank 0 "
                  "registered with)")
      ->capture_default_str()
      ->each([options](const std::string&) { options->masterAddrGiven = true; });
  sub->add_option("--master_port", options->masterPort, "rank 0's rendezvous port")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  sub->add_option("--launcher", options->launcher,
                  "how node agents start: local (this machine; several hostfile hosts run as "
                  "separate agents here), ssh, pdsh, openmpi (alias mpirun), netns (`ip netns "
                  "exec HOST`, for tests)")
      ->capture_default_str();
  sub->add_option("--launcher_args", options->launcherArgs,
                  "extra arguments for ssh, pdsh or mpirun, separated by blanks");
  sub->add_option("--ssh_port", options->sshPort, "ssh/pdsh: the hosts' ssh port")
      ->check(CLI::Range(1, 65535));
  sub->add_option("--rdzv_addr", options->rdzvAddr,
                  "multi-node: address the job's store listens on (default: 127.0.0.1 for "
                  "local, else --master_addr when given, else this host's first address)");
  sub->add_option("--rdzv_port", options->rdzvPort,
                  "multi-node: port of the job's store (default: --master_port + 1)")
      ->check(CLI::Range(1, 65535));
  sub->add_option("--heartbeat_timeout", options->heartbeatTimeout,
                  "multi-node: seconds without a node's keep-alive before it counts as lost")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--last_call", options->lastCall,
                  "multi-node elastic: seconds to wait for more nodes before (re)starting")
      ->check(CLI::NonNegativeNumber)
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
            // Everything from the first word CLI11 does not know is PROGRAM; a word that looks
            // like a flag there is a mistyped or unsupported flag, not a program to start.
            const std::string& first = options->command.front();
            if (first.size() > 1 && first.front() == '-') {
              std::cerr << "stretch launch: error: unknown flag " << first
                        << " before PROGRAM (see `stretch launch --help`; flags after PROGRAM "
                           "belong to the program)\n";
              return kExitUsage;
            }
            return run(*options);
          }};
}

}  // namespace stretch::cli
