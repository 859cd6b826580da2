// TCPStore server, part two: the request handlers (Set, Get, Add, CompareSet, Check, Wait,
// CancelWait, DeleteKey, NumKeys, MultiGet) and the Wait bookkeeping that wakes parked waiters. The
// event loop, connections and the handshake are in tcp_store_server.cpp; the state both share is in
// detail/tcp_store_server_impl.hpp. Runs on the server thread only.

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "runtime/comm/detail/printable.hpp"
#include "runtime/comm/detail/tcp_store_limits.hpp"
#include "runtime/comm/detail/tcp_store_protocol.hpp"
#include "runtime/comm/detail/tcp_store_server_impl.hpp"
#include "runtime/comm/tcp_store.hpp"

namespace stretch::comm {

// The wire protocol and the limits both ends enforce (detail/tcp_store_limits.hpp).
using namespace detail::tcpstore;

namespace {

using detail::printable;

// Reads a key list; false when the frame is malformed.
bool readKeys(FrameReader& reader, std::vector<std::string>& keys) {
  const std::uint32_t n = reader.u32();
  if (reader.failed() || n > reader.remaining() / 4)
    return false;
  keys.reserve(n);
  for (std::uint32_t i = 0; i < n && !reader.failed(); ++i)
    keys.emplace_back(reader.str());
  return reader.complete();
}

}  // namespace

bool TcpStoreServer::Impl::handleRequest(Conn& conn, Request type, FrameReader& reader) {
  switch (type) {
    case Request::Set:
      return handleSet(conn, reader);
    case Request::Get:
      return handleGet(conn, reader);
    case Request::Add:
      return handleAdd(conn, reader);
    case Request::CompareSet:
      return handleCompareSet(conn, reader);
    case Request::Check:
      return handleCheck(conn, reader);
    case Request::Wait:
      return handleWait(conn, reader);
    case Request::CancelWait:
      return handleCancelWait(conn, reader);
    case Request::DeleteKey:
      return handleDeleteKey(conn, reader);
    case Request::NumKeys:
      return handleNumKeys(conn, reader);
    case Request::MultiGet:
      return handleMultiGet(conn, reader);
    case Request::Hello:
      return false;  // only valid as the first frame
  }
  return false;
}

bool TcpStoreServer::Impl::refuseBadKey(Conn& conn, std::string_view key) {
  if (auto problem = keyProblem(key, options.maxKeyBytes)) {
    queue(conn, errorFrame(*problem));
    return true;
  }
  return false;
}

bool TcpStoreServer::Impl::refuseBadValue(Conn& conn, std::string_view key,
                                          std::string_view value) {
  if (auto problem = valueProblem(key, value, options.maxValueBytes)) {
    queue(conn, errorFrame(*problem));
    return true;
  }
  return false;
}

bool TcpStoreServer::Impl::handleSet(Conn& conn, FrameReader& reader) {
  const std::string_view key = reader.str();
  const std::string_view value = reader.str();
  if (!reader.complete())
    return false;
  if (refuseBadKey(conn, key) || refuseBadValue(conn, key, value))
    return true;
  std::string k(key);
  data[k].assign(value);
  notify(k);
  queue(conn, FrameWriter(Reply::Ok).take());
  return true;
}

bool TcpStoreServer::Impl::handleGet(Conn& conn, FrameReader& reader) {
  const std::string_view key = reader.str();
  if (!reader.complete())
    return false;
  if (refuseBadKey(conn, key))
    return true;
  const auto it = data.find(std::string(key));
  queue(conn, it == data.end() ? FrameWriter(Reply::NotFound).take()
                               : FrameWriter(Reply::Value).str(it->second).take());
  return true;
}

bool TcpStoreServer::Impl::handleAdd(Conn& conn, FrameReader& reader) {
  const std::string_view key = reader.str();
  const std::int64_t delta = reader.i64();
  if (!reader.complete())
    return false;
  if (refuseBadKey(conn, key))
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

bool TcpStoreServer::Impl::handleCompareSet(Conn& conn, FrameReader& reader) {
  const std::string_view key = reader.str();
  const std::string_view expected = reader.str();
  const std::string_view desired = reader.str();
  if (!reader.complete())
    return false;
  if (refuseBadKey(conn, key) || refuseBadValue(conn, key, expected) ||
      refuseBadValue(conn, key, desired))
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

bool TcpStoreServer::Impl::handleCheck(Conn& conn, FrameReader& reader) {
  std::vector<std::string> keys;
  if (!readKeys(reader, keys))
    return false;
  bool all = true;
  for (const auto& key : keys) {
    if (refuseBadKey(conn, key))
      return true;
    all = all && data.contains(key);
  }
  queue(conn, FrameWriter(Reply::Bool).u8(all ? 1 : 0).take());
  return true;
}

bool TcpStoreServer::Impl::handleWait(Conn& conn, FrameReader& reader) {
  std::vector<std::string> keys;
  if (!readKeys(reader, keys))
    return false;
  for (const auto& key : keys) {
    if (refuseBadKey(conn, key))
      return true;
  }
  std::unordered_set<std::string_view> seen;
  std::size_t missing = 0;
  for (const auto& key : keys) {
    if (!data.contains(key) && seen.insert(key).second) {
      waiters[key].insert(conn.id);
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

bool TcpStoreServer::Impl::handleCancelWait(Conn& conn, FrameReader& reader) {
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

bool TcpStoreServer::Impl::handleDeleteKey(Conn& conn, FrameReader& reader) {
  const std::string_view key = reader.str();
  if (!reader.complete())
    return false;
  if (refuseBadKey(conn, key))
    return true;
  const bool erased = data.erase(std::string(key)) > 0;
  queue(conn, FrameWriter(Reply::Bool).u8(erased ? 1 : 0).take());
  return true;
}

bool TcpStoreServer::Impl::handleNumKeys(Conn& conn, FrameReader& reader) {
  if (!reader.complete())
    return false;
  queue(conn, FrameWriter(Reply::Int).i64(static_cast<std::int64_t>(data.size())).take());
  return true;
}

bool TcpStoreServer::Impl::handleMultiGet(Conn& conn, FrameReader& reader) {
  std::vector<std::string> keys;
  if (!readKeys(reader, keys))
    return false;
  FrameWriter reply(Reply::Values);
  reply.u32(static_cast<std::uint32_t>(keys.size()));
  for (const auto& key : keys) {
    if (refuseBadKey(conn, key))
      return true;
    const auto it = data.find(key);
    if (it == data.end()) {
      reply.u8(0);
    } else {
      reply.u8(1).str(it->second);
    }
    // A client takes no reply longer than two values of the largest size (tcp_store_client.cpp).
    if (reply.payloadSize() > 2 * kMaxValueLimit) {
      queue(conn, errorFrame(fmt::format("multiGet of {} keys: their values add up to more "
                                         "than one reply may hold ({} bytes); ask for fewer",
                                         keys.size(), 2 * kMaxValueLimit)));
      return true;
    }
  }
  queue(conn, reply.take());
  return true;
}

void TcpStoreServer::Impl::notify(const std::string& key) {
  const auto it = waiters.find(key);
  if (it == waiters.end())
    return;
  const std::unordered_set<std::uint64_t> ids = std::move(it->second);
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
    it->second.erase(conn.id);
    if (it->second.empty())
      waiters.erase(it);
  }
  conn.waiting = false;
  conn.missing = 0;
  conn.waitKeys.clear();
}

}  // namespace stretch::comm
