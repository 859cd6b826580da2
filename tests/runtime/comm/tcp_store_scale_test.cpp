// TCPStore at scale (issue 43; runtime/comm/tcp_store.hpp): many waiters parked on one key are
// all woken by one set, waiters that withdraw are forgotten while the others stay parked, a
// storm of clients from one address is served, and the per-address cap on connections waiting
// for their handshake is an option whose default stays 64. No timing is asserted: the speed is
// measured by bench/store_rendezvous.sh against PyTorch's TCPStore.

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <sys/resource.h>
#include <sys/socket.h>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/comm/detail/socket.hpp"
#include "runtime/comm/detail/tcp_store_protocol.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/tcp_store.hpp"

namespace stretch::comm {
namespace {

using namespace std::chrono_literals;
using detail::SteadyClock;
using detail::UniqueFd;
using ::testing::HasSubstr;
namespace proto = detail::tcpstore;

constexpr const char* kToken = "scale-test-token-7c1d";

TcpStoreOptions serverOptions() {
  TcpStoreOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.isServer = true;
  options.token = kToken;
  options.timeout = 30s;
  return options;
}

TcpStoreOptions clientOptions(int port) {
  TcpStoreOptions options;
  options.host = "127.0.0.1";
  options.port = port;
  options.token = kToken;
  options.timeout = 60s;
  return options;
}

// Raises the soft descriptor limit as far as the hard one allows and returns how many
// connections (each costing a descriptor at both ends, in this one process) fit, at most `want`.
int connectionsThatFit(int want) {
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);
  ::getrlimit(RLIMIT_NOFILE, &lim);
  const auto fit = (static_cast<long long>(lim.rlim_cur) - 128) / 2;
  return static_cast<int>(std::clamp<long long>(fit, 0, want));
}

UniqueFd rawConnect(int port) {
  int err = 0;
  std::string text;
  UniqueFd fd = detail::connectOnce("127.0.0.1", port, SteadyClock::now() + 10s, err, text);
  EXPECT_TRUE(fd.valid()) << "connect: " << detail::errnoText(err) << text;
  return fd;
}

bool sendBytes(int fd, const std::string& bytes) {
  int err = 0;
  return detail::sendAll(fd, bytes.data(), bytes.size(), SteadyClock::now() + 10s, err) ==
         detail::IoStatus::Ok;
}

// One whole frame's payload, or nullopt when the peer closed or nothing came in time.
std::optional<std::string> readFrame(int fd, Duration timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  int err = 0;
  char header[4];
  if (detail::recvAll(fd, header, 4, deadline, err) != detail::IoStatus::Ok)
    return std::nullopt;
  std::string payload(proto::decodeU32(header), '\0');
  if (detail::recvAll(fd, payload.data(), payload.size(), deadline, err) != detail::IoStatus::Ok)
    return std::nullopt;
  return payload;
}

bool isReply(const std::optional<std::string>& frame, proto::Reply type) {
  return frame.has_value() && !frame->empty() &&
         static_cast<std::uint8_t>((*frame)[0]) == static_cast<std::uint8_t>(type);
}

// A connection that has passed the handshake (sent in one go, read back in bulk below so a
// few hundred of them do not wait on each other).
UniqueFd helloSent(int port) {
  UniqueFd fd = rawConnect(port);
  EXPECT_TRUE(sendBytes(fd.get(), proto::FrameWriter(proto::Request::Hello)
                                      .u32(proto::kMagic)
                                      .u16(proto::kVersion)
                                      .str(kToken)
                                      .take()));
  return fd;
}

std::vector<UniqueFd> authenticated(int port, int n) {
  std::vector<UniqueFd> fds;
  for (int i = 0; i < n; ++i)
    fds.push_back(helloSent(port));
  for (auto& fd : fds)
    EXPECT_TRUE(isReply(readFrame(fd.get(), 10s), proto::Reply::Ok)) << "handshake failed";
  return fds;
}

std::string waitFrame(const std::string& key) {
  return proto::FrameWriter(proto::Request::Wait).u32(1).str(key).take();
}

// True when nothing at all is waiting to be read on `fd` (a reply that should not exist has had
// the server's whole turn to arrive: the caller makes a round trip on another connection first).
bool nothingPending(int fd) {
  char byte = 0;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

TEST(TcpStoreScale, ManyWaitersOnOneKeyAreAllWokenByOneSet) {
  TcpStore server(serverOptions());
  const int n = connectionsThatFit(512);
  ASSERT_GE(n, 64) << "not even 64 connections fit in RLIMIT_NOFILE";
  std::vector<UniqueFd> waiters = authenticated(server.port(), n);
  for (auto& fd : waiters)
    ASSERT_TRUE(sendBytes(fd.get(), waitFrame("go")));
  // A round trip on another connection, so that a server that answered Waits early would have
  // had its turn to.
  server.set("other", "x");
  EXPECT_EQ(server.get("other"), "x");
  int early = 0;
  for (auto& fd : waiters)
    early += nothingPending(fd.get()) ? 0 : 1;
  EXPECT_EQ(early, 0) << "waiters answered before their key was set";
  server.set("go", "now");
  int woken = 0;
  for (auto& fd : waiters)
    woken += isReply(readFrame(fd.get(), 30s), proto::Reply::Ready) ? 1 : 0;
  EXPECT_EQ(woken, n);
  // Each was woken once and its connection serves requests again.
  for (auto& fd : waiters) {
    ASSERT_TRUE(sendBytes(fd.get(), proto::FrameWriter(proto::Request::Get).str("go").take()));
    const auto value = readFrame(fd.get(), 30s);
    ASSERT_TRUE(isReply(value, proto::Reply::Value)) << "a second Ready, or no reply";
  }
}

TEST(TcpStoreScale, WaitersThatWithdrawAreForgottenAndTheOthersStillWoken) {
  TcpStore server(serverOptions());
  const int n = connectionsThatFit(400) / 2 * 2;
  ASSERT_GE(n, 64) << "not even 64 connections fit in RLIMIT_NOFILE";
  std::vector<UniqueFd> waiters = authenticated(server.port(), n);
  for (auto& fd : waiters)
    ASSERT_TRUE(sendBytes(fd.get(), waitFrame("k")));
  // Every other waiter withdraws (as a client does when its timeout passes), in reverse order
  // so that neither end of the key's waiters is the easy case; the key is still missing.
  for (int i = n - 1; i >= 0; i -= 2) {
    const int fd = waiters[static_cast<std::size_t>(i)].get();
    ASSERT_TRUE(sendBytes(fd, proto::FrameWriter(proto::Request::CancelWait).take()));
    const auto answer = readFrame(fd, 30s);
    ASSERT_TRUE(isReply(answer, proto::Reply::WaitCanceled));
    proto::FrameReader reader(std::string_view(*answer).substr(1));
    EXPECT_EQ(reader.u32(), 1u);  // one key still missing
    EXPECT_EQ(reader.u32(), 0u);  // the first (only) one
    EXPECT_TRUE(reader.complete());
  }
  // A withdrawn waiter waits again on the same key: it must be woken once, not twice.
  const int again = waiters[1].get();
  ASSERT_TRUE(sendBytes(again, waitFrame("k")));
  server.set("k", "v");
  int woken = 0;
  for (int i = 0; i < n; i += 2)
    woken +=
        isReply(readFrame(waiters[static_cast<std::size_t>(i)].get(), 30s), proto::Reply::Ready)
            ? 1
            : 0;
  EXPECT_EQ(woken, n / 2);
  EXPECT_TRUE(isReply(readFrame(again, 30s), proto::Reply::Ready));
  // The withdrawn ones got nothing; each answers its next request with that request's reply.
  int stale = 0;
  for (int i = 1; i < n; i += 2) {
    const int fd = waiters[static_cast<std::size_t>(i)].get();
    ASSERT_TRUE(sendBytes(fd, proto::FrameWriter(proto::Request::Get).str("k").take()));
    stale += isReply(readFrame(fd, 30s), proto::Reply::Value) ? 0 : 1;
  }
  EXPECT_EQ(stale, 0) << "withdrawn waiters were woken after all";
}

TEST(TcpStoreScale, WaitersThatDisconnectAreForgotten) {
  TcpStore server(serverOptions());
  const int baseline = server.server()->openConnections();
  const int n = connectionsThatFit(256);
  ASSERT_GE(n, 64);
  {
    std::vector<UniqueFd> waiters = authenticated(server.port(), n);
    for (auto& fd : waiters)
      ASSERT_TRUE(sendBytes(fd.get(), waitFrame("gone")));
    server.set("sync", "1");  // a round trip after the Waits
  }
  // Closed while parked; the server drops them and a later set wakes no one stale.
  for (int i = 0; i < 600 && server.server()->openConnections() != baseline; ++i)
    std::this_thread::sleep_for(50ms);
  EXPECT_EQ(server.server()->openConnections(), baseline);
  server.set("gone", "x");
  EXPECT_EQ(server.get("gone"), "x");
  EXPECT_EQ(server.server()->openConnections(), baseline);
}

// The rendezvous of bench/store_rendezvous.sh, smaller: clients connect from many threads at
// once (some are turned away by the per-address cap while others' Hellos are unread, and retry),
// then every one adds to a counter, the last sets a key the others wait for, and each reads
// its neighbour's value.
TEST(TcpStoreScale, AConnectionStormFromOneAddressIsServedAndMeetsAtTheBarrier) {
  const int n = connectionsThatFit(1024);
  ASSERT_GE(n, 64);
  TcpStoreOptions options = serverOptions();
  options.isServer = false;
  TcpStoreServer server(options);
  std::atomic<int> wrong{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        TcpStore store(clientOptions(server.port()));
        if (store.add("count", 1) == n)
          store.set("done", "1");
        store.wait({"done"});
        store.set(fmt::format("v/{}", rank), std::to_string(rank));
        const int next = (rank + 1) % n;
        if (store.get(fmt::format("v/{}", next)) != std::to_string(next))
          wrong.fetch_add(1);
      } catch (const std::exception& e) {
        if (failed.fetch_add(1) == 0)
          ADD_FAILURE() << "client " << rank << ": " << e.what();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  TcpStore check(clientOptions(server.port()));
  EXPECT_EQ(check.add("count", 0), n);
  EXPECT_EQ(check.numKeys(), n + 2);
}

// The cap on connections of one address waiting for their handshake: 64 unless raised.
TEST(TcpStoreScale, MaxPendingPerAddressBoundsSilentConnectionsOfOneAddress) {
  EXPECT_EQ(TcpStoreOptions{}.maxPendingPerAddress, 64);
  TcpStoreOptions options = serverOptions();
  options.maxPendingPerAddress = 100;
  TcpStore server(options);
  const int baseline = server.server()->openConnections();
  std::vector<UniqueFd> silent;
  for (int i = 0; i < 100; ++i)
    silent.push_back(rawConnect(server.port()));
  server.set("sync", "1");  // the server has accepted the 100 by now, or will with the next one
  for (int i = 0; i < 200 && server.server()->openConnections() != baseline + 100; ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server.server()->openConnections(), baseline + 100)
      << "silent connections were closed below the raised cap";
  EXPECT_TRUE(nothingPending(silent[0].get())) << "the oldest was answered below the cap";
  // The 101st makes room: the oldest silent one is turned away, saying why.
  silent.push_back(rawConnect(server.port()));
  const auto verdict = readFrame(silent[0].get(), 10s);
  ASSERT_TRUE(isReply(verdict, proto::Reply::Rejected));
  EXPECT_THAT(*verdict, HasSubstr("at most 100 may"));

  TcpStoreOptions zero = serverOptions();
  zero.maxPendingPerAddress = 0;
  try {
    TcpStore refused(zero);
    ADD_FAILURE() << "maxPendingPerAddress = 0 was accepted";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("maxPendingPerAddress = 0: expected a positive count"));
  }
}

}  // namespace
}  // namespace stretch::comm
