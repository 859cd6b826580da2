// `stretch launch`: DeepSpeed's `deepspeed` launcher with an elastic agent (docs/launch.md).
//
//   stretch launch [--hostfile F] [--include S | --exclude S] [--num_nodes N] [--num_gpus G]
//                  [--master_addr A] [--master_port P] [--launcher local|ssh|pdsh|openmpi|netns]
//                  [--rdzv_addr A] [--rdzv_port P] [--heartbeat_timeout S] [--last_call S]
//                  [--elastic MIN:MAX] [--max_restarts R] [--monitor_interval S]
//                  [--log_dir D] [--event_log F] [--config DS_CONFIG] [--checkpoint_dir D]
//                  PROGRAM [ARGS...]
//
// One host: this machine's slots run under one agent (runtime/agent/local_agent.hpp).
// Several hosts (or a remote runner): this process serves the job's store on --rdzv_port and runs
// the job controller; one `stretch agent` per host, started through the runner, runs that
// host's workers (runtime/agent/job_controller.hpp). Either way the agent starts a worker
// per slot with RANK, LOCAL_RANK, WORLD_SIZE, ... (runtime/launcher/worker_env.hpp), restarts
// them after a failure (up to --max_restarts) with the batch the elastic solver gives the world
// size, and stops them all on Ctrl-C or SIGTERM. Exit status: 0 the job succeeded, 2 bad input,
// the failed worker's status (or 1) when the job failed, 128 + signal when interrupted.

#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ifaddrs.h>
#include <iostream>
#include <net/if.h>
#include <optional>
#include <random>
#include <signal.h>
#include <sstream>
#include <string>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "cli/launch_common.hpp"
#include "runtime/accel/accelerator.hpp"
#include "runtime/agent/job_controller.hpp"
#include "runtime/agent/local_agent.hpp"
#include "runtime/comm/tcp_store.hpp"
#include "runtime/common/error.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/launcher/hostfile.hpp"
#include "runtime/launcher/launch_error.hpp"
#include "runtime/launcher/remote.hpp"

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
  bool masterAddrGiven = false;
  std::string launcher = "local";
  std::string rdzvAddr;
  std::optional<int> rdzvPort;
  double heartbeatTimeout = 5.0;
  double lastCall = 2.0;
  std::string launcherArgs;
  std::optional<int> sshPort;
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

agent::Duration toDuration(double seconds) {
  return std::chrono::duration_cast<agent::Duration>(std::chrono::duration<double>(seconds));
}

// A process that brings up node agents (ssh, pdsh, mpirun, ip netns exec, or the agent itself).
struct LaunchedProcess {
  pid_t pid = -1;
  std::string what;
  std::vector<std::string> hosts;  // the nodes whose agents it runs
  std::optional<int> status;       // set once reaped
  bool reported = false;           // its end was told to the controller
};

// fork + exec argv with `env` added to this environment, in its own process group, killed
// (SIGTERM) when the launcher dies; `input` is written to its stdin when given.
LaunchedProcess spawn(const launcher::NodeLaunch& launch, const std::optional<std::string>& input) {
  int pipeFds[2] = {-1, -1};
  if (input && ::pipe(pipeFds) != 0)
    throw IoError(fmt::format("cannot create a pipe for {}: {}", launch.argv[0], strerror(errno)));
  std::vector<std::string> envText;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (!launch.env.count(kv.substr(0, kv.find('='))))
      envText.push_back(kv);
  }
  for (const auto& [k, v] : launch.env)
    envText.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& kv : envText)
    envp.push_back(kv.data());
  envp.push_back(nullptr);
  std::vector<std::string> argvText = launch.argv;
  std::vector<char*> argv;
  for (auto& a : argvText)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0)
    throw Error(fmt::format("cannot start {}: fork failed: {}", launch.argv[0], strerror(errno)));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent)
      ::_exit(1);
    if (input) {
      ::dup2(pipeFds[0], STDIN_FILENO);
      ::close(pipeFds[0]);
      ::close(pipeFds[1]);
    }
    ::execvpe(argv[0], argv.data(), envp.data());
    std::fprintf(stderr, "stretch launch: cannot run %s: %s\n", argv[0], strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  if (input) {
    ::close(pipeFds[0]);
    const std::string data = *input + "\n";
    [[maybe_unused]] const auto written = ::write(pipeFds[1], data.data(), data.size());
    ::close(pipeFds[1]);
  }
  return {pid, launcher::shellJoin(launch.argv), {}, std::nullopt, false};
}

void reap(std::vector<LaunchedProcess>& processes) {
  for (auto& p : processes) {
    int status = 0;
    if (!p.status && ::waitpid(p.pid, &status, WNOHANG) == p.pid)
      p.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
}

// Waits up to `grace` for the processes to end, then SIGTERMs and finally SIGKILLs their groups.
void finish(std::vector<LaunchedProcess>& processes, std::chrono::milliseconds grace) {
  auto allDone = [&] {
    reap(processes);
    for (const auto& p : processes) {
      if (!p.status)
        return false;
    }
    return true;
  };
  for (int signal : {0, SIGTERM, SIGKILL}) {
    if (signal != 0) {
      for (const auto& p : processes) {
        if (!p.status)
          ::kill(-p.pid, signal);
      }
    }
    const auto until = std::chrono::steady_clock::now() + grace;
    while (!allDone() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (allDone())
      return;
  }
}

// The first IPv4 address of an interface that is up and not loopback; "127.0.0.1" without one.
std::string hostAddress() {
  ifaddrs* list = nullptr;
  std::string out = "127.0.0.1";
  if (::getifaddrs(&list) != 0)
    return out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET ||
        (a->ifa_flags & IFF_UP) == 0 || (a->ifa_flags & IFF_LOOPBACK) != 0)
      continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr) {
      out = text;
      break;
    }
  }
  ::freeifaddrs(list);
  return out;
}

void installStopHandlers() {
  struct sigaction action {};
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int report(const agent::AgentResult& result) {
  for (const auto& d : result.recoveryTimes) {
    spdlog::info("agent: restart took {:.3f} s from the failure to the new workers",
                 std::chrono::duration<double>(d).count());
  }
  if (result.exitCode != 0)
    std::cerr << "stretch launch: error: " << result.message << "\n";
  return result.exitCode;
}

// Several nodes: this process serves the job's store and runs the controller; one `stretch
// agent` per host runs that host's workers.
int runMultiNode(const LaunchOptions& o, const launcher::ActiveResources& active,
                 agent::AgentConfig config, JobSettings job) {
  const launcher::RunnerKind runner = launcher::parseRunnerKind(o.launcher);
  std::vector<LaunchHost> hosts;
  for (const auto& [host, slots] : active.hosts)
    hosts.push_back({host, slots});
  const std::string rdzvAddr = !o.rdzvAddr.empty()                     ? o.rdzvAddr
                               : runner == launcher::RunnerKind::Local ? "127.0.0.1"
                               : o.masterAddrGiven                     ? o.masterAddr
                                                                       : hostAddress();
  const int rdzvPort = o.rdzvPort.value_or(o.masterPort + 1);
  if (rdzvPort == o.masterPort || rdzvPort > 65535) {
    throw launcher::LaunchError(ErrorDetail{"--rdzv_port", std::to_string(rdzvPort),
                                            "a port in 1..65535 other than --master_port"});
  }
  comm::TcpStoreOptions storeOptions;
  storeOptions.host = rdzvAddr;
  storeOptions.port = rdzvPort;
  storeOptions.isServer = true;
  storeOptions.token = job.token;
  storeOptions.timeout = std::chrono::seconds(30);
  auto store = std::make_shared<comm::PrefixStore>(agent::kJobPrefix,
                                                   std::make_shared<comm::TcpStore>(storeOptions));
  publishJob(*store, job, hosts);
  spdlog::info("launch: job store on {}:{}; starting {} node agent(s) with the {} runner", rdzvAddr,
               rdzvPort, hosts.size(), launcher::toString(runner));

  launcher::RemoteLaunchSpec spec;
  spec.runner = runner;
  for (const auto& h : hosts)
    spec.hosts.push_back(h.id);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  spec.agentArgv = {self,
                    "agent",
                    "--rdzv",
                    fmt::format("{}:{}", rdzvAddr, rdzvPort),
                    "--node_rank",
                    std::string(launcher::kNodeRankPlaceholder),
                    "--controller_timeout",
                    fmt::format("{}", o.heartbeatTimeout * 3)};
  if (!o.logDir.empty()) {
    spec.agentArgv.push_back("--log_dir");
    spec.agentArgv.push_back(std::filesystem::absolute(o.logDir).string());
  }
  // The token reaches ssh agents on stdin and the others in their environment; never argv.
  const bool tokenOnStdin = runner == launcher::RunnerKind::Ssh;
  if (tokenOnStdin)
    spec.agentArgv.push_back("--token_stdin");
  else
    spec.exports["STRETCH_STORE_TOKEN"] = job.token;
  spec.workDir = std::filesystem::current_path().string();
  spec.sshPort = o.sshPort;
  {
    std::istringstream words(o.launcherArgs);  // DeepSpeed splits --launcher_args on blanks
    for (std::string w; words >> w;)
      spec.launcherArgs.push_back(w);
  }
  if (runner == launcher::RunnerKind::Pdsh) {
    spdlog::warn(
        "launch: pdsh cannot pass the store token on stdin: it is in the remote "
        "command's environment (visible to `ps` on the hosts); use ssh or mpirun when "
        "that matters");
  }
  if (!o.logDir.empty()) {
    // For agents started by hand to grow an elastic job (`stretch agent --token_file`).
    const auto tokenPath = std::filesystem::absolute(o.logDir) / "job_token";
    std::filesystem::create_directories(tokenPath.parent_path());
    { std::ofstream(tokenPath, std::ios::trunc) << ""; }
    std::filesystem::permissions(
        tokenPath, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    std::ofstream(tokenPath, std::ios::trunc) << job.token << "\n";
    spdlog::info(
        "launch: add a node with `stretch agent --rdzv {}:{} --node_id NAME --nproc N "
        "--token_file {}`",
        rdzvAddr, rdzvPort, tokenPath.string());
  }
  std::vector<LaunchedProcess> processes;
  for (const auto& launch : launcher::buildNodeLaunches(spec)) {
    processes.push_back(spawn(launch, tokenOnStdin ? std::optional(job.token) : std::nullopt));
    // Messages show the command without the token.
    for (auto at = processes.back().what.find(job.token); at != std::string::npos;
         at = processes.back().what.find(job.token))
      processes.back().what.replace(at, job.token.size(), "<token>");
    for (const auto rank : launch.nodeRanks)
      processes.back().hosts.push_back(hosts[rank].id);
    spdlog::debug("launch: started {}", processes.back().what);
  }

  agent::JobControllerOptions options;
  options.config = std::move(config);
  options.store = store;
  if (!o.eventLog.empty())
    options.eventLog = o.eventLog;
  if (!o.checkpointDir.empty())
    options.checkpointDir = o.checkpointDir;
  options.monitorInterval = toDuration(o.monitorInterval);
  options.heartbeatTimeout = toDuration(o.heartbeatTimeout);
  options.commandTimeout = toDuration(o.heartbeatTimeout + 10.0);
  if (o.masterAddrGiven)
    options.masterAddr = o.masterAddr;
  for (const auto& h : hosts)
    options.launchHosts.push_back(h.id);
  options.stopSignal = &gStopSignal;
  options.pollLaunchers = [&]() -> std::string {
    reap(processes);
    // A process that runs one node's agent (local, netns, ssh) ended: that node is gone now,
    // no need to wait for its keep-alive to time out.
    for (auto& p : processes) {
      if (p.status && !p.reported && p.hosts.size() == 1) {
        p.reported = true;
        agent::appendRecord(
            *store, "leaves",
            fmt::format("{}\tits agent process ended with status {}", p.hosts.front(), *p.status));
      }
    }
    std::string codes;
    for (const auto& p : processes) {
      if (!p.status)
        return {};
      codes += fmt::format("\n  exit status {}: {}", *p.status, p.what);
    }
    if (store->add("nodes/count", 0) > 0)
      return {};
    return "every process started to bring up the node agents ended before any agent "
           "registered:" +
           codes;
  };
  const auto result = agent::runJobController(options);
  finish(processes, std::chrono::seconds(10));
  return report(result);
}

int run(const LaunchOptions& o) {
  try {
    launcher::parseRunnerKind(o.launcher);  // an unknown runner is an error before anything else
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
    const bool multiNode = active.hosts.size() != 1 || o.launcher != "local";

    agent::AgentConfig config;
    JobSettings job;
    job.command = o.command;
    job.masterPort = o.masterPort;
    job.token = randomToken();
    if (!o.config.empty()) {
      const auto parsed = config::loadConfig(o.config);
      for (const auto& w : parsed.warnings)
        spdlog::warn("{}", w);
      config.training = parsed.config;
      if (parsed.config.elasticity.enabled) {
        // The workers' runtime checks it against its own (ensure_immutable_elastic_config).
        job.elasticJson = nlohmann::json::parse(config::toJson(parsed.config))["elasticity"].dump();
      }
    } else {
      // No config: every world size is valid (one sample per rank and step).
      config.training.batch.microBatchPerGpu = 1;
    }
    const auto hostCount = static_cast<std::int64_t>(active.hosts.size());
    config.minNodes = hostCount;
    config.maxNodes = hostCount;
    if (!o.elastic.empty()) {
      const auto [lo, hi] = parseElastic(o.elastic);
      config.minNodes = lo;
      config.maxNodes = hi;
    }
    config.maxRestarts = o.maxRestarts.value_or(o.elastic.empty() ? 0 : 100);
    job.maxRestarts = config.maxRestarts;
    // One node: nothing to wait for. Several: a short window for the last agents to register.
    config.lastCall = multiNode && !o.elastic.empty() ? toDuration(o.lastCall) : agent::Duration(0);
    installStopHandlers();
    if (multiNode)
      return runMultiNode(o, active, config, job);

    const auto& [host, slotIndices] = active.hosts.front();
    agent::LocalAgentOptions options;
    options.config = config;
    options.nodeId = host;
    options.slots = static_cast<std::int64_t>(slotIndices.size());
    options.command = o.command;
    options.logDir = o.logDir;
    if (!o.eventLog.empty())
      options.eventLog = o.eventLog;
    if (!o.checkpointDir.empty())
      options.checkpointDir = o.checkpointDir;
    options.monitorInterval = toDuration(o.monitorInterval);
    options.stopSignal = &gStopSignal;
    const std::optional<std::vector<int>> devices =
        accel::getAccelerator()->deviceType() != "cpu"
            ? std::optional<std::vector<int>>(slotIndices)
            : std::nullopt;
    const std::string masterAddr = o.masterAddr;
    options.environment = [job, devices, masterAddr](const agent::StartWorkers& start,
                                                     const agent::NodeAssignment& node,
                                                     std::int64_t localRank) {
      return workerEnvironment(job, start, node, localRank, masterAddr, devices);
    };
    return report(agent::runLocalAgent(options));
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
            return run(*options);
          }};
}

}  // namespace stretch::cli
