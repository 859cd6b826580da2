// DistributedSampler: PyTorch 1.13's recorded output (fixtures/engine/distributed_sampler_torch113
// .txt), a literal transliteration of torch/utils/data/distributed.py as the oracle for random
// cases, argument errors, and the resume guarantee across world-size changes (rapidcheck; the
// seed is printed as "Using configuration: seed=..." and replayed with RC_PARAMS="seed=N").

#include "runtime/engine/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <rapidcheck.h>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/common/error.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::engine {
namespace {

using Indices = std::vector<std::int64_t>;

Indices parseList(const std::string& text) {
  Indices out;
  static const std::regex kNumber(R"(-?\d+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kNumber);
       it != std::sregex_iterator(); ++it) {
    out.push_back(std::stoll(it->str()));
  }
  return out;
}

// torch/utils/data/distributed.py (1.13) __iter__, statement by statement, over a given
// permutation.
Indices pytorchIndices(const Indices& permutation, std::int64_t numReplicas, std::int64_t rank,
                       bool dropLast) {
  const auto n = static_cast<std::int64_t>(permutation.size());
  std::int64_t numSamples = 0;
  if (dropLast && n % numReplicas != 0) {
    // math.ceil((len(dataset) - num_replicas) / num_replicas)
    const double x = static_cast<double>(n - numReplicas) / static_cast<double>(numReplicas);
    numSamples = static_cast<std::int64_t>(std::ceil(x));
  } else {
    numSamples = (n + numReplicas - 1) / numReplicas;
  }
  const std::int64_t totalSize = numSamples * numReplicas;
  Indices indices = permutation;
  if (!dropLast) {
    const std::int64_t paddingSize = totalSize - n;
    if (paddingSize <= n) {
      indices.insert(indices.end(), permutation.begin(), permutation.begin() + paddingSize);
    } else {
      // (indices * math.ceil(padding_size / len(indices)))[:padding_size]
      Indices repeated;
      const std::int64_t times = (paddingSize + n - 1) / n;
      for (std::int64_t t = 0; t < times; ++t) {
        repeated.insert(repeated.end(), permutation.begin(), permutation.end());
      }
      indices.insert(indices.end(), repeated.begin(), repeated.begin() + paddingSize);
    }
  } else {
    indices.resize(static_cast<std::size_t>(totalSize));
  }
  EXPECT_EQ(static_cast<std::int64_t>(indices.size()), totalSize);
  Indices out;
  for (std::int64_t i = rank; i < totalSize; i += numReplicas) {
    out.push_back(indices[static_cast<std::size_t>(i)]);
  }
  EXPECT_EQ(static_cast<std::int64_t>(out.size()), numSamples);
  return out;
}

TEST(DistributedSampler, ReproducesTorch113Sample) {
  const std::string text =
      test::readFile(test::fixturePath("engine/distributed_sampler_torch113.txt"));
  std::istringstream in(text);
  static const std::regex kHeader(
      R"(^n=(\d+) R=(\d+) drop_last=(True|False) epoch=(\d+) num_samples=(\d+) total_size=(\d+) )"
      R"(randperm\(seed\+epoch\)=(\[.*\])$)");
  static const std::regex kRank(R"(^\s*rank(\d+): (\[.*\])$)");
  static const std::regex kNoShuffle(
      R"(^n=(\d+) R=(\d+) shuffle=False drop_last=(True|False): (.*)$)");
  std::string line;
  std::optional<DistributedSampler> current;
  int blocks = 0;
  int ranks = 0;
  int noShuffle = 0;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, kHeader)) {
      const std::int64_t n = std::stoll(m[1]);
      const std::int64_t r = std::stoll(m[2]);
      const bool dropLast = m[3] == "True";
      current.emplace(n, r, 0, /*shuffle=*/true, /*seed=*/0, dropLast);
      current->setEpoch(std::stoll(m[4]));
      EXPECT_EQ(current->numSamples(), std::stoll(m[5])) << line;
      EXPECT_EQ(current->totalSize(), std::stoll(m[6])) << line;
      EXPECT_EQ(current->epochPermutation(), parseList(m[7])) << line;
      ++blocks;
    } else if (std::regex_match(line, m, kRank)) {
      ASSERT_TRUE(current.has_value()) << line;
      DistributedSampler s(current->datasetSize(), current->numReplicas(), std::stoll(m[1]), true,
                           0, current->dropLast());
      s.setEpoch(current->epoch());
      EXPECT_EQ(s.indices(), parseList(m[2])) << "n=" << s.datasetSize() << " " << line;
      ++ranks;
    } else if (std::regex_match(line, m, kNoShuffle)) {
      const std::int64_t n = std::stoll(m[1]);
      const std::int64_t r = std::stoll(m[2]);
      const Indices flat = parseList(m[4]);
      DistributedSampler first(n, r, 0, false, 0, m[3] == "True");
      const auto per = static_cast<std::size_t>(first.numSamples());
      ASSERT_EQ(flat.size(), per * static_cast<std::size_t>(r)) << line;
      for (std::int64_t rank = 0; rank < r; ++rank) {
        DistributedSampler s(n, r, rank, false, 0, m[3] == "True");
        const auto begin = flat.begin() + static_cast<std::ptrdiff_t>(per * rank);
        EXPECT_EQ(s.indices(), Indices(begin, begin + static_cast<std::ptrdiff_t>(per)))
            << line << " rank " << rank;
      }
      ++noShuffle;
    }
  }
  // The fixture holds 6 shuffled blocks of 4 ranks and one unshuffled case.
  EXPECT_EQ(blocks, 6);
  EXPECT_EQ(ranks, 24);
  EXPECT_EQ(noShuffle, 1);
}

TEST(DistributedSampler, ReferenceDocumentExamples) {
  // deepspeed_engine.md §7: n=10 R=4 epoch 1.
  const std::vector<Indices> expected = {{5, 0, 7}, {6, 8, 4}, {1, 9, 5}, {2, 3, 6}};
  for (int rank = 0; rank < 4; ++rank) {
    DistributedSampler s(10, 4, rank);
    s.setEpoch(1);
    EXPECT_EQ(s.indices(), expected[static_cast<std::size_t>(rank)]);
  }
}

TEST(DistributedSampler, SizesFollowPyTorch) {
  struct Case {
    std::int64_t n, r;
    bool dropLast;
    std::int64_t numSamples;
  };
  for (const Case& c : std::vector<Case>{{10, 4, false, 3},
                                         {10, 4, true, 2},
                                         {12, 4, true, 3},
                                         {12, 4, false, 3},
                                         {3, 4, false, 1},
                                         {3, 4, true, 0},
                                         {0, 4, false, 0},
                                         {0, 4, true, 0},
                                         {1, 1, false, 1},
                                         {7, 1, true, 7}}) {
    DistributedSampler s(c.n, c.r, 0, true, 0, c.dropLast);
    EXPECT_EQ(s.numSamples(), c.numSamples) << c.n << " " << c.r << " " << c.dropLast;
    EXPECT_EQ(s.totalSize(), c.numSamples * c.r);
    EXPECT_EQ(static_cast<std::int64_t>(s.indices().size()), c.numSamples);
    EXPECT_EQ(s.remainingSamples(), c.numSamples);
  }
}

TEST(DistributedSampler, EmptyDatasetYieldsNothing) {
  DistributedSampler s(0, 3, 2);
  EXPECT_TRUE(s.indices().empty());
  EXPECT_TRUE(s.epochPermutation().empty());
  s.setEpoch(4);
  EXPECT_TRUE(s.indices().empty());
}

TEST(DistributedSampler, EpochsDifferAndSeedsDiffer) {
  DistributedSampler a(1000, 2, 1, true, 7);
  const Indices e0 = a.indices();
  a.setEpoch(1);
  EXPECT_NE(a.indices(), e0);
  a.setEpoch(0);
  EXPECT_EQ(a.indices(), e0);
  // seed + epoch is what seeds the generator: (seed 7, epoch 1) == (seed 8, epoch 0).
  DistributedSampler b(1000, 2, 1, true, 8);
  a.setEpoch(1);
  EXPECT_EQ(b.indices(), a.indices());
}

TEST(DistributedSampler, SeedAdditionWrapsModulo2To64) {
  DistributedSampler a(50, 1, 0, true, ~std::uint64_t{0});  // 2^64 - 1
  a.setEpoch(1);
  DistributedSampler b(50, 1, 0, true, 0);
  EXPECT_EQ(a.indices(), b.indices());
}

TEST(DistributedSampler, InvalidArgumentsNameTheArgument) {
  EXPECT_EQ(test::errorOf<ConfigError>([] { DistributedSampler(10, 4, 4); }),
            "DistributedSampler.rank = 4: expected an integer in the interval [0, 3] "
            "(num_replicas = 4)");
  EXPECT_EQ(test::errorOf<ConfigError>([] { DistributedSampler(10, 4, -1); }),
            "DistributedSampler.rank = -1: expected an integer in the interval [0, 3] "
            "(num_replicas = 4)");
  EXPECT_EQ(test::errorOf<ConfigError>([] { DistributedSampler(10, 0, 0); }),
            "DistributedSampler.num_replicas = 0: expected a positive integer");
  EXPECT_EQ(test::errorOf<ConfigError>([] { DistributedSampler(-1, 2, 0); }),
            "DistributedSampler.dataset_size = -1: expected a non-negative integer");
  DistributedSampler s(10, 2, 0);
  EXPECT_EQ(test::errorOf<ConfigError>([&] { s.setEpoch(-2); }),
            "DistributedSampler.epoch = -2: expected a non-negative integer");
  s.setEpoch(3);
  EXPECT_EQ(test::errorOf<ConfigError>([&] { s.setPosition(-5); }),
            "DistributedSampler.consumed = -5: expected a non-negative number of samples "
            "consumed in epoch 3");
  // The detail is kept for machine-readable output.
  try {
    DistributedSampler(10, 4, 9);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    ASSERT_TRUE(e.detail().has_value());
    EXPECT_EQ(e.detail()->path, "DistributedSampler.rank");
    EXPECT_EQ(e.detail()->value, "9");
  }
}

TEST(DistributedSampler, StateRoundTripAndSetEpochRewinds) {
  DistributedSampler s(100, 3, 1);
  s.loadState({5, 42});
  EXPECT_EQ(s.state(), (SamplerState{5, 42}));
  s.setEpoch(6);
  EXPECT_EQ(s.state(), (SamplerState{6, 0}));
  s.setPosition(1000);  // past the end: nothing left
  EXPECT_TRUE(s.indices().empty());
  EXPECT_EQ(s.remainingSamples(), 0);
}

TEST(DistributedSampler, ResumeAtSameWorldIsTheRestOfPyTorchsList) {
  for (bool dropLast : {false, true}) {
    for (std::int64_t rank = 0; rank < 4; ++rank) {
      DistributedSampler full(103, 4, rank, true, 3, dropLast);
      full.setEpoch(2);
      const Indices all = full.indices();
      for (std::int64_t k = 0; k <= full.numSamples(); ++k) {
        DistributedSampler resumed(103, 4, rank, true, 3, dropLast);
        resumed.loadState({2, 4 * k});
        EXPECT_EQ(resumed.indices(), Indices(all.begin() + k, all.end()))
            << "dropLast " << dropLast << " rank " << rank << " k " << k;
      }
    }
  }
}

TEST(DistributedSampler, ResumeAtSmallerWorldFinishesTheEpoch) {
  // 10 samples on 4 ranks, each rank took one: G[0, 4) done; 2 ranks split P[4, 10).
  DistributedSampler old(10, 4, 0);
  const Indices perm = old.epochPermutation();  // [4, 1, 7, 5, 3, 9, 0, 8, 6, 2]
  DistributedSampler r0(10, 2, 0);
  DistributedSampler r1(10, 2, 1);
  r0.setPosition(4);
  r1.setPosition(4);
  EXPECT_EQ(r0.indices(), (Indices{perm[4], perm[6], perm[8]}));
  EXPECT_EQ(r1.indices(), (Indices{perm[5], perm[7], perm[9]}));
}

// ---- properties ----

struct Stage {
  std::int64_t world;
  std::int64_t consumedHere;  // positions of the stage's interleaved order consumed before stop
};

// The stage's samplers' lists interleaved into the global order they are consumed in.
Indices interleaved(const std::vector<Indices>& lists) {
  Indices out;
  const std::size_t per = lists.empty() ? 0 : lists.front().size();
  for (std::size_t j = 0; j < per; ++j) {
    for (const Indices& l : lists) {
      out.push_back(l[j]);
    }
  }
  return out;
}

RC_GTEST_PROP(DistributedSamplerProperty, MatchesPyTorchTransliterationAtPositionZero, ()) {
  const auto n = *rc::gen::weightedOneOf<std::int64_t>(
      {{4, rc::gen::inRange<std::int64_t>(0, 40)}, {1, rc::gen::inRange<std::int64_t>(0, 3000)}});
  const auto r = *rc::gen::inRange<std::int64_t>(1, 17);
  const bool dropLast = *rc::gen::arbitrary<bool>();
  const bool shuffle = *rc::gen::arbitrary<bool>();
  const auto seed = *rc::gen::inRange<std::uint64_t>(0, 1000);
  const auto epoch = *rc::gen::inRange<std::int64_t>(0, 10);
  for (std::int64_t rank = 0; rank < r; ++rank) {
    DistributedSampler s(n, r, rank, shuffle, seed, dropLast);
    s.setEpoch(epoch);
    const Indices perm = s.epochPermutation();
    if (n > 0) {
      RC_ASSERT(pytorchIndices(perm, r, rank, dropLast) == s.indices());
    }
    RC_ASSERT(static_cast<std::int64_t>(s.indices().size()) == s.numSamples());
  }
}

// A job runs through stages of different world sizes; each stage resumes from the position the
// previous one reached and consumes a prefix of its (rank-interleaved) order; the last stage
// runs to the end of the epoch. Every index must be consumed exactly once in the first n
// positions (dropLast: at most once), with fewer padding duplicates / dropped samples than the
// last world size, and every rank of a stage must get the same number of samples.
RC_GTEST_PROP(DistributedSamplerProperty, ResumeAcrossWorldSizesConsumesEachSampleOnce, ()) {
  const auto n = *rc::gen::weightedOneOf<std::int64_t>(
      {{4, rc::gen::inRange<std::int64_t>(1, 60)}, {1, rc::gen::inRange<std::int64_t>(1, 2000)}});
  const bool dropLast = *rc::gen::arbitrary<bool>();
  const bool shuffle = *rc::gen::arbitrary<bool>();
  const auto seed = *rc::gen::inRange<std::uint64_t>(0, 1u << 20);
  const auto epoch = *rc::gen::inRange<std::int64_t>(0, 100);
  const auto stages = *rc::gen::inRange(1, 5);
  const bool wholeSteps = *rc::gen::arbitrary<bool>();  // consumed a multiple of the world size

  Indices consumedOrder;
  std::int64_t position = 0;
  std::int64_t lastWorld = 1;
  std::int64_t finishingWorld = 0;  // the world of the stage that reached the end of P
  for (int stage = 0; stage < stages; ++stage) {
    const auto world = *rc::gen::inRange<std::int64_t>(1, 20);
    lastWorld = world;
    std::vector<Indices> lists;
    for (std::int64_t rank = 0; rank < world; ++rank) {
      DistributedSampler s(n, world, rank, shuffle, seed, dropLast);
      s.loadState({epoch, position});
      lists.push_back(s.indices());
      RC_ASSERT(static_cast<std::int64_t>(lists.back().size()) == s.remainingSamples());
      RC_ASSERT(lists.back().size() == lists.front().size());
    }
    const Indices order = interleaved(lists);
    std::int64_t take = static_cast<std::int64_t>(order.size());
    if (stage + 1 < stages) {
      take = *rc::gen::inRange<std::int64_t>(0, take + 1);
      if (wholeSteps) {
        take -= take % world;
      }
    }
    consumedOrder.insert(consumedOrder.end(), order.begin(), order.begin() + take);
    if (position < n && position + take >= n) {
      finishingWorld = world;
    }
    position += take;
  }

  std::vector<int> seen(static_cast<std::size_t>(n), 0);
  const auto total = static_cast<std::int64_t>(consumedOrder.size());
  if (!dropLast) {
    RC_ASSERT(total >= n);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t v = consumedOrder[static_cast<std::size_t>(i)];
      RC_ASSERT(v >= 0 && v < n);
      ++seen[static_cast<std::size_t>(v)];
    }
    RC_ASSERT(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
    // Padding: only the stage that reached the end of P pads, by fewer than its world size.
    RC_ASSERT(finishingWorld > 0);
    RC_ASSERT(total - n < finishingWorld);
  } else {
    for (const std::int64_t v : consumedOrder) {
      RC_ASSERT(v >= 0 && v < n);
      ++seen[static_cast<std::size_t>(v)];
    }
    RC_ASSERT(std::all_of(seen.begin(), seen.end(), [](int c) { return c <= 1; }));
    RC_ASSERT(n - total < lastWorld);
  }
  // The whole sequence is the epoch's cyclic order G from the start.
  DistributedSampler any(n, 1, 0, shuffle, seed, dropLast);
  any.setEpoch(epoch);
  const Indices perm = any.epochPermutation();
  for (std::int64_t i = 0; i < total; ++i) {
    RC_ASSERT(consumedOrder[static_cast<std::size_t>(i)] == perm[static_cast<std::size_t>(i % n)]);
  }
}

}  // namespace
}  // namespace stretch::engine
