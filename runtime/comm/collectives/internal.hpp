#pragma once
// What the algorithm files of this folder share: the Buffer name and splitting a buffer into one
// block per rank. Private to runtime/comm/collectives.

#include <algorithm>
#include <cstddef>

#include "runtime/comm/collectives/channel.hpp"

namespace stretch::comm::collectives {

using Buffer = Channel::Buffer;

// `count` elements in blocks of `block` (the last ones shorter or empty).
struct BlockLayout {
  std::size_t count;
  std::size_t block;
  std::size_t offset(int j) const noexcept {
    return std::min(count, block * static_cast<std::size_t>(j));
  }
  std::size_t size(int j) const noexcept { return offset(j + 1) - offset(j); }
};

inline BlockLayout splitEvenly(std::size_t count, int parts) {
  const auto n = static_cast<std::size_t>(parts);
  return {count, (count + n - 1) / n};
}

inline std::byte* bytePtr(void* p) {
  return static_cast<std::byte*>(p);
}

}  // namespace stretch::comm::collectives
