#include "tests/runtime/engine/fs_trap.hpp"

#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <execinfo.h>
#include <unistd.h>

namespace {

void say(const char* text) {
  std::size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t put = ::write(STDERR_FILENO, text, left);
    if (put <= 0)
      return;
    text += put;
    left -= static_cast<std::size_t>(put);
  }
}

}  // namespace

extern "C" void stretch_fs_trapped(const char* mangled) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  say("std::filesystem trap: ");
  say(status == 0 && demangled != nullptr ? demangled : mangled);
  say(" (");
  say(mangled);
  say(") was called: code under test uses std::filesystem, whose functions PyTorch 2.11's "
      "libtorch.so exports its own copies of (docs/gpu.md); use runtime/common/posix_files.hpp\n");
  void* frames[64];
  const int depth = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, depth, STDERR_FILENO);
  std::abort();
}
