#pragma once
// Test oracle: DeepSpeed's elasticity algorithm transliterated as literally as possible (linear
// divisor scans, the HCN candidate rule with PR #8237, float arithmetic where DeepSpeed uses it),
// with none of the production solver's shortcuts. Slow; only for small inputs.
// Returns nullopt where DeepSpeed would crash or return an empty/None valid list.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <set>
#include <vector>

#include "runtime/elasticity/number_theory.hpp"

namespace stretch::test::reference {

struct Result {
  std::int64_t batch = 0;
  std::vector<std::int64_t> valid;
  std::optional<std::int64_t> micro;  // v0.2 get_microbatch candidate
};

inline std::vector<std::int64_t> getValidGpus(std::int64_t batch,
                                              const std::vector<std::int64_t>& mbs,
                                              std::int64_t minValid, std::int64_t maxValid) {
  std::set<std::int64_t> valid;
  for (std::int64_t mb : mbs) {
    if (batch % mb == 0) {
      const std::int64_t maxGpus = batch / mb;
      if (minValid <= maxGpus && maxGpus <= maxValid) {
        valid.insert(maxGpus);
      }
      for (std::int64_t i = 1; i <= maxGpus / 2; ++i) {
        if (i > maxValid) {
          break;
        }
        if (i < minValid) {
          continue;
        }
        if (maxGpus % i == 0) {
          valid.insert(i);
        }
      }
    }
  }
  return {valid.begin(), valid.end()};
}

// _get_compatible_gpus_v01 (HEAD). nullopt when DeepSpeed would return no valid GPU count.
inline std::optional<Result> v01(const std::vector<std::int64_t>& mbs, std::int64_t cap,
                                 std::int64_t minGpus, std::int64_t maxGpus, bool preferLarger) {
  if (minGpus == 0)
    minGpus = 1;
  if (maxGpus == 0)
    maxGpus = cap / *std::min_element(mbs.begin(), mbs.end());
  std::int64_t lcm = 1;
  for (std::int64_t mb : mbs)
    lcm = std::lcm(lcm, mb);
  std::vector<std::int64_t> bases = mbs;
  bases.push_back(lcm);
  std::set<std::int64_t> candidates;
  const auto hcns = elasticity::highlyCompositeNumbers();
  for (std::int64_t base : bases) {
    if (base > cap)
      continue;
    if (base == cap) {
      candidates.insert(base);
      continue;
    }
    const std::int64_t value = cap / base;
    std::int64_t h = hcns.back();
    for (std::size_t i = 0; i < hcns.size(); ++i) {
      if (hcns[i] > value) {
        h = hcns[i - 1];
        break;
      }
    }
    candidates.insert(h * base);
  }
  std::size_t maxValid = 0;
  std::optional<Result> best;
  std::int64_t finalBatch = *std::min_element(mbs.begin(), mbs.end());
  for (std::int64_t bs : candidates) {
    auto cur = getValidGpus(bs, mbs, minGpus, maxGpus);
    if (cur.size() > maxValid || (cur.size() == maxValid && ((preferLarger && bs > finalBatch) ||
                                                             (!preferLarger && bs < finalBatch)))) {
      maxValid = cur.size();
      finalBatch = bs;
      best = Result{bs, cur, std::nullopt};
    }
  }
  if (!best || best->valid.empty())
    return std::nullopt;
  return best;
}

// _get_compatible_gpus_v02 for model_parallel_size 1 (where DeepSpeed's float and total-GPU
// arithmetic is exact) and num_gpus_per_node | current. nullopt where DeepSpeed misbehaves.
inline std::optional<Result> v02(const std::vector<std::int64_t>& mbs, std::int64_t cap,
                                 std::int64_t current, std::int64_t minGpus, std::int64_t maxGpus,
                                 bool preferLarger, std::int64_t gpn) {
  const std::int64_t dpPerNode = gpn;
  if (maxGpus / gpn == 0)
    return std::nullopt;  // DeepSpeed: unbounded node count
  for (std::int64_t mb : mbs) {
    if (mb > cap / dpPerNode)
      return std::nullopt;  // DeepSpeed: ValueError
  }
  auto nodes = v01(mbs, cap / dpPerNode, minGpus / gpn, maxGpus / gpn, preferLarger);
  if (!nodes)
    return std::nullopt;
  auto getMicro = [&](std::int64_t fbs) {
    std::optional<std::int64_t> cand;
    for (std::int64_t mb : mbs) {
      if ((fbs / current) % mb == 0) {
        if (!cand)
          cand = mb;
        if (preferLarger && *cand < mb)
          cand = mb;
      }
    }
    return cand;
  };
  Result r;
  r.batch = nodes->batch * dpPerNode;
  for (std::int64_t n : nodes->valid)
    r.valid.push_back(n * dpPerNode);
  if (std::find(r.valid.begin(), r.valid.end(), current) != r.valid.end()) {
    r.micro = getMicro(r.batch);
    return r;
  }
  const double currentDp =
      static_cast<double>(current) / static_cast<double>(gpn) * static_cast<double>(dpPerNode);
  std::vector<double> cands;
  for (std::int64_t mb : mbs) {
    const double minBatch = static_cast<double>(mb) * currentDp;
    cands.push_back(std::floor(static_cast<double>(cap) / minBatch) * minBatch);
  }
  const double c = preferLarger ? *std::max_element(cands.begin(), cands.end())
                                : *std::min_element(cands.begin(), cands.end());
  if (c <= 0)
    return std::nullopt;  // DeepSpeed returns batch 0
  r.batch = static_cast<std::int64_t>(c);
  r.valid = {static_cast<std::int64_t>(currentDp)};
  r.micro = getMicro(r.batch);
  return r;
}

// Exact mode by brute force over every batch in [lo, hi]: node counts k in [kLo, kHi] with
// k * unit * mb | B for some mb.
inline std::optional<Result> exact(const std::vector<std::int64_t>& mbs, std::int64_t lo,
                                   std::int64_t hi, std::int64_t kLo, std::int64_t kHi,
                                   std::int64_t unit, bool preferLarger) {
  std::optional<Result> best;
  for (std::int64_t b = lo; b <= hi; ++b) {
    std::vector<std::int64_t> valid;
    for (std::int64_t k = kLo; k <= std::min(kHi, b); ++k) {
      for (std::int64_t mb : mbs) {
        if (b % (k * unit * mb) == 0) {
          valid.push_back(k * unit);
          break;
        }
      }
    }
    if (valid.empty())
      continue;
    if (!best || valid.size() > best->valid.size() ||
        (valid.size() == best->valid.size() && preferLarger)) {
      best = Result{b, valid, std::nullopt};
    }
  }
  return best;
}

}  // namespace stretch::test::reference
