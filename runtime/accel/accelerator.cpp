#include "runtime/accel/accelerator.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <utility>

#include <fmt/format.h>

#include "runtime/accel/cpu_accelerator.hpp"
#include "runtime/common/check.hpp"
#include "runtime/common/strings.hpp"
#if defined(STRETCH_ACCEL_HAVE_CUDA)
#include "runtime/accel/cuda_accelerator.hpp"
#endif

namespace stretch::accel {

// ---- Accelerator and PinnedBuffer ---------------------------------------------------------

Accelerator::~Accelerator() = default;

std::string Accelerator::deviceName(std::optional<int> index) const {
  if (!index || *index < 0)
    return deviceType();
  return fmt::format("{}:{}", deviceType(), *index);
}

PinnedBuffer Accelerator::pinned(std::size_t bytes) {
  return PinnedBuffer(this, allocatePinned(bytes), bytes);
}

int Accelerator::resolveDevice(std::optional<int> device, std::string_view what) const {
  const int count = deviceCount();
  if (count == 0) {
    throw AcceleratorError(
        fmt::format("{}: {}: no {} device is visible to this process", name(), what, deviceType()));
  }
  const int index = device ? *device : currentDevice();
  if (index < 0 || index >= count) {
    throw AcceleratorError(fmt::format("{}: {}(device {}): expected a device index in [0, {})",
                                       name(), what, index, count));
  }
  return index;
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = std::exchange(other.owner_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  reset();
}

void PinnedBuffer::reset() noexcept {
  if (owner_ != nullptr && data_ != nullptr)
    owner_->freePinned(data_);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

// ---- Probing and selection ----------------------------------------------------------------

CudaStatus cudaStatus() {
#if defined(STRETCH_ACCEL_HAVE_CUDA)
  return probeCudaRuntime();
#else
  CudaStatus status;
  status.unavailableReason = "CUDA support not built: " STRETCH_ACCEL_NO_CUDA_REASON;
  return status;
#endif
}

std::string_view toString(SelectionSource source) noexcept {
  switch (source) {
    case SelectionSource::Environment:
      return "environment";
    case SelectionSource::Detection:
      return "detection";
    case SelectionSource::Override:
      return "setAccelerator";
  }
  return "unknown";
}

namespace {

std::string lowerTrimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos)
    return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  std::string out(text.substr(first, last - first + 1));
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string joinNames(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0)
      out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

std::string pluralDevices(int count) {
  return fmt::format("{} CUDA device{} visible", count, count == 1 ? "" : "s");
}

}  // namespace

AcceleratorChoice selectAccelerator(const SelectionInput& input) {
  std::string variable;
  std::string rawValue;
  for (const std::string_view candidate : {kAcceleratorEnv, kDeepSpeedAcceleratorEnv}) {
    const auto it = input.env.find(std::string(candidate));
    if (it != input.env.end() && !lowerTrimmed(it->second).empty()) {
      variable = candidate;
      rawValue = it->second;
      break;
    }
  }

  if (variable.empty()) {
    if (input.cuda.built && input.cuda.deviceCount > 0)
      return {"cuda", SelectionSource::Detection, pluralDevices(input.cuda.deviceCount)};
    if (!input.cuda.built) {
      return {"cpu", SelectionSource::Detection,
              input.cuda.unavailableReason.empty() ? std::string("CUDA support not built")
                                                   : input.cuda.unavailableReason};
    }
    return {"cpu", SelectionSource::Detection,
            input.cuda.unavailableReason.empty()
                ? std::string("no CUDA device visible")
                : fmt::format("no CUDA device: {}", input.cuda.unavailableReason)};
  }

  const std::string value = lowerTrimmed(rawValue);
  const std::string reason = fmt::format("{}={}", variable, rawValue);
  std::vector<std::string> accepted = {"cpu", "cuda"};
  for (const std::string& ext : input.extensions)
    accepted.push_back(lowerTrimmed(ext));
  std::sort(accepted.begin(), accepted.end());
  accepted.erase(std::unique(accepted.begin(), accepted.end()), accepted.end());

  const bool isExtension =
      std::any_of(input.extensions.begin(), input.extensions.end(),
                  [&](const std::string& ext) { return lowerTrimmed(ext) == value; });
  if (isExtension || value == "cpu")
    return {value, SelectionSource::Environment, reason};
  if (value == "cuda") {
    if (!input.cuda.built) {
      throw ConfigError(
          ErrorDetail{variable, rawValue,
                      "an accelerator this build supports: CUDA support was not built into Stretch "
                      "(configure it with the CUDA toolkit and NCCL installed), so use cpu"});
    }
    if (input.cuda.deviceCount == 0) {
      throw ConfigError(ErrorDetail{
          variable, rawValue,
          fmt::format(
              "an accelerator with a device, but no CUDA device is visible ({}); use cpu",
              input.cuda.unavailableReason.empty() ? "no device" : input.cuda.unavailableReason)});
    }
    return {"cuda", SelectionSource::Environment, reason};
  }

  std::string expected = fmt::format("one of {}", joinNames(accepted));
  const std::vector<std::string_view> views(accepted.begin(), accepted.end());
  if (const auto guess = closestMatch(value, views))
    expected += fmt::format(" (did you mean \"{}\"?)", *guess);
  throw ConfigError(ErrorDetail{variable, rawValue, expected});
}

std::map<std::string, std::string> acceleratorEnvironment() {
  std::map<std::string, std::string> env;
  for (const std::string_view name : {kAcceleratorEnv, kDeepSpeedAcceleratorEnv}) {
    if (const char* value = std::getenv(std::string(name).c_str()))
      env.emplace(std::string(name), value);
  }
  return env;
}

// ---- The process-wide accelerator ---------------------------------------------------------

namespace {

struct GlobalState {
  std::mutex mutex;
  std::map<std::string, AcceleratorFactory> factories;
  std::shared_ptr<Accelerator> current;
  AcceleratorChoice choice;
};

GlobalState& state() {
  static GlobalState instance;
  return instance;
}

}  // namespace

void registerAccelerator(const std::string& name, AcceleratorFactory factory) {
  const std::string key = lowerTrimmed(name);
  STRETCH_CHECK(!key.empty(), "registerAccelerator: empty accelerator name");
  STRETCH_CHECK(static_cast<bool>(factory), "registerAccelerator('{}'): empty factory", key);
  GlobalState& s = state();
  const std::lock_guard lock(s.mutex);
  s.factories[key] = std::move(factory);
}

std::vector<std::string> registeredAccelerators() {
  GlobalState& s = state();
  const std::lock_guard lock(s.mutex);
  std::vector<std::string> names;
  for (const auto& entry : s.factories)
    names.push_back(entry.first);
  return names;
}

std::shared_ptr<Accelerator> createAccelerator(const std::string& name) {
  const std::string key = lowerTrimmed(name);
  AcceleratorFactory factory;
  {
    GlobalState& s = state();
    const std::lock_guard lock(s.mutex);
    if (const auto it = s.factories.find(key); it != s.factories.end())
      factory = it->second;
  }
  // Called outside the lock so that a factory may use the registry itself.
  std::shared_ptr<Accelerator> created;
  if (factory) {
    created = factory();
  } else if (key == "cpu") {
    created = std::make_shared<CpuAccelerator>();
#if defined(STRETCH_ACCEL_HAVE_CUDA)
  } else if (key == "cuda") {
    created = std::make_shared<CudaAccelerator>();
#endif
  } else {
    throw ConfigError(fmt::format("accelerator '{}': expected cpu{} or a registered extension",
                                  name, cudaStatus().built ? ", cuda" : ""));
  }
  STRETCH_CHECK(created != nullptr, "the factory of accelerator '{}' returned nullptr", key);
  return created;
}

std::shared_ptr<Accelerator> getAccelerator() {
  GlobalState& s = state();
  SelectionInput input;
  {
    const std::lock_guard lock(s.mutex);
    if (s.current)
      return s.current;
    for (const auto& entry : s.factories)
      input.extensions.push_back(entry.first);
  }
  input.env = acceleratorEnvironment();
  input.cuda = cudaStatus();
  const AcceleratorChoice choice = selectAccelerator(input);
  std::shared_ptr<Accelerator> created = createAccelerator(choice.name);
  const std::lock_guard lock(s.mutex);
  if (!s.current) {  // another thread may have won the race; keep its instance
    s.current = std::move(created);
    s.choice = choice;
  }
  return s.current;
}

AcceleratorChoice acceleratorChoice() {
  static_cast<void>(getAccelerator());
  GlobalState& s = state();
  const std::lock_guard lock(s.mutex);
  return s.choice;
}

void setAccelerator(std::shared_ptr<Accelerator> accelerator) {
  GlobalState& s = state();
  const std::lock_guard lock(s.mutex);
  if (accelerator) {
    s.choice = {accelerator->name(), SelectionSource::Override, "set by setAccelerator()"};
  } else {
    s.choice = {};
  }
  s.current = std::move(accelerator);
}

}  // namespace stretch::accel
