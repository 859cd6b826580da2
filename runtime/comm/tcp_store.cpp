// TCPStore: an epoll event-loop server on one thread and a pooled, blocking client.
//
// Wire protocol (version 1). Every message is a frame:
//   u32 payload length (little-endian, > 0) | payload
// and every payload starts with a one-byte type. Fields are little-endian fixed-width integers
// (u8, u16, u32, i64) or strings (u32 length, then that many raw bytes: values are binary-safe).
//
//   client -> server                          server -> client
//   Hello      u32 magic "STRS", u16 version,  Ok | Rejected u8 reason, str message
//              str token   (must be first)
//   Set        str key, str value              Ok
//   Get        str key                         Value str | NotFound
//   Add        str key, i64 delta              Int i64
//   CompareSet str key, str expected, str des. Value str (the value stored afterwards)
//   Check      u32 n, n x str key              Bool u8
//   Wait       u32 n, n x str key              Ready (when every key exists; maybe much later)
//   CancelWait                                 [Ready], WaitCanceled u32 n, n x u32 index of a
//                                              key still missing
//   DeleteKey  str key                         Bool u8
//   NumKeys                                    Int i64
// Any request may instead get `Error str message` (bad key, oversized value, non-numeric add);
// the connection stays usable after an Error. Requests are answered in order, one at a time:
// while a Wait is pending the only valid request is CancelWait, which the client sends when its
// own timeout passes, then reads until WaitCanceled (a Ready that crossed it on the wire comes
// first and means the wait succeeded after all).
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

#include "runtime/comm/tcp_store.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <deque>
#include <fcntl.h>
#include <mutex>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "runtime/comm/detail/socket.hpp"
#include "runtime/comm/detail/tcp_store_protocol.hpp"
#include "runtime/comm/errors.hpp"

namespace stretch::comm {

namespace proto = detail::tcpstore;

namespace {

using detail::IoStatus;
using detail::SteadyClock;
using detail::UniqueFd;
using proto::FrameReader;
using proto::FrameWriter;
using proto::RejectReason;
using proto::Reply;
using proto::Request;

constexpr std::size_t kReadChunk = std::size_t{64} << 10;
constexpr std::size_t kReadBudget = std::size_t{1} << 20;
constexpr std::size_t kOutputHighWater = std::size_t{4} << 20;
constexpr std::size_t kMaxValueLimit = std::size_t{1} << 30;
constexpr int kMaxEvents = 256;
constexpr int kAcceptBurst = 256;
constexpr std::uint64_t kListenTag = 0;
constexpr std::uint64_t kWakeTag = 1;
constexpr std::size_t kMaxIdleConnections = 8;
// How long a client waits for the server to answer CancelWait before giving up on the socket.
constexpr Duration kCancelGrace = std::chrono::seconds(5);
constexpr std::string_view kNoHandshakeReply = "no handshake reply before the deadline";

// Keys and values are bytes; error messages show them escaped and cut short.
std::string printable(std::string_view text) {
  constexpr std::size_t kMaxShown = 80;
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\' && c != '"')
      out.push_back(static_cast<char>(c));
    else
      out += fmt::format("\\x{:02x}", c);
  }
  if (text.size() > kMaxShown)
    out += fmt::format("...({} bytes)", text.size());
  return out;
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

std::size_t frameLimit(const TcpStoreOptions& options) {
  return 2 * options.maxValueBytes + options.maxKeyBytes + proto::kFrameOverhead;
}

void validateOptions(const TcpStoreOptions& options, std::string_view name) {
  if (options.maxKeyBytes == 0 || options.maxKeyBytes > kMaxValueLimit) {
    throw StoreError(fmt::format("{}: maxKeyBytes = {}: expected 1 to {}", name,
                                 options.maxKeyBytes, kMaxValueLimit));
  }
  if (options.maxValueBytes > kMaxValueLimit) {
    throw StoreError(fmt::format("{}: maxValueBytes = {}: expected at most {} (1 GiB)", name,
                                 options.maxValueBytes, kMaxValueLimit));
  }
  if (options.maxConnections < 1) {
    throw StoreError(fmt::format("{}: maxConnections = {}: expected a positive count", name,
                                 options.maxConnections));
  }
  if (options.token.size() > proto::kMaxTokenBytes) {
    throw StoreError(fmt::format("{}: token of {} bytes: expected at most {} bytes", name,
                                 options.token.size(), proto::kMaxTokenBytes));
  }
  if (options.handshakeTimeout.count() <= 0 || options.timeout.count() < 0) {
    throw StoreError(fmt::format(
        "{}: handshakeTimeout = {}, timeout = {}: expected positive "
        "durations",
        name, formatDuration(options.handshakeTimeout), formatDuration(options.timeout)));
  }
}

// Validation shared by server and client; nullopt when the key is acceptable.
std::optional<std::string> keyProblem(std::string_view key, std::size_t maxKeyBytes) {
  if (key.empty())
    return std::string("key = \"\": expected a non-empty key");
  if (key.size() > maxKeyBytes) {
    return fmt::format("key \"{}\" of {} bytes exceeds the {}-byte limit", printable(key),
                       key.size(), maxKeyBytes);
  }
  return std::nullopt;
}

std::optional<std::string> valueProblem(std::string_view key, std::string_view value,
                                        std::size_t maxValueBytes) {
  if (value.size() > maxValueBytes) {
    return fmt::format("value of {} bytes for key \"{}\" exceeds the {}-byte limit", value.size(),
                       printable(key), maxValueBytes);
  }
  return std::nullopt;
}

std::string errorFrame(std::string_view message) {
  return FrameWriter(Reply::Error).str(message).take();
}

}  // namespace

// =============================================================================================
// Server

struct TcpStoreServer::Impl {
  struct Conn {
    std::uint64_t id = 0;
    UniqueFd fd;
    bool authed = false;
    bool dead = false;
    std::uint32_t events = 0;
    // Bytes received but not yet parsed are in[inPos, in.size()).
    std::string in;
    std::size_t inPos = 0;
    // Remaining bytes of an oversized frame being skipped, and its announced size.
    std::uint64_t discardLeft = 0;
    std::uint64_t discardTotal = 0;
    // Replies not yet sent; the front one from outPos on.
    std::deque<std::string> out;
    std::size_t outPos = 0;
    std::size_t outPending = 0;
    // A pending Wait: its keys as sent, and how many distinct ones are still missing.
    bool waiting = false;
    std::size_t missing = 0;
    std::vector<std::string> waitKeys;
  };

  explicit Impl(const TcpStoreOptions& opts);
  ~Impl();

  void run() noexcept;
  void acceptAll();
  void onEvent(Conn& conn, std::uint32_t events);
  void readFrom(Conn& conn);
  void consume(Conn& conn, const char* data, std::size_t size);
  void processFrames(Conn& conn);
  bool handleFrame(Conn& conn, std::string_view payload);
  bool handleRequest(Conn& conn, Request type, FrameReader& reader);
  void reject(Conn& conn, RejectReason reason, std::string_view message);
  void queue(Conn& conn, std::string frame);
  void flush(Conn& conn);
  void updateEvents(Conn& conn);
  void notify(const std::string& key);
  void unregisterWait(Conn& conn);
  void drop(Conn& conn, bool rejected);
  void reap();
  void expireHandshakes();
  Conn* find(std::uint64_t id);

  TcpStoreOptions options;
  std::string name;
  std::size_t maxFrame = 0;
  UniqueFd listenFd;
  UniqueFd epollFd;
  UniqueFd wakeFd;
  UniqueFd spareFd;  // released to accept-and-close when the process runs out of descriptors
  int port = 0;
  std::atomic<bool> stopping{false};
  std::atomic<int> open{0};
  std::atomic<std::int64_t> rejected{0};

  // Owned by the server thread only.
  std::uint64_t nextId = 2;
  std::unordered_map<std::uint64_t, std::unique_ptr<Conn>> conns;
  std::vector<std::uint64_t> deadConns;
  std::deque<std::pair<SteadyClock::time_point, std::uint64_t>> handshakes;
  std::unordered_map<std::string, std::string> data;
  std::unordered_map<std::string, std::vector<std::uint64_t>> waiters;
  std::vector<char> scratch;

  std::thread thread;
};

TcpStoreServer::Impl::Impl(const TcpStoreOptions& opts)
    : options(opts),
      name(fmt::format("TCPStore server {}", detail::formatEndpoint(opts.host, opts.port))) {
  validateOptions(options, name);
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
    const int timeoutMs = handshakes.empty() ? -1 : detail::pollTimeoutMs(handshakes.front().first);
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
    expireHandshakes();
    reap();
  }
  conns.clear();
  open.store(0);
}

void TcpStoreServer::Impl::acceptAll() {
  for (int i = 0; i < kAcceptBurst; ++i) {
    const int raw = ::accept4(listenFd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
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
    conn->events = EPOLLIN;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = conn->id;
    if (::epoll_ctl(epollFd.get(), EPOLL_CTL_ADD, conn->fd.get(), &ev) != 0)
      continue;
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
    budget -= static_cast<std::size_t>(n);
    consume(conn, scratch.data(), static_cast<std::size_t>(n));
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
    if (type != static_cast<std::uint8_t>(Request::Hello))
      return false;
    const std::uint32_t magic = reader.u32();
    const std::uint16_t version = reader.u16();
    const std::string_view token = reader.str();
    if (!reader.complete() || magic != proto::kMagic)
      return false;
    if (version != proto::kVersion) {
      reject(conn, RejectReason::BadVersion,
             fmt::format("unsupported protocol version {} (this server speaks {})", version,
                         proto::kVersion));
    } else if (!constantTimeEquals(token, options.token)) {
      reject(conn, RejectReason::WrongToken, "wrong token");
    } else {
      conn.authed = true;
      queue(conn, FrameWriter(Reply::Ok).take());
    }
    return true;
  }
  if (type < static_cast<std::uint8_t>(Request::Set) ||
      type > static_cast<std::uint8_t>(Request::NumKeys)) {
    return false;
  }
  const auto request = static_cast<Request>(type);
  if (conn.waiting && request != Request::CancelWait)
    return false;
  return handleRequest(conn, request, reader);
}

bool TcpStoreServer::Impl::handleRequest(Conn& conn, Request type, FrameReader& reader) {
  // Reads a key list; false when the frame is malformed.
  const auto readKeys = [&reader](std::vector<std::string>& keys) {
    const std::uint32_t n = reader.u32();
    if (reader.failed() || n > reader.remaining() / 4)
      return false;
    keys.reserve(n);
    for (std::uint32_t i = 0; i < n && !reader.failed(); ++i)
      keys.emplace_back(reader.str());
    return reader.complete();
  };
  const auto badKey = [&](std::string_view key) {
    if (auto problem = keyProblem(key, options.maxKeyBytes)) {
      queue(conn, errorFrame(*problem));
      return true;
    }
    return false;
  };
  const auto badValue = [&](std::string_view key, std::string_view value) {
    if (auto problem = valueProblem(key, value, options.maxValueBytes)) {
      queue(conn, errorFrame(*problem));
      return true;
    }
    return false;
  };

  switch (type) {
    case Request::Set: {
      const std::string_view key = reader.str();
      const std::string_view value = reader.str();
      if (!reader.complete())
        return false;
      if (badKey(key) || badValue(key, value))
        return true;
      std::string k(key);
      data[k].assign(value);
      notify(k);
      queue(conn, FrameWriter(Reply::Ok).take());
      return true;
    }
    case Request::Get: {
      const std::string_view key = reader.str();
      if (!reader.complete())
        return false;
      if (badKey(key))
        return true;
      const auto it = data.find(std::string(key));
      queue(conn, it == data.end() ? FrameWriter(Reply::NotFound).take()
                                   : FrameWriter(Reply::Value).str(it->second).take());
      return true;
    }
    case Request::Add: {
      const std::string_view key = reader.str();
      const std::int64_t delta = reader.i64();
      if (!reader.complete())
        return false;
      if (badKey(key))
        return true;
      std::string k(key);
      std::int64_t current = 0;
      if (const auto it = data.find(k); it != data.end()) {
        const std::string& text = it->second;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), current);
        if (ec != std::errc() || end != text.data() + text.size()) {
          queue(conn, errorFrame(fmt::format("add on key \"{}\" whose value \"{}\" is not an "
                                             "integer",
                                             printable(k), printable(text))));
          return true;
        }
      }
      std::int64_t result = 0;
      if (__builtin_add_overflow(current, delta, &result)) {
        queue(conn, errorFrame(fmt::format("add {} to key \"{}\" = {} overflows int64", delta,
                                           printable(k), current)));
        return true;
      }
      data[k] = std::to_string(result);
      notify(k);
      queue(conn, FrameWriter(Reply::Int).i64(result).take());
      return true;
    }
    case Request::CompareSet: {
      const std::string_view key = reader.str();
      const std::string_view expected = reader.str();
      const std::string_view desired = reader.str();
      if (!reader.complete())
        return false;
      if (badKey(key) || badValue(key, expected) || badValue(key, desired))
        return true;
      std::string k(key);
      const auto it = data.find(k);
      if (it == data.end() && !expected.empty()) {
        queue(conn, FrameWriter(Reply::Value).str(expected).take());
        return true;
      }
      if (it != data.end() && it->second != expected) {
        queue(conn, FrameWriter(Reply::Value).str(it->second).take());
        return true;
      }
      data[k].assign(desired);
      notify(k);
      queue(conn, FrameWriter(Reply::Value).str(desired).take());
      return true;
    }
    case Request::Check: {
      std::vector<std::string> keys;
      if (!readKeys(keys))
        return false;
      bool all = true;
      for (const auto& key : keys) {
        if (badKey(key))
          return true;
        all = all && data.contains(key);
      }
      queue(conn, FrameWriter(Reply::Bool).u8(all ? 1 : 0).take());
      return true;
    }
    case Request::Wait: {
      std::vector<std::string> keys;
      if (!readKeys(keys))
        return false;
      for (const auto& key : keys) {
        if (badKey(key))
          return true;
      }
      std::unordered_set<std::string_view> seen;
      std::size_t missing = 0;
      for (const auto& key : keys) {
        if (!data.contains(key) && seen.insert(key).second) {
          waiters[key].push_back(conn.id);
          ++missing;
        }
      }
      if (missing == 0) {
        queue(conn, FrameWriter(Reply::Ready).take());
      } else {
        conn.waiting = true;
        conn.missing = missing;
        conn.waitKeys = std::move(keys);
      }
      return true;
    }
    case Request::CancelWait: {
      if (!reader.complete())
        return false;
      FrameWriter reply(Reply::WaitCanceled);
      std::vector<std::uint32_t> still;
      for (std::size_t i = 0; i < conn.waitKeys.size(); ++i) {
        if (!data.contains(conn.waitKeys[i]))
          still.push_back(static_cast<std::uint32_t>(i));
      }
      unregisterWait(conn);
      reply.u32(static_cast<std::uint32_t>(still.size()));
      for (const std::uint32_t index : still)
        reply.u32(index);
      queue(conn, reply.take());
      return true;
    }
    case Request::DeleteKey: {
      const std::string_view key = reader.str();
      if (!reader.complete())
        return false;
      if (badKey(key))
        return true;
      const bool erased = data.erase(std::string(key)) > 0;
      queue(conn, FrameWriter(Reply::Bool).u8(erased ? 1 : 0).take());
      return true;
    }
    case Request::NumKeys: {
      if (!reader.complete())
        return false;
      queue(conn, FrameWriter(Reply::Int).i64(static_cast<std::int64_t>(data.size())).take());
      return true;
    }
    case Request::Hello:
      return false;  // only valid as the first frame
  }
  return false;
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

void TcpStoreServer::Impl::notify(const std::string& key) {
  const auto it = waiters.find(key);
  if (it == waiters.end())
    return;
  const std::vector<std::uint64_t> ids = std::move(it->second);
  waiters.erase(it);
  for (const std::uint64_t id : ids) {
    Conn* conn = find(id);
    if (conn == nullptr || conn->dead || !conn->waiting)
      continue;
    if (--conn->missing == 0) {
      conn->waiting = false;
      conn->waitKeys.clear();
      queue(*conn, FrameWriter(Reply::Ready).take());
    }
  }
}

void TcpStoreServer::Impl::unregisterWait(Conn& conn) {
  for (const auto& key : conn.waitKeys) {
    const auto it = waiters.find(key);
    if (it == waiters.end())
      continue;
    std::erase(it->second, conn.id);
    if (it->second.empty())
      waiters.erase(it);
  }
  conn.waiting = false;
  conn.missing = 0;
  conn.waitKeys.clear();
}

void TcpStoreServer::Impl::drop(Conn& conn, bool rejectedByUs) {
  if (conn.dead)
    return;
  conn.dead = true;
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

void TcpStoreServer::Impl::expireHandshakes() {
  const auto now = SteadyClock::now();
  while (!handshakes.empty() && handshakes.front().first <= now) {
    if (Conn* conn = find(handshakes.front().second); conn != nullptr && !conn->authed)
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

// =============================================================================================
// Client
//
// A small pool of authenticated connections: each request borrows one for its whole
// request/response exchange (the pool's mutex guards only the borrowing), so a thread blocked in
// wait() never holds up set() from another thread on the same TcpStore.

struct TcpStore::Client {
  struct ReplyFrame {
    Reply type = Reply::Error;
    std::string payload;  // the whole payload, type byte first

    std::string_view body() const noexcept { return std::string_view(payload).substr(1); }
    // The single string field of a Value reply, moved out without copying the bytes elsewhere
    // (values may be 64 MiB); nullopt when the body is not exactly one string.
    std::optional<std::string> takeString() {
      FrameReader reader(body());
      const std::string_view value = reader.str();
      if (!reader.complete())
        return std::nullopt;
      payload.erase(0, payload.size() - value.size());
      return std::move(payload);
    }
  };

  // Borrowed connection; returns to the pool unless marked broken.
  class Lease {
   public:
    Lease(Client& client, UniqueFd fd) : client_(client), fd_(std::move(fd)) {}
    ~Lease() {
      if (healthy_ && fd_.valid())
        client_.release(std::move(fd_));
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    int fd() const noexcept { return fd_.get(); }
    void broken() noexcept { healthy_ = false; }

   private:
    Client& client_;
    UniqueFd fd_;
    bool healthy_ = true;
  };

  Client(const TcpStoreOptions& options, int connectPort)
      : host(options.host),
        port(connectPort),
        token(options.token),
        maxKeyBytes(options.maxKeyBytes),
        maxValueBytes(options.maxValueBytes),
        maxFrame(frameLimit(options)),
        name(fmt::format("TCPStore {}", detail::formatEndpoint(options.host, connectPort))) {}

  UniqueFd connect(SteadyClock::time_point deadline);
  // Outcome of one handshake: an empty string on success, else the reason it failed.
  std::string handshake(int fd, SteadyClock::time_point deadline);
  Lease acquire(SteadyClock::time_point deadline);
  void release(UniqueFd fd);

  void checkKey(const std::string& key) const;
  void checkValue(const std::string& key, const std::string& value) const;
  void send(Lease& lease, const std::string& frame, SteadyClock::time_point deadline,
            std::string_view what);
  // Reads one reply; Timeout only when none started before `deadline` (nothing consumed).
  IoStatus tryReceive(Lease& lease, SteadyClock::time_point deadline, ReplyFrame& reply, int& err);
  // tryReceive, with failures and Error replies thrown as StoreError.
  ReplyFrame receive(Lease& lease, SteadyClock::time_point deadline, std::string_view what,
                     Duration timeout);
  // send + receive; Error replies become StoreError, other types are checked against `want`.
  ReplyFrame call(const std::string& frame, std::string_view what, Reply want);
  [[noreturn]] void ioFailure(Lease& lease, IoStatus status, int err, std::string_view what,
                              Duration timeout) const;
  // Waits for `keys` until `deadline`; throws StoreTimeoutError reporting `reported`.
  void waitUntil(const std::vector<std::string>& keys, SteadyClock::time_point deadline,
                 Duration reported);

  std::string host;
  int port;
  std::string token;
  std::size_t maxKeyBytes;
  std::size_t maxValueBytes;
  std::size_t maxFrame;
  std::string name;
  std::atomic<std::int64_t> timeoutMs{0};

  std::mutex mutex;
  std::vector<UniqueFd> idle;
};

std::string TcpStore::Client::handshake(int fd, SteadyClock::time_point deadline) {
  const std::string hello =
      FrameWriter(Request::Hello).u32(proto::kMagic).u16(proto::kVersion).str(token).take();
  int err = 0;
  IoStatus status = detail::sendAll(fd, hello.data(), hello.size(), deadline, err);
  char header[4];
  if (status == IoStatus::Ok)
    status = detail::recvAll(fd, header, sizeof header, deadline, err);
  std::string payload;
  if (status == IoStatus::Ok) {
    const std::uint32_t length = proto::decodeU32(header);
    if (length == 0 || length > proto::kMaxHandshakeFrame)
      return fmt::format("malformed handshake reply of {} bytes (is this a TCPStore?)", length);
    payload.resize(length);
    status = detail::recvAll(fd, payload.data(), payload.size(), deadline, err);
  }
  switch (status) {
    case IoStatus::Ok:
      break;
    case IoStatus::Timeout:
      return std::string(kNoHandshakeReply);
    case IoStatus::Closed:
      return err != 0 ? fmt::format("connection closed during the handshake ({})",
                                    detail::errnoText(err))
                      : std::string("connection closed during the handshake");
    case IoStatus::Error:
      return detail::errnoText(err);
  }
  FrameReader reader(payload);
  const std::uint8_t type = reader.u8();
  if (type == static_cast<std::uint8_t>(Reply::Ok) && reader.complete())
    return {};
  if (type == static_cast<std::uint8_t>(Reply::Rejected)) {
    const std::uint8_t reason = reader.u8();
    const std::string message(reader.str());
    if (reader.complete() && reason != static_cast<std::uint8_t>(RejectReason::ConnectionLimit))
      throw StoreError(fmt::format("{}: rejected: {}", name, printable(message)));
    return fmt::format("rejected: {}", printable(message));
  }
  return "malformed handshake reply (is this a TCPStore?)";
}

UniqueFd TcpStore::Client::connect(SteadyClock::time_point deadline) {
  const auto start = SteadyClock::now();
  auto backoff = std::chrono::milliseconds(10);
  int attempts = 0;
  std::string lastError = "none";
  for (;;) {
    ++attempts;
    int err = 0;
    std::string errText;
    UniqueFd fd = detail::connectOnce(host, port, deadline, err, errText);
    std::string problem;
    if (fd.valid()) {
      problem = handshake(fd.get(), deadline);
      if (problem.empty())
        return fd;
    } else {
      problem = !errText.empty() ? errText : detail::errnoText(err);
    }
    // An attempt cut short by our own deadline says less than the one before it.
    const bool cutShort = SteadyClock::now() >= deadline &&
                          (problem == kNoHandshakeReply || (!fd.valid() && err == ETIMEDOUT));
    if (!cutShort || attempts == 1)
      lastError = std::move(problem);
    const auto now = SteadyClock::now();
    if (now >= deadline) {
      const auto tried = std::chrono::duration_cast<Duration>(now - start);
      throw StoreError(fmt::format(
          "{}: could not connect within {} ({} attempt{}, last error: {}); check "
          "MASTER_ADDR/MASTER_PORT (or the store host and port) and that the store server is "
          "running",
          name, formatDuration(tried), attempts, attempts == 1 ? "" : "s", lastError));
    }
    std::this_thread::sleep_for(
        std::min<SteadyClock::duration>(backoff, deadline - SteadyClock::now()));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

TcpStore::Client::Lease TcpStore::Client::acquire(SteadyClock::time_point deadline) {
  {
    std::lock_guard lock(mutex);
    if (!idle.empty()) {
      UniqueFd fd = std::move(idle.back());
      idle.pop_back();
      return Lease(*this, std::move(fd));
    }
  }
  return Lease(*this, connect(deadline));
}

void TcpStore::Client::release(UniqueFd fd) {
  std::lock_guard lock(mutex);
  if (idle.size() < kMaxIdleConnections)
    idle.push_back(std::move(fd));
}

void TcpStore::Client::checkKey(const std::string& key) const {
  if (auto problem = keyProblem(key, maxKeyBytes))
    throw StoreError(fmt::format("{}: {}", name, *problem));
}

void TcpStore::Client::checkValue(const std::string& key, const std::string& value) const {
  if (auto problem = valueProblem(key, value, maxValueBytes))
    throw StoreError(fmt::format("{}: {}", name, *problem));
}

void TcpStore::Client::ioFailure(Lease& lease, IoStatus status, int err, std::string_view what,
                                 Duration timeout) const {
  lease.broken();
  switch (status) {
    case IoStatus::Timeout:
      throw StoreError(
          fmt::format("{}: no reply to {} within {}", name, what, formatDuration(timeout)));
    case IoStatus::Closed:
      throw StoreError(fmt::format("{}: connection lost during {}: the server closed it{}", name,
                                   what, err != 0 ? " (" + detail::errnoText(err) + ")" : ""));
    case IoStatus::Error:
    case IoStatus::Ok:
      break;
  }
  throw StoreError(fmt::format("{}: {} failed: {}", name, what, detail::errnoText(err)));
}

void TcpStore::Client::send(Lease& lease, const std::string& frame,
                            SteadyClock::time_point deadline, std::string_view what) {
  if (frame.size() - 4 > maxFrame) {
    throw StoreError(fmt::format("{}: {} request of {} bytes exceeds the {}-byte limit", name, what,
                                 frame.size() - 4, maxFrame));
  }
  int err = 0;
  const IoStatus status = detail::sendAll(lease.fd(), frame.data(), frame.size(), deadline, err);
  if (status != IoStatus::Ok)
    ioFailure(lease, status, err, what, Duration(timeoutMs.load()));
}

IoStatus TcpStore::Client::tryReceive(Lease& lease, SteadyClock::time_point deadline,
                                      ReplyFrame& reply, int& err) {
  // Nothing is consumed until the reply starts arriving, so a timeout leaves the stream intact.
  IoStatus status = detail::waitReadable(lease.fd(), deadline, err);
  if (status != IoStatus::Ok)
    return status;
  // The server writes whole frames: once the header is here the rest follows at once, so
  // allow a full timeout for it (big values) whatever was left of the caller's deadline.
  const auto rest = std::max(deadline, SteadyClock::now() + Duration(timeoutMs.load()));
  char header[4];
  status = detail::recvAll(lease.fd(), header, sizeof header, rest, err);
  if (status != IoStatus::Ok)
    return status;
  const std::uint32_t length = proto::decodeU32(header);
  // A Value reply may carry up to the server's value limit, which may exceed ours; no reply
  // is ever longer than the largest frame the protocol allows.
  if (length == 0 || length > 2 * kMaxValueLimit + proto::kFrameOverhead) {
    lease.broken();
    throw StoreError(fmt::format("{}: malformed reply of {} bytes", name, length));
  }
  std::string payload(length, '\0');
  status = detail::recvAll(lease.fd(), payload.data(), payload.size(), rest, err);
  if (status != IoStatus::Ok)
    return status;
  reply.type = static_cast<Reply>(static_cast<std::uint8_t>(payload[0]));
  reply.payload = std::move(payload);
  return IoStatus::Ok;
}

TcpStore::Client::ReplyFrame TcpStore::Client::receive(Lease& lease,
                                                       SteadyClock::time_point deadline,
                                                       std::string_view what, Duration timeout) {
  ReplyFrame reply;
  int err = 0;
  const IoStatus status = tryReceive(lease, deadline, reply, err);
  if (status != IoStatus::Ok)
    ioFailure(lease, status, err, what, timeout);
  if (reply.type == Reply::Error) {
    FrameReader reader(reply.body());
    const std::string message(reader.str());
    if (!reader.complete()) {
      lease.broken();
      throw StoreError(fmt::format("{}: malformed error reply to {}", name, what));
    }
    throw StoreError(fmt::format("{}: {}: {}", name, what, message));
  }
  return reply;
}

TcpStore::Client::ReplyFrame TcpStore::Client::call(const std::string& frame, std::string_view what,
                                                    Reply want) {
  const Duration timeout(timeoutMs.load());
  const auto deadline = SteadyClock::now() + timeout;
  Lease lease = acquire(deadline);
  send(lease, frame, deadline, what);
  ReplyFrame reply = receive(lease, deadline, what, timeout);
  if (reply.type != want && !(want == Reply::Value && reply.type == Reply::NotFound)) {
    lease.broken();
    throw StoreError(fmt::format("{}: unexpected reply 0x{:02x} to {}", name,
                                 static_cast<unsigned>(reply.type), what));
  }
  return reply;
}

void TcpStore::Client::waitUntil(const std::vector<std::string>& keys,
                                 SteadyClock::time_point deadline, Duration reported) {
  for (const auto& key : keys)
    checkKey(key);
  if (keys.empty())
    return;
  FrameWriter frame(Request::Wait);
  frame.u32(static_cast<std::uint32_t>(keys.size()));
  for (const auto& key : keys)
    frame.str(key);
  const std::string what = keys.size() == 1 ? fmt::format("wait(\"{}\")", printable(keys[0]))
                                            : fmt::format("wait({} keys)", keys.size());
  Lease lease = acquire(deadline);
  send(lease, frame.take(), deadline, what);
  ReplyFrame reply;
  int err = 0;
  const IoStatus status = tryReceive(lease, deadline, reply, err);
  if (status == IoStatus::Ok) {
    if (reply.type == Reply::Ready && reply.body().empty())
      return;
    if (reply.type == Reply::Error) {
      FrameReader reader(reply.body());
      const std::string message(reader.str());
      if (reader.complete())
        throw StoreError(fmt::format("{}: {}: {}", name, what, message));
    }
    lease.broken();
    throw StoreError(fmt::format("{}: malformed reply 0x{:02x} to {}", name,
                                 static_cast<unsigned>(reply.type), what));
  }
  if (status != IoStatus::Timeout)
    ioFailure(lease, status, err, what, reported);
  // Our timeout passed: withdraw the wait so the connection can be reused, and learn which keys
  // are still missing for the error message.
  const auto graceDeadline = SteadyClock::now() + kCancelGrace;
  std::vector<std::string> missing = keys;
  try {
    send(lease, FrameWriter(Request::CancelWait).take(), graceDeadline, "cancel " + what);
    bool sawReady = false;
    for (;;) {
      ReplyFrame answer = receive(lease, graceDeadline, "cancel " + what, kCancelGrace);
      if (answer.type == Reply::Ready) {
        sawReady = true;
        continue;
      }
      FrameReader reader(answer.body());
      const std::uint32_t n = reader.u32();
      std::vector<std::string> still;
      for (std::uint32_t i = 0; i < n && !reader.failed(); ++i) {
        const std::uint32_t index = reader.u32();
        if (index < keys.size())
          still.push_back(keys[index]);
      }
      if (answer.type != Reply::WaitCanceled || !reader.complete()) {
        lease.broken();
        break;
      }
      if (sawReady || still.empty())
        return;  // every key arrived just as we gave up
      missing = std::move(still);
      break;
    }
  } catch (const StoreError&) {
    lease.broken();  // the report below is about the timeout, not about the cancel
  }
  Store::throwTimeout(name, missing, reported);
}

// =============================================================================================
// TcpStore

TcpStore::TcpStore(const TcpStoreOptions& options) : Store(options.timeout), options_(options) {
  const std::string name =
      fmt::format("TCPStore {}", detail::formatEndpoint(options.host, options.port));
  validateOptions(options_, name);
  if (options_.isServer) {
    server_ = std::make_unique<TcpStoreServer>(options_);
  } else if (options_.port < 1 || options_.port > 65535) {
    throw StoreError(
        fmt::format("{}: port = {}: expected 1 to 65535 for a client", name, options_.port));
  }
  client_ = std::make_unique<Client>(options_, server_ ? server_->port() : options_.port);
  client_->timeoutMs.store(options_.timeout.count());
  client_->release(client_->connect(SteadyClock::now() + options_.timeout));
}

TcpStore::~TcpStore() {
  client_.reset();  // close our connections before the server stops
  server_.reset();
}

int TcpStore::port() const noexcept {
  return client_->port;
}

void TcpStore::set(const std::string& key, const std::string& value) {
  client_->timeoutMs.store(timeout().count());
  client_->checkKey(key);
  client_->checkValue(key, value);
  client_->call(FrameWriter(Request::Set).str(key).str(value).take(),
                fmt::format("set(\"{}\")", printable(key)), Reply::Ok);
}

std::string TcpStore::get(const std::string& key) {
  client_->timeoutMs.store(timeout().count());
  client_->checkKey(key);
  const Duration limit = timeout();
  const auto deadline = SteadyClock::now() + limit;
  for (;;) {
    client_->waitUntil({key}, deadline, limit);
    Client::ReplyFrame reply =
        client_->call(FrameWriter(Request::Get).str(key).take(),
                      fmt::format("get(\"{}\")", printable(key)), Reply::Value);
    if (reply.type == Reply::Value) {
      std::optional<std::string> value = reply.takeString();
      if (!value)
        throw StoreError(
            fmt::format("{}: malformed reply to get(\"{}\")", client_->name, printable(key)));
      return std::move(*value);
    }
    // Deleted between the wait and the get: wait again.
    if (SteadyClock::now() >= deadline)
      throwTimeout(client_->name, {key}, limit);
  }
}

std::int64_t TcpStore::add(const std::string& key, std::int64_t delta) {
  client_->timeoutMs.store(timeout().count());
  client_->checkKey(key);
  Client::ReplyFrame reply =
      client_->call(FrameWriter(Request::Add).str(key).i64(delta).take(),
                    fmt::format("add(\"{}\", {})", printable(key), delta), Reply::Int);
  FrameReader reader(reply.body());
  const std::int64_t value = reader.i64();
  if (!reader.complete())
    throw StoreError(fmt::format("{}: malformed reply to add", client_->name));
  return value;
}

std::string TcpStore::compareSet(const std::string& key, const std::string& expected,
                                 const std::string& desired) {
  client_->timeoutMs.store(timeout().count());
  client_->checkKey(key);
  client_->checkValue(key, expected);
  client_->checkValue(key, desired);
  Client::ReplyFrame reply =
      client_->call(FrameWriter(Request::CompareSet).str(key).str(expected).str(desired).take(),
                    fmt::format("compareSet(\"{}\")", printable(key)), Reply::Value);
  std::optional<std::string> value = reply.type == Reply::Value ? reply.takeString() : std::nullopt;
  if (!value)
    throw StoreError(fmt::format("{}: malformed reply to compareSet", client_->name));
  return std::move(*value);
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  client_->timeoutMs.store(timeout().count());
  FrameWriter frame(Request::Check);
  frame.u32(static_cast<std::uint32_t>(keys.size()));
  for (const auto& key : keys) {
    client_->checkKey(key);
    frame.str(key);
  }
  Client::ReplyFrame reply = client_->call(frame.take(), "check", Reply::Bool);
  FrameReader reader(reply.body());
  const std::uint8_t all = reader.u8();
  if (!reader.complete())
    throw StoreError(fmt::format("{}: malformed reply to check", client_->name));
  return all != 0;
}

void TcpStore::wait(const std::vector<std::string>& keys, std::optional<Duration> timeout) {
  client_->timeoutMs.store(this->timeout().count());
  const Duration limit = timeout.value_or(this->timeout());
  client_->waitUntil(keys, SteadyClock::now() + limit, limit);
}

bool TcpStore::deleteKey(const std::string& key) {
  client_->timeoutMs.store(timeout().count());
  client_->checkKey(key);
  Client::ReplyFrame reply =
      client_->call(FrameWriter(Request::DeleteKey).str(key).take(),
                    fmt::format("deleteKey(\"{}\")", printable(key)), Reply::Bool);
  FrameReader reader(reply.body());
  const std::uint8_t erased = reader.u8();
  if (!reader.complete())
    throw StoreError(fmt::format("{}: malformed reply to deleteKey", client_->name));
  return erased != 0;
}

std::int64_t TcpStore::numKeys() {
  client_->timeoutMs.store(timeout().count());
  Client::ReplyFrame reply =
      client_->call(FrameWriter(Request::NumKeys).take(), "numKeys", Reply::Int);
  FrameReader reader(reply.body());
  const std::int64_t n = reader.i64();
  if (!reader.complete())
    throw StoreError(fmt::format("{}: malformed reply to numKeys", client_->name));
  return n;
}

}  // namespace stretch::comm
