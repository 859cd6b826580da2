// all_to_all and barrier (runtime/comm/collectives/algorithms.hpp).

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "runtime/comm/collectives/algorithms.hpp"
#include "runtime/comm/collectives/internal.hpp"

namespace stretch::comm::collectives {
namespace {

bool overlaps(const void* a, std::size_t aBytes, const void* b, std::size_t bBytes) {
  const auto* pa = static_cast<const std::byte*>(a);
  const auto* pb = static_cast<const std::byte*>(b);
  return pa < pb + bBytes && pb < pa + aBytes;
}

}  // namespace

void allToAll(Channel& ch, const BufferView& input, const BufferView& output) {
  const int n = ch.size();
  const int r = ch.rank();
  const std::size_t block = input.bytes() / static_cast<std::size_t>(n);
  const std::uint64_t slot = ch.nextSlot();
  void* source = input.data;
  if (overlaps(input.data, input.bytes(), output.data, output.bytes())) {
    source = ch.scratch(input.bytes());
    std::memcpy(source, input.data, input.bytes());
  }
  Buffer* in = ch.buffer(source, input.bytes());
  Buffer* out = ch.buffer(output.data, output.bytes());
  ch.post([=] {
    for (int k = 1; k < n; ++k) {
      const int from = (r - k + n) % n;
      out->recv(from, slot, static_cast<std::size_t>(from) * block, block);
    }
    for (int k = 1; k < n; ++k) {
      const int to = (r + k) % n;
      in->send(to, slot, static_cast<std::size_t>(to) * block, block);
    }
  });
  std::memcpy(bytePtr(output.data) + static_cast<std::size_t>(r) * block,
              bytePtr(source) + static_cast<std::size_t>(r) * block, block);
  for (int k = 1; k < n; ++k) {
    ch.waitRecv(out);
    ch.waitSend(in);
  }
}

// Dissemination barrier: ceil(log2 n) rounds of one-byte messages to rank + 2^i.
void barrier(Channel& ch) {
  const int n = ch.size();
  const int r = ch.rank();
  const std::uint64_t slot = ch.nextSlot();
  std::byte* bytes = ch.scratch(2);
  Buffer* out = ch.buffer(bytes, 1);
  Buffer* in = ch.buffer(bytes + 1, 1);
  std::uint64_t round = 0;
  for (int distance = 1; distance < n; distance *= 2, ++round) {
    const int to = (r + distance) % n;
    const int from = (r - distance + n) % n;
    const std::uint64_t s = slot + round;
    ch.post([=] {
      in->recv(from, s, 0, 1);
      out->send(to, s, 0, 1);
    });
    ch.waitRecv(in);
    ch.waitSend(out);
  }
}

}  // namespace stretch::comm::collectives
