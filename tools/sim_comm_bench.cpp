#include "tools/sim_comm_bench.hpp"

#include "runtime/comm/in_process_backend.hpp"
#include "sim/sim_backend.hpp"

namespace stretch::tools {

std::vector<BenchRow> runSimulatedSweep(const sim::ClusterSpec& cluster, int ranks,
                                        const SweepOptions& options,
                                        const std::function<void(const BenchRow&)>& onRow) {
  const auto world = sim::SimWorld::create(cluster, ranks, sim::SimBackendMode::Functional);
  std::vector<BenchRow> rows;
  comm::runRankThreads(ranks, [&](int r) {
    auto backend = world->backend(r);
    SweepOptions mine = options;
    mine.clock = [backend] { return backend->simulatedTime(); };
    auto result = runSweep(*backend, mine, [&](const BenchRow& row) {
      if (r == 0 && onRow)
        onRow(row);
    });
    if (r == 0)
      rows = std::move(result);
  });
  return rows;
}

}  // namespace stretch::tools
