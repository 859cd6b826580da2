#include "runtime/agent/clock.hpp"

#include <fmt/format.h>

namespace stretch::agent {

Clock systemClock() {
  return [] {
    return std::chrono::duration_cast<Time>(std::chrono::system_clock::now().time_since_epoch());
  };
}

}  // namespace stretch::agent
