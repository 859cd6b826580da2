#pragma once
// Private to runtime/elasticity: the exact solver (see solver.hpp for the contract).

#include "runtime/config/elasticity_config.hpp"
#include "runtime/elasticity/detail/valid_sizes.hpp"

namespace stretch::elasticity::detail {

// Searches every batch in the configured range. Returns the batch and its valid data-parallel
// sizes (multiples of num_gpus_per_node / model_parallel_size).
BatchChoice solveExact(const config::ElasticityConfig& config);

}  // namespace stretch::elasticity::detail
