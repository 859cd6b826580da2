#pragma once
// This host's addresses, as the launcher and node agents announce them to each other.
// Never throw: without a usable interface or route the answer is "127.0.0.1".

#include <string>

namespace stretch::launcher {

// The first IPv4 address of an interface that is up and not loopback.
std::string hostAddress();

// The local address this host uses to reach `peer` (a UDP socket's source address; nothing is
// sent).
std::string localAddressTowards(const std::string& peer);

}  // namespace stretch::launcher
