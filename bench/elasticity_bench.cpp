// Google Benchmark for the elastic solver. The configs are those of the DeepSpeed timing table
// (docs/benchmarks.md); the DeepSpeed side of the comparison is bench/compare_deepspeed.py.

#include <benchmark/benchmark.h>

#include "runtime/config/elasticity_config.hpp"
#include "runtime/elasticity/solver.hpp"

namespace {

using stretch::config::ElasticityConfig;
using stretch::config::ElasticityVersion;

ElasticityConfig v01(std::int64_t cap, std::int64_t maxGpus) {
  ElasticityConfig c;
  c.enabled = true;
  c.version = ElasticityVersion::V0_1;
  c.maxTrainBatchSize = cap;
  c.microBatchSizes = {2, 4, 6, 8, 12, 16};
  c.maxGpus = maxGpus;
  return c;
}

void BM_V01(benchmark::State& state) {
  const ElasticityConfig c = v01(state.range(0), state.range(1));
  for (auto _ : state) {
    benchmark::DoNotOptimize(stretch::elasticity::computeElasticConfig(c));
  }
}
BENCHMARK(BM_V01)
    ->Args({10'000, 10'000})
    ->Args({100'000, 10'000})
    ->Args({720'720, 10'000})
    ->Args({10'000'000, 10'000})
    ->Args({10'000'000, 1'000'000})
    ->Args({10'000'000, 10'000'000});

void BM_V01_DeepSpeedFixture(benchmark::State& state) {
  ElasticityConfig c = v01(10'000, 1500);
  c.microBatchSizes = {8, 12, 16, 17};
  c.minGpus = 32;
  for (auto _ : state) {
    benchmark::DoNotOptimize(stretch::elasticity::computeElasticConfig(c));
  }
}
BENCHMARK(BM_V01_DeepSpeedFixture);

void BM_V02(benchmark::State& state) {
  ElasticityConfig c = v01(state.range(0), 10'000);
  c.version = ElasticityVersion::V0_2;
  c.numGpusPerNode = 8;
  c.modelParallelSize = state.range(1);
  stretch::elasticity::SolveRequest request;
  request.envWorldSize = "64";
  for (auto _ : state) {
    benchmark::DoNotOptimize(stretch::elasticity::computeElasticConfig(c, request));
  }
}
BENCHMARK(BM_V02)->Args({720'720, 2})->Args({10'000'000, 4});

void BM_Exact(benchmark::State& state) {
  ElasticityConfig c = v01(state.range(0), state.range(1));
  c.version = ElasticityVersion::Exact;
  for (auto _ : state) {
    benchmark::DoNotOptimize(stretch::elasticity::computeElasticConfig(c));
  }
}
BENCHMARK(BM_Exact)
    ->Args({100'000, 10'000})
    ->Args({720'720, 10'000})
    ->Args({10'000'000, 10'000})
    ->Args({10'000'000, 10'000'000})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
