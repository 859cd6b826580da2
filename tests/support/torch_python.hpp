#pragma once
// Debian's python3-torch as a peer for tests: which interpreter, running a command, and why torch
// cannot be used (a test skips with that reason). STRETCH_TORCH_PYTHON overrides the interpreter;
// the default is /usr/bin/python3 (a `python3` earlier on PATH may lack torch).

#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>

namespace stretch::test {

inline std::string torchPython() {
  if (const char* env = std::getenv("STRETCH_TORCH_PYTHON"); env != nullptr && *env != '\0')
    return env;
  return "/usr/bin/python3";
}

struct CommandResult {
  int exitCode = -1;
  std::string output;
};

// Runs `command` through the shell and collects its stdout.
inline CommandResult runCommand(const std::string& command) {
  CommandResult run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr)
    return run;
  char buffer[4096];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0)
    run.output.append(buffer, got);
  const int status = pclose(pipe);
  run.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

// Why torch cannot be used, or "" when it can.
inline std::string torchUnavailableReason() {
  const CommandResult probe =
      runCommand(torchPython() + " -c 'import torch; print(torch.__version__)' 2>&1");
  if (probe.exitCode == 0)
    return "";
  return torchPython() + " cannot import torch (exit " + std::to_string(probe.exitCode) +
         "): " + probe.output;
}

}  // namespace stretch::test
