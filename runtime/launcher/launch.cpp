#include "runtime/launcher/launch.hpp"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "runtime/accel/accelerator.hpp"
#include "runtime/comm/tcp_store.hpp"
#include "runtime/common/error.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/launcher/host_address.hpp"
#include "runtime/launcher/hostfile.hpp"
#include "runtime/launcher/job_controller.hpp"
#include "runtime/launcher/job_protocol.hpp"
#include "runtime/launcher/launch_error.hpp"
#include "runtime/launcher/local_agent.hpp"
#include "runtime/launcher/process.hpp"
#include "runtime/launcher/remote.hpp"
#include "runtime/launcher/token.hpp"
#include "runtime/launcher/worker_env.hpp"

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

// Several nodes: this process serves the job's store and runs the controller; one `stretch
// agent` per host runs that host's workers.
AgentResult runMultiNode(const LaunchRequest& o, const ActiveResources& active,
                         agent::AgentConfig config, JobSettings job) {
  const RunnerKind runner = parseRunnerKind(o.launcher);
  std::vector<LaunchHost> hosts;
  for (const auto& [host, slots] : active.hosts)
    hosts.push_back({host, slots});
  const std::string rdzvAddr = !o.rdzvAddr.empty()           ? o.rdzvAddr
                               : runner == RunnerKind::Local ? "127.0.0.1"
                               : o.masterAddrGiven           ? o.masterAddr
                                                             : hostAddress();
  const int rdzvPort = o.rdzvPort.value_or(o.masterPort + 1);
  if (rdzvPort == o.masterPort || rdzvPort > 65535) {
    throw LaunchError(ErrorDetail{"--rdzv_port", std::to_string(rdzvPort),
                                  "a port in 1..65535 other than --master_port"});
  }
  comm::TcpStoreOptions storeOptions;
  storeOptions.host = rdzvAddr;
  storeOptions.port = rdzvPort;
  storeOptions.isServer = true;
  storeOptions.token = job.token;
  storeOptions.timeout = std::chrono::seconds(30);
  auto store = std::make_shared<comm::PrefixStore>(kJobPrefix,
                                                   std::make_shared<comm::TcpStore>(storeOptions));
  publishJob(*store, job, hosts);
  spdlog::info("launch: job store on {}:{}; starting {} node agent(s) with the {} runner", rdzvAddr,
               rdzvPort, hosts.size(), toString(runner));

  RemoteLaunchSpec spec;
  spec.runner = runner;
  for (const auto& h : hosts)
    spec.hosts.push_back(h.id);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  spec.agentArgv = {self,
                    "agent",
                    "--rdzv",
                    fmt::format("{}:{}", rdzvAddr, rdzvPort),
                    "--node_rank",
                    std::string(kNodeRankPlaceholder),
                    "--controller_timeout",
                    fmt::format("{}", o.heartbeatTimeout * 3)};
  if (!o.logDir.empty()) {
    spec.agentArgv.push_back("--log_dir");
    spec.agentArgv.push_back(std::filesystem::absolute(o.logDir).string());
  }
  // The token reaches ssh agents on stdin and the others in their environment; never argv.
  const bool tokenOnStdin = runner == RunnerKind::Ssh;
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
  if (runner == RunnerKind::Pdsh) {
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
  for (const auto& launch : buildNodeLaunches(spec)) {
    SpawnOptions spawn;
    spawn.argv = launch.argv;
    spawn.env = launch.env;
    if (tokenOnStdin)
      spawn.stdinData = job.token;
    // The runner ends with the launcher (SIGTERM lets ssh, pdsh and mpirun take the remote
    // agents down with them).
    spawn.parentDeathSignal = SIGTERM;
    spawn.execErrorPrefix = "stretch launch: ";
    LaunchedProcess p{spawnProcess(spawn), maskToken(shellJoin(launch.argv), job.token), {}, false};
    for (const auto rank : launch.nodeRanks)
      p.hosts.push_back(hosts[rank].id);
    spdlog::debug("launch: started {}", p.what);
    processes.push_back(std::move(p));
  }

  JobControllerOptions options;
  options.config = std::move(config);
  options.store = store;
  if (!o.eventLog.empty())
    options.eventLog = o.eventLog;
  if (!o.checkpointDir.empty())
    options.checkpointDir = o.checkpointDir;
  options.monitorInterval = agent::fromSeconds(o.monitorInterval);
  options.heartbeatTimeout = agent::fromSeconds(o.heartbeatTimeout);
  options.commandTimeout = agent::fromSeconds(o.heartbeatTimeout + 10.0);
  if (o.masterAddrGiven)
    options.masterAddr = o.masterAddr;
  for (const auto& h : hosts)
    options.launchHosts.push_back(h.id);
  options.stopSignal = o.stopSignal;
  options.pollLaunchers = [&]() -> std::string {
    // A process that runs one node's agent (local, netns, ssh) ended: that node is gone now,
    // no need to wait for its keep-alive to time out.
    for (auto& p : processes) {
      p.process.poll();
      if (!p.process.running() && !p.reported && p.hosts.size() == 1) {
        p.reported = true;
        appendRecord(*store, "leaves",
                     fmt::format("{}\tits agent process ended with status {}", p.hosts.front(),
                                 p.process.exit()->code));
      }
    }
    std::string codes;
    for (const auto& p : processes) {
      if (p.process.running())
        return {};
      codes += fmt::format("\n  exit status {}: {}", p.process.exit()->code, p.what);
    }
    if (store->add("nodes/count", 0) > 0)
      return {};
    return "every process started to bring up the node agents ended before any agent "
           "registered:" +
           codes;
  };
  const auto result = runJobController(options);
  // The agents end on the controller's Exit command; give them time, then stop what is left.
  if (!waitForAll(processesOf(processes), std::chrono::seconds(10)))
    stopAll(processesOf(processes), std::chrono::seconds(10));
  return result;
}

}  // namespace

AgentResult runLaunch(const LaunchRequest& o) {
  parseRunnerKind(o.launcher);  // an unknown runner is an error before anything else
  const int defaultSlots = [&] {
    if (o.numGpus)
      return *o.numGpus;
    const auto accel = accel::getAccelerator();
    return accel->deviceType() == "cpu" ? 1 : std::max(1, accel->deviceCount());
  }();
  const ResourcePool pool =
      o.hostfile.empty() ? localResourcePool(defaultSlots) : loadHostfile(o.hostfile);
  const ActiveResources active = applyFilters(pool, o.include, o.exclude, o.numNodes,
                                              o.hostfile.empty() ? std::nullopt : o.numGpus);
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
    job.batchFromConfig = true;
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
  config.lastCall =
      multiNode && !o.elastic.empty() ? agent::fromSeconds(o.lastCall) : agent::Duration(0);
  if (multiNode)
    return runMultiNode(o, active, config, job);

  const auto& [host, slotIndices] = active.hosts.front();
  LocalAgentOptions options;
  options.config = config;
  options.nodeId = host;
  options.slots = static_cast<std::int64_t>(slotIndices.size());
  options.command = o.command;
  options.logDir = o.logDir;
  if (!o.eventLog.empty())
    options.eventLog = o.eventLog;
  if (!o.checkpointDir.empty())
    options.checkpointDir = o.checkpointDir;
  options.monitorInterval = agent::fromSeconds(o.monitorInterval);
  options.stopSignal = o.stopSignal;
  const auto devices = devicesOfSlots(slotIndices);
  const std::string masterAddr = o.masterAddr;
  options.environment = [job, devices, masterAddr](const agent::StartWorkers& start,
                                                   const agent::NodeAssignment& node,
                                                   std::int64_t localRank) {
    return jobWorkerEnvironment(job, start, node, localRank, masterAddr, devices);
  };
  return runLocalAgent(options);
}

}  // namespace stretch::launcher
