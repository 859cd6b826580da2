// `stretch launch --launcher slurm` for real: a private Slurm cluster on this machine (munged,
// slurmctld, and one slurmd per network-namespace host on a bridge, all from one slurm.conf the
// test writes), then `salloc -N 2 stretch launch --launcher slurm ...` with the example job:
//  - the job trains at world size 2 nodes x 2 slots with one agent in each node's namespace, the
//    nodes taken from SLURM_JOB_NODELIST, the store token on no command line;
//  - elastic: one node's agent SIGKILLed mid-run -> the job restarts at world size 2 on the other
//    node and finishes.
// Needs root (network namespaces, slurmd as root) and Debian's slurmd, slurmctld, slurm-client and
// munge; skipped with the reason otherwise. Every wait is bounded; the daemons, the processes in
// the namespaces and the namespaces themselves are removed at the end, also after a failure.

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cli/launch_support.hpp"
#include "tests/cli/netns_support.hpp"
#include "tests/support/test_support.hpp"

namespace {

using namespace stretch::test::launch;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool run(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
}

std::string lastLines(const fs::path& file, std::size_t n = 8) {
  std::istringstream in(stretch::test::readFileIfAny(file));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  std::string out;
  for (std::size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i)
    out += "\n  " + lines[i];
  return out;
}

std::string netnsOf(pid_t pid) {
  std::error_code ec;
  return fs::read_symlink("/proc/" + std::to_string(pid) + "/ns/net", ec).string();
}

// The /proc/PID/ns/net link of the processes in network namespace `ns` (/run/netns/NS).
std::string netnsLink(const std::string& ns) {
  struct stat st {};
  ::stat(("/run/netns/" + ns).c_str(), &st);
  return "net:[" + std::to_string(st.st_ino) + "]";
}

// munged, slurmctld (this namespace, on the bridge's address) and slurmd sn1, sn2 in two network
// namespaces (entered with nsenter --net, not `ip netns exec`: that one remounts /sys, and slurmd
// needs the cgroup file systems under /sys/fs/cgroup even with proctrack/linuxproc).
class SlurmCluster {
 public:
  // dir: the cluster's files; marker: a path on the command line of every process the test
  // starts (all of them are stopped at the end).
  SlurmCluster(const fs::path& dir, std::string marker) : dir_(dir), marker_(std::move(marker)) {
    if (::geteuid() != 0) {
      why_ = "needs root for network namespaces and slurmd";
      return;
    }
    for (const char* tool :
         {"munged", "slurmctld", "slurmd", "salloc", "srun", "sinfo", "nsenter", "ip"}) {
      if (!run(std::string("command -v ") + tool)) {
        why_ = std::string(tool) +
               " is not installed (Debian: slurmd slurmctld slurm-client munge util-linux "
               "iproute2)";
        return;
      }
    }
    net_.emplace("sl", 233);  // not multinode_test's or python_example_test's names and subnet
    if (!net_->skipReason().empty()) {
      why_ = net_->skipReason();
      return;
    }
    why_ = startDaemons();
  }

  ~SlurmCluster() {
    // Everything in the namespaces (slurmd, slurmstepd, agents, workers) and everything started
    // with this test's files (munged, slurmctld, salloc, the launcher, srun).
    // (The namespaces, links and bridge go with net_, after this.)
    const auto victims = [&] {
      std::vector<pid_t> pids = processesMentioning(marker_);
      for (const auto& ns : net_ ? net_->hosts() : std::vector<std::string>{}) {
        if (!fs::exists("/run/netns/" + ns))
          continue;
        const std::string link = netnsLink(ns);
        for (const auto& entry : fs::directory_iterator("/proc")) {
          const std::string name = entry.path().filename();
          if (name.find_first_not_of("0123456789") == std::string::npos &&
              netnsOf(std::stoi(name)) == link)
            pids.push_back(std::stoi(name));
        }
      }
      return pids;
    };
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    for (auto pids = victims(); !pids.empty() && std::chrono::steady_clock::now() < deadline;
         pids = victims()) {
      for (const pid_t p : pids)
        ::kill(p, SIGKILL);
      std::this_thread::sleep_for(50ms);
    }
  }
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  const std::string& skipReason() const { return why_; }
  std::string launcherAddress() const { return net_->launcherAddress(); }
  const std::string& netns(int i) const { return net_->hosts().at(static_cast<std::size_t>(i)); }
  fs::path conf() const { return dir_ / "slurm.conf"; }

 private:
  std::string startDaemons() {
    for (const char* sub : {"munge", "state", "spool/sn1", "spool/sn2", "log"})
      fs::create_directories(dir_ / sub);
    fs::permissions(dir_ / "munge", fs::perms::owner_all);
    {
      std::mt19937_64 rng(std::random_device{}());
      std::ofstream key(dir_ / "munge" / "key", std::ios::binary);
      for (int i = 0; i < 128; ++i) {
        const auto word = rng();
        key.write(reinterpret_cast<const char*>(&word), sizeof word);
      }
    }
    fs::permissions(dir_ / "munge" / "key", fs::perms::owner_read);
    const fs::path m = dir_ / "munge";
    if (!run("munged --force --key-file=" + (m / "key").string() +
             " --socket=" + (m / "sock").string() + " --pid-file=" + (m / "pid").string() +
             " --log-file=" + (m / "log").string() + " --seed-file=" + (m / "seed").string()))
      return "munged did not start:" + lastLines(m / "log");

    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    std::string shortName = host;
    shortName = shortName.substr(0, shortName.find('.'));
    const int ctlPort = 30000 + static_cast<int>(::getpid() % 9000);
    const std::string d = dir_.string();
    std::ofstream(conf()) << "ClusterName=stretchtest\n"
                          << "SlurmctldHost=" << shortName << "(" << launcherAddress() << ")\n"
                          << "SlurmctldPort=" << ctlPort << "\nSlurmdPort=6818\n"
                          << "AuthType=auth/munge\nCredType=cred/munge\n"
                          << "AuthInfo=socket=" << d << "/munge/sock\n"
                          << "SlurmUser=root\nSlurmdUser=root\n"
                          << "StateSaveLocation=" << d << "/state\n"
                          << "SlurmdSpoolDir=" << d << "/spool/%n\n"
                          << "SlurmctldPidFile=" << d << "/slurmctld.pid\n"
                          << "SlurmdPidFile=" << d << "/slurmd-%n.pid\n"
                          << "SlurmctldLogFile=" << d << "/log/slurmctld.log\n"
                          << "SlurmdLogFile=" << d << "/log/slurmd-%n.log\n"
                          << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
                          << "JobAcctGatherType=jobacct_gather/none\nMpiDefault=none\n"
                          << "SchedulerType=sched/builtin\nSelectType=select/cons_tres\n"
                          << "SelectTypeParameters=CR_CPU\nReturnToService=2\n"
                          << "SlurmdParameters=config_overrides\n"
                          << "NodeName=sn1 NodeAddr=" << net_->hostAddress(0)
                          << " CPUs=1 State=UNKNOWN\n"
                          << "NodeName=sn2 NodeAddr=" << net_->hostAddress(1)
                          << " CPUs=1 State=UNKNOWN\n"
                          << "PartitionName=main Nodes=sn1,sn2 Default=YES MaxTime=INFINITE "
                             "State=UP\n";
    ::setenv("SLURM_CONF", conf().c_str(), 1);  // salloc, srun, sinfo, scontrol read it
    if (!run("slurmctld -c -f " + conf().string()))
      return "slurmctld did not start:" + lastLines(dir_ / "log" / "slurmctld.log");
    for (int i = 1; i <= 2; ++i) {
      const std::string node = "sn" + std::to_string(i);
      if (!run("nsenter --net=/run/netns/" + netns(i - 1) + " slurmd -f " + conf().string() +
               " -N " + node))
        return "slurmd " + node +
               " did not start:" + lastLines(dir_ / "log" / ("slurmd-" + node + ".log"));
    }
    // Both nodes idle (registered with the controller).
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      const fs::path out = dir_ / "sinfo.txt";
      std::system(("sinfo -h -N -o '%N %T' > " + out.string() + " 2>&1").c_str());
      const std::string states = stretch::test::readFileIfAny(out);
      if (states.find("sn1 idle") != std::string::npos &&
          states.find("sn2 idle") != std::string::npos)
        return {};
      std::this_thread::sleep_for(200ms);
    }
    return "the slurmd nodes did not become idle within 30 s: " +
           stretch::test::readFileIfAny(dir_ / "sinfo.txt") +
           lastLines(dir_ / "log" / "slurmd-sn1.log") + lastLines(dir_ / "log" / "slurmctld.log");
  }

  fs::path dir_;
  std::string marker_, why_;
  std::optional<NetnsHosts> net_;  // made once the tools are there
};

// `salloc -N 2 stretch launch --launcher slurm ... <the example job>`.
std::vector<std::string> sallocJob(const SlurmCluster& cluster, const fs::path& dir, int steps,
                                   std::vector<std::string> extra) {
  std::vector<std::string> argv = {
      "salloc",     "-N",    "2",          "--time=10", STRETCH_CLI,   "launch",
      "--launcher", "slurm", "--num_gpus", "2",         "--rdzv_addr", cluster.launcherAddress(),
  };
  const auto options = multiNodeOptions(dir, freePort());
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), extra.begin(), extra.end());
  const auto job = digitsTrainer(dir, steps, 100);
  argv.insert(argv.end(), job.begin(), job.end());
  return argv;
}

class SlurmLauncher : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<SlurmCluster>(root_.path() / "cluster", root_.path().string());
    if (!cluster_->skipReason().empty())
      GTEST_SKIP() << cluster_->skipReason();
  }
  void TearDown() override {
    cluster_.reset();
    ::unsetenv("SLURM_CONF");
  }
  fs::path jobDir(const std::string& name) {
    fs::create_directories(root_.path() / name);
    return root_.path() / name;
  }

  stretch::test::TempDir root_{"stretch-slurm"};
  std::unique_ptr<SlurmCluster> cluster_;
};

TEST_F(SlurmLauncher, SallocRunsOneAgentPerNodeAndTheJobTrainsAcrossThem) {
  const fs::path dir = jobDir("fixed");
  const auto t0 = std::chrono::steady_clock::now();
  Child salloc(dir, sallocJob(*cluster_, dir, 2000, {}));
  // While it trains: one agent in each node's namespace, and the store token on no command line.
  const auto started = waitForStart(dir / "events.jsonl", [](const auto&) { return true; });
  ASSERT_FALSE(started.is_null()) << salloc.out() << salloc.err();
  EXPECT_EQ(started["world_size"], 4);
  EXPECT_EQ(started["nodes"], nlohmann::json::array({"sn1", "sn2"}));  // SLURM_JOB_NODELIST order
  for (int i = 0; i < 2; ++i) {
    const pid_t agent = agentPid(dir, "sn" + std::to_string(i + 1));
    ASSERT_GT(agent, 0);
    EXPECT_EQ(netnsOf(agent), netnsLink(cluster_->netns(i))) << "agent of sn" << i + 1;
  }
  std::string token;
  std::ifstream tokenFile(dir / "logs" / "job_token");
  std::getline(tokenFile, token);
  ASSERT_FALSE(token.empty());
  std::string srun;
  for (const pid_t p : processesMentioning(dir.string())) {
    std::string cmdline = stretch::test::readFileIfAny("/proc/" + std::to_string(p) + "/cmdline");
    EXPECT_EQ(cmdline.find(token), std::string::npos)
        << "the token is on the command line of process " << p;
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.rfind("srun ", 0) == 0)
      srun = cmdline;
  }
  std::printf("runner: %s\n", srun.c_str());
  EXPECT_NE(srun.find("--nodelist=sn1,sn2 --distribution=arbitrary"), std::string::npos) << srun;
  ASSERT_EQ(salloc.wait(120s), 0) << salloc.out() << salloc.err();
  std::printf("salloc + launch + 2000 steps at world size 4: %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  EXPECT_NE(salloc.out().find("starting 2 node agent(s) with the slurm runner"), std::string::npos);
  const auto summary = jobSummary(dir);
  ASSERT_FALSE(summary.is_null()) << salloc.out();
  EXPECT_EQ(summary["world_size"], 4);
  EXPECT_EQ(summary["steps"], 2000);
  EXPECT_EQ(startsOf(dir / "events.jsonl").size(), 1u);
}

TEST_F(SlurmLauncher, ANodesAgentKilledTheJobRestartsOnTheOtherNode) {
  const fs::path dir = jobDir("elastic");
  const fs::path events = dir / "events.jsonl";
  Child salloc(dir, sallocJob(*cluster_, dir, 6000, {"--elastic", "1:2"}));
  ASSERT_FALSE(waitForStart(events, [](const auto& s) { return s["world_size"] == 4; }).is_null())
      << salloc.out() << salloc.err();
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!fs::exists(dir / "ckpt" / "latest") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  const pid_t victim = agentPid(dir, "sn2");
  ASSERT_GT(victim, 0);
  ASSERT_EQ(netnsOf(victim), netnsLink(cluster_->netns(1)));
  const double killedAt = wallNow();
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const auto shrunk = waitForStart(events, [](const auto& s) {
    return s["world_size"] == 2 && s["nodes"] == nlohmann::json::array({"sn1"});
  });
  ASSERT_FALSE(shrunk.is_null()) << salloc.out() << salloc.err();
  std::printf("slurm node sn2's agent lost -> world size 2 on sn1 started after %.3f s\n",
              shrunk["time_ns"].get<double>() / 1e9 - killedAt);
  ASSERT_EQ(salloc.wait(180s), 0) << salloc.out() << salloc.err();
  const auto summary = jobSummary(dir);
  ASSERT_FALSE(summary.is_null());
  EXPECT_EQ(summary["steps"], 6000);
  EXPECT_EQ(summary["world_size"], 2);
  expectConstantGlobalBatch(events);
}

}  // namespace
