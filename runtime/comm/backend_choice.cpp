#include "runtime/comm/backend_choice.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "runtime/comm/store.hpp"
#include "runtime/common/error.hpp"

namespace stretch::comm {

namespace {

bool has(const std::vector<std::string>& built, std::string_view name) {
  return std::find(built.begin(), built.end(), name) != built.end();
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

[[noreturn]] void refuse(const std::string& value, std::string expected) {
  throw ConfigError(ErrorDetail{std::string(kCommBackendEnv), value, std::move(expected)});
}

std::string ranks(int n) {
  return fmt::format("{} rank{}", n, n == 1 ? "" : "s");
}

std::string devices(int n) {
  return fmt::format("{} device{}", n, n == 1 ? "" : "s");
}

}  // namespace

CommChoice chooseCommBackend(const CommChoiceInput& input) {
  const std::string override = lower(input.override);
  if (!override.empty() && override != "auto" && override != "gloo" && override != "nccl")
    refuse(input.override, "auto, gloo or nccl");
  if (input.worldSize > 1 && !has(input.built, "gloo")) {
    throw ConfigError(ErrorDetail{
        "world size", std::to_string(input.worldSize),
        "1 in a build without Gloo: every multi-rank job needs it for its CPU buffers (install "
        "libgloo-dev and rebuild with STRETCH_WITH_GLOO)"});
  }
  CommChoice choice;
  choice.forced = override == "nccl" || override == "gloo";
  if (input.device == DeviceType::Cpu) {
    if (override == "nccl")
      refuse(input.override, "auto or gloo for a job on the CPU (NCCL moves CUDA buffers only)");
    choice.summary = fmt::format("comm: gloo, {} on the CPU", ranks(input.localRanks));
    return choice;
  }

  if (input.devicesVisible < 1) {
    throw ConfigError(ErrorDetail{"device", std::string(toString(input.device)),
                                  "a device this process can see: none is visible"});
  }
  const bool ncclBuilt = has(input.built, "nccl");
  const bool deviceEach = input.devicesVisible >= input.localRanks;
  if (override == "nccl") {
    if (!ncclBuilt) {
      refuse(input.override,
             "gloo or auto in this build: it has no NCCL (build with the CUDA toolkit and NCCL, "
             "STRETCH_WITH_NCCL)");
    }
    if (!deviceEach) {
      refuse(input.override,
             fmt::format("gloo or auto here: NCCL needs a device per rank, and the {} on this "
                         "node see {}",
                         ranks(input.localRanks), devices(input.devicesVisible)));
    }
  }
  if (override != "gloo" && ncclBuilt && deviceEach) {
    choice.deviceBackend = "nccl";
    choice.summary =
        fmt::format("comm: nccl, {} on {}", ranks(input.localRanks), devices(input.localRanks));
    return choice;
  }

  choice.staged = true;
  std::string where;
  if (!deviceEach && input.devicesVisible == 1) {
    where = fmt::format("{} share {}:0", ranks(input.localRanks), toString(input.device));
  } else if (!deviceEach) {
    where = fmt::format("{} share {}", ranks(input.localRanks), devices(input.devicesVisible));
  } else {
    where = fmt::format("{} on {}", ranks(input.localRanks), devices(input.localRanks));
  }
  std::string why;
  if (override == "gloo")
    why = fmt::format(" ({}=gloo)", kCommBackendEnv);
  else if (!ncclBuilt)
    why = " (this build has no NCCL)";
  choice.summary = fmt::format("comm: gloo staged through pinned host memory, {}{}", where, why);
  return choice;
}

bool anyDeviceShared(Store& store, int rank, int size, const std::string& identity,
                     Duration timeout) {
  if (size <= 1)
    return false;
  // A rank whose device another rank counted first marks the group; the last rank to arrive
  // opens the gate, so every rank reads the mark after every rank has counted.
  if (store.add("device/" + identity, 1) > 1)
    store.add("shared", 1);
  if (store.add("arrived", 1) == size)
    store.set("all_arrived", std::to_string(rank));
  store.wait({"all_arrived"}, timeout);
  return store.add("shared", 0) > 0;
}

}  // namespace stretch::comm
