#include "tools/comm_bench.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "runtime/comm/bandwidth.hpp"
#include "runtime/comm/reduce.hpp"
#include "runtime/common/error.hpp"

namespace stretch::tools {

using stretch::comm::BufferView;
using stretch::comm::ReduceOp;

std::optional<std::uint64_t> parseByteSize(std::string_view text) noexcept {
  std::uint64_t value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  const auto [next, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || next == begin)
    return std::nullopt;
  std::string_view suffix(next, static_cast<std::size_t>(end - next));
  int shift = 0;
  if (!suffix.empty()) {
    switch (suffix.front()) {
      case 'k':
      case 'K':
        shift = 10;
        break;
      case 'm':
      case 'M':
        shift = 20;
        break;
      case 'g':
      case 'G':
        shift = 30;
        break;
      case 't':
      case 'T':
        shift = 40;
        break;
      default:
        break;
    }
    if (shift != 0)
      suffix.remove_prefix(1);
    if (shift != 0 && (suffix == "i" || suffix == "iB" || suffix == "ib"))
      suffix = {};
    if (suffix == "B" || suffix == "b")
      suffix = {};
    if (!suffix.empty())
      return std::nullopt;
  }
  if (value == 0 || value > (std::numeric_limits<std::uint64_t>::max() >> shift))
    return std::nullopt;
  return value << shift;
}

std::string formatByteSize(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"", "K", "M", "G", "T"};
  std::size_t unit = 0;
  while (unit + 1 < std::size(kUnits) && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return fmt::format("{}{}", bytes, kUnits[unit]);
}

std::vector<std::uint64_t> sweepSizes(std::uint64_t minBytes, std::uint64_t maxBytes) {
  std::vector<std::uint64_t> sizes;
  if (minBytes == 0)
    return sizes;
  for (std::uint64_t size = minBytes; size <= maxBytes; size *= 2) {
    sizes.push_back(size);
    if (size > maxBytes / 2)
      break;
  }
  return sizes;
}

std::uint64_t opBytes(OpType op, std::uint64_t size, int ranks, DataType dtype) noexcept {
  std::uint64_t unit = stretch::comm::elementSize(dtype);
  if (op == OpType::AllGather || op == OpType::ReduceScatter || op == OpType::AllToAll)
    unit *= static_cast<std::uint64_t>(std::max(ranks, 1));
  return std::max<std::uint64_t>(size / unit, 1) * unit;
}

IterationPlan iterationPlan(std::uint64_t bytes, std::optional<int> warmup,
                            std::optional<int> iters) noexcept {
  constexpr std::uint64_t kTimedBudget = 512ull << 20;
  constexpr std::uint64_t kWarmupBudget = 128ull << 20;
  const std::uint64_t b = std::max<std::uint64_t>(bytes, 1);
  IterationPlan plan;
  plan.iters =
      iters ? *iters : static_cast<int>(std::clamp<std::uint64_t>(kTimedBudget / b, 2, 20));
  plan.warmup =
      warmup ? *warmup : static_cast<int>(std::clamp<std::uint64_t>(kWarmupBudget / b, 1, 5));
  return plan;
}

nlohmann::ordered_json toJson(const BenchRow& row) {
  nlohmann::ordered_json j;
  j["op"] = std::string(stretch::comm::toString(row.op));
  j["ranks"] = row.ranks;
  j["bytes"] = row.bytes;
  j["time_us"] = row.timeUs;
  j["algbw_gbps"] = row.algbwGBps;
  j["busbw_gbps"] = row.busbwGBps;
  j["wrong"] = row.wrong;
  return j;
}

BenchRow rowFromJson(const nlohmann::json& json) {
  auto field = [&](const char* name) -> const nlohmann::json& {
    if (!json.is_object() || !json.contains(name))
      throw Error(fmt::format("benchmark row {}: missing field \"{}\"", json.dump(), name));
    return json.at(name);
  };
  try {
    BenchRow row;
    const std::string opName = field("op").get<std::string>();
    const auto op = stretch::comm::parseOpType(opName);
    if (!op)
      throw Error(fmt::format("benchmark row {}: op = \"{}\": expected an operation name",
                              json.dump(), opName));
    row.op = *op;
    row.ranks = field("ranks").get<int>();
    row.bytes = field("bytes").get<std::uint64_t>();
    row.timeUs = field("time_us").get<double>();
    row.algbwGBps = field("algbw_gbps").get<double>();
    row.busbwGBps = field("busbw_gbps").get<double>();
    row.wrong = field("wrong").get<std::int64_t>();
    return row;
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("benchmark row {}: {}", json.dump(), e.what()));
  }
}

std::int64_t inputModulus(DataType dtype, int ranks) noexcept {
  std::int64_t exact = 0;  // the largest integer the dtype holds exactly (and all below it)
  switch (dtype) {
    case DataType::Float32:
      exact = 1 << 24;
      break;
    case DataType::Float16:
      exact = 1 << 11;
      break;
    case DataType::BFloat16:
      exact = 1 << 8;
      break;
    case DataType::UInt8:
      exact = 255;
      break;
    case DataType::Float64:
    case DataType::Int32:
    case DataType::Int64:
      exact = std::numeric_limits<std::int32_t>::max();
      break;
  }
  return std::clamp<std::int64_t>(exact / std::max(ranks, 1), 1, 61);
}

namespace {

// Reads and writes the integers of the checked operation in a buffer of one dtype.
template <typename Storage, typename Encode, typename Decode>
struct Codec {
  using T = Storage;
  Encode encode;  // int64 -> Storage
  Decode decode;  // Storage -> double
};

template <typename Storage, typename Encode, typename Decode>
Codec<Storage, Encode, Decode> makeCodec(Encode e, Decode d) {
  return {e, d};
}

template <typename F>
void withCodec(DataType dtype, F&& f) {
  switch (dtype) {
    case DataType::Float32:
      return f(makeCodec<float>([](std::int64_t v) { return static_cast<float>(v); },
                                [](float x) { return static_cast<double>(x); }));
    case DataType::Float64:
      return f(makeCodec<double>([](std::int64_t v) { return static_cast<double>(v); },
                                 [](double x) { return x; }));
    case DataType::Int32:
      return f(makeCodec<std::int32_t>([](std::int64_t v) { return static_cast<std::int32_t>(v); },
                                       [](std::int32_t x) { return static_cast<double>(x); }));
    case DataType::Int64:
      return f(makeCodec<std::int64_t>([](std::int64_t v) { return v; },
                                       [](std::int64_t x) { return static_cast<double>(x); }));
    case DataType::UInt8:
      return f(makeCodec<std::uint8_t>([](std::int64_t v) { return static_cast<std::uint8_t>(v); },
                                       [](std::uint8_t x) { return static_cast<double>(x); }));
    case DataType::Float16:
      return f(makeCodec<std::uint16_t>(
          [](std::int64_t v) { return stretch::comm::floatToHalf(static_cast<float>(v)); },
          [](std::uint16_t x) { return static_cast<double>(stretch::comm::halfToFloat(x)); }));
    case DataType::BFloat16:
      return f(makeCodec<std::uint16_t>(
          [](std::int64_t v) { return stretch::comm::floatToBfloat16(static_cast<float>(v)); },
          [](std::uint16_t x) { return static_cast<double>(stretch::comm::bfloat16ToFloat(x)); }));
  }
}

// One row's buffers. `input` is the buffer the operation reads (and, for all_reduce and
// broadcast, writes); `output` is the separate output of all_gather and reduce_scatter.
struct RowBuffers {
  std::vector<std::byte> input;
  std::vector<std::byte> output;
  BufferView inputView;
  BufferView outputView;
};

RowBuffers makeBuffers(OpType op, std::uint64_t bytes, int ranks, DataType dtype) {
  const std::size_t elt = stretch::comm::elementSize(dtype);
  const std::size_t total = static_cast<std::size_t>(bytes) / elt;
  const auto n = static_cast<std::size_t>(ranks);
  std::size_t inCount = total;
  std::size_t outCount = 0;
  if (op == OpType::AllGather) {
    inCount = total / n;
    outCount = total;
  } else if (op == OpType::ReduceScatter) {
    outCount = total / n;
  }
  RowBuffers b;
  b.input.resize(inCount * elt);
  b.output.resize(outCount * elt);
  b.inputView = {b.input.data(), inCount, dtype};
  b.outputView = {b.output.data(), outCount, dtype};
  return b;
}

void runOnce(Backend& backend, OpType op, RowBuffers& b) {
  switch (op) {
    case OpType::AllReduce:
      backend.allReduce(b.inputView, ReduceOp::Sum)->wait();
      return;
    case OpType::Broadcast:
      backend.broadcast(b.inputView, 0)->wait();
      return;
    case OpType::AllGather:
      backend.allGather(b.inputView, b.outputView)->wait();
      return;
    case OpType::ReduceScatter:
      backend.reduceScatter(b.inputView, b.outputView, ReduceOp::Sum)->wait();
      return;
    default:
      throw ConfigError(
          fmt::format("--op = {}: expected one of all_reduce, all_gather, "
                      "reduce_scatter, broadcast",
                      stretch::comm::toString(op)));
  }
}

// Fills the input with this rank's integers, the output with zeros.
void fillChecked(RowBuffers& b, int rank, std::int64_t modulus) {
  std::fill(b.output.begin(), b.output.end(), std::byte{0});
  withCodec(b.inputView.dtype, [&](auto codec) {
    using T = typename decltype(codec)::T;
    auto* in = static_cast<T*>(b.inputView.data);
    for (std::size_t i = 0; i < b.inputView.count; ++i)
      in[i] = codec.encode(inputValue(rank, i, modulus));
  });
}

// Elements of this rank's result that differ from what the checked operation must produce.
std::int64_t countWrong(OpType op, const RowBuffers& b, int rank, int ranks, std::int64_t modulus) {
  // inputValue(r, i) depends on i only through i % modulus, so the sums over the ranks do too.
  std::vector<double> sumOf(static_cast<std::size_t>(modulus), 0.0);
  for (std::int64_t k = 0; k < modulus; ++k) {
    for (int r = 0; r < ranks; ++r)
      sumOf[static_cast<std::size_t>(k)] +=
          static_cast<double>(inputValue(r, static_cast<std::uint64_t>(k), modulus));
  }
  const auto m = static_cast<std::uint64_t>(modulus);
  std::int64_t wrong = 0;
  withCodec(b.inputView.dtype, [&](auto codec) {
    using T = typename decltype(codec)::T;
    switch (op) {
      case OpType::AllReduce: {
        const auto* x = static_cast<const T*>(b.inputView.data);
        for (std::size_t i = 0; i < b.inputView.count; ++i)
          wrong += codec.decode(x[i]) != sumOf[i % m];
        break;
      }
      case OpType::Broadcast: {
        const auto* x = static_cast<const T*>(b.inputView.data);
        for (std::size_t i = 0; i < b.inputView.count; ++i)
          wrong += codec.decode(x[i]) != static_cast<double>(inputValue(0, i, modulus));
        break;
      }
      case OpType::AllGather: {
        const auto* x = static_cast<const T*>(b.outputView.data);
        const std::size_t c = b.inputView.count;
        for (std::size_t i = 0; i < b.outputView.count; ++i)
          wrong += codec.decode(x[i]) !=
                   static_cast<double>(inputValue(static_cast<int>(i / c), i % c, modulus));
        break;
      }
      case OpType::ReduceScatter: {
        const auto* x = static_cast<const T*>(b.outputView.data);
        const std::size_t c = b.outputView.count;
        const std::size_t base = static_cast<std::size_t>(rank) * c;
        for (std::size_t i = 0; i < c; ++i)
          wrong += codec.decode(x[i]) != sumOf[(base + i) % m];
        break;
      }
      default:
        break;
    }
  });
  return wrong;
}

template <typename T>
T reduceScalar(Backend& backend, T value, ReduceOp op) {
  backend.allReduce(BufferView::of(std::span<T>(&value, 1)), op)->wait();
  return value;
}

}  // namespace

std::vector<BenchRow> runSweep(Backend& backend, const SweepOptions& options,
                               const std::function<void(const BenchRow&)>& onRow) {
  if (!backend.supportsDevice(stretch::comm::DeviceType::Cpu))
    throw ConfigError(
        fmt::format("--backend = {}: expected a backend for CPU buffers", backend.name()));
  const std::vector<std::uint64_t> sizes = sweepSizes(options.minBytes, options.maxBytes);
  if (sizes.empty())
    throw ConfigError(fmt::format("--min-bytes = {}, --max-bytes = {}: expected 1 <= min <= max",
                                  options.minBytes, options.maxBytes));
  const auto now = [&options]() -> std::chrono::nanoseconds {
    if (options.clock)
      return options.clock();
    return std::chrono::steady_clock::now().time_since_epoch();
  };
  const int rank = backend.rank();
  const int ranks = backend.size();
  const std::int64_t modulus = inputModulus(options.dtype, ranks);
  std::vector<BenchRow> rows;
  for (const OpType op : options.ops) {
    std::uint64_t previous = 0;
    for (const std::uint64_t size : sizes) {
      const std::uint64_t bytes = opBytes(op, size, ranks, options.dtype);
      if (bytes == previous)
        continue;
      previous = bytes;
      const IterationPlan plan = iterationPlan(bytes, options.warmup, options.iters);
      RowBuffers buffers = makeBuffers(op, bytes, ranks, options.dtype);

      for (int i = 0; i < plan.warmup; ++i)
        runOnce(backend, op, buffers);
      backend.barrier()->wait();
      const auto start = now();
      for (int i = 0; i < plan.iters; ++i)
        runOnce(backend, op, buffers);
      const auto end = now();
      const double seconds =
          std::chrono::duration<double>(end - start).count() / std::max(plan.iters, 1);

      fillChecked(buffers, rank, modulus);
      runOnce(backend, op, buffers);
      const std::int64_t wrong = countWrong(op, buffers, rank, ranks, modulus);

      BenchRow row;
      row.op = op;
      row.ranks = ranks;
      row.bytes = bytes;
      const double maxSeconds = reduceScalar(backend, seconds, ReduceOp::Max);
      row.timeUs = maxSeconds * 1e6;
      const auto bw = stretch::comm::computeBandwidth(op, bytes, maxSeconds, ranks);
      row.algbwGBps = bw.algbwGBps;
      row.busbwGBps = bw.busbwGBps;
      row.wrong = reduceScalar(backend, wrong, ReduceOp::Sum);
      rows.push_back(row);
      if (onRow)
        onRow(row);
    }
  }
  return rows;
}

}  // namespace stretch::tools
