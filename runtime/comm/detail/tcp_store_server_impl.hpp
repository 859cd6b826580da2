#pragma once
// TcpStoreServer's state, shared by the two files that implement it (private to runtime/comm):
// tcp_store_server.cpp (the event loop, connections, reading and writing frames, the handshake
// and its throttle) and tcp_store_server_requests.cpp (the request handlers and the Wait
// bookkeeping). Everything here is touched by the server thread only, except the atomics.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "runtime/comm/detail/socket.hpp"
#include "runtime/comm/detail/tcp_store_protocol.hpp"
#include "runtime/comm/tcp_store.hpp"

namespace stretch::comm {

namespace detail::tcpstore {

// An Error reply carrying `message`; the connection stays usable.
inline std::string errorFrame(std::string_view message) {
  return FrameWriter(Reply::Error).str(message).take();
}

}  // namespace detail::tcpstore

struct TcpStoreServer::Impl {
  // The server's names for the shared socket and protocol types.
  using SteadyClock = detail::SteadyClock;
  using UniqueFd = detail::UniqueFd;
  using FrameReader = detail::tcpstore::FrameReader;
  using Request = detail::tcpstore::Request;
  using RejectReason = detail::tcpstore::RejectReason;

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
    // The peer's address; whether no whole Hello has come yet (counted in silentByPeer); and
    // whether its wrong token waits for its penalty to pass.
    std::string peer;
    bool silent = false;
    bool parked = false;
  };
  // Wrong tokens in a row from one address, when the last came, and the connections still
  // waiting for their verdict, oldest first (some may have closed since).
  struct Throttle {
    int failures = 0;
    SteadyClock::time_point last{};
    std::deque<std::uint64_t> held;
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
  // One per request type, after the handshake: false when the frame is malformed (the caller
  // closes the connection), else true (answered, or a Wait parked).
  bool handleSet(Conn& conn, FrameReader& reader);
  bool handleGet(Conn& conn, FrameReader& reader);
  bool handleAdd(Conn& conn, FrameReader& reader);
  bool handleCompareSet(Conn& conn, FrameReader& reader);
  bool handleCheck(Conn& conn, FrameReader& reader);
  bool handleWait(Conn& conn, FrameReader& reader);
  bool handleCancelWait(Conn& conn, FrameReader& reader);
  bool handleDeleteKey(Conn& conn, FrameReader& reader);
  bool handleNumKeys(Conn& conn, FrameReader& reader);
  bool handleMultiGet(Conn& conn, FrameReader& reader);
  // True when the key (or value) breaks our limits; it has then been answered with Error and
  // the connection stays usable.
  bool refuseBadKey(Conn& conn, std::string_view key);
  bool refuseBadValue(Conn& conn, std::string_view key, std::string_view value);
  void reject(Conn& conn, RejectReason reason, std::string_view message);
  void queue(Conn& conn, std::string frame);
  void flush(Conn& conn);
  void updateEvents(Conn& conn);
  void notify(const std::string& key);
  void unregisterWait(Conn& conn);
  void drop(Conn& conn, bool rejected);
  void reap();
  void expireHandshakes();
  // The verdict on a handshake: version, then token; a right token is admitted at once.
  void answerHello(Conn& conn, std::uint16_t version, std::string_view token);
  // A wrong token: counted towards its address's penalty, rejected at once or held until then.
  void holdWrongToken(Conn& conn);
  // Rejects the held wrong tokens whose penalty has passed.
  void releaseHeld();
  // Makes room for one more connection from `peer` waiting for a Hello or for its verdict: an
  // address holds at most options.maxPendingPerAddress such connections, silent ones and held wrong
  // tokens together, and its oldest silent one goes first, then its oldest held wrong token.
  void makeRoomFor(const std::string& peer);
  // `conn` sent its Hello or is gone: it no longer counts as silent.
  void forgetSilent(Conn& conn);
  SteadyClock::time_point nextDeadline() const;
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
  std::unordered_map<std::string, Throttle> throttles;
  // Per address, its connections that have not sent a whole Hello yet, oldest first.
  std::unordered_map<std::string, std::deque<std::uint64_t>> silentByPeer;
  std::multimap<SteadyClock::time_point, std::uint64_t> heldWrongTokens;
  std::unordered_map<std::string, std::string> data;
  // Per missing key, the connections whose Wait is parked on it. A set, so that a waiter that
  // leaves (CancelWait when its timeout passes, or a closed connection) costs O(1), not a scan
  // of every waiter of that key: N agents re-waiting on one command key would otherwise cost
  // the server O(N) per cancel, O(N^2) per round.
  std::unordered_map<std::string, std::unordered_set<std::uint64_t>> waiters;
  std::vector<char> scratch;

  std::thread thread;
};

}  // namespace stretch::comm
