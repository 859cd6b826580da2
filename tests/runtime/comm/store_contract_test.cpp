// The Store contract (runtime/comm/store.hpp), run over every implementation.
//
// This file builds two executables:
//  - store_contract_test (unit): HashStore, FileStore, TCPStore and each inside a PrefixStore;
//  - store_integration_test (integration, STRETCH_STORE_TEST_INTEGRATION=1): RedisStore against
//    a redis-server the test starts on loopback (skipped when the binary is absent), and the
//    multi-process cases: forked children that add and set while the parent waits, for FileStore
//    and TCPStore.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <signal.h>
#include <string>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/comm/errors.hpp"
#include "runtime/comm/file_store.hpp"
#include "runtime/comm/store.hpp"
#include "runtime/comm/tcp_store.hpp"
#include "tests/runtime/comm/redis_server.hpp"
#include "tests/runtime/comm/store_test_util.hpp"
#if defined(STRETCH_TEST_HAVE_REDIS_STORE)
#include "runtime/comm/redis/redis_store.hpp"
#endif

#ifndef STRETCH_STORE_TEST_INTEGRATION
#define STRETCH_STORE_TEST_INTEGRATION 0
#endif

namespace stretch::comm {
namespace {

using namespace std::chrono_literals;
using test::Children;
using test::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

// Default timeout of every handle: long enough for a loaded CI machine, short enough that a
// broken store fails the test instead of hanging it.
constexpr Duration kHandleTimeout = 20s;
// Upper slack on "times out after T": the call must return within T + kTimeoutSlack.
constexpr Duration kTimeoutSlack = 3s;

// One store under test and the ways to get more handles onto it.
class Harness {
 public:
  virtual ~Harness() = default;
  // A new handle on the same store (a new object or client), with `timeout` as its timeout.
  // Also callable in a forked child when multiProcess().
  virtual std::shared_ptr<Store> open(Duration timeout) = 0;
  // A handle on the store below any prefix (for prefix-isolation checks).
  virtual std::shared_ptr<Store> openUnderlying(Duration timeout) { return open(timeout); }
  virtual bool multiProcess() const { return false; }
  // Non-empty: the suite is skipped with this message.
  virtual std::string skipReason() const { return {}; }
};

class HashHarness final : public Harness {
 public:
  // HashStore has one timeout for everyone who shares it: the latest open() sets it.
  std::shared_ptr<Store> open(Duration timeout) override {
    store_->setTimeout(timeout);
    return store_;
  }

 private:
  std::shared_ptr<HashStore> store_ = std::make_shared<HashStore>(kHandleTimeout);
};

class FileHarness final : public Harness {
 public:
  std::shared_ptr<Store> open(Duration timeout) override {
    return std::make_shared<FileStore>((dir_.path() / "store").string(), timeout);
  }
  bool multiProcess() const override { return true; }

 private:
  TempDir dir_;
};

class TcpHarness final : public Harness {
 public:
  TcpHarness() {
    TcpStoreOptions options = clientOptions(kHandleTimeout);
    options.isServer = true;
    options.port = 0;
    server_ = std::make_unique<TcpStore>(options);
    port_ = server_->port();
  }
  std::shared_ptr<Store> open(Duration timeout) override {
    TcpStoreOptions options = clientOptions(timeout);
    options.port = port_;
    return std::make_shared<TcpStore>(options);
  }
  bool multiProcess() const override { return true; }

 private:
  static TcpStoreOptions clientOptions(Duration timeout) {
    TcpStoreOptions options;
    options.host = "127.0.0.1";
    options.token = "contract-test-token";
    options.timeout = timeout;
    return options;
  }
  std::unique_ptr<TcpStore> server_;
  int port_ = 0;
};

#if defined(STRETCH_TEST_HAVE_REDIS_STORE)

using test::RedisServer;

class RedisHarness final : public Harness {
 public:
  std::shared_ptr<Store> open(Duration timeout) override {
    redis::RedisStoreOptions options;
    options.host = "127.0.0.1";
    options.port = server_.port();
    options.keyPrefix = "contract/";
    options.timeout = timeout;
    return std::make_shared<redis::RedisStore>(options);
  }
  std::string skipReason() const override {
    if (server_.binary().empty())
      return "redis-server not found (PATH or STRETCH_REDIS_SERVER): install redis-server";
    return {};
  }
  const RedisServer& server() const noexcept { return server_; }

 private:
  RedisServer server_;
};

#else

class RedisHarness final : public Harness {
 public:
  std::shared_ptr<Store> open(Duration) override { return nullptr; }
  std::string skipReason() const override {
    return "RedisStore not built (STRETCH_WITH_REDIS is off or hiredis is missing)";
  }
};

#endif

// A store over another harness's: `Wrap` builds it over the inner store.
template <typename Base, typename Wrap>
class WrappingHarness final : public Harness {
 public:
  std::shared_ptr<Store> open(Duration timeout) override {
    std::shared_ptr<Store> store = Wrap{}(base_.open(timeout));
    store->setTimeout(timeout);
    return store;
  }
  std::shared_ptr<Store> openUnderlying(Duration timeout) override { return base_.open(timeout); }
  bool multiProcess() const override { return base_.multiProcess(); }
  std::string skipReason() const override { return base_.skipReason(); }

 private:
  Base base_;
};

struct InPrefixStore {
  std::shared_ptr<Store> operator()(std::shared_ptr<Store> inner) const {
    return std::make_shared<PrefixStore>("job", std::move(inner));
  }
};
// The forwarding base alone: every method reaches the inner store unchanged.
struct InForwardingStore {
  std::shared_ptr<Store> operator()(std::shared_ptr<Store> inner) const {
    return std::make_shared<ForwardingStore>(std::move(inner));
  }
};
template <typename Base>
using PrefixHarness = WrappingHarness<Base, InPrefixStore>;
template <typename Base>
using ForwardingHarness = WrappingHarness<Base, InForwardingStore>;

// Type parameters: a harness and its name in test names.
template <typename H>
struct Kind {
  using Harness = H;
};
struct KindNames {
  template <typename K>
  static std::string GetName(int) {
    using H = typename K::Harness;
    if constexpr (std::is_same_v<H, HashHarness>)
      return "HashStore";
    else if constexpr (std::is_same_v<H, FileHarness>)
      return "FileStore";
    else if constexpr (std::is_same_v<H, TcpHarness>)
      return "TCPStore";
    else if constexpr (std::is_same_v<H, RedisHarness>)
      return "RedisStore";
    else if constexpr (std::is_same_v<H, PrefixHarness<HashHarness>>)
      return "PrefixOverHashStore";
    else if constexpr (std::is_same_v<H, PrefixHarness<FileHarness>>)
      return "PrefixOverFileStore";
    else if constexpr (std::is_same_v<H, PrefixHarness<TcpHarness>>)
      return "PrefixOverTCPStore";
    else if constexpr (std::is_same_v<H, ForwardingHarness<HashHarness>>)
      return "ForwardingOverHashStore";
    else
      return "PrefixOverRedisStore";
  }
};

template <typename K>
class StoreContractTest : public ::testing::Test {
 protected:
  void SetUp() override {
    harness_ = std::make_unique<typename K::Harness>();
    if (const std::string reason = harness_->skipReason(); !reason.empty())
      GTEST_SKIP() << reason;
#if defined(STRETCH_TEST_HAVE_REDIS_STORE)
    if constexpr (std::is_same_v<typename K::Harness, RedisHarness>) {
      ASSERT_TRUE(harness_->server().running()) << harness_->server().error();
    }
#endif
    store_ = harness_->open(kHandleTimeout);
  }

  Store& store() {
    return *store_;
  }
  std::shared_ptr<Store> open(Duration timeout = kHandleTimeout) {
    return harness_->open(timeout);
  }

  std::unique_ptr<typename K::Harness> harness_;
  std::shared_ptr<Store> store_;
};

#if STRETCH_STORE_TEST_INTEGRATION
using ContractKinds = ::testing::Types<Kind<RedisHarness>, Kind<PrefixHarness<RedisHarness>>>;
#else
using ContractKinds =
    ::testing::Types<Kind<HashHarness>, Kind<FileHarness>, Kind<TcpHarness>,
                     Kind<PrefixHarness<HashHarness>>, Kind<PrefixHarness<FileHarness>>,
                     Kind<PrefixHarness<TcpHarness>>, Kind<ForwardingHarness<HashHarness>>>;
#endif
TYPED_TEST_SUITE(StoreContractTest, ContractKinds, KindNames);

std::string allByteValues() {
  std::string out;
  for (int repeat = 0; repeat < 2; ++repeat) {
    for (int c = 0; c < 256; ++c)
      out.push_back(static_cast<char>(c));
  }
  out.insert(out.begin() + 10, 3, '\0');
  return out;
}

TYPED_TEST(StoreContractTest, SetThenGetReturnsTheValueAndSetOverwrites) {
  this->store().set("alpha", "1");
  EXPECT_EQ(this->store().get("alpha"), "1");
  this->store().set("alpha", "two");
  EXPECT_EQ(this->store().get("alpha"), "two");
}

TYPED_TEST(StoreContractTest, AnotherHandleSeesTheSameKeys) {
  auto other = this->open();
  this->store().set("shared", "from-first");
  EXPECT_EQ(other->get("shared"), "from-first");
  other->set("shared", "from-second");
  EXPECT_EQ(this->store().get("shared"), "from-second");
}

TYPED_TEST(StoreContractTest, EmptyValueIsAValueButEmptyKeyIsAnError) {
  this->store().set("empty", "");
  EXPECT_TRUE(this->store().check({"empty"}));
  EXPECT_EQ(this->store().get("empty"), "");
  EXPECT_THROW(this->store().set("", "x"), StoreError);
}

TYPED_TEST(StoreContractTest, BinaryValuesRoundTripExactly) {
  const std::string bytes = allByteValues();
  this->store().set("binary", bytes);
  EXPECT_EQ(this->store().get("binary"), bytes);

  std::mt19937_64 rng(20240611);
  std::string big(std::size_t{1} << 20, '\0');
  for (auto& c : big)
    c = static_cast<char>(rng() & 0xFFu);
  this->store().set("one-mebibyte", big);
  const std::string back = this->open()->get("one-mebibyte");
  EXPECT_EQ(back.size(), big.size());
  EXPECT_TRUE(back == big) << "1 MiB value changed in transit";
}

TYPED_TEST(StoreContractTest, AddTreatsMissingAsZeroAndStoresDecimalText) {
  EXPECT_EQ(this->store().add("counter", 3), 3);
  EXPECT_EQ(this->store().add("counter", -5), -2);
  EXPECT_EQ(this->store().get("counter"), "-2");
  EXPECT_EQ(this->store().add("negative", -7), -7);
  EXPECT_EQ(this->store().get("negative"), "-7");
  EXPECT_EQ(this->store().add("zero", 0), 0);
  EXPECT_TRUE(this->store().check({"zero"}));
  this->store().set("preset", "40");
  EXPECT_EQ(this->store().add("preset", 2), 42);
}

TYPED_TEST(StoreContractTest, AddOnANonNumericValueThrowsAndLeavesItAlone) {
  this->store().set("text", "abc");
  EXPECT_THROW(this->store().add("text", 1), StoreError);
  EXPECT_EQ(this->store().get("text"), "abc");
}

TYPED_TEST(StoreContractTest, ConcurrentAddsFromSeveralThreadsSumExactly) {
  constexpr int kThreads = 4;
  constexpr int kAdds = 100;
  // Half the threads share the fixture's handle (thread safety), half have their own.
  std::vector<std::shared_ptr<Store>> handles;
  for (int t = 0; t < kThreads; ++t)
    handles.push_back(t % 2 == 0 ? this->store_ : this->open());
  std::vector<std::vector<std::int64_t>> returned(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < kAdds; ++i)
          returned[static_cast<std::size_t>(t)].push_back(
              handles[static_cast<std::size_t>(t)]->add("sum", 1));
      } catch (...) {
        failures.fetch_add(1);
      }
    });
  }
  for (auto& thread : threads)
    thread.join();
  ASSERT_EQ(failures.load(), 0);
  EXPECT_EQ(this->store().get("sum"), std::to_string(kThreads * kAdds));
  // Atomic adds hand out every intermediate total exactly once.
  std::vector<std::int64_t> all;
  for (const auto& r : returned)
    all.insert(all.end(), r.begin(), r.end());
  std::sort(all.begin(), all.end());
  std::vector<std::int64_t> expected(kThreads * kAdds);
  std::iota(expected.begin(), expected.end(), 1);
  EXPECT_EQ(all, expected);
}

TYPED_TEST(StoreContractTest, CompareSetFollowsTheContract) {
  Store& s = this->store();
  // Missing key, empty expected: set.
  EXPECT_EQ(s.compareSet("cas", "", "first"), "first");
  EXPECT_EQ(s.get("cas"), "first");
  // Missing key, non-empty expected: nothing stored, expected returned.
  EXPECT_EQ(s.compareSet("cas-missing", "old", "new"), "old");
  EXPECT_FALSE(s.check({"cas-missing"}));
  // Present and equal: replaced.
  EXPECT_EQ(s.compareSet("cas", "first", "second"), "second");
  EXPECT_EQ(s.get("cas"), "second");
  // Present and different: unchanged, current value returned.
  EXPECT_EQ(s.compareSet("cas", "first", "third"), "second");
  EXPECT_EQ(s.get("cas"), "second");
  // Present with an empty value, empty expected: equal, so replaced.
  s.set("cas-empty", "");
  EXPECT_EQ(s.compareSet("cas-empty", "", "filled"), "filled");
  // Present, empty expected but non-empty value: unchanged.
  EXPECT_EQ(s.compareSet("cas", "", "fourth"), "second");
  // Binary-safe.
  const std::string bytes = allByteValues();
  EXPECT_EQ(s.compareSet("cas", "second", bytes), bytes);
  EXPECT_EQ(s.compareSet("cas", bytes, "back"), "back");
}

TYPED_TEST(StoreContractTest, ConcurrentCompareSetHasExactlyOneWinner) {
  constexpr int kThreads = 4;
  std::vector<std::string> results(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    auto handle = t == 0 ? this->store_ : this->open();
    threads.emplace_back([&, t, handle] {
      try {
        results[static_cast<std::size_t>(t)] =
            handle->compareSet("leader", "", fmt::format("rank-{}", t));
      } catch (...) {
        failures.fetch_add(1);
      }
    });
  }
  for (auto& thread : threads)
    thread.join();
  ASSERT_EQ(failures.load(), 0);
  const std::string winner = this->store().get("leader");
  int winners = 0;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(results[static_cast<std::size_t>(t)], winner) << "thread " << t;
    winners += winner == fmt::format("rank-{}", t) ? 1 : 0;
  }
  EXPECT_EQ(winners, 1);
}

TYPED_TEST(StoreContractTest, CheckIsTrueOnlyWhenEveryKeyExists) {
  EXPECT_TRUE(this->store().check({}));
  EXPECT_FALSE(this->store().check({"c1"}));
  this->store().set("c1", "x");
  EXPECT_TRUE(this->store().check({"c1"}));
  EXPECT_FALSE(this->store().check({"c1", "c2"}));
  this->store().set("c2", "y");
  EXPECT_TRUE(this->store().check({"c1", "c2", "c1"}));
}

TYPED_TEST(StoreContractTest, WaitReturnsOnceEveryKeyAppears) {
  this->store().set("already", "1");
  const auto presentTook = test::timed([&] { this->store().wait({"already"}, 5s); });
  EXPECT_LT(presentTook, 2s);

  auto setter = this->open();
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    try {
      this->store().wait({"w1", "w2", "already"});
      done.store(true);
    } catch (...) {
    }
  });
  std::this_thread::sleep_for(50ms);
  setter->set("w1", "a");
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(done.load()) << "wait returned before w2 existed";
  setter->set("w2", "b");
  waiter.join();
  EXPECT_TRUE(done.load());
}

TYPED_TEST(StoreContractTest, WaitAndSetOnOneHandleFromTwoThreadsDoNotDeadlock) {
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    try {
      this->store().wait({"same-handle"}, 10s);
      done.store(true);
    } catch (...) {
    }
  });
  std::this_thread::sleep_for(50ms);
  const auto took = test::timed([&] { this->store().set("same-handle", "v"); });
  waiter.join();
  EXPECT_TRUE(done.load());
  EXPECT_LT(took, 5s) << "set was held up by the wait on another thread";
}

TYPED_TEST(StoreContractTest, WaitTimesOutNamingTheMissingKeyAndTheHandleStaysUsable) {
  this->store().set("here-key", "1");
  const auto start = std::chrono::steady_clock::now();
  try {
    this->store().wait({"here-key", "absent-key"}, 300ms);
    ADD_FAILURE() << "wait on a missing key returned";
  } catch (const StoreTimeoutError& e) {
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_GE(took, 290ms);
    EXPECT_LT(took, 300ms + kTimeoutSlack);
    EXPECT_THAT(e.what(), HasSubstr("absent-key"));
    EXPECT_THAT(e.what(), Not(HasSubstr("here-key")));
    EXPECT_THAT(e.what(), HasSubstr("300 ms"));
  }
  // The same handle keeps working, and a later wait on it succeeds.
  this->store().set("after-timeout", "ok");
  EXPECT_EQ(this->store().get("after-timeout"), "ok");
  auto setter = this->open();
  std::thread late([&] {
    std::this_thread::sleep_for(50ms);
    setter->set("absent-key", "now");
  });
  EXPECT_NO_THROW(this->store().wait({"absent-key"}, 10s));
  late.join();
}

TYPED_TEST(StoreContractTest, GetTimesOutAfterTheStoreTimeoutNamingTheKey) {
  auto impatient = this->open(250ms);
  const auto start = std::chrono::steady_clock::now();
  try {
    impatient->get("never-set");
    ADD_FAILURE() << "get on a missing key returned";
  } catch (const StoreTimeoutError& e) {
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_GE(took, 240ms);
    EXPECT_LT(took, 250ms + kTimeoutSlack);
    EXPECT_THAT(e.what(), HasSubstr("never-set"));
  }
}

TYPED_TEST(StoreContractTest, DeleteKeyRemovesOnlyThatKey) {
  this->store().set("doomed", "x");
  this->store().set("kept", "y");
  EXPECT_TRUE(this->store().deleteKey("doomed"));
  EXPECT_FALSE(this->store().deleteKey("doomed"));
  EXPECT_FALSE(this->store().check({"doomed"}));
  EXPECT_TRUE(this->store().check({"kept"}));
  EXPECT_FALSE(this->open()->check({"doomed"}));
  // A deleted key can come back.
  EXPECT_EQ(this->store().add("doomed", 5), 5);
}

TYPED_TEST(StoreContractTest, NumKeysCountsDistinctKeys) {
  const std::int64_t before = this->store().numKeys();
  this->store().set("n1", "a");
  this->store().set("n2", "b");
  this->store().add("n3", 1);
  EXPECT_EQ(this->store().numKeys(), before + 3);
  this->store().set("n1", "again");
  EXPECT_EQ(this->store().numKeys(), before + 3);
  this->store().deleteKey("n2");
  EXPECT_EQ(this->open()->numKeys(), before + 2);
}

TYPED_TEST(StoreContractTest, TryMultiGetReturnsWhatExistsNowInOrderWithoutWaiting) {
  this->store().set("m1", "one");
  this->store().add("m3", 7);
  this->store().set("m4", std::string("\0\n", 2));
  const auto start = std::chrono::steady_clock::now();
  const auto values = this->open()->tryMultiGet({"m3", "m2", "m1", "m4", "m1"});
  // A missing key is answered at once, not waited for (the handles' timeout is 20 s).
  EXPECT_LT(std::chrono::steady_clock::now() - start, kTimeoutSlack);
  ASSERT_EQ(values.size(), 5u);
  EXPECT_EQ(values[0], std::optional<std::string>("7"));
  EXPECT_EQ(values[1], std::nullopt);
  EXPECT_EQ(values[2], std::optional<std::string>("one"));
  EXPECT_EQ(values[3], std::optional<std::string>(std::string("\0\n", 2)));
  EXPECT_EQ(values[4], std::optional<std::string>("one"));
  // It creates nothing, and no key at all is an empty answer.
  EXPECT_FALSE(this->store().check({"m2"}));
  EXPECT_TRUE(this->store().tryMultiGet({}).empty());
  EXPECT_THROW(this->store().tryMultiGet({"m1", ""}), StoreError);
}

TYPED_TEST(StoreContractTest, PrefixStoresOnOneStoreDoNotSeeEachOthersKeys) {
  auto under = this->harness_->openUnderlying(kHandleTimeout);
  PrefixStore mine("group-a", this->store_);
  PrefixStore theirs("group-b", under);
  mine.set("rank0", "a-address");
  theirs.set("rank0", "b-address");
  EXPECT_EQ(mine.get("rank0"), "a-address");
  EXPECT_EQ(theirs.get("rank0"), "b-address");
  mine.set("only-a", "1");
  EXPECT_FALSE(theirs.check({"only-a"}));
  EXPECT_FALSE(this->store().check({"rank0"}));  // the unprefixed name is someone else's key
  EXPECT_TRUE(theirs.deleteKey("rank0"));
  EXPECT_EQ(mine.get("rank0"), "a-address");
  EXPECT_EQ(mine.add("count", 2), 2);
  EXPECT_EQ(theirs.add("count", 5), 5);
  try {
    theirs.wait({"only-a"}, 100ms);
    ADD_FAILURE() << "a key under another prefix satisfied the wait";
  } catch (const StoreTimeoutError& e) {
    EXPECT_THAT(e.what(), HasSubstr("group-b/only-a"));
  }
}

TEST(ForwardingStore, RefusesANullInnerStoreNamingTheStore) {
  try {
    PrefixStore store("job", nullptr);
    ADD_FAILURE() << "a PrefixStore over no store was built";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("PrefixStore \"job\": underlying store is null"));
  }
  EXPECT_THROW(ForwardingStore(nullptr), StoreError);
}

// ---------------------------------------------------------------------------------------------
// FileStore's own promises about its file.

#if !STRETCH_STORE_TEST_INTEGRATION

void appendBytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << bytes;
}

TEST(FileStore, IgnoresThenRepairsARecordCutShortByADeadWriter) {
  TempDir dir;
  const auto path = dir.path() / "store";
  FileStore(path.string(), 2s).set("a", "1");
  // A set record of key "bbbbb" whose writer died inside the value-length field.
  appendBytes(path, std::string("\x01\x05\x00\x00\x00\x03\x00", 7));
  FileStore store(path.string(), 2s);
  EXPECT_EQ(store.get("a"), "1");
  EXPECT_EQ(store.numKeys(), 1);
  store.set("c", "3");
  FileStore fresh(path.string(), 2s);
  EXPECT_EQ(fresh.get("c"), "3");
  EXPECT_EQ(fresh.numKeys(), 2);
}

TEST(FileStore, RefusesAFileThatIsNotAStoreAndNamesIt) {
  TempDir dir;
  const auto path = dir.path() / "notes.txt";
  appendBytes(path, "just some text, not a store\n");
  try {
    FileStore store(path.string(), 2s);
    ADD_FAILURE() << "opened a text file as a store";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string()));
    EXPECT_THAT(e.what(), HasSubstr("not a FileStore file"));
  }
  const std::string missingDir = (dir.path() / "no-such-dir" / "store").string();
  try {
    FileStore store(missingDir, 2s);
    ADD_FAILURE() << "created a store in a missing directory";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr(missingDir));
    EXPECT_THAT(e.what(), HasSubstr("No such file"));
  }
}

#endif

// ---------------------------------------------------------------------------------------------
// Multi-process: ranks as real processes.

#if STRETCH_STORE_TEST_INTEGRATION

template <typename K>
class StoreMultiProcessTest : public StoreContractTest<K> {};

using MultiProcessKinds =
    ::testing::Types<Kind<FileHarness>, Kind<TcpHarness>, Kind<PrefixHarness<FileHarness>>,
                     Kind<PrefixHarness<TcpHarness>>>;
TYPED_TEST_SUITE(StoreMultiProcessTest, MultiProcessKinds, KindNames);

TYPED_TEST(StoreMultiProcessTest, ForkedChildrenAddAndSetWhileTheParentWaits) {
  ASSERT_TRUE(this->harness_->multiProcess());
  constexpr int kChildren = 4;
  constexpr int kAdds = 50;
  auto* harness = this->harness_.get();
  Children children;
  for (int c = 0; c < kChildren; ++c) {
    const pid_t pid = children.spawn([harness, c] {
      auto store = harness->open(kHandleTimeout);
      for (int i = 0; i < kAdds; ++i)
        store->add("counter", 1);
      store->set(fmt::format("child/{}", c), std::to_string(::getpid()));
      store->wait({"parent/go"});
      store->set(fmt::format("child/{}/done", c), "1");
    });
    ASSERT_GT(pid, 0) << "fork failed";
  }
  std::vector<std::string> started;
  std::vector<std::string> finished;
  for (int c = 0; c < kChildren; ++c) {
    started.push_back(fmt::format("child/{}", c));
    finished.push_back(fmt::format("child/{}/done", c));
  }
  this->store().wait(started);
  this->store().set("parent/go", "1");
  this->store().wait(finished);
  const std::vector<int> codes = children.join(kHandleTimeout);
  for (int c = 0; c < kChildren; ++c)
    EXPECT_EQ(codes[static_cast<std::size_t>(c)], 0) << "child " << c;
  EXPECT_EQ(this->store().get("counter"), std::to_string(kChildren * kAdds));
  // Every child's pid arrived intact and they are distinct processes.
  std::vector<std::string> pids;
  for (const auto& key : started)
    pids.push_back(this->store().get(key));
  std::sort(pids.begin(), pids.end());
  EXPECT_EQ(std::unique(pids.begin(), pids.end()), pids.end());
  EXPECT_THAT(pids, Not(::testing::Contains(std::to_string(::getpid()))));
}

TYPED_TEST(StoreMultiProcessTest, ChildrenRaceOnCompareSetAndAgreeOnOneLeader) {
  constexpr int kChildren = 4;
  auto* harness = this->harness_.get();
  Children children;
  for (int c = 0; c < kChildren; ++c) {
    children.spawn([harness, c] {
      auto store = harness->open(kHandleTimeout);
      store->wait({"start"});
      const std::string leader = store->compareSet("leader", "", fmt::format("child-{}", c));
      store->set(fmt::format("seen/{}", c), leader);
    });
  }
  this->store().set("start", "1");
  std::vector<std::string> seen;
  for (int c = 0; c < kChildren; ++c)
    seen.push_back(fmt::format("seen/{}", c));
  this->store().wait(seen);
  const std::string leader = this->store().get("leader");
  for (const auto& key : seen)
    EXPECT_EQ(this->store().get(key), leader) << key;
  for (const int code : children.join(kHandleTimeout))
    EXPECT_EQ(code, 0);
}

#endif

#if STRETCH_STORE_TEST_INTEGRATION && defined(STRETCH_TEST_HAVE_REDIS_STORE)

TEST(RedisStore, KeyPrefixesIsolateJobsAndNumKeysCountsOnlyItsOwn) {
  RedisServer server;
  if (server.binary().empty())
    GTEST_SKIP() << "redis-server not found (PATH or STRETCH_REDIS_SERVER)";
  ASSERT_TRUE(server.running()) << server.error();
  redis::RedisStoreOptions options;
  options.port = server.port();
  options.timeout = 5s;
  options.keyPrefix = "job[1]*/";  // glob characters must not widen numKeys' SCAN
  redis::RedisStore a(options);
  options.keyPrefix = "job2/";
  redis::RedisStore b(options);
  options.keyPrefix = "";
  redis::RedisStore whole(options);
  a.set("k", "a");
  a.set("k2", "a");
  b.set("k", "b");
  EXPECT_EQ(a.get("k"), "a");
  EXPECT_EQ(b.get("k"), "b");
  EXPECT_EQ(a.numKeys(), 2);
  EXPECT_EQ(b.numKeys(), 1);
  EXPECT_EQ(whole.numKeys(), 3);
  EXPECT_EQ(whole.get("job[1]*/k2"), "a");
}

TEST(RedisStore, ErrorsNameHostPortAndRedisReply) {
  RedisServer server;
  if (server.binary().empty())
    GTEST_SKIP() << "redis-server not found (PATH or STRETCH_REDIS_SERVER)";
  ASSERT_TRUE(server.running()) << server.error();
  redis::RedisStoreOptions options;
  options.port = server.port();
  options.timeout = 5s;
  redis::RedisStore store(options);
  store.set("text", "abc");
  try {
    store.add("text", 1);
    ADD_FAILURE() << "INCRBY on text succeeded";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr(fmt::format("127.0.0.1:{}", server.port())));
    EXPECT_THAT(e.what(), HasSubstr("not an integer"));
  }
  options.password = "no-such-password";
  try {
    redis::RedisStore rejected(options);
    ADD_FAILURE() << "AUTH with a password on a server without one succeeded";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("AUTH"));
  }
}

TEST(RedisStore, ConnectTimesOutNamingHostPortWhenNoServerListens) {
  const int port = test::freeLoopbackPort();
  redis::RedisStoreOptions options;
  options.port = port;
  options.timeout = 400ms;
  const auto start = std::chrono::steady_clock::now();
  try {
    redis::RedisStore store(options);
    ADD_FAILURE() << "connected to a port nobody listens on";
  } catch (const StoreError& e) {
    EXPECT_LT(std::chrono::steady_clock::now() - start, 400ms + kTimeoutSlack);
    EXPECT_THAT(e.what(), HasSubstr(fmt::format("127.0.0.1:{}", port)));
    EXPECT_THAT(e.what(), HasSubstr("refused"));
  }
}

#endif

}  // namespace
}  // namespace stretch::comm
