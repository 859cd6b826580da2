// DistributedSampler against torch 1.13's own torch.utils.data.DistributedSampler, run through
// /usr/bin/python3 (or $STRETCH_TORCH_PYTHON). Every rank's whole list is compared through its
// length, a polynomial hash and its first elements, for small and large datasets. Skips, saying
// why, when the interpreter cannot import torch.

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/common/int128.hpp"
#include "runtime/engine/sampler.hpp"
#include "tests/support/torch_python.hpp"

namespace stretch::engine {
namespace {

using stretch::test::CommandResult;
using stretch::test::runCommand;
using stretch::test::torchPython;
using stretch::test::torchUnavailableReason;

struct Case {
  std::int64_t n;
  std::int64_t replicas;
  bool dropLast;
  bool shuffle;
  std::uint64_t seed;
  std::int64_t epoch;
};

constexpr std::uint64_t kModulus = (std::uint64_t{1} << 61) - 1;

// Python: v = (v * 1000003 + x + 1) % (2**61 - 1) over the list.
std::uint64_t polyHash(const std::vector<std::int64_t>& xs) {
  std::uint64_t v = 0;
  for (const std::int64_t x : xs) {
    const UInt128 next = static_cast<UInt128>(v) * 1000003u + static_cast<UInt128>(x) + 1u;
    v = static_cast<std::uint64_t>(next % kModulus);
  }
  return v;
}

constexpr const char* kScript = R"PY(
import sys
import torch
from torch.utils.data import DistributedSampler

M = (1 << 61) - 1

def poly_hash(xs):
    v = 0
    for x in xs:
        v = (v * 1000003 + x + 1) % M
    return v

for line in open(sys.argv[1]):
    n, R, drop, shuf, seed, epoch = (int(x) for x in line.split())
    for r in range(R):
        s = DistributedSampler(range(n), num_replicas=R, rank=r, shuffle=bool(shuf), seed=seed,
                               drop_last=bool(drop))
        s.set_epoch(epoch)
        idx = list(s)
        print(n, R, drop, shuf, seed, epoch, r, len(s), s.total_size, len(idx), poly_hash(idx),
              *idx[:6])
)PY";

TEST(DistributedSamplerTorch, MatchesTorch113Exactly) {
  if (const std::string why = torchUnavailableReason(); !why.empty()) {
    GTEST_SKIP() << why;
  }
  const std::vector<Case> cases = {
      {10, 4, false, true, 0, 0},
      {10, 4, true, true, 0, 1},
      {3, 8, false, true, 7, 2},  // padding wraps around P more than once
      {0, 3, false, true, 0, 0},
      {17, 5, false, false, 0, 0},
      {17, 5, true, false, 0, 4},
      {1000, 7, false, true, 42, 3},
      {1000, 7, true, true, 42, 3},
      {4099, 1, false, true, 123456789, 9},
      {65537, 16, true, true, 5, 0},
      {50, 3, false, true, (std::uint64_t{1} << 63) + 11, 0},  // seed above INT64_MAX
      {50, 3, false, true, ~std::uint64_t{0} - 1, 1},          // seed + epoch = 2^64 - 1
      {1000003, 8, true, true, 1234, 5},
      {2000003, 6, false, true, 99, 2},
  };
  const std::filesystem::path dir = testing::TempDir();
  const std::filesystem::path script = dir / "stretch_sampler_torch.py";
  const std::filesystem::path input = dir / "stretch_sampler_torch_cases.txt";
  {
    std::ofstream(script) << kScript;
    std::ofstream in(input);
    for (const Case& c : cases) {
      in << c.n << ' ' << c.replicas << ' ' << c.dropLast << ' ' << c.shuffle << ' ' << c.seed
         << ' ' << c.epoch << '\n';
    }
  }
  const CommandResult run =
      runCommand(torchPython() + " " + script.string() + " " + input.string());
  ASSERT_EQ(run.exitCode, 0) << run.output;

  std::istringstream lines(run.output);
  std::string line;
  std::size_t checked = 0;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    Case c{};
    int drop = 0;
    int shuf = 0;
    std::int64_t rank = 0;
    std::int64_t len = 0;
    std::int64_t totalSize = 0;
    std::int64_t count = 0;
    std::uint64_t hash = 0;
    fields >> c.n >> c.replicas >> drop >> shuf >> c.seed >> c.epoch >> rank >> len >> totalSize >>
        count >> hash;
    ASSERT_TRUE(fields) << "unexpected output line: " << line;
    std::vector<std::int64_t> head;
    for (std::int64_t x = 0; fields >> x;) {
      head.push_back(x);
    }
    DistributedSampler s(c.n, c.replicas, rank, shuf != 0, c.seed, drop != 0);
    s.setEpoch(c.epoch);
    const std::vector<std::int64_t> ours = s.indices();
    SCOPED_TRACE(line.substr(0, 200));
    EXPECT_EQ(s.numSamples(), len);
    EXPECT_EQ(s.totalSize(), totalSize);
    ASSERT_EQ(static_cast<std::int64_t>(ours.size()), count);
    EXPECT_EQ(std::vector<std::int64_t>(ours.begin(),
                                        ours.begin() + static_cast<std::ptrdiff_t>(head.size())),
              head);
    EXPECT_EQ(polyHash(ours), hash);
    ++checked;
  }
  std::size_t expectedLines = 0;
  for (const Case& c : cases) {
    expectedLines += static_cast<std::size_t>(c.replicas);
  }
  EXPECT_EQ(checked, expectedLines) << run.output.substr(0, 2000);
}

}  // namespace
}  // namespace stretch::engine
