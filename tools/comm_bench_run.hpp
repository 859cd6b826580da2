#pragma once
// `stretch bench comm` behind one call (cli/bench_command.cpp only parses the flags): an
// nccl-tests-style communication benchmark. Ranks are threads of this process (backend
// in_process), simulated clocks of the cost model (backend sim: tools/sim_comm_bench.hpp), or
// processes of this executable re-executed as `stretch bench comm --worker ...` with the
// launcher's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, STRETCH_STORE_TOKEN); rank 0
// sends its rows back as JSON lines on stdout. The method is in tools/comm_bench.hpp.
//
// The backends must be registered first (comm::registerBuiltinBackends: the executable's
// business). Blocking; not thread-safe (prints to std::cout and std::cerr).

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cluster.hpp"
#include "tools/comm_bench.hpp"

namespace stretch::tools {

// The command's flags, as typed.
struct CommBenchOptions {
  std::string backend = "gloo";
  std::string ranks = "2";
  std::string ops = "all_reduce,all_gather,reduce_scatter,broadcast";
  std::string minBytes = "8";
  std::string maxBytes = "256M";
  std::string dtype = "fp32";
  std::string warmup;  // "" = per-size default
  std::string iters;
  std::string timeout = "3600";
  std::string cluster = "dgx-h100";  // --backend sim: the cluster preset
  std::string presets;               // --backend sim: preset folder ("" = the default)
  std::string nodes;                 // --backend sim: the cluster's node count ("" = preset's)
  bool json = false;
  bool verbose = false;
  bool worker = false;
};

// Validated options.
struct CommBenchPlan {
  std::string backend;
  sim::ClusterSpec cluster;  // --backend sim
  std::vector<int> ranks;
  SweepOptions sweep;
  double timeoutSeconds = 3600;
};

// Checks every flag; throws ConfigError naming the flag, its value and what was expected
// ("--ranks = 0: expected a comma-separated list of rank counts from 1 to 256, e.g. 2,4").
CommBenchPlan planCommBench(const CommBenchOptions& options);

// Runs the sweep for every rank count: nccl-tests' table on stdout as rows come (with --json a
// progress line per row on stderr and one JSON array at the end), a line per rank count on
// stderr. Returns the number of wrong result elements (column #wrong). Throws what failed (a
// rank, the timeout) after closing the table.
std::int64_t runCommBench(const CommBenchPlan& plan, const CommBenchOptions& options);

// One rank of a process run: joins the group from the launcher's variables, runs the sweep and,
// on rank 0, prints each row as a JSON line. Returns the exit status (1 after printing the error
// as "rank R: Kind: message" on stderr).
int runCommBenchWorker(const CommBenchOptions& options);

}  // namespace stretch::tools
