#include "runtime/accel/accelerator.hpp"

#include <atomic>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/accel/cpu_accelerator.hpp"

namespace stretch::accel {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// An accelerator extension as a plug-in would write one: two devices, counted pinned memory.
class FakeAccelerator final : public Accelerator {
 public:
  std::string name() const override { return "fake"; }
  std::string deviceType() const override { return "xpu"; }
  int deviceCount() const override { return 2; }
  int currentDevice() const override { return current_; }
  void setDevice(int index) override { current_ = resolveDevice(index, "setDevice"); }
  void synchronize(std::optional<int> device = std::nullopt) override {
    resolveDevice(device, "synchronize");
    ++synchronized_;
  }
  bool isAvailable() const override { return true; }
  std::uint64_t memoryAllocated(std::optional<int> device = std::nullopt) const override {
    return 100u + static_cast<std::uint64_t>(resolveDevice(device, "memoryAllocated"));
  }
  std::uint64_t memoryReserved(std::optional<int> device = std::nullopt) const override {
    return 200u + static_cast<std::uint64_t>(resolveDevice(device, "memoryReserved"));
  }
  std::uint64_t totalMemory(std::optional<int>) const override { return 1000; }
  std::uint64_t availableMemory(std::optional<int>) const override { return 900; }
  DeviceProperties deviceProperties(int index) const override {
    return {resolveDevice(index, "deviceProperties"), "Fake XPU", 1000, "", ""};
  }
  std::string communicationBackendName() const override { return "fakecomm"; }
  bool onAccelerator(const void* ptr) const override { return ptr == &deviceWord_; }
  void* allocatePinned(std::size_t bytes) override {
    if (bytes == 0)
      return nullptr;
    ++live_;
    return ::operator new(bytes);
  }
  void freePinned(void* ptr) noexcept override {
    if (ptr != nullptr) {
      --live_;
      ::operator delete(ptr);
    }
  }

  int live_ = 0;
  int synchronized_ = 0;
  int deviceWord_ = 0;

 private:
  int current_ = 0;
};

// ---- The interface's shared behaviour -----------------------------------------------------

TEST(AcceleratorTest, DeviceNamesFollowDeepSpeed) {
  FakeAccelerator fake;
  EXPECT_EQ(fake.deviceName(), "xpu");
  EXPECT_EQ(fake.deviceName(1), "xpu:1");
  EXPECT_EQ(fake.deviceName(-1), "xpu");
  fake.setDevice(1);
  EXPECT_EQ(fake.currentDevice(), 1);
  EXPECT_EQ(fake.currentDeviceName(), "xpu:1");
}

TEST(AcceleratorTest, OutOfRangeDevicesNameTheRange) {
  FakeAccelerator fake;
  try {
    fake.setDevice(2);
    FAIL() << "setDevice(2) of 2 devices did not throw";
  } catch (const AcceleratorError& e) {
    EXPECT_THAT(e.what(),
                AllOf(HasSubstr("fake"), HasSubstr("setDevice(device 2)"), HasSubstr("[0, 2)")));
  }
  EXPECT_THROW(fake.synchronize(-1), AcceleratorError);
  EXPECT_EQ(fake.currentDevice(), 0);  // unchanged by the failed call
  fake.synchronize(1);
  fake.synchronize();
  EXPECT_EQ(fake.synchronized_, 2);
  EXPECT_EQ(fake.memoryAllocated(), 100u);
  EXPECT_EQ(fake.memoryReserved(1), 201u);
}

TEST(AcceleratorTest, PinnedBufferFreesOnceAndMoves) {
  FakeAccelerator fake;
  {
    PinnedBuffer a = fake.pinned(64);
    ASSERT_TRUE(a);
    EXPECT_EQ(a.bytes(), 64u);
    EXPECT_EQ(fake.live_, 1);
    PinnedBuffer b = std::move(a);
    EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    EXPECT_EQ(fake.live_, 1);
    PinnedBuffer c = fake.pinned(8);
    EXPECT_EQ(fake.live_, 2);
    c = std::move(b);  // frees c's old memory
    EXPECT_EQ(fake.live_, 1);
    EXPECT_EQ(c.bytes(), 64u);
  }
  EXPECT_EQ(fake.live_, 0);
  PinnedBuffer empty = fake.pinned(0);
  EXPECT_FALSE(empty);
  EXPECT_EQ(fake.live_, 0);
}

// ---- selectAccelerator: a pure function of the environment and the probe ------------------

CudaStatus noCuda() {
  CudaStatus s;
  s.unavailableReason = "CUDA support not built";
  return s;
}

CudaStatus cudaWith(int devices) {
  CudaStatus s;
  s.built = true;
  s.runtimeVersion = "13.0";
  s.deviceCount = devices;
  if (devices == 0)
    s.unavailableReason = "CUDA driver version is insufficient for CUDA runtime version";
  return s;
}

std::string selectionError(const SelectionInput& input) {
  try {
    const AcceleratorChoice choice = selectAccelerator(input);
    ADD_FAILURE() << "expected a ConfigError, got " << choice.name;
  } catch (const ConfigError& e) {
    return e.what();
  }
  return {};
}

TEST(SelectAcceleratorTest, DetectionPrefersAVisibleCudaDevice) {
  const AcceleratorChoice two = selectAccelerator({{}, cudaWith(2), {}});
  EXPECT_EQ(two.name, "cuda");
  EXPECT_EQ(two.source, SelectionSource::Detection);
  EXPECT_EQ(two.reason, "2 CUDA devices visible");

  const AcceleratorChoice none = selectAccelerator({{}, cudaWith(0), {}});
  EXPECT_EQ(none.name, "cpu");
  EXPECT_EQ(none.source, SelectionSource::Detection);
  EXPECT_THAT(none.reason, HasSubstr("insufficient"));

  const AcceleratorChoice unbuilt = selectAccelerator({{}, noCuda(), {}});
  EXPECT_EQ(unbuilt.name, "cpu");
  EXPECT_THAT(unbuilt.reason, HasSubstr("not built"));
}

TEST(SelectAcceleratorTest, EnvironmentOverridesDetection) {
  const AcceleratorChoice cpu =
      selectAccelerator({{{"STRETCH_ACCELERATOR", "cpu"}}, cudaWith(8), {}});
  EXPECT_EQ(cpu.name, "cpu");
  EXPECT_EQ(cpu.source, SelectionSource::Environment);
  EXPECT_EQ(cpu.reason, "STRETCH_ACCELERATOR=cpu");

  const AcceleratorChoice ds = selectAccelerator({{{"DS_ACCELERATOR", "CUDA"}}, cudaWith(1), {}});
  EXPECT_EQ(ds.name, "cuda");
  EXPECT_EQ(ds.reason, "DS_ACCELERATOR=CUDA");
}

TEST(SelectAcceleratorTest, StretchVariableWinsAndEmptyMeansUnset) {
  const AcceleratorChoice both = selectAccelerator(
      {{{"STRETCH_ACCELERATOR", "cpu"}, {"DS_ACCELERATOR", "cuda"}}, cudaWith(1), {}});
  EXPECT_EQ(both.name, "cpu");
  EXPECT_EQ(both.reason, "STRETCH_ACCELERATOR=cpu");

  const AcceleratorChoice empty = selectAccelerator(
      {{{"STRETCH_ACCELERATOR", "  "}, {"DS_ACCELERATOR", "cpu"}}, cudaWith(1), {}});
  EXPECT_EQ(empty.reason, "DS_ACCELERATOR=cpu");
  EXPECT_EQ(selectAccelerator({{{"STRETCH_ACCELERATOR", ""}}, cudaWith(1), {}}).source,
            SelectionSource::Detection);
}

TEST(SelectAcceleratorTest, UnknownValueNamesVariableValueAndAcceptedNames) {
  const std::string message =
      selectionError({{{"STRETCH_ACCELERATOR", "bogus"}}, cudaWith(1), {"fake"}});
  EXPECT_EQ(message, "STRETCH_ACCELERATOR = bogus: expected one of cpu, cuda or fake");
  try {
    selectAccelerator({{{"DS_ACCELERATOR", "tpu"}}, noCuda(), {}});
    FAIL() << "tpu was accepted";
  } catch (const ConfigError& e) {
    ASSERT_TRUE(e.detail().has_value());
    EXPECT_EQ(e.detail()->path, "DS_ACCELERATOR");
    EXPECT_EQ(e.detail()->value, "tpu");
  }
  EXPECT_THAT(selectionError({{{"STRETCH_ACCELERATOR", "cud"}}, cudaWith(1), {}}),
              HasSubstr("did you mean \"cuda\"?"));
}

TEST(SelectAcceleratorTest, CudaRequestedWithoutCudaIsAClearError) {
  EXPECT_THAT(
      selectionError({{{"STRETCH_ACCELERATOR", "cuda"}}, noCuda(), {}}),
      AllOf(HasSubstr("STRETCH_ACCELERATOR = cuda"), HasSubstr("not built"), HasSubstr("use cpu")));
  EXPECT_THAT(selectionError({{{"DS_ACCELERATOR", "cuda"}}, cudaWith(0), {}}),
              AllOf(HasSubstr("DS_ACCELERATOR = cuda"), HasSubstr("no CUDA device is visible"),
                    HasSubstr("insufficient")));
}

TEST(SelectAcceleratorTest, RegisteredExtensionsAreAccepted) {
  const AcceleratorChoice fake =
      selectAccelerator({{{"STRETCH_ACCELERATOR", "Fake"}}, noCuda(), {"fake"}});
  EXPECT_EQ(fake.name, "fake");
  EXPECT_EQ(fake.source, SelectionSource::Environment);
  // An extension registered as "cuda" replaces the built-in, even in a build without CUDA.
  EXPECT_EQ(selectAccelerator({{{"STRETCH_ACCELERATOR", "cuda"}}, noCuda(), {"cuda"}}).name,
            "cuda");
}

// ---- The process-wide accelerator ---------------------------------------------------------

class GlobalAcceleratorTest : public ::testing::Test {
 protected:
  void TearDown() override { setAccelerator(nullptr); }
};

TEST_F(GlobalAcceleratorTest, SetAcceleratorInstallsAnExtension) {
  auto fake = std::make_shared<FakeAccelerator>();
  setAccelerator(fake);
  EXPECT_EQ(getAccelerator(), fake);
  EXPECT_EQ(getAccelerator()->communicationBackendName(), "fakecomm");
  const AcceleratorChoice choice = acceleratorChoice();
  EXPECT_EQ(choice.name, "fake");
  EXPECT_EQ(choice.source, SelectionSource::Override);

  setAccelerator(nullptr);
  // Back to selection over the real environment, which this test does not control.
  SelectionInput input{acceleratorEnvironment(), cudaStatus(), registeredAccelerators()};
  EXPECT_EQ(getAccelerator()->name(), selectAccelerator(input).name);
  EXPECT_NE(acceleratorChoice().source, SelectionSource::Override);
}

TEST_F(GlobalAcceleratorTest, RegisteredFactoryIsUsedWhenSelected) {
  registerAccelerator("Counting", [] { return std::make_shared<FakeAccelerator>(); });
  const auto names = registeredAccelerators();
  EXPECT_NE(std::find(names.begin(), names.end(), "counting"), names.end());
  // Selection by name goes through the pure function; the factory itself is checked here.
  const AcceleratorChoice choice =
      selectAccelerator({{{"STRETCH_ACCELERATOR", "counting"}}, noCuda(), names});
  EXPECT_EQ(choice.name, "counting");
  const auto created = createAccelerator(choice.name);
  EXPECT_EQ(created->name(), "fake");
  EXPECT_NE(createAccelerator("counting"), created);  // a factory makes a new one each time
  EXPECT_EQ(createAccelerator("CPU")->name(), "cpu");
  EXPECT_THROW(createAccelerator("bogus"), ConfigError);
}

TEST_F(GlobalAcceleratorTest, ConcurrentFirstUseCreatesOneInstance) {
  setAccelerator(nullptr);
  const SelectionInput input{acceleratorEnvironment(), cudaStatus(), registeredAccelerators()};
  try {
    selectAccelerator(input);
  } catch (const ConfigError& e) {
    GTEST_SKIP() << "the environment names an unusable accelerator: " << e.what();
  }
  constexpr int kThreads = 8;
  std::vector<std::shared_ptr<Accelerator>> seen(kThreads);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load())
        std::this_thread::yield();
      seen[static_cast<std::size_t>(i)] = getAccelerator();
    });
  }
  go = true;
  for (auto& t : threads)
    t.join();
  for (const auto& acc : seen)
    EXPECT_EQ(acc, seen.front());
  EXPECT_EQ(getAccelerator(), seen.front());
}

TEST(CudaStatusTest, ReasonIsGivenWhenNoDeviceIsVisible) {
  const CudaStatus status = cudaStatus();
  if (status.deviceCount == 0) {
    EXPECT_FALSE(status.unavailableReason.empty());
  } else {
    EXPECT_TRUE(status.built);
    EXPECT_TRUE(status.unavailableReason.empty());
  }
  if (!status.built) {
    EXPECT_TRUE(status.runtimeVersion.empty());
  }
}

}  // namespace
}  // namespace stretch::accel
