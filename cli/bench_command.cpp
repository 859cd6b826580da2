// `stretch bench comm`: the flags, parsed into tools::CommBenchOptions; the benchmark itself is
// tools/comm_bench_run.hpp.

#include <exception>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "runtime/comm/builtin/builtin_backends.hpp"
#include "tools/comm_bench_run.hpp"

namespace stretch::cli {

namespace {

constexpr const char* kCommand = "bench comm";

// Bad options are status 2 (as --json output when asked); a rank that failed, a run that timed
// out or wrong results are kExitFailed, printed as text (the table already went to stdout).
int runComm(const tools::CommBenchOptions& o) {
  stretch::comm::registerBuiltinBackends();  // Gloo (and NCCL) when this build has them
  tools::CommBenchPlan plan;
  if (const int status = runCommand(kCommand, ErrorStyle{.json = o.json},
                                    [&] {
                                      plan = tools::planCommBench(o);
                                      return kExitOk;
                                    });
      status != kExitOk)
    return status;
  return runCommand(kCommand, ErrorStyle{}, [&] {
    if (const std::int64_t wrong = tools::runCommBench(plan, o); wrong != 0) {
      printError(kCommand, fmt::format("{} result elements were wrong (column #wrong)", wrong));
      return kExitFailed;
    }
    return kExitOk;
  });
}

}  // namespace

Command addBenchCommand(CLI::App& app) {
  CLI::App* bench = app.add_subcommand(
      "bench",
      "Benchmarks. `stretch bench comm`: collective bandwidth and latency, nccl-tests "
      "style.");
  bench->require_subcommand(1);

  auto opts = std::make_shared<tools::CommBenchOptions>();
  CLI::App* comm = bench->add_subcommand(
      "comm",
      "Measure collectives over a sweep of sizes, nccl-tests style: for each rank count, "
      "operation and power-of-two size, the average time per operation (maximum over the "
      "ranks), algbw, busbw and #wrong. Ranks are processes on 127.0.0.1 (threads with --backend "
      "in_process or sim). Table on stdout, "
      "progress on stderr; exit 1 when a rank fails or a result is wrong, 2 on bad flags.");
  comm->add_option("--backend", opts->backend,
                   "Communication backend (gloo; in_process runs the ranks as threads of this "
                   "process; sim prints what the simulator's cost model predicts for --cluster, "
                   "timed on simulated clocks)")
      ->capture_default_str();
  comm->add_option("--cluster", opts->cluster,
                   "--backend sim: the cluster preset (fixtures/clusters: dgx-h100, dgx-a100, "
                   "cloud-a10g-4x, cpu-loopback); ranks fill its nodes in order")
      ->capture_default_str();
  comm->add_option("--nodes", opts->nodes,
                   "--backend sim: the cluster's node count (default: the preset's)");
  comm->add_option("--presets", opts->presets,
                   "--backend sim: cluster preset folder (default: $STRETCH_CLUSTER_PRESETS or "
                   "the source tree's fixtures/clusters)");
  comm->add_option("--ranks", opts->ranks, "Comma-separated rank counts, e.g. 2,4")
      ->capture_default_str();
  comm->add_option("--op", opts->ops,
                   "Comma-separated operations: all_reduce, all_gather, reduce_scatter, broadcast")
      ->capture_default_str();
  comm->add_option("-b,--min-bytes", opts->minBytes, "Smallest size (8, 64K, 256M, 1G)")
      ->capture_default_str();
  comm->add_option("-e,--max-bytes", opts->maxBytes, "Largest size; sizes double from the smallest")
      ->capture_default_str();
  comm->add_option("--dtype", opts->dtype,
                   "Element type (fp32, fp16, bf16, fp64, int32, int64, uint8)")
      ->capture_default_str();
  comm->add_option("-w,--warmup", opts->warmup,
                   "Warm-up iterations per size (default 5, fewer above 16 MiB)");
  comm->add_option("-n,--iters", opts->iters,
                   "Timed iterations per size (default 20, fewer above 16 MiB)");
  comm->add_option("--timeout", opts->timeout, "Limit for the whole run, in seconds")
      ->capture_default_str();
  comm->add_flag("--json", opts->json,
                 "Print one JSON array of {\"op\", \"ranks\", \"bytes\", \"time_us\", "
                 "\"algbw_gbps\", \"busbw_gbps\", \"wrong\"} rows");
  comm->add_flag("-v,--verbose", opts->verbose, "Copy the ranks' stderr to ours as it comes");
  comm->add_flag("--worker", opts->worker, "Run as one rank (internal)")->group("");

  return {bench, [opts, comm] {
            if (!comm->parsed())
              return kExitUsage;
            if (opts->worker) {
              stretch::comm::registerBuiltinBackends();
              return tools::runCommBenchWorker(*opts);
            }
            return runComm(*opts);
          }};
}

}  // namespace stretch::cli
