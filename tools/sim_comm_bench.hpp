#pragma once
// `stretch bench comm --backend sim`: the same sweep as the measured benchmark (comm_bench.hpp),
// run over the simulator's SimBackend in functional mode (ranks as threads, the data really
// moved and checked) and timed with each rank's simulated clock. Its rows are what the
// simulator's collective cost model (sim/collective_cost.hpp) assumes for that cluster, in the
// table format of the measured benchmark and nccl-tests, so a user can put the model beside
// their own measurements and see where it is optimistic.
//
// Built only with the simulator. Blocks until every rank's sweep is done; throws the first
// rank's error (ConfigError for a bad cluster or a rank count the cluster cannot hold).

#include <functional>
#include <vector>

#include "sim/cluster.hpp"
#include "tools/comm_bench.hpp"

namespace stretch::tools {

// `onRow` is called with rank 0's reduced rows, in order, from rank 0's thread.
std::vector<BenchRow> runSimulatedSweep(const sim::ClusterSpec& cluster, int ranks,
                                        const SweepOptions& options,
                                        const std::function<void(const BenchRow&)>& onRow = {});

}  // namespace stretch::tools
