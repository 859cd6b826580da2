#pragma once
// Subcommands of the `stretch` executable. Each registers its options on the parent app and
// returns a runner; a runner returns the process exit code (0 ok, 2 bad input or no plan, 1
// another failure: cli/output.hpp's runCommand maps exceptions to them).

#include <functional>
#include <vector>

namespace CLI {
class App;
}

namespace stretch::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;  // the command failed for another reason than its input
inline constexpr int kExitUsage = 2;   // bad input, invalid config, no elastic plan
// stretch launch: the job succeeded, but some of its output (event log, rank logs) could not be
// written (sysexits' EX_IOERR).
inline constexpr int kExitOutputLost = 74;

struct Command {
  CLI::App* app;             // the subcommand, owned by the parent app
  std::function<int()> run;  // runs it after parsing; returns the exit code
};

Command addElasticCommand(CLI::App& app);
Command addConfigCommand(CLI::App& app);
// `stretch report`: the build and the machine (DeepSpeed's ds_report).
Command addReportCommand(CLI::App& app);
// `stretch bench comm`: nccl-tests-style collective benchmark over ranks as processes.
Command addBenchCommand(CLI::App& app);
// `stretch launch`: the `deepspeed` launcher with an elastic agent.
Command addLaunchCommand(CLI::App& app);
// `stretch agent`: one node's elastic agent of a multi-node job (started by `stretch launch`).
Command addAgentCommand(CLI::App& app);
// Parses argv into app and runs the one command parsed: --help/--version print and return 0, a
// usage error prints "NAME: error: ..." and returns kExitUsage. The `stretch` and `stretch-agent`
// executables' main.
int parseAndRun(CLI::App& app, const std::vector<Command>& commands, int argc, char** argv);
// `stretch sim`: the discrete-event simulator on a scenario file (built with sim/).
Command addSimCommand(CLI::App& app);
// `stretch plan`: batch choices, GPU counts, checkpoint intervals and goodput (built with
// planner/).
Command addPlanCommand(CLI::App& app);

}  // namespace stretch::cli
