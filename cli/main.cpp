// `stretch`: the command-line front of the toolkit. Subcommands live in *_command.cpp.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "Stretch: elastic distributed training in the DeepSpeed style.\n"
      "Plan elastic jobs (batch sizes, checkpoint intervals, goodput under failures), simulate\n"
      "them, validate DeepSpeed configs and launch elastic jobs on one machine or many.\n"
      "Run `stretch <command> --help` for a command's options.",
      "stretch"};
  app.set_version_flag("--version", std::string("stretch ") + STRETCH_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);

  std::vector<stretch::cli::Command> commands = {
      stretch::cli::addElasticCommand(app), stretch::cli::addConfigCommand(app),
      stretch::cli::addReportCommand(app),  stretch::cli::addBenchCommand(app),
      stretch::cli::addLaunchCommand(app),  stretch::cli::addAgentCommand(app)};
  commands.push_back(stretch::cli::addSimCommand(app));
  commands.push_back(stretch::cli::addPlanCommand(app));

  return stretch::cli::parseAndRun(app, commands, argc, argv);
}
