// Multi-node `stretch launch`: a job controller in the launcher and one `stretch agent` per host,
// with the example job as workers.
//  - local runner (several hostfile hosts as agents on this machine, no privileges needed): the
//    same weights as four workers under one agent; a node's agent SIGKILLed mid-run -> the job
//    goes on at the smaller world size, a node started by hand joins -> it grows back, the global
//    batch never changes; SIGTERM to the launcher leaves no agent and no worker behind;
//  - netns runner: two network-namespace hosts with their own addresses on a bridge (skipped
//    without root or `ip netns`), the job trains across them and survives losing one.
// Every run is bounded in time.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cli/launch_support.hpp"
#include "tests/support/test_support.hpp"

namespace {

using namespace stretch::test::launch;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kConfig =
    std::string(STRETCH_SOURCE) + "/fixtures/jobs/digits/ds_config_elastic.json";

// `stretch launch` options for a multi-node run of the example job, then the job itself.
// The job's store listens on masterPort + 1.
std::vector<std::string> multiNodeJob(const fs::path& dir, const fs::path& hostfile, int steps,
                                      std::vector<std::string> extra, int masterPort = freePort()) {
  std::vector<std::string> args = {"--hostfile",
                                   hostfile.string(),
                                   "--master_port",
                                   std::to_string(masterPort),
                                   "--config",
                                   kConfig,
                                   "--monitor_interval",
                                   "1",
                                   "--heartbeat_timeout",
                                   "3",
                                   "--log_dir",
                                   (dir / "logs").string(),
                                   "--event_log",
                                   (dir / "events.jsonl").string(),
                                   "--checkpoint_dir",
                                   (dir / "ckpt").string()};
  args.insert(args.end(), extra.begin(), extra.end());
  const std::vector<std::string> job = {STRETCH_TRAIN_DIGITS,
                                        "--config",
                                        kConfig,
                                        "--steps",
                                        std::to_string(steps),
                                        "--checkpoint-dir",
                                        (dir / "ckpt").string(),
                                        "--save-every",
                                        "100",
                                        "--resume",
                                        "--json"};
  args.insert(args.end(), job.begin(), job.end());
  return args;
}

fs::path writeHostfile(const fs::path& dir, const std::vector<std::string>& hosts) {
  const fs::path path = dir / "hostfile";
  std::ofstream out(path);
  for (const auto& h : hosts)
    out << h << " slots=2\n";
  return path;
}

std::vector<nlohmann::json> startsOf(const fs::path& events) {
  std::vector<nlohmann::json> out;
  for (const auto& e : eventsOf(events)) {
    if (e["event"] == "start_workers")
      out.push_back(e);
  }
  return out;
}

// Waits until the event log holds a start_workers record that `pred` accepts; its record, or
// null after `limit`.
template <typename Pred>
nlohmann::json waitForStart(const fs::path& events, Pred pred, std::chrono::seconds limit = 60s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& s : startsOf(events)) {
      if (pred(s))
        return s;
    }
    std::this_thread::sleep_for(20ms);
  }
  return nullptr;
}

pid_t agentPid(const fs::path& dir, const std::string& node) {
  std::ifstream in(dir / "logs" / ("agent_" + node + ".pid"));
  pid_t pid = -1;
  in >> pid;
  return pid;
}

// Processes whose command line mentions `marker` (this test's directory).
std::vector<pid_t> processesMentioning(const std::string& marker) {
  std::vector<pid_t> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::string cmdline = stretch::test::readFileIfAny(entry.path() / "cmdline");
    for (char& c : cmdline) {
      if (c == '\0')
        c = ' ';
    }
    if (cmdline.find(marker) != std::string::npos && std::stoi(name) != ::getpid())
      out.push_back(std::stoi(name));
  }
  return out;
}

// Zombies and exiting processes disappear shortly after their parent reaps them.
bool noneLeft(const std::string& marker, std::chrono::seconds limit = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (processesMentioning(marker).empty())
      return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

void expectConstantGlobalBatch(const fs::path& events) {
  for (const auto& s : startsOf(events)) {
    EXPECT_EQ(s["batch"]["train_batch_size"], 48) << s.dump();
    EXPECT_EQ(s["batch"]["train_batch_size"].get<int>(),
              s["batch"]["train_micro_batch_size_per_gpu"].get<int>() *
                  s["batch"]["gradient_accumulation_steps"].get<int>() * s["world_size"].get<int>())
        << s.dump();
  }
}

TEST(MultiNodeLocal, TwoAgentsTrainBitwiseLikeFourWorkersUnderOneAgent) {
  stretch::test::TempDir single("stretch-mn-single");
  Launch one(single.path(), digitsJob(single.path(), 4, 300));
  ASSERT_EQ(one.wait(), 0) << one.err();
  const auto reference = jobSummary(single.path());
  ASSERT_FALSE(reference.is_null()) << one.err();

  stretch::test::TempDir dir("stretch-mn-two");
  Launch launch(dir.path(),
                multiNodeJob(dir.path(), writeHostfile(dir.path(), {"n0", "n1"}), 300, {}));
  ASSERT_EQ(launch.wait(), 0) << launch.err();
  const auto summary = jobSummary(dir.path());
  ASSERT_FALSE(summary.is_null()) << launch.err();
  EXPECT_EQ(summary["world_size"], 4);
  EXPECT_EQ(summary["steps"], 300);
  EXPECT_EQ(summary["weights_sha256"], reference["weights_sha256"]);
  const auto starts = startsOf(dir.path() / "events.jsonl");
  ASSERT_EQ(starts.size(), 1u);
  // Node ranks follow the hostfile, whichever agent registered first.
  EXPECT_EQ(starts[0]["nodes"], nlohmann::json::array({"n0", "n1"}));
  EXPECT_TRUE(noneLeft(dir.path().string()));
}

TEST(MultiNodeLocal, NodeLeavesThenANewNodeJoinsAndTheGlobalBatchNeverChanges) {
  stretch::test::TempDir dir("stretch-mn-elastic");
  const fs::path events = dir.path() / "events.jsonl";
  const int port = freePort();
  Launch launch(dir.path(), multiNodeJob(dir.path(), writeHostfile(dir.path(), {"n0", "n1"}), 12000,
                                         {"--elastic", "1:3", "--last_call", "1"}, port));
  const auto first = waitForStart(events, [](const auto& s) { return s["world_size"] == 4; });
  ASSERT_FALSE(first.is_null()) << launch.err();
  // Let it write a checkpoint, then take node n1 away.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!fs::exists(dir.path() / "ckpt" / "latest") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  const pid_t n1 = agentPid(dir.path(), "n1");
  ASSERT_GT(n1, 0);
  const double killedAt = wallNow();
  ASSERT_EQ(::kill(n1, SIGKILL), 0);
  const auto shrunk = waitForStart(events, [](const auto& s) {
    return s["world_size"] == 2 && s["nodes"] == nlohmann::json::array({"n0"});
  });
  ASSERT_FALSE(shrunk.is_null()) << launch.err();
  const double recovery = shrunk["time_ns"].get<double>() / 1e9 - killedAt;
  std::printf("node n1 lost -> world size 2 started after %.3f s (resume step %s)\n", recovery,
              shrunk.contains("resume_step") ? shrunk["resume_step"].dump().c_str() : "none");
  EXPECT_LT(recovery, 5.0);

  // A new node joins the running job by hand, as an operator would.
  const double joinedAt = wallNow();
  Launch joiner(dir.path(),
                {"--rdzv", "127.0.0.1:" + std::to_string(port + 1), "--node_id", "n2", "--nproc",
                 "2", "--token_file", (dir.path() / "logs" / "job_token").string(), "--log_dir",
                 (dir.path() / "logs").string()},
                "agent", "n2-");
  const auto grown = waitForStart(events, [](const auto& s) {
    return s["world_size"] == 4 && s["nodes"] == nlohmann::json::array({"n0", "n2"});
  });
  ASSERT_FALSE(grown.is_null()) << launch.err() << joiner.err();
  std::printf("node n2 joined -> world size 4 started after %.3f s\n",
              grown["time_ns"].get<double>() / 1e9 - joinedAt);

  ASSERT_EQ(launch.wait(180s), 0) << launch.err();
  EXPECT_EQ(joiner.wait(30s), 0) << joiner.err();
  const auto summary = jobSummary(dir.path());
  ASSERT_FALSE(summary.is_null());
  EXPECT_EQ(summary["steps"], 12000);
  EXPECT_EQ(summary["world_size"], 4);
  expectConstantGlobalBatch(events);
  // The shrink counted as a restart; the growth did not.
  EXPECT_EQ(grown["restart_count"], shrunk["restart_count"]);
  // Resume steps never go back.
  std::int64_t last = 0;
  for (const auto& s : startsOf(events)) {
    if (s.contains("resume_step")) {
      EXPECT_GE(s["resume_step"].get<std::int64_t>(), last);
      last = s["resume_step"];
    }
  }
  EXPECT_TRUE(noneLeft(dir.path().string()));
}

// A host that hangs (agent and workers frozen, as in a network partition) sends no keep-alive:
// the controller drops it after --heartbeat_timeout and goes on without it.
TEST(MultiNodeLocal, HungNodeIsDroppedWhenItsKeepAliveTimesOut) {
  stretch::test::TempDir dir("stretch-mn-hung");
  const fs::path events = dir.path() / "events.jsonl";
  Launch launch(dir.path(), multiNodeJob(dir.path(), writeHostfile(dir.path(), {"n0", "n1"}), 8000,
                                         {"--elastic", "1:2"}));
  ASSERT_FALSE(waitForStart(events, [](const auto& s) { return s["world_size"] == 4; }).is_null())
      << launch.err();
  const pid_t n1 = agentPid(dir.path(), "n1");
  ASSERT_GT(n1, 0);
  // Freeze the agent and its workers (each worker leads its own process group).
  std::vector<pid_t> frozen = {n1};
  std::istringstream children(stretch::test::readFileIfAny(
      "/proc/" + std::to_string(n1) + "/task/" + std::to_string(n1) + "/children"));
  for (pid_t p = 0; children >> p;)
    frozen.push_back(p);
  const double frozenAt = wallNow();
  for (const pid_t p : frozen)
    ::kill(p, SIGSTOP);
  const auto shrunk = waitForStart(events, [](const auto& s) { return s["world_size"] == 2; });
  for (const pid_t p : frozen)
    ::kill(p, SIGKILL);
  ASSERT_FALSE(shrunk.is_null()) << launch.err();
  const double detected = shrunk["time_ns"].get<double>() / 1e9 - frozenAt;
  std::printf("hung node -> world size 2 started after %.3f s (heartbeat timeout 3 s)\n", detected);
  EXPECT_GE(detected, 2.5);
  EXPECT_LT(detected, 10.0);
  ASSERT_EQ(launch.wait(180s), 0) << launch.err();
  expectConstantGlobalBatch(events);
  EXPECT_TRUE(noneLeft(dir.path().string()));
}

TEST(MultiNodeLocal, SigtermToTheLauncherStopsEveryAgentAndWorker) {
  stretch::test::TempDir dir("stretch-mn-sigterm");
  const fs::path events = dir.path() / "events.jsonl";
  Launch launch(dir.path(),
                multiNodeJob(dir.path(), writeHostfile(dir.path(), {"n0", "n1"}), 100000, {}));
  ASSERT_FALSE(waitForStart(events, [](const auto&) { return true; }).is_null()) << launch.err();
  std::this_thread::sleep_for(500ms);
  // Two agents and four workers run.
  EXPECT_GE(processesMentioning(dir.path().string()).size(), 6u);
  ::kill(launch.pid(), SIGTERM);
  EXPECT_EQ(launch.wait(60s), 128 + SIGTERM) << launch.err();
  EXPECT_TRUE(noneLeft(dir.path().string())) << processesMentioning(dir.path().string()).size();
}

TEST(MultiNodeLocal, AgentsThatCannotStartEndTheJobWithTheirStatus) {
  stretch::test::TempDir dir("stretch-mn-noagent");
  // "netns" with hosts that are no namespaces: `ip netns exec` fails for both.
  Launch launch(
      dir.path(),
      multiNodeJob(dir.path(), writeHostfile(dir.path(), {"no-such-ns-a", "no-such-ns-b"}), 10,
                   {"--launcher", "netns", "--rdzv_addr", "127.0.0.1"}));
  EXPECT_EQ(launch.wait(60s), 1);
  EXPECT_NE(launch.err().find("ended before any agent registered"), std::string::npos)
      << launch.err();
  EXPECT_TRUE(noneLeft(dir.path().string()));
}

TEST(MultiNodeLocal, BadMultiNodeOptionsAreUsageErrors) {
  stretch::test::TempDir dir("stretch-mn-bad");
  const fs::path hostfile = writeHostfile(dir.path(), {"n0", "n1"});
  {
    Launch launch(dir.path(), {"--hostfile", hostfile.string(), "--master_port", "29700",
                               "--rdzv_port", "29700", "/bin/true"});
    EXPECT_EQ(launch.wait(30s), 2);
    EXPECT_NE(launch.err().find("--rdzv_port"), std::string::npos) << launch.err();
  }
  {
    Launch launch(dir.path(),
                  {"--hostfile", hostfile.string(), "--launcher", "slurm", "/bin/true"});
    EXPECT_EQ(launch.wait(30s), 2);
    EXPECT_NE(launch.err().find("--launcher"), std::string::npos) << launch.err();
  }
  {
    Launch agent(dir.path(), {"--rdzv", "localhost", "--node_rank", "0"}, "agent");
    EXPECT_EQ(agent.wait(30s), 2);
    EXPECT_NE(agent.err().find("--rdzv"), std::string::npos) << agent.err();
  }
}

// Two hosts as network namespaces on a bridge, each with its own address: the remote-exec step
// is `ip netns exec`. Needs root (CAP_NET_ADMIN); skipped otherwise.
class NetnsHosts {
 public:
  NetnsHosts() {
    const int id = static_cast<int>(::getpid() % 200) + 20;
    bridge_ = "stbr" + std::to_string(id);
    subnet_ = "10.231." + std::to_string(id);
    if (::geteuid() != 0) {
      why_ = "needs root for `ip netns` and veth links";
      return;
    }
    std::vector<std::string> cmds = {"ip link add " + bridge_ + " type bridge",
                                     "ip addr add " + subnet_ + ".1/24 dev " + bridge_,
                                     "ip link set " + bridge_ + " up"};
    for (int i = 1; i <= 2; ++i) {
      const std::string ns = "stx" + std::to_string(id) + "h" + std::to_string(i);
      const std::string a = "stv" + std::to_string(id) + "a" + std::to_string(i);
      const std::string b = "stv" + std::to_string(id) + "b" + std::to_string(i);
      hosts_.push_back(ns);
      links_.push_back(a);
      cmds.push_back("ip netns add " + ns);
      cmds.push_back("ip link add " + a + " type veth peer name " + b);
      cmds.push_back("ip link set " + a + " master " + bridge_ + " up");
      cmds.push_back("ip link set " + b + " netns " + ns);
      cmds.push_back("ip -n " + ns + " addr add " + subnet_ + "." + std::to_string(i + 1) +
                     "/24 dev " + b);
      cmds.push_back("ip -n " + ns + " link set " + b + " up");
      cmds.push_back("ip -n " + ns + " link set lo up");
    }
    for (const auto& c : cmds) {
      if (std::system((c + " 2>/dev/null").c_str()) != 0) {
        why_ = "`" + c + "` failed (no CAP_NET_ADMIN in this container?)";
        return;
      }
    }
  }
  // Starts sshd in every namespace (port 22 of the host's own address) with keys made in `dir`;
  // the launcher's ssh then needs sshArgs(). Returns a reason when it cannot.
  std::string startSshd(const fs::path& dir) {
    if (!fs::exists("/usr/sbin/sshd") || std::system("command -v ssh >/dev/null 2>&1") != 0)
      return "needs openssh-server and openssh-client";
    fs::create_directories("/run/sshd");
    key_ = dir / "client";
    const std::string keygen = "ssh-keygen -q -t ed25519 -N '' -f ";
    if (std::system((keygen + (dir / "hostkey").string()).c_str()) != 0 ||
        std::system((keygen + key_.string()).c_str()) != 0)
      return "ssh-keygen failed";
    fs::copy_file(dir / "client.pub", dir / "authorized_keys");
    for (std::size_t i = 0; i < hosts_.size(); ++i) {
      const fs::path conf = dir / ("sshd_" + std::to_string(i) + ".conf");
      std::ofstream(conf) << "ListenAddress " << hostAddress(static_cast<int>(i)) << "\nPort 22\n"
                          << "HostKey " << (dir / "hostkey").string() << "\n"
                          << "AuthorizedKeysFile " << (dir / "authorized_keys").string() << "\n"
                          << "PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n"
                          << "PidFile " << (dir / ("sshd_" + std::to_string(i) + ".pid")).string()
                          << "\n";
      const std::string cmd = "ip netns exec " + hosts_[i] + " /usr/sbin/sshd -f " + conf.string() +
                              " -E " + (dir / ("sshd_" + std::to_string(i) + ".log")).string();
      if (std::system(cmd.c_str()) != 0)
        return "`" + cmd + "` failed";
    }
    // sshd writes its pid file once it listens; remember the pids (the directory goes first).
    for (std::size_t i = 0; i < hosts_.size(); ++i) {
      const fs::path pidFile = dir / ("sshd_" + std::to_string(i) + ".pid");
      pid_t pid = -1;
      for (int tries = 0; tries < 200 && pid <= 0; ++tries) {
        std::ifstream in(pidFile);
        if (!(in >> pid))
          std::this_thread::sleep_for(10ms);
      }
      if (pid > 0)
        sshdPids_.push_back(pid);
    }
    return {};
  }
  // ssh options that log in to the namespaces with the test's key and no host-key prompts.
  std::string sshArgs() const {
    return "-i " + key_.string() +
           " -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o LogLevel=ERROR";
  }

  ~NetnsHosts() {
    for (const pid_t pid : sshdPids_)
      ::kill(pid, SIGTERM);
    for (const auto& h : hosts_)
      std::system(("ip netns del " + h + " 2>/dev/null").c_str());
    for (const auto& l : links_)
      std::system(("ip link del " + l + " 2>/dev/null").c_str());
    std::system(("ip link del " + bridge_ + " 2>/dev/null").c_str());
  }
  const std::string& skipReason() const { return why_; }
  const std::vector<std::string>& hosts() const { return hosts_; }
  std::string launcherAddress() const { return subnet_ + ".1"; }
  std::string hostAddress(int i) const { return subnet_ + "." + std::to_string(i + 2); }

 private:
  std::string bridge_, subnet_, why_;
  std::vector<std::string> hosts_, links_;
  fs::path key_;
  std::vector<pid_t> sshdPids_;
};

TEST(MultiNodeNetns, TwoNamespaceHostsTrainAcrossTheBridgeAndSurviveLosingOne) {
  NetnsHosts net;
  if (!net.skipReason().empty())
    GTEST_SKIP() << net.skipReason();
  {
    // Not elastic: both hosts, world size 4, rank 0 on the first host's address.
    stretch::test::TempDir dir("stretch-netns-fixed");
    Launch launch(dir.path(),
                  multiNodeJob(dir.path(), writeHostfile(dir.path(), net.hosts()), 300,
                               {"--launcher", "netns", "--rdzv_addr", net.launcherAddress()}));
    ASSERT_EQ(launch.wait(120s), 0) << launch.err();
    EXPECT_NE((launch.out() + launch.err()).find("address " + net.hostAddress(0)),
              std::string::npos)
        << launch.out();
    const auto summary = jobSummary(dir.path());
    ASSERT_FALSE(summary.is_null());
    EXPECT_EQ(summary["world_size"], 4);
    EXPECT_EQ(summary["steps"], 300);
  }
  // Elastic: the second host's agent dies; the first carries on at world size 2.
  stretch::test::TempDir dir("stretch-netns-elastic");
  const fs::path events = dir.path() / "events.jsonl";
  Launch launch(dir.path(), multiNodeJob(dir.path(), writeHostfile(dir.path(), net.hosts()), 6000,
                                         {"--launcher", "netns", "--rdzv_addr",
                                          net.launcherAddress(), "--elastic", "1:2"}));
  ASSERT_FALSE(waitForStart(events, [](const auto& s) { return s["world_size"] == 4; }).is_null())
      << launch.err();
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!fs::exists(dir.path() / "ckpt" / "latest") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  const pid_t victim = agentPid(dir.path(), net.hosts()[1]);
  ASSERT_GT(victim, 0);
  const double killedAt = wallNow();
  ::kill(victim, SIGKILL);
  const auto shrunk = waitForStart(events, [](const auto& s) { return s["world_size"] == 2; });
  ASSERT_FALSE(shrunk.is_null()) << launch.err();
  std::printf("namespace host lost -> world size 2 started after %.3f s\n",
              shrunk["time_ns"].get<double>() / 1e9 - killedAt);
  ASSERT_EQ(launch.wait(180s), 0) << launch.err();
  const auto summary = jobSummary(dir.path());
  ASSERT_FALSE(summary.is_null());
  EXPECT_EQ(summary["steps"], 6000);
  expectConstantGlobalBatch(events);
  EXPECT_TRUE(noneLeft(dir.path().string()));
}

// The remote runners for real: sshd in both namespace hosts, the hostfile naming their addresses;
// ssh (token on stdin), pdsh (-R ssh) and OpenMPI's mpirun (which reaches the hosts over ssh)
// each start the two agents, and the job trains at world size 4 across them.
class RemoteRunners : public ::testing::TestWithParam<std::string> {};

TEST_P(RemoteRunners, StartOneAgentPerNamespaceHostOverSsh) {
  const std::string runner = GetParam();
  NetnsHosts net;
  if (!net.skipReason().empty())
    GTEST_SKIP() << net.skipReason();
  const std::string tool = runner == "mpirun" ? "mpirun" : runner;
  if (std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << runner << " is not installed";
  stretch::test::TempDir keys("stretch-sshd");
  if (const auto why = net.startSshd(keys.path()); !why.empty())
    GTEST_SKIP() << why;
  stretch::test::TempDir dir("stretch-runner-" + runner);
  std::vector<std::string> hosts = {net.hostAddress(0), net.hostAddress(1)};
  std::vector<std::string> extra = {"--launcher", runner, "--rdzv_addr", net.launcherAddress()};
  // How each tool is told which key to use.
  if (runner == "ssh") {
    extra.push_back("--launcher_args");
    extra.push_back(net.sshArgs());
  } else if (runner == "pdsh") {
    ::setenv("PDSH_SSH_ARGS_APPEND", net.sshArgs().c_str(), 1);
  } else {
    ::setenv("OMPI_MCA_plm_rsh_args", net.sshArgs().c_str(), 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
  Launch launch(dir.path(), multiNodeJob(dir.path(), writeHostfile(dir.path(), hosts), 300, extra));
  const int status = launch.wait(120s);
  for (const char* v : {"PDSH_SSH_ARGS_APPEND", "OMPI_MCA_plm_rsh_args", "OMPI_ALLOW_RUN_AS_ROOT",
                        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"})
    ::unsetenv(v);
  ASSERT_EQ(status, 0) << launch.out() << launch.err();
  const auto summary = jobSummary(dir.path());
  ASSERT_FALSE(summary.is_null());
  EXPECT_EQ(summary["world_size"], 4);
  EXPECT_EQ(summary["steps"], 300);
  const auto starts = startsOf(dir.path() / "events.jsonl");
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0]["nodes"], nlohmann::json(hosts));  // in hostfile order
  EXPECT_TRUE(noneLeft(dir.path().string()));
}

INSTANTIATE_TEST_SUITE_P(Runners, RemoteRunners, ::testing::Values("ssh", "pdsh", "mpirun"));

}  // namespace
