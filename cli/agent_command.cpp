// `stretch agent`: one node's agent of a multi-node job (docs/launch.md). `stretch launch`
// starts one per host (through ssh, pdsh, mpirun or `ip netns exec`); start one by hand on a new
// machine to grow an elastic job:
//
//   stretch agent --rdzv HOST:PORT --node_rank R            (started by the launcher)
//   stretch agent --rdzv HOST:PORT --node_id ID --nproc N   (a node joining a running job)
//
// It reads the job (program, MASTER_PORT, elastic config) from the launcher's store, registers,
// keeps itself alive there, runs its share of every generation and reports its workers' exits
// (runtime/agent/job_controller.hpp). The store token comes from STRETCH_STORE_TOKEN, or from
// the first line of stdin with --token_stdin (how the ssh runner hands it over, so that it never
// appears on a command line), or from --token_file (the launcher writes LOG_DIR/job_token,
// readable by its owner only).

#include <atomic>
#include <fstream>
#include <iostream>
#include <signal.h>
#include <string>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "cli/launch_common.hpp"
#include "runtime/accel/accelerator.hpp"
#include "runtime/agent/job_controller.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/tcp_store.hpp"
#include "runtime/common/error.hpp"

namespace stretch::cli {

namespace {

std::atomic<int> gAgentStop{0};

void onAgentStop(int sig) {
  gAgentStop.store(sig);
}

struct AgentCliOptions {
  std::string rdzv;
  std::optional<std::int64_t> nodeRank;
  std::string nodeId;
  std::optional<std::int64_t> nproc;
  std::string nodeAddr;
  std::string logDir;
  bool tokenStdin = false;
  std::string tokenFile;
  double heartbeatInterval = 0.5;
  double controllerTimeout = 30.0;
};

std::pair<std::string, int> parseEndpoint(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon != std::string::npos && colon > 0) {
    try {
      std::size_t used = 0;
      const std::string portText = text.substr(colon + 1);
      const int port = std::stoi(portText, &used);
      if (used == portText.size() && port >= 1 && port <= 65535)
        return {text.substr(0, colon), port};
    } catch (...) {
    }
  }
  throw ConfigError(ErrorDetail{"--rdzv", text, "HOST:PORT of the launcher's store"});
}

agent::Duration seconds(double s) {
  return std::chrono::duration_cast<agent::Duration>(std::chrono::duration<double>(s));
}

int runAgent(const AgentCliOptions& o) {
  try {
    const auto [host, port] = parseEndpoint(o.rdzv);
    if (o.nodeRank.has_value() == !o.nodeId.empty()) {
      throw ConfigError(ErrorDetail{"--node_rank / --node_id", o.nodeId,
                                    "exactly one of them (--node_id needs --nproc)"});
    }
    if (!o.nodeId.empty() && !o.nproc)
      throw ConfigError(
          ErrorDetail{"--nproc", "(missing)", "the worker count of node " + o.nodeId});
    std::string token;
    if (o.tokenStdin) {
      std::getline(std::cin, token);
    } else if (!o.tokenFile.empty()) {
      std::ifstream in(o.tokenFile);
      if (!std::getline(in, token))
        throw ConfigError(
            ErrorDetail{"--token_file", o.tokenFile, "a readable file holding the job's token"});
    } else if (const char* env = std::getenv("STRETCH_STORE_TOKEN")) {
      token = env;
    }
    comm::TcpStoreOptions storeOptions;
    storeOptions.host = host;
    storeOptions.port = port;
    storeOptions.token = token;
    storeOptions.timeout =
        std::chrono::duration_cast<comm::Duration>(seconds(std::max(5.0, o.controllerTimeout / 2)));
    const agent::StoreFactory connect = [storeOptions] {
      return std::make_shared<comm::PrefixStore>(agent::kJobPrefix,
                                                 std::make_shared<comm::TcpStore>(storeOptions));
    };
    auto store = connect();
    JobSettings job = readJob(*store);
    job.token = token;

    agent::NodeRecord node;
    if (o.nodeRank) {
      const LaunchHost launched = readLaunchHost(*store, *o.nodeRank);
      node.nodeId = launched.id;
      node.devices = launched.slots;
    } else {
      node.nodeId = o.nodeId;
      for (int i = 0; i < *o.nproc; ++i)
        node.devices.push_back(i);
    }
    node.slots = static_cast<std::int64_t>(node.devices.size());
    node.address = o.nodeAddr.empty() ? localAddressTowards(host) : o.nodeAddr;
    const bool gpus = accel::getAccelerator()->deviceType() != "cpu";

    if (!o.logDir.empty()) {
      std::filesystem::create_directories(o.logDir);
      std::ofstream(std::filesystem::path(o.logDir) / fmt::format("agent_{}.pid", node.nodeId))
          << ::getpid() << "\n";
    }

    agent::NodeAgentOptions options;
    options.connect = connect;
    options.node = node;
    options.command = job.command;
    options.logDir = o.logDir;
    options.heartbeatInterval = seconds(o.heartbeatInterval);
    options.controllerTimeout = seconds(o.controllerTimeout);
    options.stopSignal = &gAgentStop;
    const std::optional<std::vector<int>> devices =
        gpus ? std::optional<std::vector<int>>(node.devices) : std::nullopt;
    options.environment = [job, devices](const agent::StartWorkers& s,
                                         const agent::NodeAssignment& n, std::int64_t local,
                                         const std::string& masterAddr) {
      return workerEnvironment(job, s, n, local, masterAddr, devices);
    };

    struct sigaction action {};
    action.sa_handler = onAgentStop;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGHUP, &action, nullptr);

    const auto result = agent::runNodeAgent(options);
    if (result.exitCode != 0 && !result.message.empty())
      std::cerr << "stretch agent " << node.nodeId << ": " << result.message << "\n";
    return result.exitCode;
  } catch (const ConfigError& e) {
    std::cerr << "stretch agent: error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "stretch agent: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

Command addAgentCommand(CLI::App& app) {
  auto o = std::make_shared<AgentCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "agent",
      "One node's agent of a multi-node job: joins the job at the launcher's store, runs this "
      "node's workers for every generation and reports their exits. `stretch launch` starts one "
      "per host; start one by hand (--node_id, --nproc) to add a node to a running elastic job.");
  sub->add_option("--rdzv", o->rdzv, "HOST:PORT of the launcher's store (its --rdzv_port)")
      ->required();
  sub->add_option("--node_rank", o->nodeRank,
                  "this host's rank in the launch (set by the launcher)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--node_id", o->nodeId, "a name for a node that joins a running job");
  sub->add_option("--nproc", o->nproc, "workers (slots) on a joining node")
      ->check(CLI::PositiveNumber);
  sub->add_option("--node_addr", o->nodeAddr,
                  "address other nodes reach this one at (default: the source address towards "
                  "the store)");
  sub->add_option("--log_dir", o->logDir,
                  "worker logs under LOG_DIR/attempt_K/rank_R.log and agent_<node>.pid");
  sub->add_flag("--token_stdin", o->tokenStdin,
                "read the store token from the first line of stdin (else STRETCH_STORE_TOKEN)");
  sub->add_option("--token_file", o->tokenFile,
                  "read the store token from this file (the launcher writes LOG_DIR/job_token)");
  sub->add_option("--heartbeat_interval", o->heartbeatInterval, "seconds between keep-alives")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--controller_timeout", o->controllerTimeout,
                  "seconds without the store before this agent stops its workers and exits")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  return {sub, [o] { return runAgent(*o); }};
}

}  // namespace stretch::cli
