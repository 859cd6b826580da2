#pragma once
// Traps for the C++ runtime's std::filesystem functions (tests/runtime/engine/fs_trap.cmake).
// STRETCH_FS_TRAP(n, "mangled name") defines, in the executable, a function with that exact
// symbol name: calls that would have reached libstdc++'s std::filesystem function reach it
// instead, as they reach libtorch.so's copies under PyTorch 2.11 (docs/gpu.md). It reports the
// function on stderr, with a backtrace, and aborts.

extern "C" {

// Writes "std::filesystem trap: <demangled> (<mangled>) was called" and a backtrace to stderr,
// then aborts.
[[noreturn]] void stretch_fs_trapped(const char* mangled);

// How many functions fs_traps.cpp traps (every std::filesystem function libstdc++ exports).
extern const int stretch_fs_trap_count;

}  // extern "C"

#define STRETCH_FS_TRAP(n, symbol)                                    \
  extern "C" [[noreturn]] void stretch_fs_trap_##n() __asm__(symbol); \
  extern "C" void stretch_fs_trap_##n() {                             \
    stretch_fs_trapped(symbol);                                       \
  }
