// The communicator interface's pure parts (runtime/comm/communicator.hpp): which NCCL release
// offers which live-recovery call, and the process-wide library registry.

#include "runtime/comm/communicator.hpp"

#include <atomic>
#include <string>
#include <thread>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "runtime/comm/errors.hpp"

namespace stretch::comm {
namespace {

struct Expected {
  bool shrink, revoke, grow, abortParent;
};

void expectFeatures(int major, int minor, int patch, Expected want) {
  SCOPED_TRACE(testing::Message() << "NCCL " << major << "." << minor << "." << patch);
  const CommunicatorFeatures f = ncclFeatures(major, minor, patch);
  EXPECT_EQ(f.library, "nccl");
  EXPECT_EQ(f.major, major);
  EXPECT_EQ(f.minor, minor);
  EXPECT_EQ(f.patch, patch);
  EXPECT_EQ(f.shrink, want.shrink);
  EXPECT_EQ(f.revoke, want.revoke);
  EXPECT_EQ(f.grow, want.grow);
  EXPECT_EQ(f.abortParentAfterAbortiveShrink, want.abortParent);
}

TEST(NcclFeatures, EachReleaseAddsItsCall) {
  expectFeatures(2, 26, 2, {false, false, false, false});
  expectFeatures(2, 26, 99, {false, false, false, false});  // the patch never adds a call
  expectFeatures(2, 27, 0, {true, false, false, false});
  expectFeatures(2, 28, 9, {true, true, false, false});
  expectFeatures(2, 29, 0, {true, true, true, false});
  expectFeatures(2, 30, 4, {true, true, true, false});
  expectFeatures(2, 31, 0, {true, true, true, true});
  expectFeatures(3, 0, 0, {true, true, true, true});  // a later major keeps everything
  expectFeatures(1, 99, 0, {false, false, false, false});
}

TEST(NcclFeatures, VersionIsMajorMinorPatch) {
  EXPECT_EQ(ncclFeatures(2, 28, 9).version(), "2.28.9");
  EXPECT_EQ(ncclFeatures(3, 0, 0).version(), "3.0.0");
  EXPECT_EQ(CommunicatorFeatures{}.version(), "0.0.0");
}

// A library with nothing behind it: the registry only stores and hands it out.
class LocalLibrary : public CommunicatorLibrary {
 public:
  const CommunicatorFeatures& features() const noexcept override { return features_; }
  std::string uniqueId() override { return "00"; }
  std::unique_ptr<Communicator> init(const std::string&, int, int, Duration,
                                     const Interrupt&) override {
    throw CommUnsupportedError("LocalLibrary::init: a registry test's library");
  }
  std::unique_ptr<Communicator> join(const std::string&, int, int, Duration,
                                     const Interrupt&) override {
    throw CommUnsupportedError("LocalLibrary::join: a registry test's library");
  }
  std::shared_ptr<Communicator> adopt(const std::shared_ptr<Backend>&) override { return nullptr; }

 private:
  CommunicatorFeatures features_ = ncclFeatures(2, 28, 9);
};

// Names are process-wide and never removed: each test run uses names of its own (a repeated run,
// --gtest_repeat, must not meet the libraries, and the captured locals, of the run before).
std::string freshName(const std::string& base) {
  static std::atomic<int> runs{0};
  return fmt::format("communicator_test.{}.{}", base, runs++);
}
TEST(CommunicatorLibraryRegistry, AnUnknownNameHasNoLibrary) {
  EXPECT_EQ(communicatorLibrary("communicator_test.never_registered"), nullptr);
}

TEST(CommunicatorLibraryRegistry, MakesTheLibraryOnceOnFirstUse) {
  const std::string name = freshName("once");
  std::atomic<int> made{0};
  registerCommunicatorLibrary(name, [&made] {
    ++made;
    return std::make_shared<LocalLibrary>();
  });
  EXPECT_EQ(made, 0) << "registering must not make the library";

  // Concurrent first uses still make it once, and all see the same library.
  std::vector<std::shared_ptr<CommunicatorLibrary>> seen(8);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < seen.size(); ++i)
    threads.emplace_back([&seen, &name, i] { seen[i] = communicatorLibrary(name); });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(made, 1);
  ASSERT_NE(seen[0], nullptr);
  for (const auto& library : seen)
    EXPECT_EQ(library, seen[0]);
  EXPECT_EQ(communicatorLibrary(name), seen[0]);
  EXPECT_EQ(made, 1);
  EXPECT_EQ(seen[0]->features().version(), "2.28.9");
}

TEST(CommunicatorLibraryRegistry, RegisteringANameAgainKeepsTheFirst) {
  const std::string name = freshName("again");
  int firstMade = 0;
  int secondMade = 0;
  registerCommunicatorLibrary(name, [&firstMade] {
    ++firstMade;
    return std::make_shared<LocalLibrary>();
  });
  // Before and after the first use: neither replaces the first registration.
  registerCommunicatorLibrary(name, [&secondMade] {
    ++secondMade;
    return std::make_shared<LocalLibrary>();
  });
  const auto library = communicatorLibrary(name);
  registerCommunicatorLibrary(name, [&secondMade] {
    ++secondMade;
    return std::make_shared<LocalLibrary>();
  });
  EXPECT_EQ(communicatorLibrary(name), library);
  EXPECT_EQ(firstMade, 1);
  EXPECT_EQ(secondMade, 0);
}

TEST(CommunicatorLibraryRegistry, AMakeThatThrowsIsTriedAgain) {
  const std::string name = freshName("throws");
  int calls = 0;
  registerCommunicatorLibrary(name, [&calls] {
    if (++calls == 1)
      throw CommError("no device yet");
    return std::make_shared<LocalLibrary>();
  });
  EXPECT_THROW(communicatorLibrary(name), CommError);
  EXPECT_NE(communicatorLibrary(name), nullptr);
  EXPECT_NE(communicatorLibrary(name), nullptr);
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace stretch::comm
