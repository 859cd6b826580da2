// Ports a server binds later: the ephemeral range, the loopback check, the draw outside the range.

#include "runtime/common/ports.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace stretch {
namespace {

TEST(Ports, TheRangeIsReadFromTheKernelsTextOrDefaults) {
  const PortRange r = parsePortRange("32768\t60999\n");
  EXPECT_EQ(r.low, 32768);
  EXPECT_EQ(r.high, 60999);
  EXPECT_TRUE(r.contains(32768));
  EXPECT_TRUE(r.contains(60999));
  EXPECT_FALSE(r.contains(32767));
  EXPECT_FALSE(r.contains(61000));
  const PortRange narrow = parsePortRange("10000 20000");
  EXPECT_EQ(narrow.low, 10000);
  EXPECT_EQ(narrow.high, 20000);
  for (const char* bad : {"", "not a range", "5000", "20000 10000", "0 100", "100 70000"}) {
    const PortRange d = parsePortRange(bad);
    EXPECT_EQ(d.low, 32768) << bad;
    EXPECT_EQ(d.high, 60999) << bad;
  }
  const PortRange here = ephemeralPortRange();
  EXPECT_GE(here.low, 1);
  EXPECT_LE(here.low, here.high);
}

// A listener makes its port busy; the draw skips it and stays outside the ephemeral range.
TEST(Ports, AFreePortIsOutsideTheEphemeralRangeAndNotListenedOn) {
  const PortRange range = ephemeralPortRange();
  const int port = freePortOutsideEphemeralRange(1, 12345);
  EXPECT_FALSE(range.contains(port));
  EXPECT_FALSE(range.contains(port + 1));
  EXPECT_TRUE(loopbackPortFree(port));
  EXPECT_TRUE(loopbackPortFree(port + 1));

  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  EXPECT_FALSE(loopbackPortFree(port));
  // The same seed draws the same sequence: its first port is busy now, so it takes another.
  const int other = freePortOutsideEphemeralRange(1, 12345);
  EXPECT_NE(other, port);
  EXPECT_FALSE(range.contains(other));
  ::close(fd);
  EXPECT_TRUE(loopbackPortFree(port));
}

}  // namespace
}  // namespace stretch
