#include "runtime/launcher/worker_command.hpp"

#include <algorithm>
#include <cstdlib>
#include <sched.h>
#include <set>
#include <unistd.h>

#include <fmt/format.h>

#include "runtime/common/error.hpp"
#include "runtime/launcher/launch_error.hpp"

namespace stretch::launcher {

namespace {

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string pythonInterpreter() {
  if (const char* env = std::getenv("STRETCH_PYTHON"); env != nullptr && *env != '\0')
    return env;
  return "python3";
}

// The cores this process may run on (its affinity mask), ascending.
std::vector<int> allowedCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cores;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set))
        cores.push_back(c);
    }
  }
  if (cores.empty()) {
    const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < std::max(1L, n); ++c)
      cores.push_back(static_cast<int>(c));
  }
  return cores;
}

int parseCore(std::string_view word, std::string_view whole) {
  int value = 0;
  if (word.empty() || word.size() > 6)
    throw LaunchError(ErrorDetail{"--bind_core_list", std::string(whole),
                                  "core numbers and ranges such as 0,2-5"});
  for (const char c : word) {
    if (c < '0' || c > '9')
      throw LaunchError(ErrorDetail{"--bind_core_list", std::string(whole),
                                    "core numbers and ranges such as 0,2-5"});
    value = value * 10 + (c - '0');
  }
  if (value >= CPU_SETSIZE)
    throw LaunchError(ErrorDetail{"--bind_core_list", std::string(whole),
                                  fmt::format("core numbers below {}", CPU_SETSIZE)});
  return value;
}

}  // namespace

std::vector<int> parseCoreList(std::string_view text) {
  std::set<int> cores;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    const std::size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      cores.insert(parseCore(item, text));
    } else {
      const int lo = parseCore(item.substr(0, dash), text);
      const int hi = parseCore(item.substr(dash + 1), text);
      if (hi < lo)
        throw LaunchError(ErrorDetail{"--bind_core_list", std::string(text),
                                      "ranges written low-high, such as 2-5"});
      for (int c = lo; c <= hi; ++c)
        cores.insert(c);
    }
    start = comma + 1;
  }
  return {cores.begin(), cores.end()};
}

std::string formatCoreList(const std::vector<int>& cores) {
  std::string out;
  for (std::size_t i = 0; i < cores.size();) {
    std::size_t j = i;
    while (j + 1 < cores.size() && cores[j + 1] == cores[j] + 1)
      ++j;
    if (!out.empty())
      out += ',';
    out += j == i ? fmt::format("{}", cores[i]) : fmt::format("{}-{}", cores[i], cores[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> coresOfWorker(const std::vector<int>& cores, std::int64_t localRank,
                               std::int64_t localWorldSize) {
  if (localWorldSize < 1 || localRank < 0 || localRank >= localWorldSize)
    throw InternalError(
        fmt::format("coresOfWorker: local rank {} of {}", localRank, localWorldSize));
  const auto perWorker = static_cast<std::int64_t>(cores.size()) / localWorldSize;
  if (perWorker < 1) {
    throw LaunchError(ErrorDetail{
        "--bind_cores_to_rank", formatCoreList(cores),
        fmt::format("at least one core for each of the {} workers of this node", localWorldSize)});
  }
  const auto first = cores.begin() + localRank * perWorker;
  return {first, first + perWorker};
}

WorkerCommand resolveWorkerCommand(const std::vector<std::string>& programAndArgs,
                                   const CommandRules& rules) {
  if (programAndArgs.empty())
    throw LaunchError("no PROGRAM given (expected `stretch launch [OPTIONS] PROGRAM [ARGS...]`)");
  if (rules.module && rules.noPython) {
    throw LaunchError(
        "--module and --no_python cannot be used together (--module runs PROGRAM as `python3 "
        "-m PROGRAM`)");
  }
  WorkerCommand out;
  const bool python = !rules.noPython && (rules.module || endsWith(programAndArgs.front(), ".py"));
  if (python) {
    out.argv = {pythonInterpreter(), "-u"};
    if (rules.module)
      out.argv.push_back("-m");
  }
  out.programAt = out.argv.size();
  out.argv.push_back(programAndArgs.front());
  if (python && !rules.elastic && !rules.noLocalRank)
    out.localRankAt = out.argv.size();
  out.argv.insert(out.argv.end(), programAndArgs.begin() + 1, programAndArgs.end());
  out.bindCores = rules.bindCoresToRank;
  if (!rules.bindCoreList.empty()) {
    if (!rules.bindCoresToRank) {
      throw LaunchError(ErrorDetail{"--bind_core_list", rules.bindCoreList,
                                    "to be used with --bind_cores_to_rank"});
    }
    out.coreList = formatCoreList(parseCoreList(rules.bindCoreList));
  }
  return out;
}

std::vector<std::string> expandWorkerVariables(const std::vector<std::string>& argv,
                                               std::size_t programAt,
                                               const std::map<std::string, std::string>& env) {
  const auto isNameChar = [](char c) {
    return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  };
  std::vector<std::string> out = argv;
  for (std::size_t i = programAt + 1; i < out.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg.find('$') == std::string::npos)
      continue;
    std::string expanded;
    for (std::size_t k = 0; k < arg.size();) {
      if (arg[k] == '$' && k + 1 < arg.size()) {
        const bool braced = arg[k + 1] == '{';
        const std::size_t begin = k + (braced ? 2 : 1);
        std::size_t end = begin;
        while (end < arg.size() && isNameChar(arg[end]))
          ++end;
        const bool closed = !braced || (end < arg.size() && arg[end] == '}');
        if (end > begin && closed) {
          if (const auto it = env.find(arg.substr(begin, end - begin)); it != env.end()) {
            expanded += it->second;
            k = end + (braced ? 1 : 0);
            continue;
          }
        }
      }
      expanded += arg[k++];
    }
    out[i] = std::move(expanded);
  }
  return out;
}

std::string findExecutable(const std::string& name) {
  if (name.empty())
    return {};
  if (name.find('/') != std::string::npos)
    return ::access(name.c_str(), X_OK) == 0 ? name : std::string();
  const char* path = std::getenv("PATH");
  const std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t colon = std::min(dirs.find(':', start), dirs.size());
    std::string dir = dirs.substr(start, colon - start);
    if (dir.empty())
      dir = ".";
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = colon + 1;
  }
  return {};
}

WorkerInvocation workerInvocation(const WorkerCommand& command, std::int64_t localRank,
                                  std::int64_t localWorldSize) {
  WorkerInvocation out;
  out.argv = command.argv;
  out.programAt = command.programAt;
  if (command.localRankAt) {
    out.argv.insert(out.argv.begin() + static_cast<std::ptrdiff_t>(*command.localRankAt),
                    fmt::format("--local_rank={}", localRank));
  }
  if (command.bindCores) {
    const std::vector<int> cores =
        command.coreList.empty() ? allowedCores() : parseCoreList(command.coreList);
    const std::vector<int> mine = coresOfWorker(cores, localRank, localWorldSize);
    std::vector<std::string> prefix;
    if (!findExecutable("numactl").empty())
      prefix = {"numactl", "-C", formatCoreList(mine)};
    else if (!findExecutable("taskset").empty())
      prefix = {"taskset", "-c", formatCoreList(mine)};
    else
      throw LaunchError(
          "--bind_cores_to_rank needs numactl or taskset on PATH (Debian packages numactl, "
          "util-linux)");
    out.argv.insert(out.argv.begin(), prefix.begin(), prefix.end());
    out.programAt += prefix.size();
    out.env["OMP_NUM_THREADS"] = std::to_string(mine.size());
  }
  return out;
}

}  // namespace stretch::launcher
