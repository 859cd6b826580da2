#include "sim/random.hpp"

#include <cmath>

namespace stretch::sim {

namespace {

constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept {
  return (x << k) | (x >> (64 - k));
}

}  // namespace

std::uint64_t mix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t deriveSeed(std::uint64_t base, std::uint64_t replica, std::uint64_t stream) noexcept {
  return mix64(mix64(mix64(base) ^ replica) + stream);
}

Rng::Rng(std::uint64_t seed) noexcept {
  std::uint64_t x = seed;
  for (auto& word : s_) {
    x = mix64(x);
    word = x;
  }
  if ((s_[0] | s_[1] | s_[2] | s_[3]) == 0) {
    s_[0] = 1;  // the all-zero state is a fixed point of xoshiro
  }
}

std::uint64_t Rng::next() noexcept {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() noexcept {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

std::uint64_t Rng::below(std::uint64_t n) noexcept {
  // Reject the top partial block so that every residue is equally likely.
  const std::uint64_t limit = n * (UINT64_MAX / n);
  std::uint64_t x = next();
  while (x >= limit) {
    x = next();
  }
  return x % n;
}

double Rng::exponential(double mean) noexcept {
  // 1 - U is in (0, 1]: the logarithm is finite.
  return -mean * std::log1p(-uniform());
}

double Rng::weibull(double shape, double scale) noexcept {
  return scale * std::pow(-std::log1p(-uniform()), 1.0 / shape);
}

double weibullScaleForMean(double mean, double shape) noexcept {
  return mean / std::tgamma(1.0 + 1.0 / shape);
}

}  // namespace stretch::sim
