// `stretch agent`: one node's agent of a multi-node job (docs/launch.md). `stretch launch`
// starts one per host (through ssh, pdsh, mpirun or `ip netns exec`); start one by hand on a new
// machine to grow an elastic job:
//
//   stretch agent --rdzv HOST:PORT --node_rank R            (started by the launcher)
//   stretch agent --rdzv HOST:PORT --node_id ID --nproc N   (a node joining a running job)
//
// It reads the job (program, MASTER_PORT, elastic config) from the launcher's store, registers,
// keeps itself alive there, runs its share of every generation and reports its workers' exits
// (runtime/launcher/node_agent.hpp). The store token comes from STRETCH_STORE_TOKEN, or from
// the first line of stdin with --token_stdin (how the ssh runner hands it over, so that it never
// appears on a command line), or from --token_file (the launcher writes LOG_DIR/job_token,
// readable by its owner only).

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/worker_variables.hpp"
#include "runtime/launcher/node_agent.hpp"
#include "runtime/launcher/stop_signal.hpp"

namespace stretch::cli {

namespace {

int runAgent(launcher::JoinRequest request, bool tokenStdin) {
  return runCommand("agent", ErrorStyle{.kind = false}, [&] {
    // joinJob checks the token, naming where it came from.
    if (tokenStdin) {
      std::getline(std::cin, request.token);
      request.tokenSource = "--token_stdin";
    } else if (const char* env = std::getenv(worker_env::kStoreToken)) {
      request.token = env;
      request.tokenSource = worker_env::kStoreToken;
    }
    request.stopSignal = &launcher::installStopSignals({SIGINT, SIGTERM, SIGHUP});
    const auto result = launcher::joinJob(request);
    if (result.exitCode != 0 && !result.message.empty())
      std::cerr << "stretch agent " << result.nodeId << ": " << result.message << "\n";
    return result.exitCode;
  });
}

}  // namespace

Command addAgentCommand(CLI::App& app) {
  auto o = std::make_shared<launcher::JoinRequest>();
  auto tokenStdin = std::make_shared<bool>(false);
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
  sub->add_flag("--token_stdin", *tokenStdin,
                "read the store token from the first line of stdin (else STRETCH_STORE_TOKEN)");
  sub->add_option("--token_file", o->tokenFile,
                  "read the store token from this file (the launcher writes LOG_DIR/job_token)");
  sub->add_option("--keepalive_interval,--heartbeat_interval", o->keepAliveInterval,
                  "seconds between keep-alives (--heartbeat_interval is its old name)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--controller_timeout", o->controllerTimeout,
                  "seconds without the store before this agent stops its workers and exits")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  return {sub, [o, tokenStdin] { return runAgent(*o, *tokenStdin); }};
}

}  // namespace stretch::cli
