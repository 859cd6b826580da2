// broadcast and all_gather (runtime/comm/collectives/algorithms.hpp).

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "runtime/comm/collectives/algorithms.hpp"
#include "runtime/comm/collectives/internal.hpp"

namespace stretch::comm::collectives {
namespace {

// Broadcasts from this size on (3+ ranks) scatter then all-gather, so the root sends ~2x the
// buffer instead of (n-1)x.
constexpr std::size_t kScatterBroadcastBytes = std::size_t{1} << 20;

void broadcastDirect(Channel& ch, std::byte* data, std::size_t bytes, int root) {
  const int n = ch.size();
  const int r = ch.rank();
  const std::uint64_t slot = ch.nextSlot();
  Buffer* buf = ch.buffer(data, bytes);
  if (r == root) {
    ch.post([=] {
      for (int k = 1; k < n; ++k)
        buf->send((root + k) % n, slot, 0, bytes);
    });
    for (int k = 1; k < n; ++k)
      ch.waitSend(buf);
  } else {
    ch.post([=] { buf->recv(root, slot, 0, bytes); });
    ch.waitRecv(buf);
  }
}

// The root sends block j to rank j and its own block to everyone; every other rank forwards
// its block to the others.
void broadcastScatterAllGather(Channel& ch, std::byte* data, std::size_t count, std::size_t es,
                               int root) {
  const int n = ch.size();
  const int r = ch.rank();
  const BlockLayout blocks = splitEvenly(count, n);
  const std::uint64_t slot = ch.nextSlot();
  Buffer* buf = ch.buffer(data, count * es);
  if (r == root) {
    int sends = 0;
    for (int j = 0; j < n; ++j) {
      if (j == root)
        continue;
      sends += (blocks.size(j) > 0 ? 1 : 0) + (blocks.size(root) > 0 ? 1 : 0);
    }
    ch.post([=] {
      for (int k = 1; k < n; ++k) {
        const int j = (root + k) % n;
        if (blocks.size(j) > 0)
          buf->send(j, slot, blocks.offset(j) * es, blocks.size(j) * es);
        if (blocks.size(root) > 0)
          buf->send(j, slot + 1, blocks.offset(root) * es, blocks.size(root) * es);
      }
    });
    for (int i = 0; i < sends; ++i)
      ch.waitSend(buf);
    return;
  }
  const std::size_t mine = blocks.size(r);
  Buffer* own = mine > 0 ? ch.buffer(data + blocks.offset(r) * es, mine * es) : nullptr;
  int recvs = 0;
  for (int j = 0; j < n; ++j) {
    if (j != r && blocks.size(j) > 0)
      ++recvs;
  }
  ch.post([=] {
    if (own != nullptr)
      own->recv(root, slot, 0, mine * es);
    for (int k = 1; k < n; ++k) {
      const int j = (r + k) % n;
      if (blocks.size(j) > 0)
        buf->recv(j, slot + 1, blocks.offset(j) * es, blocks.size(j) * es);
    }
  });
  int forwards = 0;
  if (own != nullptr) {
    ch.waitRecv(own);
    for (int j = 0; j < n; ++j)
      forwards += (j != r && j != root) ? 1 : 0;
    ch.post([=] {
      for (int k = 1; k < n; ++k) {
        const int j = (r + k) % n;
        if (j != root)
          own->send(j, slot + 1, 0, mine * es);
      }
    });
  }
  for (int i = 0; i < recvs; ++i)
    ch.waitRecv(buf);
  for (int i = 0; i < forwards; ++i)
    ch.waitSend(own);
}

}  // namespace

void broadcast(Channel& ch, void* data, std::size_t count, DataType dtype, int root) {
  const std::size_t bytes = count * elementSize(dtype);
  if (ch.size() >= 3 && bytes >= kScatterBroadcastBytes) {
    broadcastScatterAllGather(ch, bytePtr(data), count, elementSize(dtype), root);
  } else {
    broadcastDirect(ch, bytePtr(data), bytes, root);
  }
}

void allGather(Channel& ch, const BufferView& input, const BufferView& output) {
  const int n = ch.size();
  const int r = ch.rank();
  const std::size_t bytes = input.bytes();
  const std::uint64_t slot = ch.nextSlot();
  Buffer* in = ch.buffer(input.data, bytes);
  Buffer* out = ch.buffer(output.data, output.bytes());
  ch.post([=] {
    for (int k = 1; k < n; ++k) {
      const int src = (r - k + n) % n;
      out->recv(src, slot, static_cast<std::size_t>(src) * bytes, bytes);
    }
    for (int k = 1; k < n; ++k)
      in->send((r + k) % n, slot, 0, bytes);
  });
  std::byte* own = bytePtr(output.data) + static_cast<std::size_t>(r) * bytes;
  if (own != input.data)
    std::memmove(own, input.data, bytes);
  for (int k = 1; k < n; ++k) {
    ch.waitRecv(out);
    ch.waitSend(in);
  }
}

}  // namespace stretch::comm::collectives
