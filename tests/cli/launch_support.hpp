#pragma once
// Helpers for the tests that run `stretch launch` and `stretch agent` as processes: a bounded
// child process with its output in files, free ports, the example job's command line, and
// readers for the job's summary and event log. Needs STRETCH_CLI, STRETCH_TRAIN_DIGITS and
// STRETCH_SOURCE defined by the test target.

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <optional>
#include <random>
#include <signal.h>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "tests/support/test_support.hpp"

extern char** environ;

namespace stretch::test::launch {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

inline int freePort() {
  static std::mt19937 rng(static_cast<unsigned>(::getpid()));
  return 20000 + static_cast<int>(rng() % 20000);
}

// A running `stretch launch`; stdout and stderr go to files in `dir`.
class Launch {
 public:
  // `stretch <subcommand> ARGS...` (subcommand "launch" or "agent").
  Launch(const fs::path& dir, std::vector<std::string> args,
         const std::string& subcommand = "launch", const std::string& name = "")
      : dir_(dir), name_(name) {
    std::vector<std::string> argv = {STRETCH_CLI, subcommand};
    argv.insert(argv.end(), args.begin(), args.end());
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
    EXPECT_EQ(posix_spawn(&pid_, argv[0].c_str(), &actions, nullptr, cargv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Launch() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }

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

  // The launcher's child processes (its workers).
  std::vector<pid_t> workers() const {
    std::vector<pid_t> out;
    std::istringstream in(stretch::test::readFileIfAny("/proc/" + std::to_string(pid_) + "/task/" +
                                                       std::to_string(pid_) + "/children"));
    pid_t p = 0;
    while (in >> p)
      out.push_back(p);
    return out;
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

inline std::vector<std::string> digitsJob(const fs::path& dir, int slots, int steps) {
  const std::string config =
      std::string(STRETCH_SOURCE) + "/fixtures/jobs/digits/ds_config_elastic.json";
  return {"--num_gpus",
          std::to_string(slots),
          "--master_port",
          std::to_string(freePort()),
          "--config",
          config,
          "--elastic",
          "1:1",
          "--monitor_interval",
          "1",
          "--log_dir",
          (dir / "logs").string(),
          "--event_log",
          (dir / "events.jsonl").string(),
          "--checkpoint_dir",
          (dir / "ckpt").string(),
          STRETCH_TRAIN_DIGITS,
          "--config",
          config,
          "--steps",
          std::to_string(steps),
          "--checkpoint-dir",
          (dir / "ckpt").string(),
          "--save-every",
          "40",
          "--resume",
          "--json"};
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
