// `stretch report`: DeepSpeed's ds_report. What this build contains and what this machine
// offers: version, the accelerator that would be chosen and why, its devices and memory, the
// communication backends built (or why not), library versions, CUDA and NCCL versions, the
// compiler and the build type. `--json` prints the same as one object.

#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/version.h>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "runtime/accel/accelerator.hpp"
#include "runtime/comm/backend_registry.hpp"
#include "runtime/comm/builtin/builtin_backends.hpp"

#if defined(STRETCH_HAVE_GLOO)
#include "runtime/comm/gloo/gloo_backend.hpp"
#endif
#if defined(STRETCH_HAVE_NCCL)
#include "runtime/comm/nccl/nccl_backend.hpp"
#endif
#if defined(STRETCH_HAVE_REDIS)
#include "runtime/comm/redis/redis_store.hpp"
#endif

namespace stretch::cli {

namespace {

using Json = nlohmann::ordered_json;

struct ReportOptions {
  bool json = false;
};

std::string version3(long major, long minor, long patch) {
  return fmt::format("{}.{}.{}", major, minor, patch);
}

std::string formatBytes(std::uint64_t bytes) {
  const double gib = static_cast<double>(bytes) / static_cast<double>(1ull << 30);
  if (gib >= 1.0)
    return fmt::format("{:.1f} GiB", gib);
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / static_cast<double>(1ull << 20));
}

// One optional integration: built (with a version) or not (with the reason).
Json integration(bool built, const std::string& version, const std::string& notBuiltReason) {
  Json out;
  out["built"] = built;
  if (built)
    out["version"] = version;
  else
    out["reason"] = notBuiltReason;
  return out;
}

// Why an optional module is missing: switched off, or not found at configure time.
[[maybe_unused]] std::string notBuiltReason(std::string_view option, std::string_view value,
                                            std::string_view hint) {
  if (value == "OFF")
    return fmt::format("disabled ({}=OFF)", option);
  return fmt::format("not found at configure time ({})", hint);
}

Json libraryVersions() {
  Json libs;
  libs["fmt"] = version3(FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100);
  libs["spdlog"] = version3(SPDLOG_VER_MAJOR, SPDLOG_VER_MINOR, SPDLOG_VER_PATCH);
  libs["nlohmann_json"] = version3(NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR,
                                   NLOHMANN_JSON_VERSION_PATCH);
#if defined(CLI11_VERSION)
  libs["CLI11"] = CLI11_VERSION;
#endif
#if defined(STRETCH_HAVE_GLOO)
  libs["gloo"] = comm::gloo::glooVersion();
#endif
#if defined(STRETCH_HAVE_NCCL)
  libs["nccl"] = comm::nccl::ncclVersion();
#endif
#if defined(STRETCH_HAVE_REDIS)
  libs["hiredis"] = comm::redis::hiredisVersion();
#endif
  if (const accel::CudaStatus cuda = accel::cudaStatus(); cuda.built) {
    libs["cuda_runtime"] = cuda.runtimeVersion;
    if (!cuda.driverVersion.empty())
      libs["cuda_driver"] = cuda.driverVersion;
  }
  return libs;
}

Json communicationBackends() {
  comm::registerBuiltinBackends();
  Json backends;
#if defined(STRETCH_HAVE_GLOO)
  backends["gloo"] = integration(true, comm::gloo::glooVersion(), "");
#else
  backends["gloo"] = integration(
      false, "", notBuiltReason("STRETCH_WITH_GLOO", STRETCH_GLOO_OPTION, "install libgloo-dev"));
#endif
#if defined(STRETCH_HAVE_NCCL)
  backends["nccl"] = integration(true, comm::nccl::ncclVersion(), "");
  backends["nccl"]["build_version"] = comm::nccl::ncclBuildVersion();
#else
  backends["nccl"] = integration(false, "",
                                 notBuiltReason("STRETCH_WITH_NCCL", STRETCH_NCCL_OPTION,
                                                "needs nccl.h, libnccl and the CUDA toolkit"));
#endif
#if defined(STRETCH_HAVE_REDIS)
  backends["redis"] = integration(true, comm::redis::hiredisVersion(), "");
  backends["redis"]["kind"] = "store (hiredis)";
#else
  backends["redis"] = integration(
      false, "",
      notBuiltReason("STRETCH_WITH_REDIS", STRETCH_REDIS_OPTION, "install libhiredis-dev"));
  backends["redis"]["kind"] = "store (hiredis)";
#endif
#if defined(STRETCH_HAVE_MPI)
  backends["mpi"] = integration(true, STRETCH_MPI_VERSION, "");
#else
  backends["mpi"] = integration(false, "", "not found at configure time (install libopenmpi-dev)");
#endif
  backends["mpi"]["kind"] = "Monte Carlo over ranks (mpirun -n K stretch sim|plan)";
  Json registered = Json::array();
  for (const comm::BackendInfo& info : comm::registeredBackends()) {
    registered.push_back({{"name", info.name},
                          {"device", comm::toString(info.device)},
                          {"description", info.description}});
  }
  backends["registered"] = registered;
  return backends;
}

Json cudaSection() {
  const accel::CudaStatus cuda = accel::cudaStatus();
  Json out;
  out["built"] = cuda.built;
  out["runtime_version"] = cuda.runtimeVersion.empty() ? Json(nullptr) : Json(cuda.runtimeVersion);
  out["driver_version"] = cuda.driverVersion.empty() ? Json(nullptr) : Json(cuda.driverVersion);
  out["device_count"] = cuda.deviceCount;
  out["unavailable_reason"] =
      cuda.unavailableReason.empty() ? Json(nullptr) : Json(cuda.unavailableReason);
  return out;
}

// Throws ConfigError when STRETCH_ACCELERATOR / DS_ACCELERATOR name an unusable accelerator.
Json acceleratorSection() {
  const std::shared_ptr<accel::Accelerator> acc = accel::getAccelerator();
  const accel::AcceleratorChoice choice = accel::acceleratorChoice();
  Json out;
  out["name"] = acc->name();
  out["source"] = std::string(accel::toString(choice.source));
  out["reason"] = choice.reason;
  out["communication_backend"] = acc->communicationBackendName();
  Json devices = Json::array();
  const int count = acc->deviceCount();
  for (int i = 0; i < count; ++i) {
    Json device;
    device["name"] = acc->deviceName(i);
    try {
      const accel::DeviceProperties props = acc->deviceProperties(i);
      device["model"] = props.name;
      device["total_memory"] = props.totalMemory;
      device["available_memory"] = acc->availableMemory(i);
      device["details"] = props.details;
    } catch (const accel::AcceleratorError& e) {
      device["error"] = e.what();
    }
    devices.push_back(device);
  }
  out["devices"] = devices;
  return out;
}

Json buildReport() {
  Json report;
  report["stretch_version"] = STRETCH_VERSION;
  report["accelerator"] = acceleratorSection();
  report["cuda"] = cudaSection();
  report["communication"] = communicationBackends();
  report["libraries"] = libraryVersions();
  report["build"] = {{"compiler", STRETCH_COMPILER},
                     {"build_type", STRETCH_BUILD_TYPE},
                     {"cxx_standard", static_cast<long>(__cplusplus)}};
  return report;
}

void row(const std::string& label, const std::string& value) {
  std::cout << fmt::format("  {:.<26} {}\n", label + " ", value);
}

std::string textOr(const Json& value, const std::string& fallback) {
  return value.is_string() ? value.get<std::string>() : fallback;
}

void printHuman(const Json& r) {
  std::cout << "Stretch environment report\n";
  row("stretch version", r["stretch_version"].get<std::string>());
  row("compiler", r["build"]["compiler"].get<std::string>());
  row("build type", r["build"]["build_type"].get<std::string>());

  const Json& acc = r["accelerator"];
  std::cout << "\nAccelerator\n";
  row("selected", fmt::format("{} ({}: {})", acc["name"].get<std::string>(),
                              acc["source"].get<std::string>(), acc["reason"].get<std::string>()));
  row("communication backend", acc["communication_backend"].get<std::string>());
  for (const Json& d : acc["devices"]) {
    if (d.contains("error")) {
      row(d["name"].get<std::string>(), "error: " + d["error"].get<std::string>());
      continue;
    }
    row(d["name"].get<std::string>(),
        fmt::format("{}, {} total, {} available, {}", d["model"].get<std::string>(),
                    formatBytes(d["total_memory"].get<std::uint64_t>()),
                    formatBytes(d["available_memory"].get<std::uint64_t>()),
                    d["details"].get<std::string>()));
  }

  const Json& cuda = r["cuda"];
  std::cout << "\nCUDA\n";
  if (!cuda["built"].get<bool>()) {
    row("runtime", "not built: " + textOr(cuda["unavailable_reason"], "unknown"));
  } else {
    row("runtime version", textOr(cuda["runtime_version"], "unknown"));
    row("driver version", textOr(cuda["driver_version"], "none (no driver installed)"));
    const int devices = cuda["device_count"].get<int>();
    row("devices", devices > 0 ? std::to_string(devices)
                               : "0: " + textOr(cuda["unavailable_reason"], "none visible"));
  }

  std::cout << "\nCommunication\n";
  const Json& comm = r["communication"];
  for (const char* name : {"gloo", "nccl", "redis", "mpi"}) {
    const Json& b = comm[name];
    std::string value = b["built"].get<bool>() ? "built, version " + b["version"].get<std::string>()
                                               : "not built: " + b["reason"].get<std::string>();
    if (b.contains("build_version"))
      value += fmt::format(" (headers {})", b["build_version"].get<std::string>());
    row(b.contains("kind") ? fmt::format("{} {}", name, b["kind"].get<std::string>()) : name,
        value);
  }
  for (const Json& info : comm["registered"]) {
    row("registered " + info["name"].get<std::string>(),
        fmt::format("{} buffers: {}", info["device"].get<std::string>(),
                    info["description"].get<std::string>()));
  }

  std::cout << "\nLibraries\n";
  for (const auto& [name, version] : r["libraries"].items())
    row(name, version.get<std::string>());
}

int runReport(const ReportOptions& opts) {
  return runCommand("report", ErrorStyle{.json = opts.json}, [&] {
    const Json report = buildReport();
    if (opts.json)
      std::cout << report.dump() << "\n";
    else
      printHuman(report);
    return kExitOk;
  });
}

}  // namespace

Command addReportCommand(CLI::App& app) {
  auto opts = std::make_shared<ReportOptions>();
  CLI::App* sub = app.add_subcommand(
      "report",
      "Show what this build contains and what this machine offers (DeepSpeed's ds_report): the "
      "accelerator STRETCH_ACCELERATOR / DS_ACCELERATOR or detection picks and its devices, the "
      "communication backends built, CUDA, NCCL and library versions, compiler and build type.");
  sub->add_flag("--json", opts->json,
                "Print one JSON object with the keys stretch_version, accelerator, cuda, "
                "communication, libraries and build, or {\"error\", \"message\"}");
  return {sub, [opts] { return runReport(*opts); }};
}

}  // namespace stretch::cli
