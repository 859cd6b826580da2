// `stretch-agent`: `stretch agent` alone, in an executable that links only what a node agent runs
// (the launcher, the job store's client, the agent's state machine), not the simulator, planner,
// Gloo, NCCL, MPI and CUDA that `stretch` links: it starts in about a fifth of the time, which is
// most of a launch's time when `stretch launch --launcher local` starts thousands of agents on
// one machine (docs/launch.md). `stretch-agent agent ARGS` is `stretch agent ARGS`.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "Stretch's node agent alone: `stretch-agent agent ARGS` is `stretch agent ARGS` "
      "(run `stretch-agent agent --help`). `stretch launch` starts it for the hosts of "
      "a local launch when it is installed beside `stretch`.",
      "stretch-agent"};
  app.set_version_flag("--version", std::string("stretch-agent ") + STRETCH_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);
  const std::vector<stretch::cli::Command> commands = {stretch::cli::addAgentCommand(app)};
  return stretch::cli::parseAndRun(app, commands, argc, argv);
}
