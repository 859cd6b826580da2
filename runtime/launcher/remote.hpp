#pragma once
// Command lines that start one Stretch agent per node (DeepSpeed's multinode runners,
// deepspeed/launcher/multinode_runner.py), built as argv vectors: nothing is ever run through a
// shell unquoted. Pure: builds commands, runs nothing.
//
// Runners (hosts are in node-rank order; N = number of hosts):
//   local   one process per node on this machine: argv = agent argv; env = exports.
//   ssh     one process per node:
//             ssh [launcherArgs] -o BatchMode=yes -o StrictHostKeyChecking=accept-new [-p PORT]
//             HOST
//                 'cd DIR && exec env K=V ... AGENT ARGS'
//           (the remote command is one argument; ssh hands it to the remote login shell, which
//           must be POSIX: sh, bash, dash, zsh, ksh).
//   pdsh    one process for all nodes (DeepSpeed's PDSHRunner):
//             pdsh -S -f FANOUT -w h1,h2,... [launcherArgs] 'cd DIR && env K=V ... AGENT ARGS'
//           env PDSH_RCMD_TYPE=ssh (+ PDSH_SSH_ARGS_APPEND="-p PORT" with sshPort; merge it with
//           an existing value if you keep one). The node-rank placeholder becomes pdsh's "%n"
//           (pdsh's index of the host in its -w list), and every literal '%' is written "%%"
//           so pdsh's %h/%u/%n substitution cannot touch the agent's arguments (DeepSpeed does
//           not escape them). FANOUT is max(1024, N): pdsh starts at most FANOUT commands at a
//           time and the agents run for the whole job, so DeepSpeed's fixed 1024 would never
//           start nodes beyond the 1024th. No "exec": pdsh -S appends "; echo <rc>" to read the
//           exit status.
//   openmpi one process for all nodes, one agent per host, mpirun rank = node rank:
//             mpirun -n N --map-by node --bind-to none --host h1:1,h2:1,... [--wdir DIR]
//                    -x K1 -x K2 ... [launcherArgs] AGENT ARGS
//           env = exports (forwarded by name with -x so values stay off the command line).
//           ":1" and --map-by node place exactly one agent per host (the hosts' GPU slot counts
//           would make mpirun stack several agents on the first host); --bind-to none keeps
//           mpirun from pinning the agent - and every worker it starts - to one core. With the
//           node-rank placeholder in the agent argv the agent runs as
//             sh -c 'exec AGENT ... "$OMPI_COMM_WORLD_RANK" ...'
//           since one mpirun command cannot carry per-node arguments.
//   slurm   one process for all nodes, one agent per node, srun task rank = node rank
//           (DeepSpeed's SlurmRunner runs `srun -n SLOTS ... --export=ALL,K=V python script` with
//           one task per slot; Stretch runs one node agent per node instead):
//             srun --nodes=N --ntasks=N --ntasks-per-node=1 --nodelist=h1,h2,...
//                  --distribution=arbitrary --kill-on-bad-exit=0 --input=none [--chdir=DIR]
//                  --export=ALL [launcherArgs] AGENT ARGS
//           env = exports: srun hands the caller's environment to the tasks (--export=ALL) inside
//           its munge-authenticated launch request, so the values are on no command line; on the
//           nodes they are in the agent's /proc/PID/environ, readable by the same user and root
//           only. --distribution=arbitrary lays the tasks out in --nodelist order (the default
//           block layout would follow Slurm's node order), so task K runs on hosts[K];
//           --kill-on-bad-exit=0 keeps the other agents running when one node's agent dies (the
//           elastic restart goes on without it); --input=none keeps srun off the terminal (it
//           runs in the background process group). With the node-rank placeholder the agent runs
//           as  sh -c 'exec AGENT ... "$SLURM_PROCID" ...'.
//   netns   one process per node, for tests on one machine (each "host" is a network namespace):
//             ip netns exec NSNAME AGENT ARGS;  env = exports.
//           NSNAME is netnsNames[host], else the host name itself.
// local and netns run in the caller's working directory (workDir is for the remote runners).
//
// Node rank: every agent argument exactly equal to kNodeRankPlaceholder is replaced by the node
// rank (ssh/local/netns: the decimal rank; pdsh: %n; openmpi: $OMPI_COMM_WORLD_RANK; slurm:
// $SLURM_PROCID). No other
// argument is ever rewritten.
//
// Errors: LaunchError for bad user input (an unknown --launcher, an environment variable name
// that is not [A-Za-z_][A-Za-z0-9_]*, a NUL byte in an argument or value, an invalid host or
// namespace name, an --ssh_port outside 1..65535); InternalError for a malformed spec (no hosts,
// no agent program).

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stretch::launcher {

enum class RunnerKind { Local, Ssh, Pdsh, OpenMpi, Netns, Slurm };

// "local", "ssh", "pdsh", "openmpi", "netns", "slurm".
std::string_view toString(RunnerKind kind) noexcept;
// Case-insensitive (DeepSpeed lower-cases --launcher); "mpirun" means openmpi. LaunchError naming
// --launcher otherwise.
RunnerKind parseRunnerKind(std::string_view name);

inline constexpr std::string_view kNodeRankPlaceholder = "{node_rank}";
// pdsh's default fan-out in DeepSpeed (PDSH_MAX_FAN_OUT); raised to the host count when larger.
inline constexpr int kPdshMinFanOut = 1024;

// POSIX sh quoting: the word as is when it only has characters from [A-Za-z0-9_@%+:,./-] and is
// not empty, else in single quotes with every ' written '"'"'. `sh -c "printf %s <quoted>"`
// prints exactly `arg`. Throws LaunchError when arg has a NUL byte (no argv can carry one).
std::string shellQuote(std::string_view arg);
// The words quoted and joined with single spaces (for logs and dry runs).
std::string shellJoin(const std::vector<std::string>& argv);

// One process the launcher starts: its argv and the variables to add to (and override in) the
// launcher's own environment for it. nodeRanks: the nodes whose agents it starts (one for
// local/ssh/netns, all for pdsh/openmpi/slurm).
struct NodeLaunch {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::vector<std::size_t> nodeRanks;
  bool operator==(const NodeLaunch&) const = default;
};

struct RemoteLaunchSpec {
  RunnerKind runner = RunnerKind::Local;
  std::vector<std::string> hosts;                 // node-rank order
  std::vector<std::string> agentArgv;             // program + arguments (see kNodeRankPlaceholder)
  std::map<std::string, std::string> exports;     // variables every agent gets
  std::string workDir;                            // remote working directory; "" = login default
  std::vector<std::string> launcherArgs;          // extra ssh / pdsh / mpirun / srun arguments
  std::optional<int> sshPort;                     // ssh -p / PDSH_SSH_ARGS_APPEND
  std::map<std::string, std::string> netnsNames;  // host -> namespace (netns runner)
};

std::vector<NodeLaunch> buildNodeLaunches(const RemoteLaunchSpec& spec);

// Expands Slurm's compressed host list (SLURM_JOB_NODELIST, `scontrol show hostnames` syntax):
// comma-separated names, each with any number of bracketed lists of numbers and ranges, e.g.
// "node[01-03,07],gpu5" -> node01 node02 node03 node07 gpu5 and "r[1-2]n[1-2]" -> r1n1 r1n2 r2n1
// r2n2. A range keeps the zero padding of its first number ("[08-10]" -> 08 09 10). Order is kept
// and duplicates removed. LaunchError naming SLURM_JOB_NODELIST for an empty list, unbalanced or
// empty brackets, a range whose end is below its start, or more than 1,000,000 names.
std::vector<std::string> expandSlurmHostlist(std::string_view list);

// What DeepSpeed's runner exports to the node agents' environment (runner.py's EXPORT_ENVS and
// .deepspeed_env), given the launcher's environment, its working directory and the env files
// read (each as {name for messages, text}, in order; later ones win):
//  - every variable whose name starts with NCCL, PYTHON, MLFLOW, MV2 or UCX (DeepSpeed's list
//    plus the CUDA accelerator's NCCL);
//  - PYTHONPATH with workDir in front (workDir alone when it was unset);
//  - each `NAME=VALUE` line of the env files (split at the first '='; blank lines and '#'
//    comments skipped, where DeepSpeed fails on them).
// STRETCH_STORE_TOKEN is never exported this way. LaunchError naming "FILE:LINE" for a line that
// is not NAME=VALUE with a valid variable name.
std::map<std::string, std::string> deepspeedExports(
    const std::map<std::string, std::string>& environment, const std::string& workDir,
    const std::vector<std::pair<std::string, std::string>>& envFiles);

}  // namespace stretch::launcher
