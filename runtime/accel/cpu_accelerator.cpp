#include "runtime/accel/cpu_accelerator.hpp"

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

#include <fmt/format.h>

namespace stretch::accel {

namespace {

constexpr std::size_t kPageAlignment = 4096;

std::string readText(const char* path) {
  std::ifstream in(path);
  if (!in)
    return {};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::uint64_t procValue(const char* path, std::string_view key) {
  return parseMeminfoValue(readText(path), key).value_or(0);
}

std::uint64_t sysconfBytes(int name) {
  const long pages = ::sysconf(name);
  const long pageSize = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || pageSize <= 0)
    return 0;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(pageSize);
}

std::string cpuModelName() {
  const std::string text = readText("/proc/cpuinfo");
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        const auto start = line.find_first_not_of(" \t", colon + 1);
        return start == std::string::npos ? std::string() : line.substr(start);
      }
    }
  }
  return "host CPU";
}

}  // namespace

std::optional<std::uint64_t> parseMeminfoValue(std::string_view text, std::string_view key) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ':') {
      continue;
    }
    std::string_view rest = line.substr(key.size() + 1);
    const auto digits = rest.find_first_not_of(" \t");
    if (digits == std::string_view::npos)
      return std::nullopt;
    rest.remove_prefix(digits);
    std::uint64_t value = 0;
    const auto [next, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (ec != std::errc())
      return std::nullopt;
    const std::string_view unit(next, static_cast<std::size_t>(rest.data() + rest.size() - next));
    // The kernel writes "kB" and means KiB.
    return unit.find("kB") != std::string_view::npos ? value * 1024 : value;
  }
  return std::nullopt;
}

std::string CpuAccelerator::deviceName(std::optional<int> /*index*/) const {
  return "cpu";
}

void CpuAccelerator::setDevice(int index) {
  if (index < 0) {
    throw AcceleratorError(
        fmt::format("cpu: setDevice({}): expected a non-negative device index", index));
  }
}

void CpuAccelerator::synchronize(std::optional<int> device) {
  resolveDevice(device, "synchronize");
}

std::uint64_t CpuAccelerator::memoryAllocated(std::optional<int> device) const {
  resolveDevice(device, "memoryAllocated");
  return procValue("/proc/self/status", "VmRSS");
}

std::uint64_t CpuAccelerator::memoryReserved(std::optional<int> device) const {
  resolveDevice(device, "memoryReserved");
  return procValue("/proc/self/status", "VmSize");
}

std::uint64_t CpuAccelerator::totalMemory(std::optional<int> device) const {
  resolveDevice(device, "totalMemory");
  const std::uint64_t total = procValue("/proc/meminfo", "MemTotal");
  return total != 0 ? total : sysconfBytes(_SC_PHYS_PAGES);
}

std::uint64_t CpuAccelerator::availableMemory(std::optional<int> device) const {
  resolveDevice(device, "availableMemory");
  const std::uint64_t available = procValue("/proc/meminfo", "MemAvailable");
  return available != 0 ? available : sysconfBytes(_SC_AVPHYS_PAGES);
}

DeviceProperties CpuAccelerator::deviceProperties(int index) const {
  const int device = resolveDevice(index, "deviceProperties");
  DeviceProperties props;
  props.index = device;
  props.name = cpuModelName();
  props.totalMemory = totalMemory(device);
  props.details = fmt::format("{} logical cores", std::thread::hardware_concurrency());
  return props;
}

void* CpuAccelerator::allocatePinned(std::size_t bytes) {
  if (bytes == 0)
    return nullptr;
  const std::size_t rounded = (bytes + kPageAlignment - 1) / kPageAlignment * kPageAlignment;
  void* ptr = std::aligned_alloc(kPageAlignment, rounded);
  if (ptr == nullptr) {
    throw AcceleratorError(fmt::format("cpu allocatePinned({} bytes): out of host memory", bytes));
  }
  return ptr;
}

void CpuAccelerator::freePinned(void* ptr) noexcept {
  std::free(ptr);
}

}  // namespace stretch::accel
