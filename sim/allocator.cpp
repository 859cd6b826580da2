#include "sim/allocator.hpp"

#include <cstdlib>  // defines __GLIBC__ on glibc systems

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace stretch::sim {

void tuneAllocatorForSimulation() noexcept {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_TOP_PAD, 256 << 20);
#endif
}

}  // namespace stretch::sim
