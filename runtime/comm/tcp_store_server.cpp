// TCPStore server: an epoll event loop on one thread (runtime/comm/tcp_store.hpp; the wire
// protocol is in runtime/comm/detail/tcp_store_protocol.hpp).
//
// Server rules: the first frame must be a Hello of at most kMaxHandshakeFrame bytes arriving
// within handshakeTimeout; a wrong token or version is answered with Rejected and closed. After
// the handshake, frames are capped at 2 * maxValueBytes + maxKeyBytes + kFrameOverhead; a longer
// frame is skipped unread and answered with Error (the client's limits may differ from ours).
// A zero length, an unknown type, a truncated or over-long field list, or a request other than
// CancelWait during a Wait closes the connection. A connection whose replies pile up beyond
// kOutputHighWater is not read from until its peer drains them, so one slow reader cannot make
// the server buffer without bound, and each wake-up reads at most kReadBudget bytes from one
// socket so a fast sender cannot starve the others. rejectedConnections() counts every
// connection the server closed on its own: wrong token or version, handshake timeout, malformed
// frame, connection limit.
//
// Wrong tokens cost their sender, never the right-token clients of the same address (issue 42:
// 50 threads sending wrong tokens from 127.0.0.1 used to lock the job's own workers out). Every
// Hello is judged as soon as it is read, and a right token is admitted at once. A wrong token
// is answered only after a penalty that grows with that address's wrong tokens in a row (none
// for the first, then 5 ms, doubling up to 1 s; forgotten after kForgetAfter without one); its
// connection waits alone, so a sender that waits for its verdicts guesses about once a second
// per connection. Right tokens neither wait nor clear the count.
//
// Connections that send nothing cost their sender too (issue 42 follow-up: 16,384 silent
// connections from one address, each held for the 10 s handshake deadline, filled the
// connection limit and locked the job out). An address holds at most maxPendingPerAddress (64)
// connections waiting for something, silent ones (no whole Hello yet) and held wrong tokens
// together; one more from it makes room by rejecting its oldest silent connection (as
// ConnectionLimit, which a real client retries), or when it has none its oldest held wrong token.
// (Tokens a user chooses must be 16 characters or more and not all blank:
// runtime/launcher/token.hpp. A sender that opens connections without waiting for verdicts is
// bounded only by how fast the server accepts them; the token's length is the defence there.)
//
// This file holds the event loop, accepting and dropping connections, reading and writing
// frames, and the handshake with its throttle; the request handlers and the Wait bookkeeping
// are in tcp_store_server_requests.cpp, the state both share in detail/tcp_store_server_impl.hpp.

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <fcntl.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>

#include "runtime/comm/detail/socket.hpp"
#include "runtime/comm/detail/tcp_store_limits.hpp"
#include "runtime/comm/detail/tcp_store_protocol.hpp"
#include "runtime/comm/detail/tcp_store_server_impl.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/tcp_store.hpp"

namespace stretch::comm {

namespace proto = detail::tcpstore;
// The wire protocol and the limits both ends enforce (detail/tcp_store_limits.hpp).
using namespace detail::tcpstore;

namespace {

using detail::SteadyClock;
using detail::UniqueFd;

constexpr std::size_t kReadChunk = std::size_t{64} << 10;
constexpr std::size_t kReadBudget = std::size_t{1} << 20;
constexpr std::size_t kOutputHighWater = std::size_t{4} << 20;
constexpr int kMaxEvents = 256;
constexpr int kAcceptBurst = 256;
constexpr std::uint64_t kListenTag = 0;
constexpr std::uint64_t kWakeTag = 1;
constexpr auto kFirstPenalty = std::chrono::milliseconds(5);
constexpr auto kMaxPenalty = std::chrono::seconds(1);
constexpr std::size_t kMaxThrottledPeers = 4096;
constexpr auto kForgetAfter = std::chrono::seconds(60);

// How long a wrong token waits for its verdict after `failures` wrong tokens in a row from its
// address.
SteadyClock::duration penaltyFor(int failures) {
  if (failures <= 0)
    return SteadyClock::duration::zero();
  const auto penalty = kFirstPenalty * (std::int64_t{1} << std::min(failures - 1, 16));
  return std::min<SteadyClock::duration>(penalty, kMaxPenalty);
}

// The peer's address without its port ("" when unknown).
std::string peerAddress(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
  } else if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
  }
  return text;
}

// Time depends only on the length of `offered` (the attacker's input), never on where the first
// differing byte is.
bool constantTimeEquals(std::string_view offered, std::string_view secret) noexcept {
  volatile unsigned char diff = offered.size() == secret.size() ? 0 : 1;
  const std::size_t n = secret.size();
  for (std::size_t i = 0; i < offered.size(); ++i) {
    const auto a = static_cast<unsigned char>(offered[i]);
    const auto b =
        n == 0 ? static_cast<unsigned char>(0) : static_cast<unsigned char>(secret[i % n]);
    diff = static_cast<unsigned char>(diff | (a ^ b));
  }
  return diff == 0;
}

}  // namespace

TcpStoreServer::Impl::Impl(const TcpStoreOptions& opts)
    : options(opts),
      name(fmt::format("TCPStore server {}", detail::formatEndpoint(opts.host, opts.port))) {
  validateOptions(options, name);
  if (options.maxPendingPerAddress < 1) {
    throw StoreError(fmt::format("{}: maxPendingPerAddress = {}: expected a positive count", name,
                                 options.maxPendingPerAddress));
  }
  maxFrame = frameLimit(options);
  listenFd = detail::listenOn(options.host, options.port, name);
  port = detail::localPort(listenFd.get());
  name = fmt::format("TCPStore server {}", detail::formatEndpoint(options.host, port));
  epollFd.reset(::epoll_create1(EPOLL_CLOEXEC));
  wakeFd.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  spareFd.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!epollFd.valid() || !wakeFd.valid())
    throw StoreError(fmt::format("{}: cannot start: {}", name, detail::errnoText(errno)));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenTag;
  ::epoll_ctl(epollFd.get(), EPOLL_CTL_ADD, listenFd.get(), &ev);
  ev.data.u64 = kWakeTag;
  ::epoll_ctl(epollFd.get(), EPOLL_CTL_ADD, wakeFd.get(), &ev);
  scratch.resize(kReadChunk);
  thread = std::thread([this] { run(); });
  ::pthread_setname_np(thread.native_handle(), "stretch-store");
}

TcpStoreServer::Impl::~Impl() {
  stopping.store(true);
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wakeFd.get(), &one, sizeof one);
  if (thread.joinable())
    thread.join();
}

TcpStoreServer::Impl::Conn* TcpStoreServer::Impl::find(std::uint64_t id) {
  const auto it = conns.find(id);
  return it == conns.end() ? nullptr : it->second.get();
}

void TcpStoreServer::Impl::run() noexcept {
  std::vector<epoll_event> events(kMaxEvents);
  while (!stopping.load()) {
    const auto deadline = nextDeadline();
    const int timeoutMs =
        deadline == SteadyClock::time_point::max() ? -1 : detail::pollTimeoutMs(deadline);
    const int n = ::epoll_wait(epollFd.get(), events.data(), kMaxEvents, timeoutMs);
    if (n < 0 && errno != EINTR) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // keep serving; never spin
      continue;
    }
    for (int i = 0; i < n; ++i) {
      const std::uint64_t tag = events[static_cast<std::size_t>(i)].data.u64;
      if (tag == kWakeTag)
        continue;  // stopping is re-checked by the loop
      try {
        if (tag == kListenTag) {
          acceptAll();
        } else if (Conn* conn = find(tag); conn != nullptr && !conn->dead) {
          onEvent(*conn, events[static_cast<std::size_t>(i)].events);
        }
      } catch (const std::exception&) {
        // Out of memory or similar while serving one peer: that peer goes, the server stays.
        if (Conn* conn = find(tag))
          drop(*conn, /*rejected=*/true);
      }
      reap();
    }
    releaseHeld();
    expireHandshakes();
    reap();
  }
  conns.clear();
  open.store(0);
}

void TcpStoreServer::Impl::acceptAll() {
  for (int i = 0; i < kAcceptBurst; ++i) {
    sockaddr_storage peer{};
    socklen_t peerLength = sizeof peer;
    const int raw = ::accept4(listenFd.get(), reinterpret_cast<sockaddr*>(&peer), &peerLength,
                              SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (raw < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
        continue;
      if ((errno == EMFILE || errno == ENFILE) && spareFd.valid()) {
        // Out of descriptors: accept with the spare one and close at once, so the pending
        // connection does not keep the listener readable forever.
        spareFd.reset();
        UniqueFd victim(::accept4(listenFd.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (victim.valid())
          rejected.fetch_add(1);
        victim.reset();
        spareFd.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        continue;
      }
      return;  // EAGAIN, or an error we cannot act on now
    }
    UniqueFd fd(raw);
    reap();  // connections closed earlier in this burst (to make room) no longer count
    if (conns.size() >= static_cast<std::size_t>(options.maxConnections)) {
      const std::string frame =
          FrameWriter(Reply::Rejected)
              .u8(static_cast<std::uint8_t>(RejectReason::ConnectionLimit))
              .str(fmt::format("server at its connection limit of {}", options.maxConnections))
              .take();
      rejected.fetch_add(1);
      [[maybe_unused]] const ssize_t n =
          ::send(fd.get(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      continue;
    }
    detail::setNoDelay(fd.get());
    auto conn = std::make_unique<Conn>();
    conn->id = nextId++;
    conn->fd = std::move(fd);
    conn->peer = peerAddress(peer);
    conn->events = EPOLLIN;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = conn->id;
    if (::epoll_ctl(epollFd.get(), EPOLL_CTL_ADD, conn->fd.get(), &ev) != 0)
      continue;
    makeRoomFor(conn->peer);
    conn->silent = true;
    silentByPeer[conn->peer].push_back(conn->id);
    handshakes.emplace_back(SteadyClock::now() + options.handshakeTimeout, conn->id);
    conns.emplace(conn->id, std::move(conn));
    open.fetch_add(1);
  }
}

void TcpStoreServer::Impl::onEvent(Conn& conn, std::uint32_t events) {
  if ((events & EPOLLOUT) != 0) {
    const bool wasBlocked = conn.outPending >= kOutputHighWater;
    flush(conn);
    if (!conn.dead && wasBlocked && conn.outPending < kOutputHighWater)
      processFrames(conn);  // requests parked while the peer was not reading replies
  }
  if (conn.dead)
    return;
  if ((events & EPOLLIN) != 0) {
    readFrom(conn);
  } else if ((events & (EPOLLERR | EPOLLHUP)) != 0) {
    drop(conn, /*rejected=*/false);
    return;
  }
  if (!conn.dead)
    updateEvents(conn);
}

void TcpStoreServer::Impl::readFrom(Conn& conn) {
  std::size_t budget = kReadBudget;
  while (!conn.dead && budget > 0 && conn.outPending < kOutputHighWater) {
    const ssize_t n = ::recv(conn.fd.get(), scratch.data(), std::min(scratch.size(), budget), 0);
    if (n == 0) {
      drop(conn, /*rejected=*/false);
      return;
    }
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        drop(conn, /*rejected=*/false);
      return;
    }
    const auto got = static_cast<std::size_t>(n);
    const bool drained = got < std::min(scratch.size(), budget);
    budget -= got;
    consume(conn, scratch.data(), got);
    // A short read emptied the socket: asking again would only return EAGAIN, one wasted system
    // call per request. The epoll registration is level-triggered, so bytes that arrive after
    // this read bring us back.
    if (drained)
      return;
  }
}

void TcpStoreServer::Impl::consume(Conn& conn, const char* bytes, std::size_t size) {
  if (conn.discardLeft > 0) {
    const std::size_t skip =
        static_cast<std::size_t>(std::min<std::uint64_t>(conn.discardLeft, size));
    conn.discardLeft -= skip;
    bytes += skip;
    size -= skip;
    if (conn.discardLeft > 0)
      return;
    queue(conn, errorFrame(fmt::format(
                    "request of {} bytes exceeds the server's {}-byte limit (keys up to {} "
                    "bytes, values up to {} bytes)",
                    conn.discardTotal, maxFrame, options.maxKeyBytes, options.maxValueBytes)));
    if (conn.dead)
      return;
  }
  conn.in.append(bytes, size);
  processFrames(conn);
}

void TcpStoreServer::Impl::processFrames(Conn& conn) {
  while (!conn.dead && conn.discardLeft == 0 && conn.outPending < kOutputHighWater) {
    const std::size_t avail = conn.in.size() - conn.inPos;
    if (avail < 4)
      break;
    const std::uint32_t length = proto::decodeU32(conn.in.data() + conn.inPos);
    const std::size_t limit = conn.authed ? maxFrame : proto::kMaxHandshakeFrame;
    if (length == 0 || (length > limit && !conn.authed)) {
      drop(conn, /*rejected=*/true);
      return;
    }
    if (length > limit) {
      // Well-formed but too big for us: skip it unread and say why.
      conn.inPos += 4;
      const std::size_t skip = std::min<std::size_t>(length, conn.in.size() - conn.inPos);
      conn.inPos += skip;
      conn.discardLeft = length - skip;
      conn.discardTotal = length;
      if (conn.discardLeft == 0) {
        queue(conn, errorFrame(fmt::format(
                        "request of {} bytes exceeds the server's {}-byte limit (keys up to {} "
                        "bytes, values up to {} bytes)",
                        length, maxFrame, options.maxKeyBytes, options.maxValueBytes)));
      }
      continue;
    }
    if (avail - 4 < length) {
      // Grow once to the announced size instead of doubling through a big value (untouched
      // capacity costs address space, not memory).
      conn.in.reserve(conn.inPos + 4 + std::size_t{length});
      break;
    }
    const std::string_view payload(conn.in.data() + conn.inPos + 4, length);
    conn.inPos += 4 + std::size_t{length};
    if (!handleFrame(conn, payload)) {
      drop(conn, /*rejected=*/true);
      return;
    }
  }
  if (conn.inPos == conn.in.size()) {
    conn.in.clear();
    conn.inPos = 0;
    if (conn.in.capacity() > kReadBudget)
      std::string().swap(conn.in);  // do not keep a big value's buffer per idle connection
  } else if (conn.inPos >= kReadChunk && conn.inPos * 2 >= conn.in.size()) {
    conn.in.erase(0, conn.inPos);
    conn.inPos = 0;
  }
}

bool TcpStoreServer::Impl::handleFrame(Conn& conn, std::string_view payload) {
  FrameReader reader(payload);
  const std::uint8_t type = reader.u8();
  if (!conn.authed) {
    if (type != static_cast<std::uint8_t>(Request::Hello) || conn.parked)
      return false;  // (a client waits for the verdict on its Hello before it sends more)
    // Judged at once, whatever its address did before: only a wrong token waits (answerHello).
    const std::uint32_t magic = reader.u32();
    const std::uint16_t version = reader.u16();
    const std::string_view token = reader.str();
    if (!reader.complete() || magic != proto::kMagic)
      return false;
    forgetSilent(conn);
    answerHello(conn, version, token);
    return true;
  }
  if (type < static_cast<std::uint8_t>(Request::Set) ||
      type > static_cast<std::uint8_t>(Request::MultiGet)) {
    return false;
  }
  const auto request = static_cast<Request>(type);
  if (conn.waiting && request != Request::CancelWait)
    return false;
  return handleRequest(conn, request, reader);
}

void TcpStoreServer::Impl::reject(Conn& conn, RejectReason reason, std::string_view message) {
  // Counted before the peer can read the verdict, so what a client sees the counter shows.
  rejected.fetch_add(1);
  queue(conn,
        FrameWriter(Reply::Rejected).u8(static_cast<std::uint8_t>(reason)).str(message).take());
  drop(conn, /*rejected=*/false);
}

void TcpStoreServer::Impl::queue(Conn& conn, std::string frame) {
  if (conn.dead)
    return;
  conn.outPending += frame.size();
  conn.out.push_back(std::move(frame));
  flush(conn);
}

void TcpStoreServer::Impl::flush(Conn& conn) {
  while (!conn.out.empty()) {
    const std::string& front = conn.out.front();
    const ssize_t n = ::send(conn.fd.get(), front.data() + conn.outPos, front.size() - conn.outPos,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        drop(conn, /*rejected=*/false);
      break;
    }
    conn.outPos += static_cast<std::size_t>(n);
    conn.outPending -= static_cast<std::size_t>(n);
    if (conn.outPos == front.size()) {
      conn.out.pop_front();
      conn.outPos = 0;
    }
  }
  if (!conn.dead)
    updateEvents(conn);
}

void TcpStoreServer::Impl::updateEvents(Conn& conn) {
  std::uint32_t wanted = 0;
  if (conn.outPending < kOutputHighWater)
    wanted |= EPOLLIN;
  if (conn.outPending > 0)
    wanted |= EPOLLOUT;
  if (wanted == conn.events)
    return;
  epoll_event ev{};
  ev.events = wanted;
  ev.data.u64 = conn.id;
  if (::epoll_ctl(epollFd.get(), EPOLL_CTL_MOD, conn.fd.get(), &ev) == 0)
    conn.events = wanted;
  else
    drop(conn, /*rejected=*/false);
}

void TcpStoreServer::Impl::drop(Conn& conn, bool rejectedByUs) {
  if (conn.dead)
    return;
  conn.dead = true;
  forgetSilent(conn);
  if (rejectedByUs)
    rejected.fetch_add(1);
  deadConns.push_back(conn.id);
}

void TcpStoreServer::Impl::reap() {
  for (const std::uint64_t id : deadConns) {
    const auto it = conns.find(id);
    if (it == conns.end())
      continue;
    unregisterWait(*it->second);
    ::epoll_ctl(epollFd.get(), EPOLL_CTL_DEL, it->second->fd.get(), nullptr);
    conns.erase(it);
    open.fetch_sub(1);
  }
  deadConns.clear();
}

void TcpStoreServer::Impl::answerHello(Conn& conn, std::uint16_t version, std::string_view token) {
  if (version != proto::kVersion) {
    reject(conn, RejectReason::BadVersion,
           fmt::format("unsupported protocol version {} (this server speaks {})", version,
                       proto::kVersion));
  } else if (!constantTimeEquals(token, options.token)) {
    holdWrongToken(conn);
  } else {
    conn.authed = true;
    queue(conn, FrameWriter(Reply::Ok).take());
  }
}

void TcpStoreServer::Impl::holdWrongToken(Conn& conn) {
  const auto now = SteadyClock::now();
  if (throttles.size() >= kMaxThrottledPeers && throttles.find(conn.peer) == throttles.end()) {
    std::erase_if(throttles, [&](const auto& item) {
      return item.second.held.empty() && now - item.second.last > kForgetAfter;
    });
    if (throttles.size() >= kMaxThrottledPeers)
      std::erase_if(throttles, [](const auto& item) { return item.second.held.empty(); });
  }
  Throttle& t = throttles[conn.peer];
  if (now - t.last > kForgetAfter)
    t.failures = 0;
  const auto penalty = penaltyFor(t.failures);
  ++t.failures;
  t.last = now;
  if (penalty == SteadyClock::duration::zero()) {
    reject(conn, RejectReason::WrongToken, "wrong token");
    return;
  }
  // Only this connection waits; the oldest of too many from one address is answered now.
  makeRoomFor(conn.peer);
  conn.parked = true;
  t.held.push_back(conn.id);
  heldWrongTokens.emplace(now + penalty, conn.id);
}

void TcpStoreServer::Impl::releaseHeld() {
  const auto now = SteadyClock::now();
  while (!heldWrongTokens.empty() && heldWrongTokens.begin()->first <= now) {
    const std::uint64_t id = heldWrongTokens.begin()->second;
    heldWrongTokens.erase(heldWrongTokens.begin());
    Conn* conn = find(id);
    if (conn == nullptr || conn->dead || !conn->parked)
      continue;
    conn->parked = false;
    reject(*conn, RejectReason::WrongToken, "wrong token");
  }
}

void TcpStoreServer::Impl::makeRoomFor(const std::string& peer) {
  for (;;) {
    // Looked up afresh each time: a Hello read below may have held a wrong token of this address.
    const auto throttle = throttles.find(peer);
    std::deque<std::uint64_t>* held =
        throttle == throttles.end() ? nullptr : &throttle->second.held;
    if (held != nullptr) {
      std::erase_if(*held, [&](std::uint64_t id) {
        const Conn* c = find(id);
        return c == nullptr || c->dead || !c->parked;
      });
    }
    const auto silent = silentByPeer.find(peer);
    const std::size_t silentCount = silent == silentByPeer.end() ? 0 : silent->second.size();
    const std::size_t heldCount = held == nullptr ? 0 : held->size();
    if (silentCount + heldCount < static_cast<std::size_t>(options.maxPendingPerAddress))
      return;
    if (silentCount > 0) {
      // Silent connections go first: they have not even tried, and a real client whose
      // connection this was sees ConnectionLimit and tries again. But a connection accepted in
      // the same burst as newer ones may have its Hello waiting unread: read it first, so that
      // only a connection that really sent nothing (or half a Hello) counts as silent. (A Hello
      // read here is judged at once; a wrong one is held, which cannot recurse further: this
      // address is then one below the cap.)
      Conn* oldest = find(silent->second.front());
      readFrom(*oldest);
      if (!oldest->dead)
        updateEvents(*oldest);
      if (oldest->dead || !oldest->silent)
        continue;
      forgetSilent(*oldest);
      reject(*oldest, RejectReason::ConnectionLimit,
             fmt::format("no Hello yet while {} connections from {} waited for their handshake "
                         "or verdict (at most {} may)",
                         silentCount + heldCount, peer, options.maxPendingPerAddress));
    } else {
      Conn* oldest = find(held->front());
      held->pop_front();
      oldest->parked = false;
      reject(*oldest, RejectReason::WrongToken, "wrong token");
    }
  }
}

void TcpStoreServer::Impl::forgetSilent(Conn& conn) {
  if (!conn.silent)
    return;
  conn.silent = false;
  const auto it = silentByPeer.find(conn.peer);
  if (it == silentByPeer.end())
    return;
  std::erase(it->second, conn.id);
  if (it->second.empty())
    silentByPeer.erase(it);
}

SteadyClock::time_point TcpStoreServer::Impl::nextDeadline() const {
  auto next = SteadyClock::time_point::max();
  if (!handshakes.empty())
    next = handshakes.front().first;
  if (!heldWrongTokens.empty())
    next = std::min(next, heldWrongTokens.begin()->first);
  return next;
}

void TcpStoreServer::Impl::expireHandshakes() {
  const auto now = SteadyClock::now();
  while (!handshakes.empty() && handshakes.front().first <= now) {
    // A held wrong token is answered when its penalty ends (at most kMaxPenalty from now).
    if (Conn* conn = find(handshakes.front().second);
        conn != nullptr && !conn->authed && !conn->parked)
      drop(*conn, /*rejected=*/true);
    handshakes.pop_front();
  }
}

TcpStoreServer::TcpStoreServer(const TcpStoreOptions& options)
    : impl_(std::make_unique<Impl>(options)) {}

TcpStoreServer::~TcpStoreServer() = default;

int TcpStoreServer::port() const noexcept {
  return impl_->port;
}

int TcpStoreServer::openConnections() const noexcept {
  return impl_->open.load();
}

std::int64_t TcpStoreServer::rejectedConnections() const noexcept {
  return impl_->rejected.load();
}

}  // namespace stretch::comm
