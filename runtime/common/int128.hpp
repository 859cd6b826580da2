#pragma once
// 128-bit integers (a GCC/Clang extension) for overflow-free products of 64-bit values.
// __extension__ keeps -Wpedantic quiet about the non-standard type.

namespace stretch {

__extension__ using Int128 = __int128;
__extension__ using UInt128 = unsigned __int128;

}  // namespace stretch
