#include "runtime/common/ports.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <fstream>
#include <netinet/in.h>
#include <random>
#include <sstream>
#include <sys/socket.h>
#include <unistd.h>

namespace stretch {

PortRange parsePortRange(const std::string& text) {
  std::istringstream in(text);
  PortRange range;
  int low = 0;
  int high = 0;
  if (in >> low >> high && low >= 1 && low <= high && high <= 65535) {
    range.low = low;
    range.high = high;
  }
  return range;
}

PortRange ephemeralPortRange() {
  std::ifstream file("/proc/sys/net/ipv4/ip_local_port_range");
  std::stringstream text;
  text << file.rdbuf();
  return parsePortRange(text.str());
}

bool loopbackPortFree(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool free = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return free;
}

int freePortOutsideEphemeralRange(int alsoFree, std::uint32_t seed) {
  const PortRange range = ephemeralPortRange();
  const bool below = range.low >= 13024;  // room for 12,000 ports above 1024
  const int first = below ? range.low - 12000 : std::min(range.high + 1, 65000);
  const int last = below ? range.low : 65535;
  const auto span = static_cast<unsigned>(std::max(1, last - first - alsoFree));
  std::mt19937 rng(seed);
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int port = first + static_cast<int>(rng() % span);
    bool free = true;
    for (int i = 0; i <= alsoFree && free; ++i)
      free = loopbackPortFree(port + i);
    if (free)
      return port;
  }
  return first + static_cast<int>(rng() % span);
}

}  // namespace stretch
