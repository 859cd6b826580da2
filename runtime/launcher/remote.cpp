#include "runtime/launcher/remote.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <set>

#include <fmt/format.h>

#include "runtime/common/check.hpp"
#include "runtime/common/worker_variables.hpp"
#include "runtime/launcher/hostfile.hpp"
#include "runtime/launcher/launch_error.hpp"

namespace stretch::launcher {

namespace {

bool isSafeShellChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '@' || c == '%' || c == '+' || c == ':' || c == ',' || c == '.' || c == '/' ||
         c == '-';
}

bool isEnvName(std::string_view name) {
  if (name.empty() || (name.front() >= '0' && name.front() <= '9')) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::string escapePercent(std::string_view s) {
  std::string out;
  for (const char c : s) {
    out += c;
    if (c == '%') {
      out += '%';
    }
  }
  return out;
}

void checkExports(const std::map<std::string, std::string>& exports) {
  for (const auto& [name, value] : exports) {
    if (!isEnvName(name)) {
      throw LaunchError(ErrorDetail{"environment variable name", name,
                                    "letters, digits and '_', not starting with a digit"});
    }
    if (value.find('\0') != std::string::npos) {
      throw LaunchError(ErrorDetail{name, "a value with a NUL byte", "no NUL byte"});
    }
  }
}

void checkName(std::string_view what, const std::string& name) {
  if (!isValidHostName(name)) {
    throw LaunchError(
        ErrorDetail{std::string(what), name,
                    "letters, digits, '.', '-' and '_', not starting with '-' or '.'"});
  }
}

// The command a remote shell runs: [cd DIR && ][exec ][env K=V ... ]AGENT ARGS.
// rankWord: what the node-rank placeholder becomes, already in shell syntax.
std::string remoteCommand(const RemoteLaunchSpec& spec, const std::string& rankWord,
                          bool pdshEscape, bool useExec) {
  const auto literal = [pdshEscape](std::string_view s) {
    const std::string q = shellQuote(s);
    return pdshEscape ? escapePercent(q) : q;
  };
  std::string out;
  if (!spec.workDir.empty()) {
    out += "cd " + literal(spec.workDir) + " && ";
  }
  if (useExec) {
    out += "exec ";
  }
  if (!spec.exports.empty()) {
    out += "env";
    for (const auto& [name, value] : spec.exports) {
      out += " " + (pdshEscape ? escapePercent(name) : name) + "=" + literal(value);
    }
    out += " ";
  }
  for (std::size_t i = 0; i < spec.agentArgv.size(); ++i) {
    out += i ? " " : "";
    out += spec.agentArgv[i] == kNodeRankPlaceholder ? rankWord : literal(spec.agentArgv[i]);
  }
  return out;
}

std::vector<std::string> agentArgvFor(const RemoteLaunchSpec& spec, const std::string& rank) {
  std::vector<std::string> out = spec.agentArgv;
  for (std::string& arg : out) {
    if (arg == kNodeRankPlaceholder) {
      arg = rank;
    }
  }
  return out;
}

// srun and mpirun: one command starts every node's agent; the tool's own rank variable is the
// node rank, so an agent argv with the placeholder runs as `sh -c 'exec AGENT ... "$VAR" ...'`
// (the tool already set the working directory and forwards the exports).
NodeLaunch oneLaunchForAllNodes(const RemoteLaunchSpec& spec, std::vector<std::string> argv,
                                const std::string& rankWord) {
  const bool needsRank = std::find(spec.agentArgv.begin(), spec.agentArgv.end(),
                                   kNodeRankPlaceholder) != spec.agentArgv.end();
  if (needsRank) {
    RemoteLaunchSpec inner = spec;
    inner.workDir.clear();
    inner.exports.clear();
    argv.push_back("sh");
    argv.push_back("-c");
    argv.push_back(remoteCommand(inner, rankWord, /*pdshEscape=*/false, /*useExec=*/true));
  } else {
    argv.insert(argv.end(), spec.agentArgv.begin(), spec.agentArgv.end());
  }
  std::vector<std::size_t> ranks(spec.hosts.size());
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    ranks[i] = i;
  }
  return NodeLaunch{std::move(argv), spec.exports, std::move(ranks)};
}

}  // namespace

std::string_view toString(RunnerKind kind) noexcept {
  switch (kind) {
    case RunnerKind::Local:
      return "local";
    case RunnerKind::Ssh:
      return "ssh";
    case RunnerKind::Pdsh:
      return "pdsh";
    case RunnerKind::OpenMpi:
      return "openmpi";
    case RunnerKind::Netns:
      return "netns";
    case RunnerKind::Slurm:
      return "slurm";
  }
  return "unknown";
}

RunnerKind parseRunnerKind(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "mpirun")  // the and OpenMPI's own name for it
    return RunnerKind::OpenMpi;
  for (const RunnerKind kind : {RunnerKind::Local, RunnerKind::Ssh, RunnerKind::Pdsh,
                                RunnerKind::OpenMpi, RunnerKind::Netns, RunnerKind::Slurm}) {
    if (lower == toString(kind)) {
      return kind;
    }
  }
  throw LaunchError(ErrorDetail{"--launcher", std::string(name),
                                "one of local, ssh, pdsh, openmpi (or mpirun), netns, slurm "
                                "(DeepSpeed's mvapich, mpich and impi launchers are not "
                                "supported)"});
}

std::string shellQuote(std::string_view arg) {
  if (arg.find('\0') != std::string_view::npos) {
    throw LaunchError(
        ErrorDetail{"command-line argument", "a string with a NUL byte", "no NUL byte"});
  }
  if (!arg.empty() && std::all_of(arg.begin(), arg.end(), isSafeShellChar)) {
    return std::string(arg);
  }
  std::string out = "'";
  for (const char c : arg) {
    if (c == '\'') {
      out += "'\"'\"'";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

std::string shellJoin(const std::vector<std::string>& argv) {
  std::string out;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    out += i ? " " : "";
    out += shellQuote(argv[i]);
  }
  return out;
}

std::vector<NodeLaunch> buildNodeLaunches(const RemoteLaunchSpec& spec) {
  STRETCH_CHECK(!spec.hosts.empty(), "a launch needs at least one host");
  STRETCH_CHECK(!spec.agentArgv.empty() && !spec.agentArgv.front().empty(),
                "the agent program is missing");
  STRETCH_CHECK(spec.agentArgv.front().front() != '-' &&
                    spec.agentArgv.front().find('=') == std::string::npos,
                "agent program {} would be read as an option or an assignment",
                spec.agentArgv.front());
  checkExports(spec.exports);
  for (const std::string& host : spec.hosts) {
    checkName("host", host);
  }
  for (const std::string& arg : spec.agentArgv) {
    shellQuote(arg);  // rejects NUL bytes for every runner
  }
  if (spec.sshPort && (*spec.sshPort < 1 || *spec.sshPort > 65535)) {
    throw LaunchError(
        ErrorDetail{"--ssh_port", std::to_string(*spec.sshPort), "a TCP port in 1..65535"});
  }

  std::vector<NodeLaunch> out;
  const std::size_t n = spec.hosts.size();
  switch (spec.runner) {
    case RunnerKind::Local:
      for (std::size_t i = 0; i < n; ++i) {
        out.push_back(NodeLaunch{agentArgvFor(spec, std::to_string(i)), spec.exports, {i}});
      }
      break;
    case RunnerKind::Netns:
      for (std::size_t i = 0; i < n; ++i) {
        const auto mapped = spec.netnsNames.find(spec.hosts[i]);
        const std::string ns = mapped == spec.netnsNames.end() ? spec.hosts[i] : mapped->second;
        checkName("network namespace", ns);
        std::vector<std::string> argv = {"ip", "netns", "exec", ns};
        const std::vector<std::string> agent = agentArgvFor(spec, std::to_string(i));
        argv.insert(argv.end(), agent.begin(), agent.end());
        out.push_back(NodeLaunch{std::move(argv), spec.exports, {i}});
      }
      break;
    case RunnerKind::Ssh:
      for (std::size_t i = 0; i < n; ++i) {
        // --launcher_args first: ssh keeps the first value of an option, so the user's
        // choices win over these defaults. accept-new: a host seen for the first time is
        // trusted and remembered, a host whose key changed is refused (never "no").
        std::vector<std::string> argv = {"ssh"};
        argv.insert(argv.end(), spec.launcherArgs.begin(), spec.launcherArgs.end());
        for (const char* option : {"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new"})
          argv.emplace_back(option);
        if (spec.sshPort) {
          argv.push_back("-p");
          argv.push_back(std::to_string(*spec.sshPort));
        }
        argv.push_back(spec.hosts[i]);
        argv.push_back(remoteCommand(spec, std::to_string(i), /*pdshEscape=*/false,
                                     /*useExec=*/true));
        out.push_back(NodeLaunch{std::move(argv), {}, {i}});
      }
      break;
    case RunnerKind::Pdsh: {
      std::string hostList;
      for (std::size_t i = 0; i < n; ++i) {
        hostList += i ? "," : "";
        hostList += spec.hosts[i];
      }
      const int fanOut = std::max(kPdshMinFanOut, static_cast<int>(n));
      std::vector<std::string> argv = {"pdsh", "-S", "-f", std::to_string(fanOut), "-w", hostList};
      argv.insert(argv.end(), spec.launcherArgs.begin(), spec.launcherArgs.end());
      argv.push_back(remoteCommand(spec, "%n", /*pdshEscape=*/true, /*useExec=*/false));
      std::map<std::string, std::string> env = {{"PDSH_RCMD_TYPE", "ssh"}};
      if (spec.sshPort) {
        env["PDSH_SSH_ARGS_APPEND"] = fmt::format("-p {}", *spec.sshPort);
      }
      std::vector<std::size_t> ranks(n);
      for (std::size_t i = 0; i < n; ++i) {
        ranks[i] = i;
      }
      out.push_back(NodeLaunch{std::move(argv), std::move(env), std::move(ranks)});
      break;
    }
    case RunnerKind::Slurm: {
      std::string hostList;
      for (std::size_t i = 0; i < n; ++i) {
        hostList += i ? "," : "";
        hostList += spec.hosts[i];
      }
      std::vector<std::string> argv = {"srun",
                                       fmt::format("--nodes={}", n),
                                       fmt::format("--ntasks={}", n),
                                       "--ntasks-per-node=1",
                                       "--nodelist=" + hostList,
                                       "--distribution=arbitrary",
                                       "--kill-on-bad-exit=0",
                                       "--input=none"};
      if (!spec.workDir.empty()) {
        argv.push_back("--chdir=" + spec.workDir);
      }
      argv.push_back("--export=ALL");  // the exports travel in srun's own environment
      argv.insert(argv.end(), spec.launcherArgs.begin(), spec.launcherArgs.end());
      out.push_back(oneLaunchForAllNodes(spec, std::move(argv), "\"$SLURM_PROCID\""));
      break;
    }
    case RunnerKind::OpenMpi: {
      std::string hostList;
      for (std::size_t i = 0; i < n; ++i) {
        hostList += i ? "," : "";
        hostList += spec.hosts[i] + ":1";
      }
      std::vector<std::string> argv = {"mpirun",    "-n",   std::to_string(n), "--map-by", "node",
                                       "--bind-to", "none", "--host",          hostList};
      if (!spec.workDir.empty()) {
        argv.push_back("--wdir");
        argv.push_back(spec.workDir);
      }
      for (const auto& [name, value] : spec.exports) {
        argv.push_back("-x");
        argv.push_back(name);
      }
      argv.insert(argv.end(), spec.launcherArgs.begin(), spec.launcherArgs.end());
      out.push_back(oneLaunchForAllNodes(spec, std::move(argv), "\"$OMPI_COMM_WORLD_RANK\""));
      break;
    }
  }
  return out;
}

namespace {

constexpr std::size_t kMaxSlurmHosts = 1000000;

[[noreturn]] void badHostlist(std::string_view list, std::string_view why) {
  throw LaunchError(
      ErrorDetail{"SLURM_JOB_NODELIST", std::string(list),
                  "a Slurm host list such as node[01-03,07],gpu5 (" + std::string(why) + ")"});
}

// One bracket's numbers: "01-03,7" -> 01 02 03 7.
std::vector<std::string> expandBracket(std::string_view list, std::string_view body) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= body.size()) {
    const std::size_t comma = std::min(body.find(',', start), body.size());
    const std::string_view item = body.substr(start, comma - start);
    const std::size_t dash = item.find('-');
    const std::string_view lo = item.substr(0, dash);
    const std::string_view hi = dash == std::string_view::npos ? lo : item.substr(dash + 1);
    const auto number = [&](std::string_view digits) {
      if (digits.empty() || digits.size() > 18 ||
          !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        badHostlist(list, "a bracket holds numbers and ranges LO-HI");
      }
      return std::stoull(std::string(digits));
    };
    const std::uint64_t a = number(lo);
    const std::uint64_t b = number(hi);
    if (b < a) {
      badHostlist(list, "a range ends below its start");
    }
    if (b - a >= kMaxSlurmHosts || out.size() + (b - a) >= kMaxSlurmHosts) {
      badHostlist(list, "more than 1000000 hosts");
    }
    for (std::uint64_t v = a; v <= b; ++v) {
      out.push_back(fmt::format("{:0{}}", v, lo.size()));
    }
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> expandSlurmHostlist(std::string_view list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    // The next top-level comma ends this name pattern.
    std::size_t end = start;
    int depth = 0;
    for (; end < list.size() && (depth > 0 || list[end] != ','); ++end) {
      if (list[end] == '[' && ++depth > 1) {
        badHostlist(list, "nested brackets");
      }
      if (list[end] == ']' && --depth < 0) {
        badHostlist(list, "a ']' without its '['");
      }
    }
    if (depth != 0) {
      badHostlist(list, "a '[' without its ']'");
    }
    const std::string_view pattern = list.substr(start, end - start);
    if (pattern.empty()) {
      badHostlist(list, "an empty name");
    }
    // Every bracket multiplies the names so far.
    std::vector<std::string> names = {""};
    for (std::size_t i = 0; i < pattern.size();) {
      if (pattern[i] != '[') {
        const std::size_t next = std::min(pattern.find('[', i), pattern.size());
        for (std::string& name : names) {
          name += pattern.substr(i, next - i);
        }
        i = next;
        continue;
      }
      const std::size_t close = pattern.find(']', i);
      const auto numbers = expandBracket(list, pattern.substr(i + 1, close - i - 1));
      if (names.size() * numbers.size() + out.size() > kMaxSlurmHosts) {
        badHostlist(list, "more than 1000000 hosts");
      }
      std::vector<std::string> product;
      product.reserve(names.size() * numbers.size());
      for (const std::string& name : names) {
        for (const std::string& number : numbers) {
          product.push_back(name + number);
        }
      }
      names = std::move(product);
      i = close + 1;
    }
    out.insert(out.end(), names.begin(), names.end());
    start = end + 1;
  }
  // Duplicates out, first place kept.
  std::vector<std::string> unique;
  std::set<std::string_view> seen;
  for (const std::string& name : out) {
    if (seen.insert(name).second) {
      unique.push_back(name);
    }
  }
  return unique;
}

std::map<std::string, std::string> deepspeedExports(
    const std::map<std::string, std::string>& environment, const std::string& workDir,
    const std::vector<std::pair<std::string, std::string>>& envFiles) {
  static constexpr std::string_view kPrefixes[] = {"NCCL", "PYTHON", "MLFLOW", "MV2", "UCX"};
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : environment) {
    for (const auto prefix : kPrefixes) {
      if (name.rfind(prefix, 0) == 0) {
        out[name] = value;
        break;
      }
    }
  }
  const auto path = environment.find("PYTHONPATH");
  out["PYTHONPATH"] =
      path == environment.end() || path->second.empty() ? workDir : workDir + ":" + path->second;
  const auto validName = [](std::string_view name) {
    if (name.empty() || (name[0] >= '0' && name[0] <= '9'))
      return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
      return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    });
  };
  const auto trim = [](std::string_view text) {
    const auto first = text.find_first_not_of(" \t\r");
    if (first == std::string_view::npos)
      return std::string_view();
    return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
  };
  for (const auto& [file, text] : envFiles) {
    std::size_t start = 0;
    for (int line = 1; start <= text.size(); ++line) {
      const std::size_t end = std::min(text.find('\n', start), text.size());
      const std::string_view raw = std::string_view(text).substr(start, end - start);
      start = end + 1;
      const std::string_view content = trim(raw);
      if (content.empty() || content.front() == '#')
        continue;
      const auto eq = content.find('=');
      const std::string_view name =
          eq == std::string_view::npos ? content : trim(content.substr(0, eq));
      if (eq == std::string_view::npos || !validName(name)) {
        throw LaunchError(ErrorDetail{fmt::format("{}:{}", file, line), std::string(raw),
                                      "NAME=VALUE with a variable name of letters, digits and _"});
      }
      if (name == worker_env::kStoreToken)
        continue;
      out[std::string(name)] = std::string(trim(content.substr(eq + 1)));
    }
  }
  out.erase(worker_env::kStoreToken);
  return out;
}

}  // namespace stretch::launcher
