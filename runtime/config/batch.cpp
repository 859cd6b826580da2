#include "runtime/config/batch.hpp"

#include <limits>
#include <string>

#include <fmt/format.h>

#include "runtime/common/error.hpp"

namespace stretch::config {

namespace {

// 128-bit intermediates keep every product of two 64-bit values exact.
__extension__ typedef __int128 Wide;  // NOLINT(modernize-use-using): __extension__ needs typedef

constexpr std::string_view kTrainBatch = "train_batch_size";
constexpr std::string_view kMicroBatch = "train_micro_batch_size_per_gpu";
constexpr std::string_view kGradAccum = "gradient_accumulation_steps";

constexpr Wide kWideInt64Max = std::numeric_limits<std::int64_t>::max();

std::string toText(Wide value) {
  if (value == 0) {
    return "0";
  }
  const bool negative = value < 0;
  // Work on the negative side so that the most negative value does not overflow.
  std::string digits;
  Wide rest = negative ? value : -value;
  while (rest != 0) {
    digits.insert(digits.begin(), static_cast<char>('0' - static_cast<int>(rest % 10)));
    rest /= 10;
  }
  return negative ? "-" + digits : digits;
}

// Python's // (floor division), which DeepSpeed uses; callers rule out b == 0.
Wide floorDiv(Wide a, Wide b) {
  Wide q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) {
    --q;
  }
  return q;
}

// One member of the triple: its value and, when DeepSpeed's table inferred it, how.
struct Member {
  std::string_view key;
  Wide value = 0;
  bool overflow = false;  // inferred product beyond 64 bits; value is meaningless
  std::string inferredFrom;

  std::string shown() const {
    if (overflow) {
      return fmt::format("(inferred: {}, beyond 64 bits)", inferredFrom);
    }
    if (inferredFrom.empty()) {
      return toText(value);
    }
    return fmt::format("{} (inferred: {})", toText(value), inferredFrom);
  }
};

[[noreturn]] void fail(const Member& member, std::string expected) {
  throw ConfigError(ErrorDetail{std::string(member.key), member.shown(), std::move(expected)});
}

Member given(std::string_view key, std::int64_t value) {
  return Member{key, value, false, {}};
}

// A given divisor of 0 would make DeepSpeed raise ZeroDivisionError; report it as the bad key.
void requireNonZeroDivisor(std::string_view key, std::int64_t value) {
  if (value == 0) {
    fail(given(key, value), "a positive integer (it divides train_batch_size)");
  }
}

}  // namespace

BatchTriple resolveBatch(const BatchKeys& keys, std::int64_t dpWorldSize) {
  if (dpWorldSize < 1) {
    throw ConfigError(
        ErrorDetail{"data-parallel world size", std::to_string(dpWorldSize), "a positive integer"});
  }
  const Wide ws = dpWorldSize;
  const auto& tb = keys.trainBatchSize;
  const auto& mb = keys.microBatchPerGpu;
  const auto& gas = keys.gradientAccumulation;

  Member train;
  Member micro;
  Member accum;
  // DeepSpeedConfig._set_batch_related_parameters, row by row.
  if (tb && mb && gas) {
    train = given(kTrainBatch, *tb);
    micro = given(kMicroBatch, *mb);
    accum = given(kGradAccum, *gas);
  } else if (tb && mb) {
    requireNonZeroDivisor(kMicroBatch, *mb);
    train = given(kTrainBatch, *tb);
    micro = given(kMicroBatch, *mb);
    accum = Member{kGradAccum, floorDiv(floorDiv(*tb, *mb), ws), false,
                   fmt::format("{} {} / {} {} / world size {}", kTrainBatch, *tb, kMicroBatch, *mb,
                               dpWorldSize)};
  } else if (tb && gas) {
    requireNonZeroDivisor(kGradAccum, *gas);
    train = given(kTrainBatch, *tb);
    accum = given(kGradAccum, *gas);
    micro = Member{kMicroBatch, floorDiv(floorDiv(*tb, ws), *gas), false,
                   fmt::format("{} {} / world size {} / {} {}", kTrainBatch, *tb, dpWorldSize,
                               kGradAccum, *gas)};
  } else if (mb && gas) {
    micro = given(kMicroBatch, *mb);
    accum = given(kGradAccum, *gas);
    train = Member{kTrainBatch, 0, false,
                   fmt::format("{} {} * {} {} * world size {}", kMicroBatch, *mb, kGradAccum, *gas,
                               dpWorldSize)};
    const Wide partial = Wide{*mb} * *gas;  // fits: |product| < 2^126
    if (partial > kWideInt64Max || partial < -kWideInt64Max) {
      train.overflow = true;
    } else {
      train.value = partial * ws;
      train.overflow = train.value > kWideInt64Max || train.value < -kWideInt64Max - 1;
    }
  } else if (tb) {
    train = given(kTrainBatch, *tb);
    accum = Member{kGradAccum, 1, false, "default when only train_batch_size is given"};
    micro = Member{kMicroBatch, floorDiv(*tb, ws), false,
                   fmt::format("{} {} / world size {}", kTrainBatch, *tb, dpWorldSize)};
  } else if (mb) {
    micro = given(kMicroBatch, *mb);
    accum =
        Member{kGradAccum, 1, false, "default when only train_micro_batch_size_per_gpu is given"};
    train = Member{kTrainBatch, Wide{*mb} * ws, false,
                   fmt::format("{} {} * world size {}", kMicroBatch, *mb, dpWorldSize)};
    train.overflow = train.value > kWideInt64Max || train.value < -kWideInt64Max - 1;
  } else {
    throw ConfigError(
        "either train_batch_size or train_micro_batch_size_per_gpu must be given (DeepSpeed "
        "infers the other batch keys from them and the data-parallel world size)");
  }

  // DeepSpeedConfig._batch_assertion, in its order.
  if (train.overflow) {
    fail(train, "a positive integer that fits in 64 bits");
  }
  if (train.value <= 0) {
    fail(train, "a positive integer (DeepSpeed: train batch size has to be greater than 0)");
  }
  if (micro.value <= 0) {
    fail(micro,
         "a positive integer (DeepSpeed: micro batch size per gpu has to be greater than 0)");
  }
  if (accum.value <= 0) {
    fail(accum,
         "a positive integer (DeepSpeed: gradient accumulation steps has to be greater than 0)");
  }
  // All three are positive and at most 2^63, so the product fits unless it is already too big.
  const Wide partial = micro.value * accum.value;
  const bool productTooBig = partial > kWideInt64Max || partial * ws > kWideInt64Max;
  if (productTooBig || train.value != partial * ws) {
    fail(train,
         fmt::format("{} * {} * world size ({} != {} * {} * {})", kMicroBatch, kGradAccum,
                     toText(train.value), toText(micro.value), toText(accum.value), dpWorldSize));
  }
  return BatchTriple{static_cast<std::int64_t>(train.value), static_cast<std::int64_t>(micro.value),
                     static_cast<std::int64_t>(accum.value)};
}

}  // namespace stretch::config
