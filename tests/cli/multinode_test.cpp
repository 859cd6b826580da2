// Multi-node `stretch launch`: a job controller in the launcher and one `stretch agent` per host,
// with the example job as workers.
//  - local runner (several hostfile hosts as agents on this machine, no privileges needed): the
//    same weights as four workers under one agent; a node's agent SIGKILLed mid-run -> the job
//    goes on at the smaller world size, a node started by hand joins -> it grows back, the global
//    batch never changes; SIGTERM to the launcher leaves no agent and no worker behind;
//  - netns runner: two network-namespace hosts with their own addresses on a bridge (skipped
//    without root or `ip netns`), the job trains across them and survives losing one.
// Every run is bounded in time.

#include <algorithm>
#include <arpa/inet.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <optional>
#include <string>
#include <sys/socket.h>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cli/launch_support.hpp"
#include "tests/cli/netns_support.hpp"
#include "tests/support/test_support.hpp"

namespace {

using namespace stretch::test::launch;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// `stretch launch` options for a multi-node run of the example job, then the job itself.
// The job's store listens on masterPort + 1.
std::vector<std::string> multiNodeJob(const fs::path& dir, const fs::path& hostfile, int steps,
                                      std::vector<std::string> extra, int masterPort = freePort()) {
  std::vector<std::string> args = {"--hostfile", hostfile.string()};
  const auto options = multiNodeOptions(dir, masterPort);
  args.insert(args.end(), options.begin(), options.end());
  args.insert(args.end(), extra.begin(), extra.end());
  if (std::find(extra.begin(), extra.end(), "--launcher") == extra.end()) {
    args.push_back("--launcher");  // several hosts default to pdsh, as in DeepSpeed
    args.push_back("local");
  }
  const auto job = digitsTrainer(dir, steps, 100);
  args.insert(args.end(), job.begin(), job.end());
  return args;
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

// The job is 1200 steps and its workers wait after step 1000 (the fault script's pause) until the
// new node's workers are in the world (the controller published the live generation of 4), so
// that the growth always happens before the end however fast the workers train, and the test
// then trains only the last 200 steps.
TEST(MultiNodeLocal, NodeLeavesThenANewNodeJoinsAndTheGlobalBatchNeverChanges) {
  stretch::test::TempDir dir("stretch-mn-elastic");
  const fs::path events = dir.path() / "events.jsonl";
  const fs::path faults = dir.path() / "faults";
  fs::create_directories(faults);
  ::setenv("STRETCH_FAULT_DIR", faults.c_str(), 1);
  ::setenv("STRETCH_FAULT_PAUSE_AT_STEPS", "1000", 1);
  const int port = freePort();
  Launch launch(dir.path(), multiNodeJob(dir.path(), writeHostfile(dir.path(), {"n0", "n1"}), 1200,
                                         {"--elastic", "1:3", "--last_call", "1"}, port));
  const auto first = waitForStart(events, [](const auto& s) { return s["world_size"] == 4; });
  ASSERT_FALSE(first.is_null()) << launch.err();
  // Let it write a checkpoint, then take node n1 away.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!fs::exists(dir.path() / "ckpt" / "latest") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  const pid_t n1 = agentPid(dir.path(), "n1");
  ASSERT_GT(n1, 0);
  // A local launch starts its agents with the slim stretch-agent built beside stretch.
  EXPECT_EQ(fs::read_symlink(fs::path("/proc") / std::to_string(n1) / "exe").filename(),
            "stretch-agent");
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
  waitUntil([&] { return launch.out().find("4 worker(s) on 2 node(s)") != std::string::npos; });
  std::ofstream(faults / "pause_1000.release") << "\n";
  ::unsetenv("STRETCH_FAULT_DIR");
  ::unsetenv("STRETCH_FAULT_PAUSE_AT_STEPS");
  ASSERT_FALSE(grown.is_null()) << launch.err() << joiner.err();
  std::printf("node n2 joined -> world size 4 started after %.3f s\n",
              grown["time_ns"].get<double>() / 1e9 - joinedAt);

  ASSERT_EQ(launch.wait(180s), 0) << launch.err();
  EXPECT_EQ(joiner.wait(30s), 0) << joiner.err();
  const auto summary = jobSummary(dir.path());
  ASSERT_FALSE(summary.is_null());
  EXPECT_EQ(summary["steps"], 1200);
  EXPECT_EQ(summary["world_size"], 4);
  expectConstantGlobalBatch(events);
  // The shrink counted as a restart; the growth did not.
  EXPECT_EQ(grown["restart_count"], shrunk["restart_count"]);
  expectResumeStepsNeverGoBack(events);
  EXPECT_TRUE(noneLeft(dir.path().string()));
}

// A host that hangs (agent and workers frozen, as in a network partition) sends no keep-alive:
// the controller drops it after --keepalive_timeout and goes on without it. (The frozen workers
// hold the others in their collectives, so the job cannot end before the drop: 2000 steps, some
// 7 s of training on 2 cores, is plenty.)
TEST(MultiNodeLocal, HungNodeIsDroppedWhenItsKeepAliveTimesOut) {
  stretch::test::TempDir dir("stretch-mn-hung");
  const fs::path events = dir.path() / "events.jsonl";
  Launch launch(dir.path(), multiNodeJob(dir.path(), writeHostfile(dir.path(), {"n0", "n1"}), 2000,
                                         {"--elastic", "1:2"}));
  ASSERT_FALSE(waitForStart(events, [](const auto& s) { return s["world_size"] == 4; }).is_null())
      << launch.err();
  const pid_t n1 = agentPid(dir.path(), "n1");
  ASSERT_GT(n1, 0);
  // Freeze the agent and its workers (each worker leads its own process group).
  std::vector<pid_t> frozen = {n1};
  for (const pid_t p : childrenOf(n1))
    frozen.push_back(p);
  const double frozenAt = wallNow();
  for (const pid_t p : frozen)
    ::kill(p, SIGSTOP);
  const auto shrunk = waitForStart(events, [](const auto& s) { return s["world_size"] == 2; });
  for (const pid_t p : frozen)
    ::kill(p, SIGKILL);
  ASSERT_FALSE(shrunk.is_null()) << launch.err();
  const double detected = shrunk["time_ns"].get<double>() / 1e9 - frozenAt;
  std::printf("hung node -> world size 2 started after %.3f s (keep-alive timeout 3 s)\n",
              detected);
  EXPECT_GE(detected, 2.5);
  EXPECT_LT(detected, 10.0);
  ASSERT_EQ(launch.wait(180s), 0) << launch.err();
  expectConstantGlobalBatch(events);
  EXPECT_TRUE(noneLeft(dir.path().string()));
}

// DeepSpeed's spelling of the same launch (-H, -i, --elastic_training --min_elastic_nodes
// --max_elastic_nodes) is the same job: same decisions, bitwise the same weights. And the
// --no_ssh mode, where each node starts its own `stretch launch --node_rank K`, too.
TEST(MultiNodeLocal, DeepSpeedFlagsAndNoSshRunTheSameJobAsTheNativeFlags) {
  const auto run = [](const std::string& name, std::vector<std::string> extra, bool dsSpelling) {
    stretch::test::TempDir dir("stretch-mn-" + name);
    auto args = multiNodeJob(dir.path(), writeHostfile(dir.path(), {"n0", "n1"}), 120, extra);
    if (dsSpelling)
      std::replace(args.begin(), args.end(), std::string("--hostfile"), std::string("-H"));
    Launch launch(dir.path(), args);
    EXPECT_EQ(launch.wait(), 0) << launch.err();
    return jobSummary(dir.path());
  };
  const auto native = run("native", {"--elastic", "1:2"}, false);
  ASSERT_FALSE(native.is_null());
  EXPECT_EQ(native["world_size"], 4);
  const auto deepspeed = run("ds",
                             {"-i", "n0@n1", "--elastic_training", "--min_elastic_nodes", "1",
                              "--max_elastic_nodes", "2", "--no_ssh_check"},
                             true);
  ASSERT_FALSE(deepspeed.is_null());
  EXPECT_EQ(deepspeed["weights_sha256"], native["weights_sha256"]);
  EXPECT_EQ(deepspeed["samples"], native["samples"]);

  // --no_ssh: node 0 serves the store on --master_addr, node 1 joins it; one shared token.
  stretch::test::TempDir dir("stretch-mn-nossh");
  const fs::path hostfile = writeHostfile(dir.path(), {"n0", "n1"});
  const int port = freePort();
  ::setenv("STRETCH_STORE_TOKEN", "test-shared-secret", 1);
  const auto node = [&](int rank) {
    return multiNodeJob(dir.path(), hostfile, 120,
                        {"--elastic", "1:2", "--no_ssh", "--node_rank", std::to_string(rank),
                         "--master_addr", "127.0.0.1"},
                        port);
  };
  Launch rank0(dir.path(), node(0), "launch", "rank0-");
  Launch rank1(dir.path(), node(1), "launch", "rank1-");
  ::unsetenv("STRETCH_STORE_TOKEN");
  EXPECT_EQ(rank0.wait(), 0) << rank0.err();
  EXPECT_EQ(rank1.wait(), 0) << rank1.err();
  const auto noSsh = jobSummary(dir.path());
  ASSERT_FALSE(noSsh.is_null()) << rank0.err();
  EXPECT_EQ(noSsh["world_size"], 4);
  EXPECT_EQ(noSsh["weights_sha256"], native["weights_sha256"]);
}

// DeepSpeed's .deepspeed_env (here named by DS_ENV_FILE) reaches every node's workers, and
// PYTHONPATH starts with the launch directory, as DeepSpeed's runner exports them.
TEST(MultiNodeLocal, DeepSpeedEnvFileReachesEveryNodesWorkers) {
  stretch::test::TempDir dir("stretch-mn-dsenv");
  const fs::path envFile = dir.path() / "ds_env";
  std::ofstream(envFile) << "# forwarded to the nodes\nSTRETCH_TEST_FORWARDED = from the file\n";
  ::setenv("DS_ENV_FILE", envFile.c_str(), 1);
  Launch launch(dir.path(),
                {"--hostfile", writeHostfile(dir.path(), {"n0", "n1"}).string(), "--launcher",
                 "local", "--master_port", std::to_string(freePort()), "/bin/sh", "-c",
                 "echo \"$STRETCH_TEST_FORWARDED|$PYTHONPATH\" > " +
                     (dir.path() / "seen_").string() + "$RANK"});
  ::unsetenv("DS_ENV_FILE");
  ASSERT_EQ(launch.wait(60s), 0) << launch.err();
  const std::string cwd = fs::current_path().string();
  for (int rank = 0; rank < 4; ++rank) {
    const std::string seen =
        stretch::test::readFileIfAny(dir.path() / ("seen_" + std::to_string(rank)));
    EXPECT_EQ(seen.rfind("from the file|" + cwd, 0), 0u) << rank << ": " << seen;
  }
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

// A hostfile of nodes n0, n1 with one slot each, for the /bin/sh jobs below.
fs::path oneSlotHosts(const fs::path& dir) {
  std::ofstream(dir / "hostfile") << "n0 slots=1\nn1 slots=1\n";
  return dir / "hostfile";
}

// True once none of `pids` runs any more (gone, or a zombie), within `limit`.
bool allEnded(const std::vector<pid_t>& pids, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::none_of(pids.begin(), pids.end(), stretch::test::processAlive))
      return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

// SIGKILL of the controller (the multi-node `stretch launch`) used to leave no `interrupted`
// record: its orphan guard knew no process group (the node agents' were not guarded), so it
// recorded nothing. The agents' groups are guarded now: the guard kills them (each agent's own
// guard then kills its workers and what they started) and records the end.
TEST(MultiNodeLocal, SigkillOfTheControllerRecordsTheEndAndLeavesNothingBehind) {
  stretch::test::TempDir dir("stretch-mn-sigkill");
  const fs::path events = dir.path() / "events.jsonl";
  const std::string children = (dir.path() / "child.").string();
  Launch launch(dir.path(), {"--hostfile", oneSlotHosts(dir.path()).string(), "--launcher", "local",
                             "--master_port", std::to_string(freePort()), "--log_dir",
                             (dir.path() / "logs").string(), "--event_log", events.string(),
                             "/bin/sh", "-c", "sleep 60 & echo $! > " + children + "$RANK; wait"});
  ASSERT_TRUE(waitUntil([&] {
    return !stretch::test::readFileIfAny(children + "0").empty() &&
           !stretch::test::readFileIfAny(children + "1").empty();
  })) << launch.err();
  const std::vector<pid_t> agents = {agentPid(dir.path(), "n0"), agentPid(dir.path(), "n1")};
  std::vector<pid_t> job = agents;
  for (const pid_t agent : agents) {
    // The worker: the agent's child running /bin/sh (not an orphan guard being forked, which is
    // briefly the agent's child too).
    for (const pid_t child : childrenOf(agent)) {
      if (stretch::test::readFileIfAny("/proc/" + std::to_string(child) + "/cmdline")
              .rfind("/bin/sh", 0) == 0)
        job.push_back(child);
    }
  }
  ASSERT_EQ(job.size(), 4u);  // two agents, a worker each
  job.push_back(std::stoi(stretch::test::readFileIfAny(children + "0")));
  job.push_back(std::stoi(stretch::test::readFileIfAny(children + "1")));
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(launch.pid(), SIGKILL), 0);
  std::optional<double> recordMs;
  const auto deadline = killed + 10s;
  while (!recordMs && std::chrono::steady_clock::now() < deadline) {
    const auto records = eventsOf(events);
    if (!records.empty() && records.back()["event"] == "interrupted") {
      recordMs =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - killed)
              .count();
    } else {
      std::this_thread::sleep_for(1ms);
    }
  }
  ASSERT_TRUE(recordMs.has_value()) << "no interrupted record 10 s after the SIGKILL";
  const bool ended = allEnded(job, 10s);
  std::printf(
      "SIGKILLed controller: interrupted record after %.1f ms, the agents, workers and "
      "their children gone after %.1f ms\n",
      *recordMs,
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - killed).count());
  EXPECT_TRUE(ended) << "an agent, a worker or its child outlived the controller by 10 s";
  EXPECT_NE(eventsOf(events).back()["reason"].get<std::string>().find(
                "orphan guard killed 2 node agent process group(s)"),
            std::string::npos)
      << eventsOf(events).back().dump();
  EXPECT_EQ(launch.wait(10s), 128 + SIGKILL);
  EXPECT_TRUE(noneLeft(dir.path().string())) << processesMentioning(dir.path().string()).size();
}

// SIGSTOP and SIGCONT of the launcher (the controller of an elastic job on two nodes, a 2 s
// keep-alive timeout, so the agents' --controller_timeout is 6 s):
//  - stopped for less than the agents' timeout, the job resumes as if nothing had happened;
//  - stopped for longer, the agents stop their workers and exit about 6 s after the stop (their
//    store requests and reconnections used to come on top: 16.5 s here, 22.8-24 s for the
//    default 15 s; a request cut by the stop could add 5 s more), and on SIGCONT the launcher
//    ends at once with exit status 1 and a message saying why (it used to wait an undocumented
//    10 minutes for nodes), its `fail` record last, and no start_workers record after the agents
//    had gone (one used to name an agent that had already exited).
TEST(MultiNodeLocal, ALauncherStoppedAndContinuedResumesOrEndsWithinSeconds) {
  stretch::test::TempDir dir("stretch-mn-sigstop");
  const fs::path events = dir.path() / "events.jsonl";
  Launch launch(dir.path(),
                {"--hostfile", oneSlotHosts(dir.path()).string(), "--launcher", "local",
                 "--master_port", std::to_string(freePort()), "--elastic", "1:2",
                 "--keepalive_timeout", "2", "--log_dir", (dir.path() / "logs").string(),
                 "--event_log", events.string(), "/bin/sh", "-c", "exec sleep 600"});
  ASSERT_FALSE(waitForStart(events, [](const auto& s) { return s["world_size"] == 2; }).is_null())
      << launch.err();
  const std::vector<pid_t> agents = {agentPid(dir.path(), "n0"), agentPid(dir.path(), "n1")};
  ASSERT_GT(agents[0], 0);
  ASSERT_GT(agents[1], 0);

  // A stop shorter than the agents' timeout: nothing changes.
  ASSERT_EQ(::kill(launch.pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(1500ms);
  ASSERT_EQ(::kill(launch.pid(), SIGCONT), 0);
  std::this_thread::sleep_for(2500ms);
  EXPECT_TRUE(stretch::test::processAlive(launch.pid())) << launch.err();
  EXPECT_TRUE(stretch::test::processAlive(agents[0]) && stretch::test::processAlive(agents[1]));
  EXPECT_EQ(startsOf(events).size(), 1u) << launch.err();

  // A longer one: the agents give up after their timeout.
  const auto stopped = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(launch.pid(), SIGSTOP), 0);
  const bool agentsEnded = allEnded(agents, 20s);
  const double agentsGone =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
  const auto continued = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(launch.pid(), SIGCONT), 0);
  const int status = launch.wait(30s);
  const double ended =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - continued).count();
  std::printf(
      "launcher stopped: its agents exited %.2f s after SIGSTOP (--controller_timeout "
      "6 s); after SIGCONT it ended in %.2f s with status %d\n",
      agentsGone, ended, status);
  ASSERT_TRUE(agentsEnded) << launch.err();
  // The timeout counts from the store's last answer: an idle agent's last keep-alive, at most
  // one interval (1 s) before the stop; then the workers' stop and at most one keep-alive beat
  // (1 s). Room for a loaded machine either way.
  EXPECT_GE(agentsGone, 4.9);
  EXPECT_LT(agentsGone, 8.0);
  EXPECT_EQ(status, 1) << launch.err();
  EXPECT_LT(ended, 5.0);
  const std::string err = launch.err();
  EXPECT_NE(err.find("stretch launch: error: every node agent has ended and none is left to run "
                     "the job"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("--controller_timeout"), std::string::npos) << err;
  const auto records = eventsOf(events);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back()["event"], "fail") << records.back().dump();
  EXPECT_EQ(startsOf(events).size(), 1u) << "a start was logged after the agents had exited";
  EXPECT_TRUE(noneLeft(dir.path().string()));
}

// The job store's port taken by another process: a clear error naming it, exit status 1.
// Issue 43: the launcher starts many node agents from several threads (one per 32 launches, up to
// 8). A child's parent-death signal comes when the thread that started it ends, so the threads
// stay until the job ends: 64 agents started from 2 threads all run their worker to the end
// (before the threads were kept, the second thread's 32 agents got SIGTERM as it returned).
TEST(MultiNodeLocal, SixtyFourAgentsStartedFromTwoThreadsAllRunTheJob) {
  stretch::test::TempDir dir("stretch-mn-64");
  std::ofstream hosts(dir.path() / "hostfile");
  for (int i = 0; i < 64; ++i)
    hosts << "h" << i << " slots=1\n";
  hosts.close();
  const fs::path events = dir.path() / "events.jsonl";
  Launch launch(dir.path(),
                {"--hostfile", (dir.path() / "hostfile").string(), "--launcher", "local",
                 "--elastic_training", "--min_elastic_nodes", "64", "--max_elastic_nodes", "64",
                 "--max_restarts", "0", "--master_port", std::to_string(freePort()), "--event_log",
                 events.string(), "/bin/sh", "-c", "[ \"$WORLD_SIZE\" = 64 ] && sleep 2"});
  EXPECT_EQ(launch.wait(300s), 0) << launch.err();
  const std::string said = launch.out() + launch.err();  // spdlog's lines go to stdout
  EXPECT_NE(said.find("started 64 process(es) for the node agents"), std::string::npos) << said;
  EXPECT_NE(said.find("2 thread(s))"), std::string::npos) << said;
  const std::string log = stretch::test::readFileIfAny(events.string());
  EXPECT_NE(log.find("\"event\":\"finish\""), std::string::npos) << log;
  EXPECT_EQ(log.find("\"event\":\"stop_workers\""), std::string::npos) << log;
}

TEST(MultiNodeLocal, AJobStorePortInUseIsAnErrorNamingIt) {
  stretch::test::TempDir dir("stretch-mn-port");
  const int port = freePort();
  const int taken = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(taken, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port + 1));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(taken, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(taken, 1), 0);
  Launch launch(dir.path(),
                {"--hostfile", writeHostfile(dir.path(), {"n0", "n1"}).string(), "--launcher",
                 "local", "--master_port", std::to_string(port), "/bin/true"});
  EXPECT_EQ(launch.wait(60s), 1) << launch.err();
  ::close(taken);
  EXPECT_NE(launch.err().find("cannot listen on 127.0.0.1:" + std::to_string(port + 1)),
            std::string::npos)
      << launch.err();
  EXPECT_EQ(launch.err().find("terminate called"), std::string::npos) << launch.err();
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
    Launch launch(dir.path(), {"--hostfile", hostfile.string(), "--launcher", "local",
                               "--master_port", "29700", "--rdzv_port", "29700", "/bin/true"});
    EXPECT_EQ(launch.wait(30s), 2);
    EXPECT_NE(launch.err().find("--rdzv_port"), std::string::npos) << launch.err();
  }
  {
    Launch launch(dir.path(),
                  {"--hostfile", hostfile.string(), "--launcher", "mvapich", "/bin/true"});
    EXPECT_EQ(launch.wait(30s), 2);
    EXPECT_NE(launch.err().find("--launcher"), std::string::npos) << launch.err();
  }
  {
    Launch agent(dir.path(), {"--rdzv", "localhost", "--node_rank", "0"}, "agent");
    EXPECT_EQ(agent.wait(30s), 2);
    EXPECT_NE(agent.err().find("--rdzv"), std::string::npos) << agent.err();
  }
}

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
