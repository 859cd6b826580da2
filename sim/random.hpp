#pragma once
// Random numbers for the simulator, identical on every platform: xoshiro256** seeded through
// splitmix64, and distributions written here (the standard library's distributions are
// implementation-defined, so the same seed could give other failures on another compiler).
//
// Each random process of a run (failures, failure causes, spot preemptions, ...) draws from its
// own stream, derived from the run's seed and a stream number, so adding a process to a scenario
// does not move the draws of the others.
//
// Not thread-safe: one Rng per simulation.

#include <cstdint>

namespace stretch::sim {

// splitmix64 step: a well-mixed 64-bit function of x (Steele, Lea, Flood; OOPSLA 2014).
std::uint64_t mix64(std::uint64_t x) noexcept;

// The seed of stream `stream` of replica `replica` of a run seeded with `base`.
std::uint64_t deriveSeed(std::uint64_t base, std::uint64_t replica, std::uint64_t stream) noexcept;

// Stream numbers (stable: changing one changes every result that depends on it).
enum class RandomStream : std::uint64_t {
  Failures = 1,
  Causes = 2,
  Preemptions = 3,
  Workers = 4,
};

class Rng {
 public:
  explicit Rng(std::uint64_t seed) noexcept;

  std::uint64_t next() noexcept;
  // Uniform in [0, 1) with 53 random bits.
  double uniform() noexcept;
  // Uniform integer in [0, n); n > 0. Unbiased (rejection).
  std::uint64_t below(std::uint64_t n) noexcept;
  // Exponential with the given mean (> 0).
  double exponential(double mean) noexcept;
  // Weibull with shape k > 0 and scale lambda > 0: lambda * (-ln(1 - U))^(1/k).
  double weibull(double shape, double scale) noexcept;

 private:
  std::uint64_t s_[4];
};

// The Weibull scale that gives mean `mean` at shape k: mean / Gamma(1 + 1/k).
double weibullScaleForMean(double mean, double shape) noexcept;

}  // namespace stretch::sim
