// `stretch launch`: DeepSpeed's `deepspeed` launcher with an elastic agent (docs/launch.md).
//
//   stretch launch [-H F] [-i S | -e S] [--num_nodes N] [--num_gpus G] [--master_addr A]
//                  [--master_port P] [--launcher pdsh|ssh|openmpi|slurm|local|netns]
//                  [--launcher_args A]
//                  [--elastic MIN:MAX | --elastic_training --min_elastic_nodes N
//                  --max_elastic_nodes N] [--no_ssh --node_rank K] [--module | --no_python]
//                  [--no_local_rank] [--bind_cores_to_rank [--bind_core_list L]] [--save_pid]
//                  [--config DS_CONFIG] [--log_dir D] [--event_log F] [--checkpoint_dir D] ...
//                  PROGRAM [ARGS...]
// DeepSpeed's runner flags keep DeepSpeed's meaning (docs/compatibility.md lists them all);
// --autotuning and --venv_script are refused by name.
//
// The flags become a launcher::LaunchRequest and runtime/launcher/launch.hpp runs the job.
// Exit status: 0 the job succeeded, 2 bad input, the failed worker's status (or 1) when the job
// failed, 128 + signal when interrupted (SIGINT, SIGTERM, SIGHUP, SIGQUIT), 74 when it succeeded
// but output was lost (an event log or rank log on a full disk).

#include <csignal>
#include <iostream>
#include <map>
#include <memory>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "runtime/common/error.hpp"
#include "runtime/launcher/launch.hpp"
#include "runtime/launcher/stop_signal.hpp"

namespace stretch::cli {

namespace {

// Bad input (ConfigError, IoError, an elasticity section with no plan) is status 2
// (docs/launch.md); anything else that stops the launch (the job store's port taken by another
// process, a runner that cannot start) is 1.
int run(launcher::LaunchRequest request) {
  return runCommand("launch", ErrorStyle{.kind = false}, [&] {
    // SIGHUP: the ssh session or terminal went away; SIGQUIT: Ctrl-\. Both stop the job as
    // SIGTERM does (every worker's process group, an `interrupted` event) instead of killing
    // the launcher alone.
    request.stopSignal = &launcher::installStopSignals({SIGINT, SIGTERM, SIGHUP, SIGQUIT});
    const auto result = launcher::runLaunch(request);
    for (const auto& d : result.recoveryTimes) {
      spdlog::info("agent: restart took {:.3f} s from the failure to the new workers",
                   std::chrono::duration<double>(d).count());
    }
    if (result.liveRecoveries > 0) {
      spdlog::info(
          "agent: {} generation change(s) continued live (the running workers kept training); "
          "{} failure(s) in all",
          result.liveRecoveries, result.recoveryTimes.size());
    }
    if (result.exitCode != 0)
      std::cerr << "stretch launch: error: " << result.message << "\n";
    for (const std::string& lost : result.lostOutput)
      std::cerr << "stretch launch: error: output lost: " << lost << "\n";
    if (result.exitCode == 0 && !result.lostOutput.empty()) {
      std::cerr << "stretch launch: the job finished, but some of its output could not be "
                   "written (exit status "
                << kExitOutputLost << ")\n";
      return kExitOutputLost;
    }
    return result.exitCode;
  });
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
  sub->add_option("-H,--hostfile", options->hostfile,
                  "hostfile: `host slots=N` per line (default: /job/hostfile when it exists, "
                  "else this machine)");
  // Empty would mean "not given" (every host): refuse it instead.
  const CLI::Validator hosts(
      [](std::string& value) {
        return value.empty() ? std::string(
                                   "an empty filter would mean every host; name the "
                                   "hosts, e.g. host1:0,1@host2")
                             : std::string();
      },
      "HOSTS");
  sub->add_option("-i,--include", options->include, "hosts and slots to use: host:0,1@host2")
      ->check(hosts);
  sub->add_option("-e,--exclude", options->exclude, "hosts and slots to leave out")->check(hosts);
  sub->add_option("--num_nodes", options->numNodes, "use the first N hosts")
      ->check(CLI::PositiveNumber);
  sub->add_option("--num_gpus,--num_accelerators", options->numGpus,
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
                  "how node agents start: pdsh (default for several hosts, as DeepSpeed), ssh, "
                  "openmpi (alias mpirun), slurm (srun inside an allocation; hosts from "
                  "SLURM_JOB_NODELIST without a hostfile), local (default for one host; several "
                  "hostfile hosts run as separate agents on this machine), netns (`ip netns exec "
                  "HOST`, for tests)");
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
  // Keep-alive for nodes, heartbeat for workers (--hang_timeout); the old name stays accepted.
  sub->add_option("--keepalive_timeout,--heartbeat_timeout", options->keepAliveTimeout,
                  "multi-node: seconds without a node's keep-alive before it counts as lost "
                  "(--heartbeat_timeout is its old name)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--last_call", options->lastCall,
                  "multi-node elastic: seconds to wait for more nodes before (re)starting")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--elastic", options->elastic,
                  "MIN:MAX nodes; enables restarts (100 by default)");
  sub->add_flag("--elastic_training", options->elasticTraining,
                "DeepSpeed's elastic switch: nodes between --min_elastic_nodes (default 1) and "
                "--max_elastic_nodes (default: the hosts); same as --elastic MIN:MAX");
  sub->add_option("--min_elastic_nodes", options->minElasticNodes,
                  "with --elastic_training: fewest nodes the job runs on");
  sub->add_option("--max_elastic_nodes", options->maxElasticNodes,
                  "with --elastic_training: most nodes the job runs on");
  sub->add_flag("--module", options->commandRules.module,
                "run PROGRAM as a Python module: python3 -u -m PROGRAM");
  sub->add_flag("--no_python", options->commandRules.noPython,
                "run PROGRAM as is even when it ends in .py (no python3 -u in front)");
  sub->add_flag("--no_local_rank", options->commandRules.noLocalRank,
                "do not pass --local_rank=N to a Python PROGRAM (LOCAL_RANK is always in the "
                "environment; elastic jobs never get the flag)");
  sub->add_flag("--bind_cores_to_rank", options->commandRules.bindCoresToRank,
                "give each worker its own block of cores (numactl -C, or taskset -c) and "
                "OMP_NUM_THREADS = cores per worker");
  sub->add_option("--bind_core_list", options->commandRules.bindCoreList,
                  "with --bind_cores_to_rank: the cores to share out, e.g. 0-7,16-23 (default: "
                  "every core the agent may use)");
  sub->add_option("--node_rank", options->nodeRank,
                  "with --no_ssh: this node's line in the hostfile, from 0");
  sub->add_flag("--no_ssh", options->noSsh,
                "start no remote agents: run `stretch launch --no_ssh --node_rank K` on every "
                "node yourself (rank 0 serves the job's store on --master_addr; all need the "
                "same STRETCH_STORE_TOKEN)");
  sub->add_flag("--no_ssh_check", options->noSshCheck,
                "accepted for DeepSpeed compatibility: Stretch does not probe ssh first (a host "
                "it cannot reach shows up as an agent that never registers)");
  sub->add_flag("--force_multi", options->forceMulti,
                "run the job store and node agents even for a single host");
  sub->add_flag("--save_pid", options->savePid,
                "write this launcher's pid to $TMPDIR/<pid>.deepspeed while it runs");
  sub->add_option("--enable_each_rank_log", options->eachRankLog,
                  "DeepSpeed's name for --log_dir: each worker's output in its own file");
  sub->add_option("--max_restarts", options->maxRestarts,
                  "restarts after failures before giving up (default 0, elastic 100)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--recovery", options->recovery,
                  "after a failure: 'live' keeps the surviving workers training when every "
                  "worker says it can (the Stretch engine: a failure costs the step in flight, "
                  "no restart, no checkpoint read) and restarts every worker from the "
                  "checkpoint otherwise; 'restart' always restarts. 'auto' is the old name of "
                  "'live'")
      ->transform(CLI::Transformer(std::map<std::string, std::string>{{"auto", "live"}}))
      ->check(CLI::IsMember({"live", "restart"}))
      ->capture_default_str();
  sub->add_option("--hang_timeout", options->hangTimeout,
                  "seconds a worker may go without a heartbeat (the Stretch engine beats every "
                  "second; other programs may write STRETCH_HEARTBEAT_FILE once per step) before "
                  "it counts as hung and is killed: exactly this limit when given; left to the "
                  "default, the limit grows to 10x the longest gap between a worker's beats "
                  "(a program that beats once per step); 0: off")
      ->check(CLI::NonNegativeNumber)
      ->each([options](const std::string&) { options->hangTimeoutGiven = true; })
      ->capture_default_str();
  sub->add_option("--crash_loop_limit", options->crashLoopLimit,
                  "generations in a row that fail the same way (exit code) before their first "
                  "step before the job fails; meanwhile restarts back off 1, 2, 4, ... s (at "
                  "most 60 s); 0: no limit")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
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
  auto refused = std::make_shared<std::vector<std::pair<std::string, std::string>>>();
  sub->add_option_function<std::string>(
      "--autotuning",
      [refused](const std::string& v) {
        refused->emplace_back("--autotuning " + v,
                              "DeepSpeed's autotuner is not part of Stretch; run it with "
                              "DeepSpeed, then launch the tuned config with --config");
      },
      "refused: DeepSpeed's autotuner is not part of Stretch");
  sub->add_option_function<std::string>(
      "--venv_script",
      [refused](const std::string& v) {
        refused->emplace_back("--venv_script " + v,
                              "not supported yet: activate the environment in the remote "
                              "login shell's startup file, or give the interpreter's full "
                              "path as PROGRAM");
      },
      "refused: not supported yet (see docs/compatibility.md)");
  auto logLevel = std::make_shared<std::string>("info");
  sub->add_option("--log_level", *logLevel, "the launcher's log level")
      ->check(CLI::IsMember({"debug", "info", "warning", "error", "critical"}))
      ->capture_default_str();
  sub->add_flag_callback(
      "-q,--quiet", [logLevel] { *logLevel = "error"; }, "only errors (--log_level error)");
  // PROGRAM and everything after it belong to the workers.
  sub->prefix_command();
  sub->footer("PROGRAM [ARGS...]  the worker program and its arguments (required)");
  return {sub, [options, sub, refused, logLevel] {
            if (!refused->empty()) {
              std::cerr << "stretch launch: error: " << refused->front().first << ": "
                        << refused->front().second << "\n";
              return kExitUsage;
            }
            spdlog::set_level(*logLevel == "warning" ? spdlog::level::warn
                                                     : spdlog::level::from_str(*logLevel));
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
