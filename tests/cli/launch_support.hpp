#pragma once
// Helpers for the tests that run `stretch launch` and `stretch agent` as processes: a bounded
// child process with its output in files, free ports, the example job's command line, readers
// for the job's summary and event log (start_workers records and their batch), agents' pids, and
// the processes a test left behind. Needs STRETCH_CLI, STRETCH_TRAIN_DIGITS and
// STRETCH_SOURCE defined by the test target.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <signal.h>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "tests/support/test_support.hpp"

extern char** environ;

namespace stretch::test::launch {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A free port P for --master_port whose P + 1 (the launcher's job store) is free too.
inline int freePort() {
  return stretch::test::freeTestPort(1);
}

// Waits (bounded: 90 s) until `done` holds; false when it never did.
inline bool waitUntil(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done())
      return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

// The children of process `pid` (for a launcher: its workers or agents).
inline std::vector<pid_t> childrenOf(pid_t pid) {
  std::vector<pid_t> out;
  std::istringstream in(stretch::test::readFileIfAny("/proc/" + std::to_string(pid) + "/task/" +
                                                     std::to_string(pid) + "/children"));
  pid_t p = 0;
  while (in >> p)
    out.push_back(p);
  return out;
}

// A running program (argv[0] looked up on PATH when it has no '/'); stdout and stderr go to
// `dir`/NAMEout.txt and `dir`/NAMEerr.txt. With `ownGroup`, in a process group of its own (its
// pgid is its pid). SIGKILLed if still running when destroyed.
class Child {
 public:
  Child(const fs::path& dir, std::vector<std::string> argv, const std::string& name = "",
        bool ownGroup = false)
      : dir_(dir), name_(name) {
    std::vector<char*> cargv;
    for (auto& a : argv)
      cargv.push_back(a.data());
    cargv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, (dir / (name + "out.txt")).c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, (dir / (name + "err.txt")).c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    if (ownGroup) {
      posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
      posix_spawnattr_setpgroup(&attr, 0);
    }
    EXPECT_EQ(posix_spawnp(&pid_, argv[0].c_str(), &actions, &attr, cargv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // The exit status, or -1 when it did not end within `limit` (then it is killed).
  int wait(std::chrono::seconds limit = 120s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(10ms);
    }
    return -1;
  }

  pid_t pid() const { return pid_; }
  std::string out() const { return stretch::test::readFileIfAny(dir_ / (name_ + "out.txt")); }
  std::string err() const { return stretch::test::readFileIfAny(dir_ / (name_ + "err.txt")); }

 private:
  fs::path dir_;
  std::string name_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// A running `stretch <subcommand> ARGS...` (subcommand "launch", "agent", "sim", ...).
class Launch : public Child {
 public:
  Launch(const fs::path& dir, std::vector<std::string> args,
         const std::string& subcommand = "launch", const std::string& name = "")
      : Child(dir, cliArgv(subcommand, std::move(args)), name) {}

  // The launcher's child processes (its workers).
  std::vector<pid_t> workers() const { return childrenOf(pid()); }

 private:
  static std::vector<std::string> cliArgv(const std::string& subcommand,
                                          std::vector<std::string> args) {
    std::vector<std::string> argv = {STRETCH_CLI, subcommand};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
};

// The last JSON summary line the job printed (rank 0's).
inline nlohmann::json summaryOf(const std::string& out) {
  std::istringstream in(out);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty() && line.front() == '{')
      last = line;
  }
  return last.empty() ? nlohmann::json() : nlohmann::json::parse(last);
}

// Rank 0's summary from the worker logs of the last attempt that has one.
inline nlohmann::json jobSummary(const fs::path& dir) {
  nlohmann::json last;
  for (int attempt = 1; attempt < 100; ++attempt) {
    const fs::path log = dir / "logs" / ("attempt_" + std::to_string(attempt)) / "rank_0.log";
    if (!fs::exists(log))
      break;
    const auto summary = summaryOf(stretch::test::readFileIfAny(log));
    if (!summary.is_null())
      last = summary;
  }
  return last;
}

inline std::vector<nlohmann::json> eventsOf(const fs::path& file) {
  std::vector<nlohmann::json> out;
  std::istringstream in(stretch::test::readFileIfAny(file));
  std::string line;
  while (std::getline(in, line))
    out.push_back(nlohmann::json::parse(line));
  return out;
}

// The event log's start_workers records, in order.
inline std::vector<nlohmann::json> startsOf(const fs::path& events) {
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

// The elastic solver's split of the global batch for a world size: {micro batch, accumulation}.
using BatchSplit = std::function<std::pair<int, int>(int worldSize)>;

// Every start_workers record of `events` trains `globalBatch` = micro x accum x world size, with
// the split `split` gives for its world size when one is given.
inline void expectConstantGlobalBatch(const fs::path& events, int globalBatch = 48,
                                      const BatchSplit& split = {}) {
  for (const auto& s : startsOf(events)) {
    EXPECT_EQ(s["batch"]["train_batch_size"], globalBatch) << s.dump();
    const int micro = s["batch"]["train_micro_batch_size_per_gpu"].get<int>();
    const int accum = s["batch"]["gradient_accumulation_steps"].get<int>();
    const int world = s["world_size"].get<int>();
    EXPECT_EQ(s["batch"]["train_batch_size"].get<int>(), micro * accum * world) << s.dump();
    if (split) {
      const auto [expectedMicro, expectedAccum] = split(world);
      EXPECT_EQ(micro, expectedMicro) << s.dump();
      EXPECT_EQ(accum, expectedAccum) << s.dump();
    }
  }
}

// The resume steps of the start_workers records of `events` never go back.
inline void expectResumeStepsNeverGoBack(const fs::path& events) {
  std::int64_t last = 0;
  for (const auto& s : startsOf(events)) {
    if (s.contains("resume_step")) {
      EXPECT_GE(s["resume_step"].get<std::int64_t>(), last) << s.dump();
      last = s["resume_step"];
    }
  }
}

// The pid of node `node`'s agent, from the pid file in the job's log directory (dir/logs); -1
// when there is none.
inline pid_t agentPid(const fs::path& dir, const std::string& node) {
  std::ifstream in(dir / "logs" / ("agent_" + node + ".pid"));
  pid_t pid = -1;
  in >> pid;
  return pid;
}

// A hostfile in `dir` naming `hosts`, 2 slots each.
inline fs::path writeHostfile(const fs::path& dir, const std::vector<std::string>& hosts) {
  const fs::path path = dir / "hostfile";
  std::ofstream out(path);
  for (const auto& h : hosts)
    out << h << " slots=2\n";
  return path;
}

// Processes whose command line mentions `marker` (a test's directory), but this one.
inline std::vector<pid_t> processesMentioning(const std::string& marker) {
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

// True once no process mentions `marker`, within `limit`. (Zombies and exiting processes
// disappear shortly after their parent reaps them.)
inline bool noneLeft(const std::string& marker, std::chrono::seconds limit = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (processesMentioning(marker).empty())
      return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

// The example job's elastic DeepSpeed config.
inline std::string digitsConfig() {
  return std::string(STRETCH_SOURCE) + "/fixtures/jobs/digits/ds_config_elastic.json";
}

// The example job's own command line (what follows the launcher's options): `steps` steps with
// digitsConfig(), a checkpoint in dir/ckpt every `saveEvery` steps, resuming from the latest one,
// and a JSON summary.
// The launcher options a multi-node run of the example job uses: the job's store on
// masterPort + 1, the example's elastic config, 1 s ticks, a 3 s keep-alive timeout, logs, event
// log and checkpoints under `dir`.
inline std::vector<std::string> multiNodeOptions(const fs::path& dir, int masterPort) {
  return {"--master_port",
          std::to_string(masterPort),
          "--config",
          digitsConfig(),
          "--monitor_interval",
          "1",
          "--keepalive_timeout",
          "3",
          "--log_dir",
          (dir / "logs").string(),
          "--event_log",
          (dir / "events.jsonl").string(),
          "--checkpoint_dir",
          (dir / "ckpt").string()};
}

// The launcher options of a job on `nodes` local node agents n0, n1, ... of `slots` workers each
// (the local runner; the hostfile is written into `dir`), elastic on 1 to `maxNodes` nodes: its
// store on masterPort + 1, 0.1 s ticks, a 5 s keep-alive timeout, up to 10 restarts, logs under
// dir/logs and the event log `events`.
inline std::vector<std::string> localNodesOptions(const fs::path& dir, int nodes, int slots,
                                                  int masterPort, const std::string& config,
                                                  int maxNodes, const fs::path& events) {
  {
    std::ofstream hostfile(dir / "hostfile");
    for (int n = 0; n < nodes; ++n)
      hostfile << "n" << n << " slots=" << slots << "\n";
  }
  return {"--hostfile",
          (dir / "hostfile").string(),
          "--launcher",
          "local",
          "--master_port",
          std::to_string(masterPort),
          "--config",
          config,
          "--elastic",
          "1:" + std::to_string(maxNodes),
          "--last_call",
          "1",
          "--max_restarts",
          "10",
          "--monitor_interval",
          "0.1",
          "--keepalive_timeout",
          "5",
          "--log_dir",
          (dir / "logs").string(),
          "--event_log",
          events.string()};
}

inline std::vector<std::string> digitsTrainer(const fs::path& dir, int steps, int saveEvery) {
  return {STRETCH_TRAIN_DIGITS,
          "--config",
          digitsConfig(),
          "--steps",
          std::to_string(steps),
          "--checkpoint-dir",
          (dir / "ckpt").string(),
          "--save-every",
          std::to_string(saveEvery),
          "--resume",
          "--json"};
}

// `stretch launch` of the example job on `slots` local workers with --recovery restart: the
// restart path (every worker restarted from the checkpoint), which these tests compare with an
// uninterrupted run; live recovery has its own tests (live_recovery_test.cpp).
inline std::vector<std::string> digitsJob(const fs::path& dir, int slots, int steps) {
  std::vector<std::string> args = {"--num_gpus",         std::to_string(slots),
                                   "--master_port",      std::to_string(freePort()),
                                   "--config",           digitsConfig(),
                                   "--elastic",          "1:1",
                                   "--monitor_interval", "1",
                                   "--log_dir",          (dir / "logs").string(),
                                   "--event_log",        (dir / "events.jsonl").string(),
                                   "--checkpoint_dir",   (dir / "ckpt").string(),
                                   "--recovery",         "restart"};
  const auto trainer = digitsTrainer(dir, steps, 40);
  args.insert(args.end(), trainer.begin(), trainer.end());
  return args;
}

// The wall-clock time of the first log line of `log` containing `needle` ("[2026-11-23
// 02:40:00.617] [info] ..."), as seconds since the epoch; nullopt when absent.
inline std::optional<double> logTime(const fs::path& log, const std::string& needle) {
  std::istringstream in(stretch::test::readFileIfAny(log));
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(needle) == std::string::npos || line.size() < 25 || line[0] != '[')
      continue;
    std::tm tm{};
    int millis = 0;
    if (std::sscanf(line.c_str(), "[%d-%d-%d %d:%d:%d.%d]", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                    &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &millis) != 7)
      continue;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_isdst = -1;
    return static_cast<double>(std::mktime(&tm)) + millis / 1000.0;
  }
  return std::nullopt;
}

inline double wallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace stretch::test::launch
