#pragma once
// The command line of one worker, with DeepSpeed's launch.py rules (docs/compatibility.md):
//
//  - A Python PROGRAM runs under the interpreter: `python3 -u PROGRAM ARGS`, or with --module
//    `python3 -u -m PROGRAM ARGS`. PROGRAM counts as Python when --module is given or its name
//    ends in ".py", unless --no_python. (DeepSpeed prefixes every PROGRAM with its own Python
//    unless --no_python; Stretch runs any other program as is, so `stretch launch ./train` works
//    without --no_python.) The interpreter is `python3` from PATH, or STRETCH_PYTHON when set.
//  - `--local_rank=N` goes right after PROGRAM (before ARGS) for a Python PROGRAM of a job that
//    is not elastic, unless --no_local_rank, as launch.py does. Elastic jobs never get it
//    (launch.py's elastic agent does not pass it); LOCAL_RANK is always in the environment.
//  - --bind_cores_to_rank: the cores (--bind_core_list, else every core this host lets the agent
//    use) are split into equal consecutive blocks, one per local worker (the remainder unused);
//    the worker runs under `numactl -C LIST` (or `taskset -c LIST` without numactl) with
//    OMP_NUM_THREADS = cores per worker.
//
// resolveWorkerCommand is pure; workerInvocation reads the host's CPU affinity and PATH only when
// binding cores.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stretch::launcher {

// The launch flags that shape a worker's command line.
struct CommandRules {
  bool module = false;       // --module
  bool noPython = false;     // --no_python
  bool noLocalRank = false;  // --no_local_rank
  bool elastic = false;      // --elastic / --elastic_training
  bool bindCoresToRank = false;
  std::string bindCoreList;  // --bind_core_list: "0,2-5"; "" = every core the agent may use
};

// A job's worker command, the same for every worker of every node but for what
// workerInvocation adds per worker.
struct WorkerCommand {
  std::vector<std::string> argv;           // [python3 -u [-m]] PROGRAM ARGS
  std::size_t programAt = 0;               // PROGRAM's index in argv (> 0: run by Python)
  std::optional<std::size_t> localRankAt;  // where "--local_rank=N" is inserted
  bool bindCores = false;
  std::string coreList;  // "" = every core of the host
  bool operator==(const WorkerCommand&) const = default;
};

// PROGRAM ARGS with the rules above. Throws LaunchError for an empty command, --module with
// --no_python, or a --bind_core_list that is not a list of cores ("0,2-5").
WorkerCommand resolveWorkerCommand(const std::vector<std::string>& programAndArgs,
                                   const CommandRules& rules);

// "0,2-5" -> {0, 2, 3, 4, 5} (ascending, each once). Throws LaunchError naming --bind_core_list.
std::vector<int> parseCoreList(std::string_view text);
// {0, 2, 3, 4, 5} -> "0,2-5".
std::string formatCoreList(const std::vector<int>& cores);

// The cores of local worker `localRank` of `localWorldSize` from `cores`: consecutive blocks of
// cores.size() / localWorldSize. Throws LaunchError when there are fewer cores than workers.
std::vector<int> coresOfWorker(const std::vector<int>& cores, std::int64_t localRank,
                               std::int64_t localWorldSize);

// One worker's argv, and the variables it adds (OMP_NUM_THREADS when binding). Throws
// LaunchError when binding is asked for and neither numactl nor taskset is on PATH, or the host
// has fewer cores than workers.
struct WorkerInvocation {
  std::vector<std::string> argv;
  std::size_t programAt = 0;  // PROGRAM's index in argv
  std::map<std::string, std::string> env;
};
WorkerInvocation workerInvocation(const WorkerCommand& command, std::int64_t localRank,
                                  std::int64_t localWorldSize);

// PROGRAM's arguments with every `$NAME` or `${NAME}` whose NAME is one of `env`'s variables
// (the launcher's, such as STRETCH_DS_CONFIG or LOCAL_RANK) replaced by its value, so that
// `--deepspeed_config '$STRETCH_DS_CONFIG'` (quoted against the user's shell) reaches the worker
// as the path. Other text, PROGRAM itself and what comes before it are kept as they are.
std::vector<std::string> expandWorkerVariables(const std::vector<std::string>& argv,
                                               std::size_t programAt,
                                               const std::map<std::string, std::string>& env);

// Whether `name` (no '/': looked up in PATH) names an executable file; the resolved path or "".
std::string findExecutable(const std::string& name);

}  // namespace stretch::launcher
