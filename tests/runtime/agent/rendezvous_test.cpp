// StoreRendezvous with threads as agents over HashStore, and once over TcpStore on loopback.
// The clock is real time plus an offset the test moves forward, so windows and timeouts pass
// when the test says so.

#include "runtime/agent/rendezvous.hpp"

#include <atomic>
#include <functional>
#include <future>
#include <thread>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "runtime/comm/tcp_store.hpp"

namespace stretch::agent {
namespace {

using namespace std::chrono_literals;

class TestClock {
 public:
  Clock clock() {
    return [this] {
      return std::chrono::duration_cast<Time>(std::chrono::steady_clock::now().time_since_epoch()) +
             Time{offset_.load()};
    };
  }
  void advance(Duration d) { offset_ += d.count(); }
  Time now() { return clock()(); }

 private:
  std::atomic<std::int64_t> offset_{0};
};

RendezvousOptions options(std::int64_t minNodes, std::int64_t maxNodes) {
  RendezvousOptions o;
  o.minNodes = minNodes;
  o.maxNodes = maxNodes;
  o.lastCall = 30s;     // passes only when a test moves the clock (the tests take ms)
  o.joinTimeout = 60s;  // a join stuck by a failed test still ends
  o.pollInterval = 1ms;
  o.prefix = "job";
  return o;
}

// Polls `pred` for up to 20 s of real time.
bool eventually(const std::function<bool()>& pred) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) {
      return true;
    }
    std::this_thread::sleep_for(1ms);
  }
  return pred();
}

std::int64_t registered(comm::Store& store, std::uint64_t generation) {
  const std::string key = "job/g/" + std::to_string(generation) + "/count";
  return store.check({key}) ? std::stoll(store.get(key)) : 0;
}

std::vector<std::string> ids(const Membership& m) {
  std::vector<std::string> out;
  for (const MemberNode& n : m.nodes) {
    out.push_back(n.nodeId);
  }
  return out;
}

TEST(StoreRendezvous, OneNodeJoinsAlone) {
  auto store = std::make_shared<comm::HashStore>();
  TestClock clock;
  StoreRendezvous r(store, options(1, 1), clock.clock());
  EXPECT_EQ(r.latestGeneration(), 0u);
  EXPECT_FALSE(r.membership(1).has_value());
  const Membership m = r.join("a", 4);
  EXPECT_EQ(m.generation, 1u);
  EXPECT_EQ(m.nodes, (std::vector<MemberNode>{{"a", 0, 4}}));
  EXPECT_EQ(m.totalSlots(), 4);
  EXPECT_EQ(r.latestGeneration(), 1u);
  EXPECT_EQ(r.membership(1), m);
  EXPECT_EQ(r.nodeId(), "a");
}

TEST(StoreRendezvous, AgentsAgreeOnOneMembership) {
  auto store = std::make_shared<comm::HashStore>();
  TestClock clock;
  constexpr int kAgents = 6;
  std::vector<std::future<Membership>> results;
  for (int i = 0; i < kAgents; ++i) {
    results.push_back(std::async(std::launch::async, [&, i] {
      StoreRendezvous r(store, options(kAgents, kAgents), clock.clock());
      return r.join(fmt::format("node{}", i), i + 1);
    }));
  }
  std::vector<Membership> got;
  for (auto& f : results) {
    got.push_back(f.get());
  }
  ASSERT_EQ(got[0].nodes.size(), static_cast<std::size_t>(kAgents));
  EXPECT_EQ(got[0].generation, 1u);
  for (const Membership& m : got) {
    EXPECT_EQ(m, got[0]);
  }
  for (std::size_t i = 0; i < got[0].nodes.size(); ++i) {
    const MemberNode& n = got[0].nodes[i];
    EXPECT_EQ(n.nodeRank, static_cast<std::int64_t>(i));
    EXPECT_EQ(n.slots, std::stoll(n.nodeId.substr(4)) + 1);
  }
  EXPECT_EQ(got[0].totalSlots(), 1 + 2 + 3 + 4 + 5 + 6);
}

TEST(StoreRendezvous, LastCallWindowThenWaitingNodesAndTheNextGeneration) {
  auto store = std::make_shared<comm::HashStore>();
  TestClock clock;
  StoreRendezvous a(store, options(1, 3), clock.clock());
  StoreRendezvous b(store, options(1, 3), clock.clock());
  StoreRendezvous c(store, options(1, 3), clock.clock());

  // Round 1: a reaches min_nodes, b comes within the last call, the window passes.
  auto fa = std::async(std::launch::async, [&] { return a.join("a", 8); });
  ASSERT_TRUE(eventually([&] { return registered(*store, 1) == 1; }));
  auto fb = std::async(std::launch::async, [&] { return b.join("b", 8); });
  ASSERT_TRUE(eventually([&] { return registered(*store, 1) == 2; }));
  EXPECT_EQ(fa.wait_for(20ms), std::future_status::timeout);  // still in the window
  clock.advance(30s);
  const Membership m1 = fa.get();
  EXPECT_EQ(fb.get(), m1);
  EXPECT_EQ(m1.generation, 1u);
  EXPECT_EQ(ids(m1), (std::vector<std::string>{"a", "b"}));

  // c comes while generation 1 runs: it waits for the next round; the members see it.
  auto fc = std::async(std::launch::async, [&] { return c.join("c", 4); });
  ASSERT_TRUE(eventually([&] { return a.waitingNodes().size() == 1; }));
  EXPECT_EQ(a.waitingNodes(), (std::vector<RendezvousNode>{{"c", 4}}));
  EXPECT_EQ(fc.wait_for(20ms), std::future_status::timeout);
  EXPECT_EQ(a.latestGeneration(), 1u);

  // a re-joins (a scale up): round 2 opens, c registers; b sees a member re-joined.
  auto fa2 = std::async(std::launch::async, [&] { return a.join("a", 8); });
  ASSERT_TRUE(eventually([&] { return registered(*store, 2) == 2; }));
  std::vector<std::string> waiting;
  for (const RendezvousNode& n : b.waitingNodes()) {
    waiting.push_back(n.nodeId);
  }
  std::sort(waiting.begin(), waiting.end());
  EXPECT_EQ(waiting, (std::vector<std::string>{"a", "c"}));
  auto fb2 = std::async(std::launch::async, [&] { return b.join("b", 8); });
  // max_nodes 3 registered: closes at once, no window.
  const Membership m2 = fa2.get();
  EXPECT_EQ(fb2.get(), m2);
  EXPECT_EQ(fc.get(), m2);
  EXPECT_EQ(m2.generation, 2u);
  std::vector<std::string> members = ids(m2);
  std::sort(members.begin(), members.end());
  EXPECT_EQ(members, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(m2.totalSlots(), 20);
  EXPECT_TRUE(a.waitingNodes().empty());
  EXPECT_EQ(c.latestGeneration(), 2u);
}

TEST(StoreRendezvous, NodesBeyondMaxNodesWaitForTheNextRound) {
  auto store = std::make_shared<comm::HashStore>();
  TestClock clock;
  std::vector<std::unique_ptr<StoreRendezvous>> agents;
  for (int i = 0; i < 3; ++i) {
    agents.push_back(std::make_unique<StoreRendezvous>(store, options(2, 2), clock.clock()));
  }
  std::vector<std::future<Membership>> joins;
  for (int i = 0; i < 3; ++i) {
    joins.push_back(std::async(std::launch::async, [&, i] {
      return agents[static_cast<std::size_t>(i)]->join(fmt::format("n{}", i), 2);
    }));
  }
  // Two of them form generation 1; the third waits.
  ASSERT_TRUE(eventually([&] { return agents[0]->latestGeneration() == 1; }));
  const Membership m1 = *agents[0]->membership(1);
  ASSERT_EQ(m1.nodes.size(), 2u);
  int outside = -1;
  for (int i = 0; i < 3; ++i) {
    if (m1.find(fmt::format("n{}", i)) == nullptr) {
      outside = i;
    }
  }
  ASSERT_GE(outside, 0);
  const auto out = static_cast<std::size_t>(outside);
  for (std::size_t i = 0; i < 3; ++i) {
    if (i != out) {
      EXPECT_EQ(joins[i].get(), m1);
    }
  }
  ASSERT_TRUE(eventually([&] { return agents[0]->waitingNodes().size() == 1; }));
  EXPECT_EQ(agents[0]->waitingNodes()[0].nodeId, fmt::format("n{}", outside));

  // The first member restarts: it and the waiting node form generation 2.
  const std::string first = m1.nodes[0].nodeId;
  const auto firstIndex = static_cast<std::size_t>(std::stoi(first.substr(1)));
  const Membership m2 = agents[firstIndex]->join(first, 2);
  EXPECT_EQ(joins[out].get(), m2);
  EXPECT_EQ(m2.generation, 2u);
  EXPECT_NE(m2.find(first), nullptr);
  EXPECT_NE(m2.find(fmt::format("n{}", outside)), nullptr);
}

TEST(StoreRendezvous, JoinTimesOutSayingWhatItWaitedFor) {
  auto store = std::make_shared<comm::HashStore>();
  TestClock clock;
  RendezvousOptions o = options(2, 2);
  o.joinTimeout = 10min;
  StoreRendezvous a(store, o, clock.clock());
  auto fa = std::async(std::launch::async, [&] { return a.join("a", 1); });
  ASSERT_TRUE(eventually([&] { return registered(*store, 1) == 1; }));
  clock.advance(11min);
  try {
    fa.get();
    FAIL() << "no timeout";
  } catch (const RendezvousTimeoutError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rendezvous job round 1: node a gave up after join timeout"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("1 of min_nodes 2 node(s) registered (a)"), std::string::npos) << what;
  }
}

TEST(StoreRendezvous, AWaitingNodeTimesOutWhenNoMemberOpensTheRound) {
  auto store = std::make_shared<comm::HashStore>();
  TestClock clock;
  RendezvousOptions o = options(1, 2);
  o.lastCall = 0s;
  o.joinTimeout = 5min;
  StoreRendezvous a(store, o, clock.clock());
  StoreRendezvous late(store, o, clock.clock());
  a.join("a", 1);  // no last call: generation 1 is a alone
  auto f = std::async(std::launch::async, [&] { return late.join("late", 1); });
  ASSERT_TRUE(eventually([&] { return a.waitingNodes().size() == 1; }));
  clock.advance(6min);
  try {
    f.get();
    FAIL() << "no timeout";
  } catch (const RendezvousTimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("no member of generation 1 (a) joined again"),
              std::string::npos)
        << e.what();
  }
}

TEST(StoreRendezvous, HeartbeatsFindDeadNodes) {
  auto store = std::make_shared<comm::HashStore>();
  TestClock clock;
  StoreRendezvous a(store, options(2, 2), clock.clock());
  StoreRendezvous b(store, options(2, 2), clock.clock());
  EXPECT_THROW(a.heartbeat(0s), RendezvousError);  // before join
  auto fa = std::async(std::launch::async, [&] { return a.join("a", 1); });
  b.join("b", 1);
  fa.get();
  const Time t0 = clock.now();  // both wrote a heartbeat at join, before t0
  EXPECT_TRUE(a.deadNodes(t0, 30s).empty());
  a.heartbeat(t0 + 100s);
  EXPECT_EQ(a.deadNodes(t0 + 100s, 30s), (std::vector<std::string>{"b"}));
  EXPECT_EQ(b.deadNodes(t0 + 100s, 200s), (std::vector<std::string>{}));
  b.heartbeat(t0 + 120s);
  EXPECT_TRUE(a.deadNodes(t0 + 125s, 30s).empty());
  a.leave();
  EXPECT_EQ(b.deadNodes(t0 + 125s, 30s), (std::vector<std::string>{"a"}));
}

TEST(StoreRendezvous, AnOrphanedJobIsReopenedByAWaitingNode) {
  auto store = std::make_shared<comm::HashStore>();
  TestClock clock;
  RendezvousOptions o = options(1, 2);
  o.orphanTimeout = 60s;
  o.lastCall = 0s;
  o.joinTimeout = 10min;
  StoreRendezvous a(store, o, clock.clock());
  a.join("a", 1);  // generation 1: a alone
  StoreRendezvous b(store, o, clock.clock());
  auto fb = std::async(std::launch::async, [&] { return b.join("b", 1); });
  ASSERT_TRUE(eventually([&] { return a.waitingNodes().size() == 1; }));
  // a goes silent for longer than the orphan timeout: b opens round 2 itself.
  clock.advance(2min);
  const Membership m = fb.get();
  EXPECT_EQ(m.generation, 2u);
  EXPECT_EQ(ids(m), (std::vector<std::string>{"b"}));
}

TEST(StoreRendezvous, BadInputIsRejected) {
  auto store = std::make_shared<comm::HashStore>();
  StoreRendezvous r(store, options(1, 1));
  EXPECT_THROW(r.join("", 1), RendezvousError);
  EXPECT_THROW(r.join("has space", 1), RendezvousError);
  EXPECT_THROW(r.join("a", 0), RendezvousError);
  RendezvousOptions o = options(2, 1);
  try {
    StoreRendezvous bad(store, o);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "rendezvous.max_nodes = 1: expected an integer >= rendezvous.min_nodes");
  }
  store->set("job/g/1/members", "garbage");
  EXPECT_THROW(r.membership(1), RendezvousError);
}

TEST(StoreRendezvous, WorksOverTcpStoreOnLoopback) {
  comm::TcpStoreOptions server;
  server.host = "127.0.0.1";
  server.port = 0;
  server.isServer = true;
  server.token = "agent-test";
  server.timeout = 30s;
  auto host = std::make_shared<comm::TcpStore>(server);
  constexpr int kAgents = 3;
  TestClock clock;
  std::vector<std::future<Membership>> joins;
  for (int i = 0; i < kAgents; ++i) {
    joins.push_back(std::async(std::launch::async, [&, i] {
      comm::TcpStoreOptions client = server;
      client.isServer = false;
      client.port = host->port();
      auto store = std::make_shared<comm::TcpStore>(client);
      RendezvousOptions o = options(kAgents, kAgents);
      o.pollInterval = 5ms;
      StoreRendezvous r(store, o, clock.clock());
      Membership m = r.join(fmt::format("host{}", i), 2);
      r.heartbeat(clock.now());
      return m;
    }));
  }
  std::vector<Membership> got;
  for (auto& f : joins) {
    got.push_back(f.get());
  }
  ASSERT_EQ(got[0].nodes.size(), static_cast<std::size_t>(kAgents));
  for (const Membership& m : got) {
    EXPECT_EQ(m, got[0]);
  }
  StoreRendezvous observer(host, options(kAgents, kAgents), clock.clock());
  EXPECT_EQ(observer.latestGeneration(), 1u);
  EXPECT_TRUE(observer.deadNodes(clock.now(), 10min).empty());
}

}  // namespace
}  // namespace stretch::agent
