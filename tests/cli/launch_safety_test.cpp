// `stretch launch` against what its surroundings do to it (issue 42, items 3, 5 and 6), end to
// end with /bin/sh workers:
//  - a log directory that fills up during the run, or is full before it starts, never ends the
//    job: the per-generation config copy goes elsewhere, the loss is reported (stderr, event log,
//    exit status 74) and the workers still get their batch (a small tmpfs in a private mount
//    namespace stands in for the full disk; skipped where no mount namespace can be made);
//  - SIGKILL of the launcher's whole process group (`kill -9 -- -PGID`, `timeout -s KILL`)
//    leaves no process of the job behind: the orphan guard runs in a session of its own;
//  - links planted at the paths the launcher writes in a user's directory (rank logs, their
//    attempt directory, the config copy's temporary file) are never written through.
// Every wait is bounded.

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <signal.h>
#include <spawn.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "tests/cli/launch_support.hpp"
#include "tests/support/test_support.hpp"

namespace {

using namespace stretch::test::launch;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::size_t countOf(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

// The argv prefix that runs the rest of a command line in a private mount namespace with a tmpfs
// mounted at `dir` (mount options `options`) after `setup` ran there ("$0" is `dir`); nullopt
// when this machine cannot make one (neither root nor unprivileged user namespaces).
std::optional<std::vector<std::string>> onSmallFilesystem(const fs::path& dir,
                                                          const std::string& options,
                                                          const std::string& setup) {
  fs::create_directories(dir);
  const std::vector<std::string> unshare =
      ::geteuid() == 0
          ? std::vector<std::string>{"unshare", "-m", "--propagation", "private"}
          : std::vector<std::string>{"unshare", "-r", "-m", "--propagation", "private"};
  std::string probe;
  for (const auto& word : unshare)
    probe += word + " ";
  probe += "sh -c 'mount -t tmpfs -o size=16k tmpfs \"$0\"' " + dir.string() + " 2>/dev/null";
  if (std::system(probe.c_str()) != 0)
    return std::nullopt;
  std::vector<std::string> argv = unshare;
  argv.insert(argv.end(), {"sh", "-c",
                           "mount -t tmpfs -o " + options + " tmpfs \"$0\" && { " + setup +
                               "; } && exec \"$@\"",
                           dir.string()});
  return argv;
}

// What launchOnSmallDisk's job left: its exit status, stderr, stdout and stderr together, and
// its directories.
struct SmallDiskJob {
  int status = -1;
  std::string err;
  std::string all;
  fs::path logs;    // --log_dir, on the tmpfs
  fs::path out;     // where the workers write what the test checks
  fs::path events;  // --event_log
};

// `stretch launch` of two /bin/sh workers (elastic 1:1, the digits config) that run `script`
// with $1 = the out directory and $2 = the log directory, the log directory on a tmpfs of
// `options` prepared by `setup` (onSmallFilesystem), all under `dir`; waits at most 90 s.
// nullopt when no such tmpfs can be made here.
std::optional<SmallDiskJob> launchOnSmallDisk(const stretch::test::TempDir& dir,
                                              const std::string& options, const std::string& setup,
                                              const std::string& script) {
  SmallDiskJob job;
  job.logs = dir.path() / "logs";
  job.out = dir.path() / "out";
  job.events = dir.path() / "events.jsonl";
  fs::create_directories(job.out);
  const auto prefix = onSmallFilesystem(job.logs, options, setup);
  if (!prefix)
    return std::nullopt;
  std::vector<std::string> argv = *prefix;
  argv.insert(argv.end(),
              {STRETCH_CLI, "launch", "--num_gpus", "2", "--elastic", "1:1", "--config",
               digitsConfig(), "--log_dir", job.logs.string(), "--event_log", job.events.string(),
               "/bin/sh", "-c", script, "sh", job.out.string(), job.logs.string()});
  Child launch(dir.path(), argv);
  job.status = launch.wait(90s);
  job.err = launch.err();
  job.all = launch.out() + job.err;  // the agent's log lines, and the final errors
  return job;
}

// The event log's log_problem records.
std::vector<nlohmann::json> logProblemsOf(const fs::path& events) {
  std::vector<nlohmann::json> problems;
  for (const auto& r : eventsOf(events)) {
    if (r["event"] == "log_problem")
      problems.push_back(r);
  }
  return problems;
}

// The event log's last record's "event" ("" for an empty log).
std::string lastEventOf(const fs::path& events) {
  const auto records = eventsOf(events);
  return records.empty() ? "" : records.back()["event"].get<std::string>();
}

constexpr const char* kNoSmallDisk =
    "no private mount namespace with a tmpfs here (needs root or user namespaces)";

// A log directory that fills up while the job runs: generation 1's rank 0 fills it and fails;
// generation 2 used to end the job at once (exit 2 in 0.03 s, "cannot write
// .../ds_config.generation_2.json.tmp...: No space left on device", the survivor killed, no
// `fail` record). Now the copy goes to $TMPDIR, the workers run and finish, and the loss is
// reported once in each place.
TEST(Launch, ALogDirectoryThatFillsUpNeverEndsTheJob) {
  stretch::test::TempDir dir("stretch-launch");
  const std::string script =
      "if [ \"$STRETCH_GENERATION\" = 1 ]; then\n"
      "  if [ \"$RANK\" = 0 ]; then dd if=/dev/zero of=\"$2/filler\" bs=4k >/dev/null 2>&1; "
      "exit 1; fi\n"
      "  exec sleep 30\n"
      "fi\n"
      "cp \"$STRETCH_DS_CONFIG\" \"$1/config.$RANK\"\n"
      "echo \"$STRETCH_GENERATION $STRETCH_TRAIN_BATCH_SIZE\" > \"$1/gen.$RANK\"\n"
      "echo \"hello from $RANK\"\n";
  const auto job = launchOnSmallDisk(dir, "size=256k", "true", script);
  if (!job)
    GTEST_SKIP() << kNoSmallDisk;
  const auto& [status, err, all, logs, out, events] = *job;
  EXPECT_EQ(status, 74) << err;  // the job finished; output was lost
  for (const int rank : {0, 1}) {
    const std::string r = std::to_string(rank);
    EXPECT_EQ(stretch::test::readFileIfAny(out / ("gen." + r)), "2 48\n") << err;
    const std::string copy = stretch::test::readFileIfAny(out / ("config." + r));
    ASSERT_FALSE(copy.empty()) << "rank " << rank << " got no STRETCH_DS_CONFIG: " << err;
    const auto config = nlohmann::json::parse(copy);
    EXPECT_EQ(config["train_batch_size"], 48);
    EXPECT_FALSE(config.contains("elasticity"));
  }
  EXPECT_EQ(countOf(all, "generation 2's config copy"), 2u) << all;  // the error, output lost
  EXPECT_NE(err.find("output lost: generation 2's config copy " +
                     (logs / "ds_config.generation_2.json").string()),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("No space left on device; the workers get "), std::string::npos) << err;
  EXPECT_EQ(countOf(all, "rank_1.log: cannot write: No space left on device; the worker goes on"),
            1u)
      << all;
  EXPECT_NE(err.find((logs / "attempt_2" / "rank_1.log").string() +
                     ": cannot write: No space left on device; 13 bytes lost"),
            std::string::npos)
      << err;
  const auto problems = logProblemsOf(events);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0]["generation"], 2) << problems[0].dump();
  EXPECT_NE(problems[0]["reason"].get<std::string>().find("No space left on device"),
            std::string::npos)
      << problems[0].dump();
  EXPECT_EQ(lastEventOf(events), "finish");
}

// A log directory already full (no blocks, no inodes) before the job starts used to fail the
// job at start (exit 2). Now every worker runs; what could not be written is listed.
TEST(Launch, ALogDirectoryFullBeforeTheStartNeverStopsTheJob) {
  stretch::test::TempDir dir("stretch-launch");
  const auto job =
      launchOnSmallDisk(dir, "size=64k,nr_inodes=16",
                        "dd if=/dev/zero of=\"$0/filler\" bs=4k >/dev/null 2>&1; i=0; "
                        "while [ $i -lt 100 ] && touch \"$0/f$i\" 2>/dev/null; do i=$((i+1)); done",
                        "cp \"$STRETCH_DS_CONFIG\" \"$1/config.$RANK\"; echo \"hello from $RANK\"");
  if (!job)
    GTEST_SKIP() << kNoSmallDisk;
  const auto& [status, err, all, logs, out, events] = *job;
  EXPECT_EQ(status, 74) << err;
  for (const int rank : {0, 1}) {
    const auto copy = stretch::test::readFileIfAny(out / ("config." + std::to_string(rank)));
    ASSERT_FALSE(copy.empty()) << err;
    EXPECT_EQ(nlohmann::json::parse(copy)["train_batch_size"], 48);
  }
  EXPECT_NE(err.find("output lost: generation 1's config copy"), std::string::npos) << err;
  EXPECT_NE(all.find("log directory " + (logs / "attempt_1").string() + ": cannot create it"),
            std::string::npos)
      << all;
  for (const std::string rank : {"0", "1"}) {
    EXPECT_NE(err.find("output lost: " + (logs / "attempt_1" / ("rank_" + rank + ".log")).string() +
                       ": cannot create the log file: "),
              std::string::npos)
        << err;
  }
  // The config copy, the attempt directory, two rank logs.
  EXPECT_EQ(logProblemsOf(events).size(), 4u);
  EXPECT_EQ(lastEventOf(events), "finish");
}

// SIGKILL of the launcher's whole process group used to kill the orphan guard with it: the
// workers died of their parent-death signal, but what they started (a wrapper script's training
// process) ran on with PPID 1, and no `interrupted` record was written. The guard now has a
// session of its own: within a bounded time nothing of the job is left, and the record is there.
TEST(Launch, SigkillOfTheLaunchersProcessGroupLeavesNoProcessBehind) {
  for (const std::string how : {"kill -9 -- -PGID", "timeout -s KILL"}) {
    SCOPED_TRACE(how);
    stretch::test::TempDir dir("stretch-launch");
    const std::string children = (dir.path() / "child.").string();
    const fs::path events = dir.path() / "events.jsonl";
    std::vector<std::string> argv = {
        STRETCH_CLI, "launch",      "--num_gpus",
        "2",         "--event_log", events.string(),
        "/bin/sh",   "-c",          "sleep 60 & echo $! > " + children + "$RANK; wait"};
    if (how == "timeout -s KILL")
      argv.insert(argv.begin(), {"timeout", "-s", "KILL", "4"});
    // What the test reaps: the launcher, or `timeout`.
    Child started(dir.path(), argv, "", /*ownGroup=*/true);
    const pid_t reaped = started.pid();
    pid_t launcher = how == "timeout -s KILL" ? -1 : reaped;
    ASSERT_GT(reaped, 0);
    ASSERT_TRUE(waitUntil([&] {
      return !stretch::test::readFileIfAny(children + "0").empty() &&
             !stretch::test::readFileIfAny(children + "1").empty();
    }));
    if (launcher < 0) {
      const auto kids = childrenOf(reaped);
      ASSERT_EQ(kids.size(), 1u);
      launcher = kids[0];
    }
    const std::vector<pid_t> workers = childrenOf(launcher);
    ASSERT_EQ(workers.size(), 2u);
    const pid_t child0 = std::stoi(stretch::test::readFileIfAny(children + "0"));
    const pid_t child1 = std::stoi(stretch::test::readFileIfAny(children + "1"));
    // From the group's SIGKILL (kill), or from the moment `timeout` was seen gone.
    auto killed = std::chrono::steady_clock::now();
    if (how == "kill -9 -- -PGID") {
      ASSERT_EQ(::kill(-::getpgid(launcher), SIGKILL), 0);
    }
    ASSERT_NE(started.wait(10s), -1) << how << " did not end the launcher";
    if (how != "kill -9 -- -PGID")
      killed = std::chrono::steady_clock::now();
    // Bounded: 10 s for every process of the job, the guard included (its command line is the
    // launcher's, which names the test's directory).
    const auto deadline = killed + 10s;
    bool gone = false;
    while (!gone && std::chrono::steady_clock::now() < deadline) {
      gone = processesMentioning(dir.path().string()).empty();
      for (const pid_t p : {workers[0], workers[1], child0, child1})
        gone = gone && !stretch::test::processAlive(p);
      if (!gone)
        std::this_thread::sleep_for(1ms);
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - killed)
            .count();
    EXPECT_TRUE(gone) << "a process of the job outlived the group's SIGKILL by 10 s";
    std::printf("%s: every process of the job gone %.1f ms after the kill\n", how.c_str(), ms);
    ASSERT_TRUE(waitUntil([&] {
      const auto records = eventsOf(events);
      return !records.empty() && records.back()["event"] == "interrupted";
    })) << "no interrupted record";
    EXPECT_NE(eventsOf(events).back()["reason"].get<std::string>().find(
                  "orphan guard killed 2 worker process group(s)"),
              std::string::npos);
  }
}

// Links planted at the paths the launcher writes in the log directory: a rank log linked to a
// victim (it used to get the rank's output appended), a rank log hard-linked to one, the config
// copy's temporary files, and (second job) an attempt directory linked to another directory.
// None is written through; each is replaced, said so on stderr and in the event log, and the job
// runs as if nothing had been planted.
TEST(Launch, LinksPlantedInTheLogDirectoryAreNeverWrittenThrough) {
  stretch::test::TempDir dir("stretch-launch");
  const fs::path logs = dir.path() / "logs";
  const fs::path events = dir.path() / "events.jsonl";
  const fs::path victim = dir.path() / "victim.txt";
  const fs::path hardVictim = dir.path() / "hard-victim.txt";
  const fs::path configVictim = dir.path() / "config-victim.txt";
  for (const auto& v : {victim, hardVictim, configVictim})
    std::ofstream(v) << "precious\n";
  fs::create_directories(logs / "attempt_1");
  fs::create_symlink(victim, logs / "attempt_1" / "rank_1.log");
  fs::create_hard_link(hardVictim, logs / "attempt_1" / "rank_0.log");
  // The shell plants the config copy's temporary names at its own pid, then becomes the
  // launcher (exec keeps the pid).
  Child launch(
      dir.path(),
      {"/bin/sh", "-c",
       "for i in 0 1 2 3 4 5 6 7 8 9; do ln -s \"$2\" "
       "\"$1/ds_config.generation_1.json.tmp.$$.$i\" || exit 9; done; exec \"$3\" launch "
       "--num_gpus 2 --elastic 1:1 --config \"$4\" --log_dir \"$1\" --event_log \"$5\" "
       "/bin/sh -c 'echo \"hello from $RANK\"'",
       "sh", logs.string(), configVictim.string(), STRETCH_CLI, digitsConfig(), events.string()});
  EXPECT_EQ(launch.wait(60s), 0) << launch.err();
  const std::string err = launch.out() + launch.err();
  for (const auto& v : {victim, hardVictim, configVictim})
    EXPECT_EQ(stretch::test::readFileIfAny(v), "precious\n") << v;
  EXPECT_EQ(fs::hard_link_count(hardVictim), 1u);
  for (const std::string rank : {"0", "1"}) {
    const fs::path log = logs / "attempt_1" / ("rank_" + rank + ".log");
    EXPECT_FALSE(fs::is_symlink(log));
    EXPECT_EQ(stretch::test::readFileIfAny(log), "hello from " + rank + "\n");
  }
  EXPECT_NE(err.find("rank_1.log: it was a symbolic link; removed it (never written through) and "
                     "created a new file"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("rank_0.log: it was a hard link to a file with other names"),
            std::string::npos)
      << err;
  EXPECT_TRUE(fs::is_regular_file(logs / "ds_config.generation_1.json"));
  EXPECT_EQ(logProblemsOf(events).size(), 2u);

  // An attempt directory linked to another directory: its logs are not created there.
  const fs::path elsewhere = dir.path() / "elsewhere";
  const fs::path logs2 = dir.path() / "logs2";
  fs::create_directories(elsewhere);
  fs::create_directories(logs2);
  std::ofstream(elsewhere / "rank_0.log") << "precious\n";
  fs::create_directory_symlink(elsewhere, logs2 / "attempt_1");
  Launch second(dir.path(),
                {"--num_gpus", "1", "--log_dir", logs2.string(), "/bin/sh", "-c", "echo hello"},
                "launch", "second-");
  EXPECT_EQ(second.wait(60s), 0) << second.err();
  EXPECT_EQ(stretch::test::readFileIfAny(elsewhere / "rank_0.log"), "precious\n");
  EXPECT_FALSE(fs::is_symlink(logs2 / "attempt_1"));
  EXPECT_EQ(stretch::test::readFileIfAny(logs2 / "attempt_1" / "rank_0.log"), "hello\n");
  const std::string secondLog = second.out() + second.err();
  EXPECT_NE(secondLog.find("attempt_1: it was a symbolic link; removed it (never followed)"),
            std::string::npos)
      << secondLog;
}

}  // namespace
