// The runner command lines through a real /bin/sh: a quoted word, the ssh remote command, the
// pdsh remote command (after pdsh's own %h/%u/%n/%% substitution, reimplemented here from
// pdsh's pipecmd_format_arg) and the mpirun `sh -c` wrapper must hand the agent exactly the
// arguments, environment and working directory they were built from. Spawns sh; no network.

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <rapidcheck.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/launcher/remote.hpp"

namespace stretch::launcher {
namespace {

// Runs `command` with /bin/sh -c (popen) and returns its stdout; a test failure when the shell
// exits non-zero.
std::string runShell(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "popen failed";
    return {};
  }
  std::string out;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) {
    out.append(buffer, n);
  }
  const int status = ::pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "status " << status << " of " << command;
  return out;
}

std::vector<std::string> splitNul(const std::string& s) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < s.size()) {
    const std::size_t end = s.find('\0', pos);
    if (end == std::string::npos) {
      out.push_back(s.substr(pos));
      break;
    }
    out.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

const std::vector<std::string> kHostile = {
    "",
    " ",
    "'",
    "''",
    "\"",
    "\\",
    "\\'",
    "'\\''",
    "$HOME",
    "${HOME}",
    "$(echo pwned)",
    "`echo pwned`",
    "a;echo pwned",
    "a && echo pwned",
    "a | cat",
    "a > /dev/null",
    "*",
    "?",
    "[a-z]",
    "~",
    "~root",
    "#comment",
    "a#b",
    "-n",
    "-e",
    "--",
    "a=b",
    "PATH=/nonexistent",
    "line1\nline2",
    "tab\there",
    "\r",
    "trailing newline\n",
    "%n %h %u %% %",
    "100%",
    "{node_rank}x",
    "!",
    "!!",
    "\xc3\xa9\xe2\x82\xac",  // UTF-8
    "\x01\x7f\xff",
    "a'b\"c$d`e\\f",
};

TEST(ShellQuoteThroughSh, HostileStrings) {
  for (const std::string& s : kHostile) {
    EXPECT_EQ(runShell("printf %s " + shellQuote(s)), s) << shellQuote(s);
  }
}

TEST(ShellQuoteThroughSh, JoinedWordsStaySeparate) {
  std::vector<std::string> argv = {"printf", "%s\\0"};
  argv.insert(argv.end(), kHostile.begin(), kHostile.end());
  const std::vector<std::string> back = splitNul(runShell(shellJoin(argv)));
  EXPECT_EQ(back, kHostile);
}

RC_GTEST_PROP(ShellQuoteThroughSh, RandomStringsRoundTrip, ()) {
  const std::string special = "'\"\\$`!*?[]{}()<>|&;#~ \t\n%=-";
  const auto s = *rc::gen::container<std::string>(rc::gen::weightedOneOf<char>(
      {{3, rc::gen::elementOf(special)},
       {2, rc::gen::inRange<char>('a', 'z' + 1)},
       {1, rc::gen::suchThat(rc::gen::arbitrary<char>(), [](char c) { return c != '\0'; })}}));
  RC_ASSERT(runShell("printf %s " + shellQuote(s)) == s);
}

class Scratch : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = std::filesystem::temp_directory_path() /
           ("stretch launcher 'shell' $test_" + std::to_string(::getpid()) + "_" +
            std::to_string(counter++));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

// An "agent" that prints its working directory, two variables and its arguments, NUL-separated.
RemoteLaunchSpec printingAgent(RunnerKind runner, const std::filesystem::path& dir) {
  RemoteLaunchSpec spec;
  spec.runner = runner;
  spec.hosts = {"w0", "w1", "w2"};
  spec.agentArgv = {
      "/bin/sh", "-c",          "printf '%s\\0' \"$PWD\" \"$A_VAR\" \"$B_VAR\" \"$@\"",
      "agent",   "--node_rank", std::string(kNodeRankPlaceholder)};
  spec.agentArgv.insert(spec.agentArgv.end(), kHostile.begin(), kHostile.end());
  spec.exports = {{"A_VAR", "it's $(x) %n 100%"}, {"B_VAR", "line1\nline2"}};
  spec.workDir = dir.string();
  return spec;
}

std::vector<std::string> expectedOutput(const std::filesystem::path& dir, const std::string& rank) {
  std::vector<std::string> out = {dir.string(), "it's $(x) %n 100%", "line1\nline2", "--node_rank",
                                  rank};
  out.insert(out.end(), kHostile.begin(), kHostile.end());
  return out;
}

using RemoteCommandThroughSh = Scratch;

TEST_F(RemoteCommandThroughSh, Ssh) {
  const auto launches = buildNodeLaunches(printingAgent(RunnerKind::Ssh, dir_));
  ASSERT_EQ(launches.size(), 3u);
  // What sshd does with the last argument: $SHELL -c "<it>".
  EXPECT_EQ(splitNul(runShell(launches[2].argv.back())), expectedOutput(dir_, "2"));
}

// pdsh's pipecmd_format_arg: %h host, %u user, %n rank, %% a percent sign.
std::string pdshFormat(const std::string& arg, const std::string& host, int rank) {
  std::string out;
  for (std::size_t i = 0; i < arg.size(); ++i) {
    if (arg[i] != '%' || i + 1 >= arg.size()) {
      out += arg[i];
      continue;
    }
    const char c = arg[++i];
    if (c == 'h') {
      out += host;
    } else if (c == 'u') {
      out += "someuser";
    } else if (c == 'n') {
      out += std::to_string(rank);
    } else if (c == '%') {
      out += '%';
    } else {
      out += '%';
      out += c;
    }
  }
  return out;
}

TEST_F(RemoteCommandThroughSh, PdshAfterPdshSubstitution) {
  const auto launches = buildNodeLaunches(printingAgent(RunnerKind::Pdsh, dir_));
  ASSERT_EQ(launches.size(), 1u);
  const std::string remote = pdshFormat(launches[0].argv.back(), "w1", 1);
  EXPECT_EQ(splitNul(runShell(remote)), expectedOutput(dir_, "1"));
}

TEST_F(RemoteCommandThroughSh, OpenMpiShellWrapper) {
  RemoteLaunchSpec spec = printingAgent(RunnerKind::OpenMpi, dir_);
  const auto launches = buildNodeLaunches(spec);
  ASSERT_EQ(launches.size(), 1u);
  const std::vector<std::string>& argv = launches[0].argv;
  const auto sh = std::find(argv.begin(), argv.end(), "sh");
  ASSERT_NE(sh, argv.end());
  // What mpirun does on node 2: cd --wdir, export the -x variables, exec the program.
  std::string command = "cd " + shellQuote(dir_.string()) + " && OMPI_COMM_WORLD_RANK=2";
  for (const auto& [name, value] : launches[0].env) {
    command += " " + name + "=" + shellQuote(value);
  }
  command += " " + shellJoin(std::vector<std::string>(sh, argv.end()));
  EXPECT_EQ(splitNul(runShell(command)), expectedOutput(dir_, "2"));
}

}  // namespace
}  // namespace stretch::launcher
