// all_reduce and reduce_scatter (runtime/comm/collectives/algorithms.hpp).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/comm/collectives/algorithms.hpp"
#include "runtime/comm/collectives/internal.hpp"
#include "runtime/comm/reduce.hpp"

namespace stretch::comm::collectives {
namespace {

// Below this (times the number of recursive-doubling steps) all_reduce exchanges whole
// buffers; above it, reduce-scatter + all-gather moves each byte 2(n-1)/n times only.
constexpr std::size_t kRecursiveDoublingBytes = std::size_t{512} << 10;
// Reduce-scatter scratch per operation; larger operations run in pieces.
constexpr std::size_t kScratchLimitBytes = std::size_t{32} << 20;

// Recursive doubling: log2(n) exchanges of the whole buffer; ranks beyond the largest power of
// two fold into a partner first and get the result back at the end. Both sides of an exchange
// compute op(mine, theirs) with commutative ops, so every rank ends bit-identical.
void allReduceRecursiveDoubling(Channel& ch, std::byte* data, std::size_t count, DataType dtype,
                                ReduceOp op) {
  const int n = ch.size();
  const int r = ch.rank();
  const std::size_t bytes = count * elementSize(dtype);
  int pof2 = 1;
  while (pof2 * 2 <= n)
    pof2 *= 2;
  const int extra = n - pof2;
  const std::uint64_t slot = ch.nextSlot();
  Buffer* buf = ch.buffer(data, bytes);
  if (r >= pof2) {
    const int partner = r - pof2;
    ch.post([=] {
      buf->send(partner, slot, 0, bytes);
      buf->recv(partner, slot + 1, 0, bytes);
    });
    ch.waitSend(buf);
    ch.waitRecv(buf);
    return;
  }
  std::byte* tmp = ch.scratch(bytes);
  Buffer* tb = ch.buffer(tmp, bytes);
  if (r < extra) {
    ch.post([=] { tb->recv(r + pof2, slot, 0, bytes); });
    ch.waitRecv(tb);
    reduceInto(dtype, op, data, tmp, count);
  }
  std::uint64_t step = 2;
  for (int mask = 1; mask < pof2; mask <<= 1, ++step) {
    const int peer = r ^ mask;
    const std::uint64_t s = slot + step;
    ch.post([=] {
      tb->recv(peer, s, 0, bytes);
      buf->send(peer, s, 0, bytes);
    });
    ch.waitRecv(tb);
    ch.waitSend(buf);
    reduceInto(dtype, op, data, tmp, count);
  }
  if (r < extra) {
    ch.post([=] { buf->send(r + pof2, slot + 1, 0, bytes); });
    ch.waitSend(buf);
  }
}

// Reduce-scatter then all-gather, each as one round of direct messages: rank j reduces block j
// (in a fixed source order) and sends it to everyone. Every byte crosses 2(n-1)/n times, with
// two synchronisation points instead of a ring's 2(n-1).
void allReduceDirectPiece(Channel& ch, std::byte* data, std::size_t count, DataType dtype,
                          ReduceOp op) {
  const int n = ch.size();
  const int r = ch.rank();
  const std::size_t es = elementSize(dtype);
  const BlockLayout blocks = splitEvenly(count, n);
  const std::size_t mine = blocks.size(r);
  const std::uint64_t slot = ch.nextSlot();
  Buffer* buf = ch.buffer(data, count * es);
  std::byte* tmp =
      ch.scratch(std::max<std::size_t>(1, static_cast<std::size_t>(n - 1) * mine * es));
  std::vector<Buffer*> parts(static_cast<std::size_t>(n), nullptr);
  if (mine > 0) {
    for (int k = 1; k < n; ++k)
      parts[static_cast<std::size_t>(k)] =
          ch.buffer(tmp + static_cast<std::size_t>(k - 1) * mine * es, mine * es);
  }
  ch.post([=] {
    for (int k = 1; k < n; ++k) {
      const int src = (r - k + n) % n;
      if (mine > 0)
        parts[static_cast<std::size_t>(k)]->recv(src, slot, 0, mine * es);
    }
    for (int k = 1; k < n; ++k) {
      const int dst = (r + k) % n;
      if (blocks.size(dst) > 0)
        buf->send(dst, slot, blocks.offset(dst) * es, blocks.size(dst) * es);
    }
    for (int k = 1; k < n; ++k) {
      const int src = (r - k + n) % n;
      if (blocks.size(src) > 0)
        buf->recv(src, slot + 1, blocks.offset(src) * es, blocks.size(src) * es);
    }
  });
  std::byte* block = data + blocks.offset(r) * es;
  for (int k = 1; k < n; ++k) {
    if (mine == 0)
      break;
    ch.waitRecv(parts[static_cast<std::size_t>(k)]);
    reduceInto(dtype, op, block, tmp + static_cast<std::size_t>(k - 1) * mine * es, mine);
  }
  if (op == ReduceOp::Avg)
    finishAverage(dtype, block, mine, n);
  for (int k = 1; k < n; ++k) {
    if (blocks.size((r + k) % n) > 0)
      ch.waitSend(buf);
  }
  if (mine > 0) {
    ch.post([=] {
      for (int k = 1; k < n; ++k)
        buf->send((r + k) % n, slot + 1, blocks.offset(r) * es, mine * es);
    });
  }
  for (int k = 1; k < n; ++k) {
    if (blocks.size((r - k + n) % n) > 0)
      ch.waitRecv(buf);
    if (mine > 0)
      ch.waitSend(buf);
  }
}

void allReduceDirect(Channel& ch, std::byte* data, std::size_t count, DataType dtype, ReduceOp op) {
  const auto n = static_cast<std::size_t>(ch.size());
  const std::size_t es = elementSize(dtype);
  // Scratch holds (n-1) blocks of piece/n elements.
  const std::size_t piece = std::max(n, kScratchLimitBytes / es / (n - 1) * n);
  for (std::size_t start = 0; start < count; start += piece) {
    allReduceDirectPiece(ch, data + start * es, std::min(piece, count - start), dtype, op);
  }
}

}  // namespace

void allReduce(Channel& ch, void* data, std::size_t count, DataType dtype, ReduceOp op) {
  int steps = 0;
  for (int p = 1; p * 2 <= ch.size(); p *= 2)
    ++steps;
  const std::size_t bytes = count * elementSize(dtype);
  if (bytes * static_cast<std::size_t>(std::max(steps, 1)) <= kRecursiveDoublingBytes) {
    allReduceRecursiveDoubling(ch, bytePtr(data), count, dtype, op);
    if (op == ReduceOp::Avg)
      finishAverage(dtype, data, count, ch.size());
  } else {
    allReduceDirect(ch, bytePtr(data), count, dtype, op);
  }
}

// Rank j gets block j of every input; reduced in a fixed source order, in pieces that bound the
// scratch memory.
void reduceScatter(Channel& ch, const BufferView& input, const BufferView& output, ReduceOp op) {
  const int n = ch.size();
  const int r = ch.rank();
  const DataType dtype = output.dtype;
  const std::size_t es = elementSize(dtype);
  const std::size_t m = output.count;
  const std::size_t piece = std::max<std::size_t>(
      1, std::min(m, kScratchLimitBytes / es / static_cast<std::size_t>(n - 1)));
  Buffer* in = ch.buffer(input.data, input.bytes());
  std::byte* tmp = ch.scratch(static_cast<std::size_t>(n - 1) * piece * es);
  std::vector<Buffer*> parts(static_cast<std::size_t>(n), nullptr);
  for (int k = 1; k < n; ++k)
    parts[static_cast<std::size_t>(k)] =
        ch.buffer(tmp + static_cast<std::size_t>(k - 1) * piece * es, piece * es);
  std::byte* out = bytePtr(output.data);
  const std::byte* src = static_cast<const std::byte*>(input.data);
  for (std::size_t start = 0; start < m; start += piece) {
    const std::size_t len = std::min(piece, m - start);
    const std::uint64_t slot = ch.nextSlot();
    ch.post([=] {
      for (int k = 1; k < n; ++k)
        parts[static_cast<std::size_t>(k)]->recv((r - k + n) % n, slot, 0, len * es);
      for (int k = 1; k < n; ++k) {
        const int dst = (r + k) % n;
        in->send(dst, slot, (static_cast<std::size_t>(dst) * m + start) * es, len * es);
      }
    });
    std::memmove(out + start * es, src + (static_cast<std::size_t>(r) * m + start) * es, len * es);
    for (int k = 1; k < n; ++k) {
      ch.waitRecv(parts[static_cast<std::size_t>(k)]);
      reduceInto(dtype, op, out + start * es, tmp + static_cast<std::size_t>(k - 1) * piece * es,
                 len);
    }
    for (int k = 1; k < n; ++k)
      ch.waitSend(in);
  }
  if (op == ReduceOp::Avg)
    finishAverage(dtype, output.data, m, n);
}

}  // namespace stretch::comm::collectives
