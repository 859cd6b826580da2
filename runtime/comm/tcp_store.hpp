#pragma once
// TCPStore: the job's rendezvous store over TCP (c10d's TCPStore), hardened for shared networks.
//
// One process (rank 0 or the elastic agent) runs the server on a thread; every rank connects as
// a client. The server
//  - binds only to the given host address (loopback for single-node jobs), never 0.0.0.0
//    unless asked explicitly;
//  - admits only clients that present the job's token in their first message (compared in
//    constant time; the launcher draws a random token per launch and hands it to workers in
//    STRETCH_STORE_TOKEN);
//  - caps key and value sizes, pending bytes per connection and the number of connections;
//  - drops a connection on any malformed message, wrong token or handshake not completed within
//    the handshake timeout, and keeps serving everyone else: random bytes on its port cannot
//    crash it or make it block.
// Clients connect with retries until their timeout, then throw StoreError naming host:port and
// the last socket error; a rejected token throws StoreError saying so.

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/comm/store.hpp"

namespace stretch::comm {

struct TcpStoreOptions {
  std::string host = "127.0.0.1";      // address the server binds to / the client connects to
  int port = 29500;                    // 0 with isServer: pick a free port (see TcpStore::port())
  bool isServer = false;               // run the server in this process (rank 0 or the agent)
  std::string token;                   // the job's token; "" admits only clients with "" too
  Duration timeout = kDefaultTimeout;  // connect, get and wait timeout
  Duration handshakeTimeout = std::chrono::seconds(10);
  std::size_t maxKeyBytes = 4096;
  std::size_t maxValueBytes = std::size_t{64} << 20;  // 64 MiB
  int maxConnections = 16384;
  // Server: connections from one address that may wait at once for their handshake (no whole
  // Hello yet) or for the verdict on a wrong token; one more rejects that address's oldest
  // silent one (as ConnectionLimit, which clients retry). 64 keeps one host's flood from filling
  // the connection limit (issue 42). Raise it only where many real clients share one address
  // and connect at once (NAT, a benchmark's thousands of clients on 127.0.0.1).
  int maxPendingPerAddress = 64;
};

// The server alone (the agent runs one without being a client). Stops on destruction.
class TcpStoreServer {
 public:
  // Binds and starts serving; throws StoreError naming host:port when binding fails.
  explicit TcpStoreServer(const TcpStoreOptions& options);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const noexcept;
  // Connections currently open and rejected since start (for tests and `stretch report`).
  int openConnections() const noexcept;
  std::int64_t rejectedConnections() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class TcpStore final : public Store {
 public:
  // With options.isServer, starts a server first (port 0 picks a free one) and connects to it.
  explicit TcpStore(const TcpStoreOptions& options);
  ~TcpStore() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            std::optional<Duration> timeout = std::nullopt) override;
  bool deleteKey(const std::string& key) override;
  // One request (MultiGet) whatever the number of keys.
  std::vector<std::optional<std::string>> tryMultiGet(
      const std::vector<std::string>& keys) override;
  std::int64_t numKeys() override;

  const std::string& host() const noexcept { return options_.host; }
  // The port connected to (the server's actual port when it picked one).
  int port() const noexcept;
  // The in-process server, or nullptr for a pure client.
  TcpStoreServer* server() const noexcept { return server_.get(); }

 private:
  struct Client;
  TcpStoreOptions options_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<Client> client_;
};

}  // namespace stretch::comm
