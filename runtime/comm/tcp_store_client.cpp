// TCPStore client (runtime/comm/tcp_store.hpp; the wire protocol is in
// runtime/comm/detail/tcp_store_protocol.hpp): a small pool of authenticated connections. Each
// request borrows one for its whole request/response exchange (the pool's mutex guards only the
// borrowing), so a thread blocked in wait() never holds up set() from another thread on the same
// TcpStore.

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "runtime/comm/detail/printable.hpp"
#include "runtime/comm/detail/socket.hpp"
#include "runtime/comm/detail/tcp_store_limits.hpp"
#include "runtime/comm/detail/tcp_store_protocol.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/tcp_store.hpp"

namespace stretch::comm {

namespace proto = detail::tcpstore;
// The wire protocol and the limits both ends enforce (detail/tcp_store_limits.hpp).
using namespace detail::tcpstore;

namespace {

using detail::IoStatus;
using detail::printable;
using detail::SteadyClock;
using detail::UniqueFd;

constexpr std::size_t kMaxIdleConnections = 8;
// How long a client waits for the server to answer CancelWait before giving up on the socket.
constexpr Duration kCancelGrace = std::chrono::seconds(5);
constexpr std::string_view kNoHandshakeReply = "no handshake reply before the deadline";

}  // namespace

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
  // A request of `type` carrying a key list (Check, Wait, MultiGet); each key is checked.
  std::string keysFrame(Request type, const std::vector<std::string>& keys) const;
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
  std::atomic<std::int64_t> timeoutTicks{0};  // Duration::count() of the current timeout

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

std::string TcpStore::Client::keysFrame(Request type, const std::vector<std::string>& keys) const {
  FrameWriter frame(type);
  frame.u32(static_cast<std::uint32_t>(keys.size()));
  for (const auto& key : keys) {
    checkKey(key);
    frame.str(key);
  }
  return frame.take();
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
    ioFailure(lease, status, err, what, Duration(timeoutTicks.load()));
}

IoStatus TcpStore::Client::tryReceive(Lease& lease, SteadyClock::time_point deadline,
                                      ReplyFrame& reply, int& err) {
  // Nothing is consumed until the reply starts arriving, so a timeout leaves the stream intact.
  IoStatus status = detail::waitReadable(lease.fd(), deadline, err);
  if (status != IoStatus::Ok)
    return status;
  // The server writes whole frames: once the header is here the rest follows at once, so
  // allow a full timeout for it (big values) whatever was left of the caller's deadline.
  const auto rest = std::max(deadline, SteadyClock::now() + Duration(timeoutTicks.load()));
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
  const Duration timeout(timeoutTicks.load());
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
  std::string frame = keysFrame(Request::Wait, keys);
  if (keys.empty())
    return;
  const std::string what = keys.size() == 1 ? fmt::format("wait(\"{}\")", printable(keys[0]))
                                            : fmt::format("wait({} keys)", keys.size());
  Lease lease = acquire(deadline);
  send(lease, frame, deadline, what);
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
  client_->timeoutTicks.store(options_.timeout.count());
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
  client_->timeoutTicks.store(timeout().count());
  client_->checkKey(key);
  client_->checkValue(key, value);
  client_->call(FrameWriter(Request::Set).str(key).str(value).take(),
                fmt::format("set(\"{}\")", printable(key)), Reply::Ok);
}

std::string TcpStore::get(const std::string& key) {
  client_->timeoutTicks.store(timeout().count());
  client_->checkKey(key);
  const Duration limit = timeout();
  const auto deadline = SteadyClock::now() + limit;
  // The value first: a key that exists costs one round trip, and a server that stops answering
  // costs the timeout and no more (a wait that times out is withdrawn, which may take
  // kCancelGrace on top). A missing key is waited for, then read again.
  for (;;) {
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
    if (SteadyClock::now() >= deadline)
      throwTimeout(client_->name, {key}, limit);
    client_->waitUntil({key}, deadline, limit);
  }
}

std::int64_t TcpStore::add(const std::string& key, std::int64_t delta) {
  client_->timeoutTicks.store(timeout().count());
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
  client_->timeoutTicks.store(timeout().count());
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
  client_->timeoutTicks.store(timeout().count());
  Client::ReplyFrame reply =
      client_->call(client_->keysFrame(Request::Check, keys), "check", Reply::Bool);
  FrameReader reader(reply.body());
  const std::uint8_t all = reader.u8();
  if (!reader.complete())
    throw StoreError(fmt::format("{}: malformed reply to check", client_->name));
  return all != 0;
}

void TcpStore::wait(const std::vector<std::string>& keys, std::optional<Duration> timeout) {
  client_->timeoutTicks.store(this->timeout().count());
  const Duration limit = timeout.value_or(this->timeout());
  client_->waitUntil(keys, SteadyClock::now() + limit, limit);
}

bool TcpStore::deleteKey(const std::string& key) {
  client_->timeoutTicks.store(timeout().count());
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

std::vector<std::optional<std::string>> TcpStore::tryMultiGet(
    const std::vector<std::string>& keys) {
  client_->timeoutTicks.store(timeout().count());
  Client::ReplyFrame reply =
      client_->call(client_->keysFrame(Request::MultiGet, keys),
                    fmt::format("multiGet of {} keys", keys.size()), Reply::Values);
  FrameReader reader(reply.body());
  const std::uint32_t n = reader.u32();
  std::vector<std::optional<std::string>> out;
  if (!reader.failed() && n == keys.size()) {
    out.reserve(n);
    for (std::uint32_t i = 0; i < n && !reader.failed(); ++i)
      out.push_back(reader.u8() != 0 ? std::optional<std::string>(reader.str()) : std::nullopt);
  }
  if (!reader.complete() || out.size() != keys.size())
    throw StoreError(
        fmt::format("{}: malformed reply to multiGet of {} keys", client_->name, keys.size()));
  return out;
}

std::int64_t TcpStore::numKeys() {
  client_->timeoutTicks.store(timeout().count());
  Client::ReplyFrame reply =
      client_->call(FrameWriter(Request::NumKeys).take(), "numKeys", Reply::Int);
  FrameReader reader(reply.body());
  const std::int64_t n = reader.i64();
  if (!reader.complete())
    throw StoreError(fmt::format("{}: malformed reply to numKeys", client_->name));
  return n;
}

}  // namespace stretch::comm
