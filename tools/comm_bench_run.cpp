// `stretch bench comm` behind one call: the flags checked (planCommBench), the sweep run over
// threads, simulated clocks or processes of this executable, and the result table printed as the
// rows come (runCommBench); and one rank of a process run (runCommBenchWorker).

#include "tools/comm_bench_run.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "runtime/comm/backend_registry.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/in_process_backend.hpp"
#include "runtime/comm/init_distributed.hpp"
#include "sim/scenario.hpp"
#include "tools/rank_launcher.hpp"
#include "tools/sim_comm_bench.hpp"

namespace stretch::tools {

namespace {

namespace fs = std::filesystem;
using stretch::comm::DataType;
using stretch::comm::OpType;

constexpr const char* kCommand = "bench comm";
constexpr int kMaxRanks = 256;
constexpr std::uint64_t kMaxBytes = 16ull << 30;
constexpr const char* kInProcess = "in_process";
constexpr const char* kSim = "sim";

[[noreturn]] void badFlag(const std::string& flag, const std::string& value,
                          const std::string& expected) {
  throw ConfigError(ErrorDetail{flag, value.empty() ? "\"\"" : value, expected});
}

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    items.push_back(
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos)
      return items;
    start = comma + 1;
  }
}

std::optional<long long> parseInt(const std::string& text) {
  if (text.empty())
    return std::nullopt;
  std::size_t used = 0;
  try {
    const long long v = std::stoll(text, &used, 10);
    if (used != text.size())
      return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

int parseCount(const std::string& flag, const std::string& text, int min) {
  const auto v = parseInt(text);
  if (!v || *v < min || *v > 1'000'000)
    badFlag(flag, text, fmt::format("an integer from {} to 1000000", min));
  return static_cast<int>(*v);
}

// The registered backends for CPU buffers (the benchmark's buffers live in host memory).
std::vector<std::string> cpuBackends() {
  std::vector<std::string> names = {kInProcess};
  names.push_back(kSim);
  for (const auto& info : stretch::comm::registeredBackends()) {
    if (info.device == stretch::comm::DeviceType::Cpu)
      names.push_back(info.name);
  }
  return names;
}

// ---- output ---------------------------------------------------------------------------------

std::string formatTime(double us) {
  if (us >= 10000.0)
    return fmt::format("{:7.0f}", us);
  if (us >= 100.0)
    return fmt::format("{:7.1f}", us);
  return fmt::format("{:7.2f}", us);
}

// Prints rows as they arrive: nccl-tests' table on stdout (one block per ranks x op), or, with
// --json, a progress line per row on stderr and the JSON array at the end.
class RowPrinter {
 public:
  RowPrinter(const CommBenchPlan& plan, bool json) : plan_(plan), json_(json) {}

  void add(const BenchRow& row) {
    if (json_) {
      std::cerr << fmt::format(
          "stretch {}: {} ranks {:<14} {:>12} B {:>10.2f} us {:>7.3f} GB/s "
          "busbw{}\n",
          kCommand, row.ranks, stretch::comm::toString(row.op), row.bytes, row.timeUs,
          row.busbwGBps, row.wrong != 0 ? fmt::format(", {} wrong", row.wrong) : "");
    } else {
      if (rows_.empty() || rows_.back().op != row.op || rows_.back().ranks != row.ranks) {
        footer();
        header(row);
      }
      const bool reduces = row.op == OpType::AllReduce || row.op == OpType::ReduceScatter;
      std::cout << fmt::format("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}  {} {:>7.3f} {:>7.3f}  {:>6}\n",
                               row.bytes, row.bytes / stretch::comm::elementSize(plan_.sweep.dtype),
                               stretch::comm::toString(plan_.sweep.dtype), reduces ? "sum" : "none",
                               row.op == OpType::Broadcast ? 0 : -1, formatTime(row.timeUs),
                               row.algbwGBps, row.busbwGBps, row.wrong);
      std::cout.flush();
      group_.push_back(row);
    }
    rows_.push_back(row);
  }

  void finish() {
    if (json_) {
      nlohmann::ordered_json array = nlohmann::ordered_json::array();
      for (const auto& row : rows_)
        array.push_back(toJson(row));
      std::cout << array.dump() << "\n";
    } else {
      footer();
    }
  }

  std::int64_t wrong() const {
    std::int64_t total = 0;
    for (const auto& row : rows_)
      total += row.wrong;
    return total;
  }

 private:
  void header(const BenchRow& row) {
    const std::string where = plan_.backend == kInProcess ? "threads of one process"
                              : plan_.backend == kSim
                                  ? "simulated: the cost model of cluster " + simCluster()
                                  : "processes on 127.0.0.1";
    std::cout << fmt::format("# {}, {} ranks ({}), backend {}, {}\n",
                             stretch::comm::toString(row.op), row.ranks, where, plan_.backend,
                             stretch::comm::toString(plan_.sweep.dtype));
    std::cout << fmt::format("#{:>11}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7} {:>7} {:>7}  {:>6}\n",
                             "size", "count", "type", "redop", "root", "time", "algbw", "busbw",
                             "#wrong");
    std::cout << fmt::format("#{:>11}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7} {:>7} {:>7}\n", "(B)",
                             "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)");
  }

  std::string simCluster() const {
    return fmt::format("{}, {} nodes x {} GPUs", plan_.cluster.name, plan_.cluster.nodes,
                       plan_.cluster.gpusPerNode);
  }

  void footer() {
    if (group_.empty())
      return;
    double sum = 0;
    std::int64_t wrong = 0;
    for (const auto& row : group_) {
      sum += row.busbwGBps;
      wrong += row.wrong;
    }
    std::cout << fmt::format("# Out of bounds values : {} {}\n", wrong,
                             wrong == 0 ? "OK" : "FAILED");
    std::cout << fmt::format("# Avg bus bandwidth    : {:.3f} GB/s\n#\n",
                             sum / static_cast<double>(group_.size()));
    group_.clear();
  }

  const CommBenchPlan& plan_;
  bool json_;
  std::vector<BenchRow> rows_;
  std::vector<BenchRow> group_;
};

// ---- running --------------------------------------------------------------------------------

std::vector<std::string> workerArgs(const CommBenchPlan& plan, const CommBenchOptions& o, int ranks,
                                    double timeoutSeconds) {
  std::vector<std::string> args = {"bench",
                                   "comm",
                                   "--worker",
                                   "--backend",
                                   plan.backend,
                                   "--ranks",
                                   std::to_string(ranks),
                                   "--op",
                                   o.ops,
                                   "--min-bytes",
                                   o.minBytes,
                                   "--max-bytes",
                                   o.maxBytes,
                                   "--dtype",
                                   o.dtype,
                                   "--timeout",
                                   fmt::format("{:.3f}", timeoutSeconds)};
  if (!o.warmup.empty()) {
    args.push_back("--warmup");
    args.push_back(o.warmup);
  }
  if (!o.iters.empty()) {
    args.push_back("--iters");
    args.push_back(o.iters);
  }
  return args;
}

std::string selfExecutable() {
  std::error_code ec;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec)
    throw stretch::comm::CommError(
        fmt::format("bench: cannot find this executable (/proc/self/exe): {}", ec.message()));
  return path.string();
}

void runProcesses(const CommBenchPlan& plan, const CommBenchOptions& o, int ranks,
                  std::chrono::steady_clock::time_point deadline, RowPrinter& printer) {
  RankLaunch launch;
  launch.executable = selfExecutable();
  const double left =
      std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
  launch.args = workerArgs(plan, o, ranks, std::max(left, 1.0));
  launch.worldSize = ranks;
  launch.deadline = deadline;
  launch.forwardStderr = o.verbose;
  launch.onStdoutLine = [&](int rank, const std::string& line) {
    if (rank == 0 && !line.empty() && line.front() == '{') {
      printer.add(rowFromJson(nlohmann::json::parse(line)));
    } else if (!line.empty()) {
      std::cerr << fmt::format("[rank {}] {}\n", rank, line);
    }
  };
  runRanks(launch);
}

void runThreads(const CommBenchPlan& plan, int ranks,
                std::chrono::steady_clock::time_point deadline, RowPrinter& printer) {
  const auto left = std::chrono::duration_cast<stretch::comm::Duration>(
      deadline - std::chrono::steady_clock::now());
  stretch::comm::InProcessWorld world(
      ranks, std::max<stretch::comm::Duration>(left, std::chrono::seconds(1)));
  stretch::comm::runRankThreads(ranks, [&](int r) {
    auto backend = world.backend(r);
    runSweep(*backend, plan.sweep, [&](const BenchRow& row) {
      if (r == 0)
        printer.add(row);
    });
  });
}

}  // namespace

CommBenchPlan planCommBench(const CommBenchOptions& o) {
  CommBenchPlan plan;
  plan.backend = o.backend;
  const std::vector<std::string> backends = cpuBackends();
  if (std::find(backends.begin(), backends.end(), o.backend) == backends.end())
    badFlag("--backend", o.backend,
            fmt::format("a CPU backend this build has: {}", fmt::join(backends, ", ")));

  for (const std::string& item : splitList(o.ranks)) {
    const auto n = parseInt(item);
    if (!n || *n < 1 || *n > kMaxRanks)
      badFlag(
          "--ranks", o.ranks,
          fmt::format("a comma-separated list of rank counts from 1 to {}, e.g. 2,4", kMaxRanks));
    plan.ranks.push_back(static_cast<int>(*n));
  }
  if (plan.backend == kSim) {
    const auto dir = o.presets.empty() ? sim::defaultPresetDir({}) : fs::path(o.presets);
    try {
      plan.cluster = sim::loadClusterPreset(o.cluster, dir);
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("--cluster: {}", e.what()));
    }
    if (!o.nodes.empty())
      plan.cluster.nodes = parseCount("--nodes", o.nodes, 1);
    for (const int n : plan.ranks) {
      if (n > plan.cluster.gpus())
        badFlag(
            "--ranks", o.ranks,
            fmt::format("at most the {} GPUs of cluster {} ({} nodes x {})", plan.cluster.gpus(),
                        o.cluster, plan.cluster.nodes, plan.cluster.gpusPerNode));
    }
  }

  plan.sweep.ops.clear();
  for (const std::string& item : splitList(o.ops)) {
    const auto op = stretch::comm::parseOpType(item);
    const bool known =
        op && std::find(std::begin(kBenchOps), std::end(kBenchOps), *op) != std::end(kBenchOps);
    if (!known)
      badFlag("--op", o.ops,
              "a comma-separated list of all_reduce, all_gather, reduce_scatter, broadcast");
    if (std::find(plan.sweep.ops.begin(), plan.sweep.ops.end(), *op) != plan.sweep.ops.end())
      badFlag("--op", o.ops, fmt::format("each operation once ({} is repeated)", item));
    plan.sweep.ops.push_back(*op);
  }

  const std::string sizeHelp = "a size in bytes such as 8, 64K, 256M or 1G (at most 16G)";
  const auto minBytes = parseByteSize(o.minBytes);
  if (!minBytes || *minBytes > kMaxBytes)
    badFlag("--min-bytes", o.minBytes, sizeHelp);
  const auto maxBytes = parseByteSize(o.maxBytes);
  if (!maxBytes || *maxBytes > kMaxBytes)
    badFlag("--max-bytes", o.maxBytes, sizeHelp);
  if (*minBytes > *maxBytes)
    badFlag("--max-bytes", o.maxBytes, fmt::format("at least --min-bytes ({})", o.minBytes));
  plan.sweep.minBytes = *minBytes;
  plan.sweep.maxBytes = *maxBytes;

  const auto dtype = stretch::comm::parseDataType(o.dtype);
  if (!dtype)
    badFlag("--dtype", o.dtype, "one of fp32, fp16, bf16, fp64, int32, int64, uint8");
  plan.sweep.dtype = *dtype;

  if (!o.warmup.empty())
    plan.sweep.warmup = parseCount("--warmup", o.warmup, 0);
  if (!o.iters.empty())
    plan.sweep.iters = parseCount("--iters", o.iters, 1);

  char* end = nullptr;
  const double timeout = std::strtod(o.timeout.c_str(), &end);
  if (o.timeout.empty() || end != o.timeout.c_str() + o.timeout.size() || !std::isfinite(timeout) ||
      timeout <= 0)
    badFlag("--timeout", o.timeout, "a positive number of seconds");
  plan.timeoutSeconds = timeout;
  return plan;
}

std::int64_t runCommBench(const CommBenchPlan& plan, const CommBenchOptions& o) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(plan.timeoutSeconds));
  RowPrinter printer(plan, o.json);
  try {
    for (const int ranks : plan.ranks) {
      std::cerr << fmt::format("stretch {}: {} ranks, backend {} ({}), {} .. {} B, {}\n", kCommand,
                               ranks, plan.backend,
                               plan.backend == kInProcess ? "threads"
                               : plan.backend == kSim     ? "simulated"
                                                          : "processes",
                               plan.sweep.minBytes, plan.sweep.maxBytes, o.ops);
      if (plan.backend == kInProcess)
        runThreads(plan, ranks, deadline, printer);
      else if (plan.backend == kSim)
        runSimulatedSweep(plan.cluster, ranks, plan.sweep,
                          [&](const BenchRow& row) { printer.add(row); });
      else
        runProcesses(plan, o, ranks, deadline, printer);
    }
  } catch (...) {
    printer.finish();
    throw;
  }
  printer.finish();
  return printer.wrong();
}

// One rank of a process run: joins the group from the launcher's variables, runs the sweep and,
// on rank 0, prints each row as a JSON line.
int runCommBenchWorker(const CommBenchOptions& o) {
  int rank = -1;
  try {
    const CommBenchPlan plan = planCommBench(o);
    stretch::comm::InitOptions init;
    init.backend = plan.backend;
    init.autoMpiDiscovery = false;
    init.timeout = std::chrono::duration_cast<stretch::comm::Duration>(
        std::chrono::duration<double>(plan.timeoutSeconds));
    const auto group = stretch::comm::initDistributed(init);
    rank = group->rank();
    if (group->size() != plan.ranks.front())
      throw stretch::comm::DistributedInitError(
          fmt::format("bench worker: WORLD_SIZE {} does not match --ranks {}", group->size(),
                      plan.ranks.front()));
    auto& backend = group->backend(stretch::comm::DeviceType::Cpu);
    runSweep(backend, plan.sweep, [&](const BenchRow& row) {
      if (rank == 0) {
        std::fputs((toJson(row).dump() + "\n").c_str(), stdout);
        std::fflush(stdout);
      }
    });
    stretch::comm::destroyProcessGroup();
    return 0;
  } catch (const Error& e) {
    std::cerr << fmt::format("rank {}: {}: {}\n",
                             rank < 0 ? std::string("?") : std::to_string(rank), e.kind(),
                             e.what());
  } catch (const std::exception& e) {
    std::cerr << fmt::format("rank {}: {}\n", rank, e.what());
  }
  return 1;
}

}  // namespace stretch::tools
