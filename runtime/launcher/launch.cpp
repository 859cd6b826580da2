#include "runtime/launcher/launch.hpp"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runtime/accel/accelerator.hpp"
#include "runtime/comm/tcp_store.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/common/worker_variables.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/launcher/host_address.hpp"
#include "runtime/launcher/hostfile.hpp"
#include "runtime/launcher/job_controller.hpp"
#include "runtime/launcher/job_protocol.hpp"
#include "runtime/launcher/launch_error.hpp"
#include "runtime/launcher/local_agent.hpp"
#include "runtime/launcher/node_agent.hpp"
#include "runtime/launcher/process.hpp"
#include "runtime/launcher/remote.hpp"
#include "runtime/launcher/slurm_allocation.hpp"
#include "runtime/launcher/token.hpp"
#include "runtime/launcher/worker_env.hpp"

extern "C" char** environ;

namespace stretch::launcher {

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
  throw LaunchError(ErrorDetail{"--elastic", text, "MIN:MAX node counts, 1 <= MIN <= MAX"});
}

namespace {

// A process that brings up node agents (ssh, pdsh, mpirun, ip netns exec, or the agent itself).
struct LaunchedProcess {
  ChildProcess process;
  std::string what;                // its command line, without the token
  std::vector<std::string> hosts;  // the nodes whose agents it runs
  bool reported = false;           // its end was told to the controller
};

std::vector<ChildProcess*> processesOf(std::vector<LaunchedProcess>& launched) {
  std::vector<ChildProcess*> out;
  for (auto& l : launched)
    out.push_back(&l.process);
  return out;
}

// This process's environment as a map.
std::map<std::string, std::string> processEnvironment() {
  std::map<std::string, std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const auto eq = entry.find('=');
    if (eq != std::string::npos)
      out[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return out;
}

// DeepSpeed's .deepspeed_env files (the name from DS_ENV_FILE), in the home directory and then
// the working directory, as {path, text}; the ones that exist.
std::vector<std::pair<std::string, std::string>> deepspeedEnvFiles() {
  const char* name = std::getenv("DS_ENV_FILE");
  const std::string file = name != nullptr && *name != '\0' ? name : ".deepspeed_env";
  std::vector<std::string> paths;
  if (!file.empty() && file.front() == '/') {
    paths.push_back(file);
  } else {
    if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
      paths.push_back(std::string(home) + "/" + file);
    paths.push_back(std::filesystem::absolute(file).string());
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& path : paths) {
    if (::access(path.c_str(), F_OK) != 0 ||
        std::any_of(out.begin(), out.end(), [&](const auto& f) { return f.first == path; }))
      continue;
    out.emplace_back(path, readFile(path, "DeepSpeed environment file"));
    spdlog::info("launch: exporting the variables of {} to every node agent", path);
  }
  return out;
}

// Where the job's store listens (--rdzv_addr, or the master address, or this host's) and its
// port (--rdzv_port, or --master_port + 1).
std::pair<std::string, int> jobStoreAddress(const LaunchRequest& o, RunnerKind runner) {
  const std::string addr = !o.rdzvAddr.empty()           ? o.rdzvAddr
                           : o.noSsh                     ? o.masterAddr
                           : runner == RunnerKind::Local ? "127.0.0.1"
                           : o.masterAddrGiven           ? o.masterAddr
                                                         : hostAddress();
  const int port = o.rdzvPort.value_or(o.masterPort + 1);
  if (port == o.masterPort || port > 65535) {
    throw LaunchError(ErrorDetail{"--rdzv_port", std::to_string(port),
                                  "a port in 1..65535 other than --master_port"});
  }
  return {addr, port};
}

// The executable that runs `agent`: for agents on this machine, `stretch-agent` beside this
// executable when it is there (cli/agent_main.cpp: the agent alone, which starts in about a fifth
// of the time of the whole CLI, most of a local launch of thousands of agents); otherwise, and on
// other hosts (whose installation may be older), this executable.
std::string agentExecutable(RunnerKind runner) {
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  if (runner == RunnerKind::Local) {
    const std::filesystem::path slim = self.parent_path() / "stretch-agent";
    if (::access(slim.c_str(), X_OK) == 0)
      return slim.string();
  }
  return self.string();
}

// How the runner starts `stretch agent` on every host. The token reaches ssh agents on stdin,
// pdsh agents (pdsh forwards no stdin) in a private file in the home directory (`tokenFile`),
// the others (local, netns, mpirun -x) in their environment; never on a command line.
RemoteLaunchSpec agentLaunchSpec(const LaunchRequest& o, RunnerKind runner,
                                 const std::vector<LaunchHost>& hosts, const std::string& rdzv,
                                 const JobSettings& job, std::optional<TokenFile>& tokenFile) {
  RemoteLaunchSpec spec;
  spec.runner = runner;
  for (const auto& h : hosts) {
    spec.hosts.push_back(h.id);
    if (o.noSsh)
      break;
  }
  spec.agentArgv = {agentExecutable(runner),
                    "agent",
                    "--rdzv",
                    rdzv,
                    "--node_rank",
                    std::string(kNodeRankPlaceholder),
                    "--controller_timeout",
                    fmt::format("{}", o.keepAliveTimeout * kControllerTimeoutFactor),
                    "--keepalive_interval",
                    fmt::format("{}", toSeconds(*job.keepAliveInterval))};
  if (!o.logDir.empty()) {
    spec.agentArgv.push_back("--log_dir");
    spec.agentArgv.push_back(std::filesystem::absolute(o.logDir).string());
  }
  spec.exports = deepspeedExports(processEnvironment(), std::filesystem::current_path().string(),
                                  deepspeedEnvFiles());
  if (runner == RunnerKind::Ssh) {
    spec.agentArgv.push_back("--token_stdin");
  } else if (runner == RunnerKind::Pdsh) {
    tokenFile.emplace(job.token);
    spec.agentArgv.push_back("--token_file");
    spec.agentArgv.push_back(tokenFile->path());
    spdlog::info(
        "launch: pdsh agents read the store token from {} (mode 0600; the hosts must share "
        "this home directory); it is removed when the job ends",
        tokenFile->path());
  } else {
    spec.exports[worker_env::kStoreToken] = job.token;
  }
  spec.workDir = std::filesystem::current_path().string();
  spec.sshPort = o.sshPort;
  std::istringstream words(o.launcherArgs);  // DeepSpeed splits --launcher_args on blanks
  for (std::string w; words >> w;)
    spec.launcherArgs.push_back(w);
  return spec;
}

// Threads that start processes and stay until this object is destroyed: a child's parent-death
// signal comes when the thread that started it ends (process.hpp), so they outlive the children
// (destroy this after them). Not thread-safe.
class SpawnThreads {
 public:
  SpawnThreads() = default;
  SpawnThreads(const SpawnThreads&) = delete;
  SpawnThreads& operator=(const SpawnThreads&) = delete;
  ~SpawnThreads() {
    {
      std::lock_guard lock(mutex_);
      release_ = true;
    }
    changed_.notify_all();
    for (std::thread& thread : threads_)
      thread.join();
  }
  // Runs job(t) for t in 0..count-1, job(0) on the calling thread and each other on a new
  // thread; returns once every one has returned (job must not throw).
  void run(std::size_t count, const std::function<void(std::size_t)>& job) {
    std::size_t finished = 0;
    for (std::size_t t = 1; t < count; ++t) {
      threads_.emplace_back([this, t, &job, &finished] {
        job(t);
        std::unique_lock lock(mutex_);
        ++finished;
        changed_.notify_all();
        changed_.wait(lock, [&] { return release_; });
      });
    }
    job(0);
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return finished == count - 1; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool release_ = false;
  std::vector<std::thread> threads_;
};

// Starts the runner's processes that bring up the node agents, from up to kSpawnThreads threads
// (one per kLaunchesPerSpawnThread launches), which `spawners` keeps: a spawn returns once its
// child has exec'd, which on a loaded host waits for the scheduler, so 2,048 local agents started
// one after the other took 9-17 ms each; several threads wait for several children at once.
std::vector<LaunchedProcess> startNodeAgents(const RemoteLaunchSpec& spec,
                                             const std::vector<LaunchHost>& hosts,
                                             const JobSettings& job, SpawnThreads& spawners) {
  constexpr std::size_t kSpawnThreads = 8;
  constexpr std::size_t kLaunchesPerSpawnThread = 32;
  nameGuardedGroups("node agent");
  const auto began = std::chrono::steady_clock::now();
  const std::vector<NodeLaunch> launches = buildNodeLaunches(spec);
  std::vector<std::optional<LaunchedProcess>> started(launches.size());
  std::vector<std::exception_ptr> errors(launches.size());
  const auto startOne = [&](std::size_t i) {
    const NodeLaunch& launch = launches[i];
    SpawnOptions spawn;
    spawn.argv = launch.argv;
    spawn.env = launch.env;
    if (spec.runner == RunnerKind::Ssh)
      spawn.stdinData = job.token;
    // The runner ends with the launcher (SIGTERM lets ssh, pdsh and mpirun take the remote
    // agents down with them).
    spawn.parentDeathSignal = SIGTERM;
    // And a launcher killed outright (SIGKILL) takes them down too, through its orphan guard,
    // which records the end in the event log (a node agent SIGKILLed takes its workers).
    spawn.groupDiesWithParent = true;
    spawn.execErrorPrefix = "stretch launch: ";
    LaunchedProcess p{spawnProcess(spawn), maskToken(shellJoin(launch.argv), job.token), {}, false};
    for (const auto rank : launch.nodeRanks)
      p.hosts.push_back(hosts[rank].id);
    spdlog::debug("launch: started {}", p.what);
    started[i] = std::move(p);
  };
  const std::size_t threads =
      std::clamp<std::size_t>(launches.size() / kLaunchesPerSpawnThread, 1, kSpawnThreads);
  // Thread t starts launches t, t + threads, ...: an error stops only its own thread, and the
  // first one (in launch order) is thrown once all have ended; what started is stopped then by
  // its LaunchedProcess, as when the loop was serial.
  const auto startEvery = [&](std::size_t first) {
    for (std::size_t i = first; i < launches.size(); i += threads) {
      try {
        startOne(i);
      } catch (...) {
        errors[i] = std::current_exception();
        return;
      }
    }
  };
  spawners.run(threads, startEvery);
  std::vector<LaunchedProcess> processes;
  for (std::size_t i = 0; i < launches.size(); ++i) {
    if (errors[i])
      std::rethrow_exception(errors[i]);
    if (started[i])
      processes.push_back(std::move(*started[i]));
  }
  const auto took = std::chrono::steady_clock::now() - began;
  spdlog::info("launch: started {} process(es) for the node agents in {} ({} each, {} thread(s))",
               processes.size(), agent::formatDuration(took),
               agent::formatDuration(took / std::max<std::size_t>(processes.size(), 1)), threads);
  return processes;
}

// The controller's poll of the processes that bring up the agents: a process that runs one
// node's agent (local, netns, ssh) that ended means that node is gone now, no need to wait for
// its keep-alive to time out; all of them ended (and no agent alive) ends the job.
std::function<LaunchersStatus()> agentProcessPoll(std::vector<LaunchedProcess>& processes,
                                                  std::shared_ptr<comm::Store> store) {
  return [&processes, store]() -> LaunchersStatus {
    // Called every 10 ms: one waitid that reaps nothing says whether any of this process's
    // children has ended since, so that 2,048 idle agents cost one system call a turn, not 2,048
    // waitpid calls. (Its children are these processes; the orphan guard is nobody's child.)
    siginfo_t info{};
    info.si_pid = 0;
    const bool anyEnded =
        ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0;
    for (auto& p : processes) {
      if (anyEnded)
        p.process.poll();
      if (!p.process.running() && !p.reported && p.hosts.size() == 1) {
        p.reported = true;
        appendRecord(*store, "leaves",
                     fmt::format("{}\tits agent process ended with status {}", p.hosts.front(),
                                 p.process.exit()->code));
      }
    }
    LaunchersStatus status;
    for (const auto& p : processes) {
      if (p.process.running())
        return status;
      status.ended += fmt::format("\n  exit status {}: {}", p.process.exit()->code, p.what);
    }
    status.allEnded = true;
    return status;
  };
}

// Several nodes: this process serves the job's store and runs the controller; one `stretch
// agent` per host runs that host's workers.
AgentResult runMultiNode(const LaunchRequest& o, const ActiveResources& active,
                         agent::AgentConfig config, JobSettings job) {
  // --no_ssh: this is node rank 0; it starts its own agent and the others join by themselves.
  const RunnerKind runner = o.noSsh ? RunnerKind::Local : parseRunnerKind(o.launcher);
  std::vector<LaunchHost> hosts;
  for (const auto& [host, slots] : active.hosts)
    hosts.push_back({host, slots});
  const auto [rdzvAddr, rdzvPort] = jobStoreAddress(o, runner);
  comm::TcpStoreOptions storeOptions;
  storeOptions.host = rdzvAddr;
  storeOptions.port = rdzvPort;
  storeOptions.isServer = true;
  storeOptions.token = job.token;
  storeOptions.timeout = kLauncherStoreTimeout;
  if (runner == RunnerKind::Local) {
    // Every local agent connects from the loopback address, its three connections (its loop,
    // keep-alive and command wait) at once: the store's cap on one address's connections still
    // in their handshake (64, against one host's flood) would turn most of 256 agents away and
    // make them retry for seconds (launch at 256 agents: 5.7 s, 3 of them in retries).
    storeOptions.maxPendingPerAddress =
        std::max(storeOptions.maxPendingPerAddress, 3 * static_cast<int>(hosts.size()) + 16);
  }
  const auto rawStore = std::make_shared<comm::TcpStore>(storeOptions);
  auto store = std::make_shared<comm::PrefixStore>(kJobPrefix, rawStore);
  // Live recovery: the workers meet in this store, which outlives every one of them.
  job.liveRecovery = o.recovery != "restart";
  job.hangTimeout = o.hangTimeout;
  job.hangTimeoutFixed = o.hangTimeoutGiven;
  // The agents beat, and the controller reads their keep-alives, at a quarter of the timeout.
  job.keepAliveInterval = keepAliveIntervalFor(agent::fromSeconds(o.keepAliveTimeout));
  publishJob(*store, job, hosts);
  std::optional<TokenFile> tokenFile;
  const RemoteLaunchSpec spec =
      agentLaunchSpec(o, runner, hosts, fmt::format("{}:{}", rdzvAddr, rdzvPort), job, tokenFile);
  spdlog::info("launch: job store on {}:{}; starting {} node agent(s) with the {} runner ({})",
               rdzvAddr, rdzvPort, hosts.size(), toString(runner), spec.agentArgv.front());
  if (!o.logDir.empty()) {
    // For agents started by hand to grow an elastic job (`stretch agent --token_file`).
    const auto tokenPath = std::filesystem::absolute(o.logDir) / "job_token";
    std::filesystem::create_directories(tokenPath.parent_path());
    writePrivateFile(tokenPath.string(), job.token + "\n");
    spdlog::info(
        "launch: add a node with `stretch agent --rdzv {}:{} --node_id NAME --nproc N "
        "--token_file {}`",
        rdzvAddr, rdzvPort, tokenPath.string());
  }
  SpawnThreads spawners;  // after the agents: their parent-death signal comes when these end
  std::vector<LaunchedProcess> processes = startNodeAgents(spec, hosts, job, spawners);

  JobControllerOptions options;
  if (job.liveRecovery)
    options.liveStore = rawStore;
  options.batchContract = job.batchFromConfig;
  options.config = std::move(config);
  options.store = store;
  {
    // The controller's record watches wait on a client of their own (JobControllerOptions).
    comm::TcpStoreOptions client = storeOptions;
    client.isServer = false;
    client.port = rawStore->port();
    options.watchStore =
        std::make_shared<comm::PrefixStore>(kJobPrefix, std::make_shared<comm::TcpStore>(client));
  }
  options.keepAliveCheck = *job.keepAliveInterval;
  if (!o.eventLog.empty())
    options.eventLog = o.eventLog;
  if (!o.checkpointDir.empty())
    options.checkpointDir = o.checkpointDir;
  options.monitorInterval = agent::fromSeconds(o.monitorInterval);
  options.keepAliveTimeout = agent::fromSeconds(o.keepAliveTimeout);
  // A command's round on one machine's agents grows with their number (2,048 local agents
  // starting their workers took more than the 15 s of the default, and were given up on): 10 ms
  // more per host. Agents that died are found by their keep-alives, not by this.
  options.commandTimeout =
      agent::fromSeconds(o.keepAliveTimeout + 10.0 + 0.01 * static_cast<double>(hosts.size()));
  if (o.masterAddrGiven)
    options.masterAddr = o.masterAddr;
  for (const auto& h : hosts)
    options.launchHosts.push_back(h.id);
  options.stopSignal = o.stopSignal;
  options.pollLaunchers = agentProcessPoll(processes, store);
  const auto result = runJobController(options);
  // The agents end on the controller's Exit command; give them time, then stop what is left.
  if (!waitForAll(processesOf(processes), std::chrono::seconds(10)))
    stopAll(processesOf(processes), std::chrono::seconds(10));
  return result;
}

// --elastic MIN:MAX or DeepSpeed's --elastic_training --min_elastic_nodes --max_elastic_nodes;
// neither: exactly the launch's hosts.
std::pair<std::int64_t, std::int64_t> elasticNodes(const LaunchRequest& o, std::int64_t hosts) {
  if (!o.elastic.empty() && o.elasticTraining) {
    throw LaunchError(ErrorDetail{"--elastic", o.elastic,
                                  "either --elastic MIN:MAX or --elastic_training with "
                                  "--min_elastic_nodes/--max_elastic_nodes, not both"});
  }
  if (!o.elasticTraining) {
    for (const auto& [flag, value] : {std::pair{"--min_elastic_nodes", o.minElasticNodes},
                                      std::pair{"--max_elastic_nodes", o.maxElasticNodes}}) {
      if (value) {
        throw LaunchError(
            ErrorDetail{flag, std::to_string(*value), "to be used with --elastic_training"});
      }
    }
    if (!o.elastic.empty())
      return parseElastic(o.elastic);
    return {hosts, hosts};
  }
  // DeepSpeed's launch.py: -1 (not given) means 1 and the number of hosts.
  const std::int64_t lo = o.minElasticNodes.value_or(1);
  const std::int64_t hi = o.maxElasticNodes.value_or(std::max<std::int64_t>(hosts, lo));
  if (lo < 1)
    throw LaunchError(ErrorDetail{"--min_elastic_nodes", std::to_string(lo), "at least 1"});
  if (hi < lo) {
    throw LaunchError(ErrorDetail{"--min_elastic_nodes", std::to_string(lo),
                                  fmt::format("at most --max_elastic_nodes ({})", hi)});
  }
  return {lo, hi};
}

// --no_ssh needs --node_rank (a host of the launch) and the address of node rank 0.
void checkNodeRank(const LaunchRequest& o, std::int64_t hosts) {
  if (o.noSsh && !o.nodeRank) {
    throw LaunchError(
        ErrorDetail{"--no_ssh", "given",
                    "--node_rank K too: each node runs its own `stretch launch --no_ssh "
                    "--node_rank K` (K = its line in the hostfile, from 0)"});
  }
  if (!o.nodeRank)
    return;
  if (!o.noSsh) {
    throw LaunchError(ErrorDetail{"--node_rank", std::to_string(*o.nodeRank),
                                  "to be used with --no_ssh (the runner numbers the nodes "
                                  "otherwise)"});
  }
  if (*o.nodeRank < 0 || *o.nodeRank >= hosts) {
    throw LaunchError(ErrorDetail{
        "--node_rank", std::to_string(*o.nodeRank),
        fmt::format("a node rank in 0..{} (the launch has {} host(s))", hosts - 1, hosts)});
  }
  if (hosts > 1 && !o.masterAddrGiven) {
    throw LaunchError(ErrorDetail{"--master_addr", "not given",
                                  "the address of node rank 0 with --no_ssh: every node's "
                                  "`stretch launch --no_ssh` reaches the job's store there"});
  }
}

// The program can start here: PROGRAM (or the Python interpreter and the script) exists and is
// executable. Checked before any worker starts, so a typo is exit 2, not a restart loop.
void checkProgramRuns(const WorkerCommand& command, const CommandRules& rules) {
  const std::string& first = command.argv.front();
  const bool python = command.programAt > 0;
  if (findExecutable(first).empty()) {
    throw LaunchError(
        ErrorDetail{python ? "the Python interpreter" : "PROGRAM", first,
                    python ? "an executable on PATH (install python3, set STRETCH_PYTHON, or give "
                             "--no_python to run PROGRAM as is)"
                    : first.find('/') == std::string::npos
                        ? "a program on PATH (give a path such as ./" + first + " for a file here)"
                        : "an executable file (check the path and its x permission)"});
  }
  if (python && !rules.module) {
    const std::string& script = command.argv[command.programAt];
    if (::access(script.c_str(), R_OK) != 0) {
      throw LaunchError(ErrorDetail{
          "PROGRAM", script, fmt::format("a readable Python script ({})", std::strerror(errno))});
    }
  }
}

// DeepSpeed's runner.backend_exists(): the runner's program is on PATH.
void checkRunnerInstalled(RunnerKind runner, const std::string& name) {
  const char* program = runner == RunnerKind::Ssh       ? "ssh"
                        : runner == RunnerKind::Pdsh    ? "pdsh"
                        : runner == RunnerKind::OpenMpi ? "mpirun"
                        : runner == RunnerKind::Netns   ? "ip"
                        : runner == RunnerKind::Slurm   ? "srun"
                                                        : nullptr;
  if (program != nullptr && findExecutable(program).empty()) {
    throw LaunchError(ErrorDetail{
        "--launcher", name,
        fmt::format("a runner whose program is installed: {} is not on PATH{}", program,
                    runner == RunnerKind::Pdsh
                        ? " (pdsh is the default for several hosts, as in DeepSpeed: install "
                          "Debian's pdsh, or give --launcher ssh, openmpi or local)"
                        : "")});
  }
}

// --enable_each_rank_log DIR is DeepSpeed's name for a per-rank log directory: --log_dir.
std::string eachRankLogDir(const LaunchRequest& o) {
  if (o.eachRankLog.empty() || o.eachRankLog == "None")
    return o.logDir;
  if (!o.logDir.empty() && o.logDir != o.eachRankLog) {
    throw LaunchError(
        ErrorDetail{"--enable_each_rank_log", o.eachRankLog,
                    "the same directory as --log_dir (" + o.logDir + "), or only one of them"});
  }
  struct stat st {};
  if (::stat(o.eachRankLog.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    throw LaunchError(
        ErrorDetail{"--enable_each_rank_log", o.eachRankLog, "a directory, not a file"});
  }
  return o.eachRankLog;
}

// --save_pid: DeepSpeed writes the launcher's pid to <tmpdir>/<pid>.deepspeed and removes it at
// the end.
class PidFile {
 public:
  explicit PidFile(bool enabled) {
    if (!enabled)
      return;
    const char* tmp = std::getenv("TMPDIR");
    path_ =
        fmt::format("{}/{}.deepspeed", tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", ::getpid());
    // Created afresh and never through a link someone planted at the predictable path.
    try {
      writePrivateFile(path_, fmt::format("{}\n", ::getpid()));
    } catch (const IoError& e) {
      path_.clear();  // not ours to remove
      throw IoError(fmt::format("--save_pid: {}", e.what()));
    }
    spdlog::info("launch: pid {} saved in {}", ::getpid(), path_);
  }
  ~PidFile() {
    if (!path_.empty())
      ::unlink(path_.c_str());
  }
  PidFile(const PidFile&) = delete;
  PidFile& operator=(const PidFile&) = delete;

 private:
  std::string path_;
};

// --no_ssh: the nodes start independently, so they share the store token through the
// environment (STRETCH_STORE_TOKEN, the same secret on every node).
std::string sharedToken() {
  const char* token = std::getenv(worker_env::kStoreToken);
  if (token != nullptr && *token != '\0')
    checkTokenStrength(token, worker_env::kStoreToken);
  if (token == nullptr || *token == '\0') {
    throw LaunchError(ErrorDetail{
        "--no_ssh", "given",
        "STRETCH_STORE_TOKEN set to one secret shared by every node (for example `export "
        "STRETCH_STORE_TOKEN=$(openssl rand -hex 16)` once, copied to each node); the job's "
        "store refuses clients without it"});
  }
  return token;
}

// --no_ssh --node_rank K (K > 0): this process is node K's agent; node rank 0's `stretch
// launch` serves the job's store on --master_addr.
AgentResult joinAsNode(const LaunchRequest& o, const JobSettings& job) {
  JoinRequest join;
  join.rdzv = fmt::format("{}:{}", o.rdzvAddr.empty() ? o.masterAddr : o.rdzvAddr,
                          o.rdzvPort.value_or(o.masterPort + 1));
  join.nodeRank = *o.nodeRank;
  join.token = job.token;
  join.logDir = o.logDir;
  join.controllerTimeout = o.keepAliveTimeout * kControllerTimeoutFactor;
  join.stopSignal = o.stopSignal;
  spdlog::info("launch: node rank {} joins the job at {}", *o.nodeRank, join.rdzv);
  const NodeAgentResult result = joinJob(join);
  AgentResult out;
  out.exitCode = result.exitCode;
  out.message = result.message;
  out.generations = result.generationsRun;
  return out;
}

}  // namespace

std::optional<std::string> ephemeralPortWarning(int port, const PortRange& range) {
  if (!range.contains(port))
    return std::nullopt;
  return fmt::format(
      "launch: --master_port {} is in this host's ephemeral port range {}-{} "
      "(net.ipv4.ip_local_port_range): between restarts any outgoing connection may take it "
      "and rank 0 could not listen on it again; a port below {} avoids that",
      port, range.low, range.high, range.low);
}

std::optional<std::string> sharedDevicesNote(int numGpus, std::string_view deviceType,
                                             int visible) {
  if (deviceType != "cuda" || visible < 1 || numGpus <= visible)
    return std::nullopt;
  return fmt::format(
      "launch: --num_gpus {} is more than the {} {} device{} visible here: {} workers share "
      "{}, and their {} buffers go through Gloo staged in host memory (NCCL needs a device per "
      "worker)",
      numGpus, visible, deviceType, visible == 1 ? "" : "s", numGpus,
      visible == 1 ? fmt::format("{}:0", deviceType) : fmt::format("{} devices", visible),
      deviceType);
}

AgentResult runLaunch(const LaunchRequest& request) {
  LaunchRequest o = request;
  if (o.recovery != "live" && o.recovery != "auto" && o.recovery != "restart")
    throw LaunchError(
        ErrorDetail{"--recovery", o.recovery, "live or restart ('auto' is the old name of live)"});
  if (const auto warning = ephemeralPortWarning(o.masterPort, ephemeralPortRange()))
    spdlog::warn("{}", *warning);
  if (o.hostfile.empty() && ::access(std::string(kDefaultHostfile).c_str(), F_OK) == 0) {
    o.hostfile = std::string(kDefaultHostfile);  // DeepSpeed's default (DLTS_HOSTFILE)
    spdlog::info("launch: using the hostfile {} (give --hostfile to choose another)", o.hostfile);
  }
  if (!o.launcher.empty())
    parseRunnerKind(o.launcher);  // an unknown runner is an error before anything else
  const int defaultSlots = [&] {
    const auto accel = accel::getAccelerator();
    if (o.numGpus) {
      // Workers started on this machine share its devices when there are fewer.
      if (o.hostfile.empty() && (o.launcher.empty() || o.launcher == "local")) {
        if (const auto note =
                sharedDevicesNote(*o.numGpus, accel->deviceType(), accel->deviceCount()))
          spdlog::warn("{}", *note);
      }
      return *o.numGpus;
    }
    return accel->deviceType() == "cpu" ? 1 : std::max(1, accel->deviceCount());
  }();
  const std::string slurmNodes =
      !o.launcher.empty() && parseRunnerKind(o.launcher) == RunnerKind::Slurm
          ? slurmAllocationNodes()
          : std::string();
  const ResourcePool pool = !o.hostfile.empty() ? loadHostfile(o.hostfile)
                            : !slurmNodes.empty()
                                ? slurmResourcePool(slurmNodes, slurmSlots(o.numGpus, defaultSlots))
                                : localResourcePool(defaultSlots);
  const ActiveResources active = applyFilters(pool, o.include, o.exclude, o.numNodes,
                                              o.hostfile.empty() ? std::nullopt : o.numGpus);
  const auto hostCount = static_cast<std::int64_t>(active.hosts.size());
  if (o.launcher.empty())
    o.launcher = hostCount > 1 ? "pdsh" : "local";  // DeepSpeed's default runner is pdsh
  const auto [minNodes, maxNodes] = elasticNodes(o, hostCount);
  const bool elastic = !o.elastic.empty() || o.elasticTraining;
  checkNodeRank(o, hostCount);
  const bool multiNode = hostCount != 1 || o.launcher != "local" || o.forceMulti || o.noSsh;

  CommandRules rules = o.commandRules;
  rules.elastic = elastic;
  const WorkerCommand command = resolveWorkerCommand(o.command, rules);
  const RunnerKind runner = parseRunnerKind(o.launcher);
  if (runner == RunnerKind::Local || runner == RunnerKind::Netns)
    checkProgramRuns(command, o.commandRules);  // the workers run on this machine's files
  if (multiNode && !o.noSsh)
    checkRunnerInstalled(runner, o.launcher);
  if (command.bindCores)
    workerInvocation(command, 0, 1);  // numactl or taskset present, the core list valid
  const std::string logDir = eachRankLogDir(o);
  const PidFile pidFile(o.savePid);

  agent::AgentConfig config;
  JobSettings job;
  job.command = command;
  job.masterPort = o.masterPort;
  job.token = o.noSsh ? sharedToken() : randomToken();
  if (!o.config.empty()) {
    // Read and parsed once: the workers get the same text (GenerationConfigs).
    std::string text = readFile(o.config, "--config");
    const auto parsed = config::parseConfig(text, o.config);
    for (const auto& w : parsed.warnings)
      spdlog::warn("{}", w);
    config.training = parsed.config;
    job.batchFromConfig = true;
    job.configJson = std::move(text);
    if (parsed.config.elasticity.enabled) {
      // The workers' runtime checks it against its own (ensure_immutable_elastic_config).
      job.elasticJson = config::elasticityToJson(parsed.config.elasticity);
    }
  } else {
    // No config: every world size is valid (one sample per rank and step).
    config.training.batch.microBatchPerGpu = 1;
  }
  config.minNodes = minNodes;
  config.maxNodes = maxNodes;
  config.maxRestarts = o.maxRestarts.value_or(elastic ? 100 : 0);
  config.crashLoopLimit = o.crashLoopLimit;
  job.maxRestarts = config.maxRestarts;
  // One node: nothing to wait for. Several: a short window for the last agents to register.
  config.lastCall = multiNode && elastic ? agent::fromSeconds(o.lastCall) : agent::Duration(0);
  o.logDir = logDir;
  if (o.noSsh && *o.nodeRank > 0)
    return joinAsNode(o, job);
  if (multiNode)
    return runMultiNode(o, active, config, job);

  const auto& [host, slotIndices] = active.hosts.front();
  LocalAgentOptions options;
  options.config = config;
  options.batchContract = job.batchFromConfig;
  options.nodeId = host;
  options.slots = static_cast<std::int64_t>(slotIndices.size());
  options.command = command;
  options.logDir = logDir;
  if (!o.eventLog.empty())
    options.eventLog = o.eventLog;
  if (!o.checkpointDir.empty())
    options.checkpointDir = o.checkpointDir;
  options.monitorInterval = agent::fromSeconds(o.monitorInterval);
  options.hang.floor = agent::fromSeconds(o.hangTimeout);
  options.hang.fixed = o.hangTimeoutGiven;
  options.stopSignal = o.stopSignal;
  const auto devices = devicesOfSlots(slotIndices);
  const std::string masterAddr = o.masterAddr;
  std::shared_ptr<GenerationConfigs> configs;
  if (job.configJson)
    configs = std::make_shared<GenerationConfigs>(*job.configJson, logDir);
  options.configs = configs;
  // Live recovery: the agent serves the store its workers meet in after a failure (rank 0's
  // rendezvous store dies with rank 0), on a free port of the master address.
  std::string liveAddress;
  if (o.recovery != "restart") {
    comm::TcpStoreOptions storeOptions;
    storeOptions.host = masterAddr;
    storeOptions.port = 0;
    storeOptions.isServer = true;
    storeOptions.token = job.token;
    storeOptions.timeout = kLauncherStoreTimeout;
    auto store = std::make_shared<comm::TcpStore>(storeOptions);
    liveAddress = fmt::format("{}:{}", masterAddr, store->port());
    options.liveStore = std::move(store);
  }
  options.environment = [job, devices, masterAddr, configs, liveAddress](
                            const agent::StartWorkers& start, const agent::NodeAssignment& node,
                            std::int64_t localRank) {
    auto env = jobWorkerEnvironment(job, start, node, static_cast<std::int64_t>(start.nodes.size()),
                                    localRank, masterAddr, devices, configs.get());
    if (!liveAddress.empty()) {
      env[worker_env::kAgentStore] = liveAddress;
      env[worker_env::kNodeId] = node.nodeId;
    }
    return env;
  };
  return runLocalAgent(options);
}

}  // namespace stretch::launcher
