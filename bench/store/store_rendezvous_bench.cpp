// stretch-bench-store: the rendezvous barrier of N store clients on Stretch's TcpStore (issue 43).
// The peer is PyTorch's TCPStore, driven the same way by bench/store_peer/torch_store_bench.py;
// bench/store_rendezvous.sh runs both and prints the table.
//
// Coordinator (default): runs a TcpStoreServer on 127.0.0.1 and spawns ceil(N / per-proc)
// worker processes (this executable with --worker), each holding up to --per-proc clients, one
// TcpStore and one thread per client (a client blocks in wait() like a rank does). When every
// client is connected the coordinator takes t0 and tells every worker to go. Each client then
//   add("count", 1); the one that reaches N sets "done"; wait({"done"});
//   set("v/<i>", "<i>"); get("v/<(i+1) % N>") (checked: "<(i+1) % N>");
// and records when it finished (CLOCK_MONOTONIC, shared by all processes). The barrier time is
// the last finish minus t0, and the server's CPU time over it is the coordinator's (its main
// thread only reads the workers' pipes). Afterwards the coordinator reads "count" back (must be
// N). With --withdraw-ms MS a second round follows: every client waits MS on a key nobody sets
// and withdraws (as an idle agent does with its command wait), and the server's CPU over it is
// "withdraw_server_cpu_s". Prints one JSON line: {"store": "stretch", "clients", "workers",
// "connect_s", "barrier_s", "server_cpu_s", "wrong", "failed", "rejected", "count"} (and
// "withdraw_ms", "withdrawn", "withdraw_server_cpu_s"); --json FILE writes it there too.
//
// Exit status: 0 done and every answer right, 1 a wrong answer, 2 bad options or setup error
// (descriptors), 3 a worker failed.

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iostream>
#include <latch>
#include <memory>
#include <spawn.h>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/comm/errors.hpp"
#include "runtime/comm/tcp_store.hpp"

extern char** environ;

namespace {

using stretch::comm::TcpStore;
using stretch::comm::TcpStoreOptions;
using stretch::comm::TcpStoreServer;

constexpr const char* kToken = "stretch-bench-store-token";

std::int64_t monotonicNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Raises the soft descriptor limit to `want` (and the hard one too when allowed, i.e. as root).
// Returns the soft limit in force afterwards.
rlim_t raiseFdLimit(rlim_t want) {
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur >= want)
    return lim.rlim_cur;
  if (lim.rlim_max < want) {
    rlimit more{want, want};
    if (::setrlimit(RLIMIT_NOFILE, &more) == 0)
      return want;
  }
  lim.rlim_cur = std::min(want, lim.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &lim);
  ::getrlimit(RLIMIT_NOFILE, &lim);
  return lim.rlim_cur;
}

struct Worker {
  pid_t pid = -1;
  FILE* out = nullptr;  // its stdout: "ready" then "done ..." lines
  int in = -1;          // its stdin: "go"
};

// One worker process: `count` clients numbered from `first`.
int runWorker(const std::string& host, int port, int first, int count, int clients, int withdrawMs,
              double timeoutSeconds) {
  raiseFdLimit(static_cast<rlim_t>(count) + 64);
  TcpStoreOptions options;
  options.host = host;
  options.port = port;
  options.token = kToken;
  options.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeoutSeconds * 1000));
  std::latch connected(count);
  std::latch go(1);
  std::latch barrierDone(count);
  std::latch nextRound(1);
  std::atomic<bool> withdraw{false};
  std::atomic<int> withdrawn{0};
  std::atomic<std::int64_t> lastEnd{0};
  std::atomic<int> wrong{0};
  std::atomic<int> failed{0};
  std::string firstError;
  std::atomic_flag errorTaken = ATOMIC_FLAG_INIT;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(count));
  for (int k = 0; k < count; ++k) {
    threads.emplace_back([&, rank = first + k] {
      std::unique_ptr<TcpStore> store;
      try {
        store = std::make_unique<TcpStore>(options);
      } catch (const std::exception& e) {
        if (!errorTaken.test_and_set())
          firstError = e.what();
        failed.fetch_add(1);
      }
      connected.count_down();
      go.wait();
      try {
        if (!store)
          throw std::runtime_error("not connected");
        if (store->add("count", 1) == clients)
          store->set("done", "1");
        store->wait({"done"});
        store->set(fmt::format("v/{}", rank), std::to_string(rank));
        const int next = (rank + 1) % clients;
        if (store->get(fmt::format("v/{}", next)) != std::to_string(next))
          wrong.fetch_add(1);
        const std::int64_t end = monotonicNs();
        std::int64_t seen = lastEnd.load();
        while (seen < end && !lastEnd.compare_exchange_weak(seen, end)) {
        }
      } catch (const std::exception& e) {
        if (store && !errorTaken.test_and_set())
          firstError = e.what();
        if (store)
          failed.fetch_add(1);  // (one that could not connect is counted already)
      }
      barrierDone.count_down();
      nextRound.wait();
      if (!store || !withdraw.load())
        return;
      // Every client parks a wait on a key nobody sets and withdraws it when its timeout
      // passes, as an idle agent does with its command wait.
      try {
        store->wait({"never"}, std::chrono::milliseconds(withdrawMs));
        wrong.fetch_add(1);  // the key nobody sets was there
      } catch (const stretch::comm::StoreTimeoutError&) {
        withdrawn.fetch_add(1);
      } catch (const std::exception& e) {
        if (!errorTaken.test_and_set())
          firstError = e.what();
        failed.fetch_add(1);
      }
    });
  }
  connected.wait();
  std::printf("ready %d\n", failed.load());
  std::fflush(stdout);
  char line[64] = {};
  if (std::fgets(line, sizeof line, stdin) == nullptr || std::strncmp(line, "go", 2) != 0) {
    go.count_down();  // the coordinator is gone: let the threads finish and leave
    nextRound.count_down();
    for (auto& t : threads)
      t.join();
    return 3;
  }
  go.count_down();
  barrierDone.wait();
  const int failedInBarrier = failed.load();
  const int wrongInBarrier = wrong.load();
  std::printf("done %lld %d %d\n", static_cast<long long>(lastEnd.load()), wrongInBarrier,
              failedInBarrier);
  std::fflush(stdout);
  // Then "withdraw" (the withdrawal round) or "end".
  const bool round = std::fgets(line, sizeof line, stdin) != nullptr &&
                     std::strncmp(line, "withdraw", 8) == 0 && withdrawMs > 0;
  withdraw.store(round);
  nextRound.count_down();
  for (auto& t : threads)
    t.join();
  if (round) {
    std::printf("withdrawn %d %d %d\n", withdrawn.load(), wrong.load() - wrongInBarrier,
                failed.load() - failedInBarrier);
    std::fflush(stdout);
  }
  if (failed.load() > 0)
    std::fprintf(stderr, "worker %d..%d: %d client(s) failed, first: %s\n", first,
                 first + count - 1, failed.load(), firstError.c_str());
  return failed.load() > 0 ? 3 : 0;
}

Worker spawnWorker(const std::string& self, const std::vector<std::string>& args) {
  int toChild[2];
  int fromChild[2];
  if (::pipe2(toChild, O_CLOEXEC) != 0 || ::pipe2(fromChild, O_CLOEXEC) != 0)
    throw std::runtime_error(fmt::format("pipe: {}", std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, toChild[0], 0);
  posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(self.c_str()));
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  Worker w;
  const int rc = ::posix_spawn(&w.pid, self.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(toChild[0]);
  ::close(fromChild[1]);
  if (rc != 0)
    throw std::runtime_error(fmt::format("posix_spawn {}: {}", self, std::strerror(rc)));
  w.in = toChild[1];
  w.out = ::fdopen(fromChild[0], "r");
  return w;
}

// CPU time of this whole process (user + system), seconds.
double processCpuSeconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

int runCoordinator(int clients, int perProc, int maxPending, int withdrawMs, double timeoutSeconds,
                   const std::string& jsonPath) {
  // The server holds one descriptor per client.
  const rlim_t need = static_cast<rlim_t>(clients) + 256;
  if (const rlim_t got = raiseFdLimit(need); got < need) {
    std::fprintf(stderr,
                 "stretch-bench-store: the server needs %llu descriptors, RLIMIT_NOFILE allows "
                 "%llu (raise `ulimit -Hn` or run as root)\n",
                 static_cast<unsigned long long>(need), static_cast<unsigned long long>(got));
    return 2;
  }
  TcpStoreOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.token = kToken;
  // A documented option: the default (16,384) is exactly the largest N; leave a little room.
  options.maxConnections = std::max(options.maxConnections, clients + 64);
  if (maxPending > 0)
    options.maxPendingPerAddress = maxPending;
  TcpStoreServer server(options);

  char selfPath[4096] = {};
  const ssize_t len = ::readlink("/proc/self/exe", selfPath, sizeof selfPath - 1);
  if (len <= 0) {
    std::fprintf(stderr, "stretch-bench-store: cannot find its own executable\n");
    return 2;
  }
  const std::string self(selfPath, static_cast<std::size_t>(len));
  const std::int64_t spawnStart = monotonicNs();
  std::vector<Worker> workers;
  for (int first = 0; first < clients; first += perProc) {
    const int count = std::min(perProc, clients - first);
    workers.push_back(spawnWorker(
        self, {"--worker", "--host", options.host, "--port", std::to_string(server.port()),
               "--first", std::to_string(first), "--count", std::to_string(count), "--clients",
               std::to_string(clients), "--withdraw-ms", std::to_string(withdrawMs), "--timeout",
               fmt::format("{}", timeoutSeconds)}));
  }
  auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "stretch-bench-store: %s\n", why.c_str());
    for (auto& w : workers)
      ::kill(w.pid, SIGKILL);
    for (auto& w : workers)
      ::waitpid(w.pid, nullptr, 0);
    return 3;
  };
  char line[256];
  for (std::size_t i = 0; i < workers.size(); ++i) {
    int connectFailures = 0;
    if (std::fgets(line, sizeof line, workers[i].out) == nullptr ||
        std::sscanf(line, "ready %d", &connectFailures) != 1)
      return fail(fmt::format("worker {} exited before its clients connected", i));
    if (connectFailures > 0)
      return fail(fmt::format("worker {}: {} client(s) could not connect", i, connectFailures));
  }
  // The coordinator's main thread sleeps in fgets from here on: its CPU is the server's.
  const double cpu0 = processCpuSeconds();
  const std::int64_t t0 = monotonicNs();
  for (auto& w : workers) {
    if (::write(w.in, "go\n", 3) != 3)
      return fail("a worker is gone before the start");
  }
  std::int64_t lastEnd = 0;
  int wrong = 0;
  int failed = 0;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    long long end = 0;
    int w = 0;
    int f = 0;
    if (std::fgets(line, sizeof line, workers[i].out) == nullptr ||
        std::sscanf(line, "done %lld %d %d", &end, &w, &f) != 3)
      return fail(fmt::format("worker {} exited before its clients finished", i));
    lastEnd = std::max<std::int64_t>(lastEnd, end);
    wrong += w;
    failed += f;
  }
  const double serverCpu = processCpuSeconds() - cpu0;
  // The withdrawal round, when asked for: every client parks a wait on a key nobody sets and
  // withdraws it after withdrawMs; the server's CPU over the round, per client, stays flat when
  // a withdrawal costs O(1) however many wait on the key.
  int withdrawn = 0;
  const double cpu1 = processCpuSeconds();
  for (auto& w : workers) {
    const char* command = withdrawMs > 0 ? "withdraw\n" : "end\n";
    if (::write(w.in, command, std::strlen(command)) < 0)
      return fail("a worker is gone before the withdrawal round");
  }
  for (std::size_t i = 0; withdrawMs > 0 && i < workers.size(); ++i) {
    int n = 0;
    int w = 0;
    int f = 0;
    if (std::fgets(line, sizeof line, workers[i].out) == nullptr ||
        std::sscanf(line, "withdrawn %d %d %d", &n, &w, &f) != 3)
      return fail(fmt::format("worker {} exited before its clients withdrew", i));
    withdrawn += n;
    wrong += w;
    failed += f;
  }
  const double withdrawCpu = processCpuSeconds() - cpu1;
  int status = 0;
  for (auto& w : workers) {
    int ws = 0;
    ::waitpid(w.pid, &ws, 0);
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
      status = 3;
    std::fclose(w.out);
    ::close(w.in);
  }
  std::int64_t count = -1;
  {
    TcpStoreOptions clientOptions = options;
    clientOptions.isServer = false;
    clientOptions.port = server.port();
    TcpStore check(clientOptions);
    count = check.add("count", 0);
  }
  if (count != clients)
    ++wrong;
  if (withdrawMs > 0 && withdrawn + failed != clients)
    ++wrong;
  nlohmann::json result = {
      {"store", "stretch"},
      {"clients", clients},
      {"workers", workers.size()},
      {"connect_s", static_cast<double>(t0 - spawnStart) / 1e9},
      {"barrier_s", static_cast<double>(lastEnd - t0) / 1e9},
      {"server_cpu_s", serverCpu},
      {"wrong", wrong},
      {"failed", failed},
      {"rejected", server.rejectedConnections()},
      {"count", count},
  };
  if (withdrawMs > 0) {
    result["withdraw_ms"] = withdrawMs;
    result["withdrawn"] = withdrawn;
    result["withdraw_server_cpu_s"] = withdrawCpu;
  }
  std::cout << result.dump() << std::endl;
  if (!jsonPath.empty())
    std::ofstream(jsonPath) << result.dump(2) << "\n";
  if (status != 0 || failed > 0)
    return 3;
  return wrong > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Rendezvous barrier of N clients on Stretch's TcpStore (issue 43)"};
  int clients = 1024;
  int perProc = 1024;
  int maxPending = 0;
  int withdrawMs = 0;
  double timeoutSeconds = 120;
  std::string jsonPath;
  bool worker = false;
  std::string host = "127.0.0.1";
  int port = 0;
  int first = 0;
  int count = 0;
  app.add_option("-n,--clients", clients, "number of store clients")->check(CLI::Range(1, 1 << 20));
  app.add_option("--per-proc", perProc, "clients (threads) per worker process")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--max-pending-per-address", maxPending,
                 "the server's TcpStoreOptions::maxPendingPerAddress (default: its default, 64)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--withdraw-ms", withdrawMs,
                 "then a round where every client waits MS on a key nobody sets and withdraws "
                 "(prints the server's CPU over it)")
      ->check(CLI::Range(0, 600000));
  app.add_option("--timeout", timeoutSeconds, "store timeout of every client, seconds")
      ->check(CLI::PositiveNumber);
  app.add_option("--json", jsonPath, "also write the result to FILE");
  app.add_flag("--worker", worker, "(internal) run clients for a coordinator");
  app.add_option("--host", host, "(internal) the server's address");
  app.add_option("--port", port, "(internal) the server's port");
  app.add_option("--first", first, "(internal) the first client's number");
  app.add_option("--count", count, "(internal) clients in this worker");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (worker)
      return runWorker(host, port, first, count, clients, withdrawMs, timeoutSeconds);
    return runCoordinator(clients, perProc, maxPending, withdrawMs, timeoutSeconds, jsonPath);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stretch-bench-store: %s\n", e.what());
    return 3;
  }
}
