#pragma once
// TCP ports on this host: the kernel's ephemeral range and free loopback ports outside it.
//
// A server that binds a port chosen earlier (the job store on --master_port, a test's launch, the
// bench's ranks) can lose it to any outgoing connection in between when the port is inside the
// ephemeral range, from which the kernel draws connections' source ports. Ports drawn below that
// range (freePortOutsideEphemeralRange) are taken only by another server.

#include <cstdint>
#include <string>

namespace stretch {

struct PortRange {
  int low = 32768;  // Linux's default
  int high = 60999;
  bool contains(int port) const noexcept { return port >= low && port <= high; }
};

// The range in `text` ("LOW HIGH", as /proc/sys/net/ipv4/ip_local_port_range holds it), or
// Linux's default when the text is not such a pair.
PortRange parsePortRange(const std::string& text);
// This host's ephemeral port range (net.ipv4.ip_local_port_range); the default when unreadable.
PortRange ephemeralPortRange();

// Whether a TCP listener could bind `port` on 127.0.0.1 now.
bool loopbackPortFree(int port);

// A port P such that P .. P + alsoFree are free on 127.0.0.1, drawn at random from the 12,000
// ports below the ephemeral range (above it when there is no room below); after 100 busy draws,
// a draw that was not checked. `seed` varies the draws between processes (their pid, say).
int freePortOutsideEphemeralRange(int alsoFree, std::uint32_t seed);

}  // namespace stretch
