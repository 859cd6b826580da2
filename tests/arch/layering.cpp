#include "tests/arch/layering.hpp"

#include <algorithm>
#include <fnmatch.h>
#include <fstream>
#include <map>
#include <regex>
#include <set>

namespace stretch::arch {

namespace {

struct Module {
  std::string folder;                   // "runtime/comm/gloo"
  std::vector<std::string> deps;        // direct allowed dependencies (module folders)
  std::vector<std::string> thirdParty;  // third-party room names it may include
};

// Folders = CMake targets = namespaces (docs/architecture.md, "Module map").
const std::vector<Module>& modules() {
  static const std::vector<Module> kModules = {
      {"runtime/common", {}, {"fmt", "spdlog"}},
      {"runtime/config", {"runtime/common"}, {"json"}},
      {"runtime/comm", {"runtime/common"}, {}},
      {"runtime/accel", {"runtime/common"}, {"cuda-in-cuda-files"}},
      {"runtime/elasticity", {"runtime/config", "runtime/common"}, {}},
      // Checkpoint layout, manifests and their verification (SHA-256: OpenSSL), below the engine
      // that writes checkpoints and the launcher that reports which one a start resumes from.
      {"runtime/checkpoint", {"runtime/common"}, {"json", "openssl"}},
      // Live recovery's store protocol, spoken by the engine and the launcher.
      {"runtime/live", {"runtime/comm"}, {}},
      {"runtime/comm/gloo", {"runtime/comm"}, {"gloo"}},
      {"runtime/comm/nccl", {"runtime/comm", "runtime/accel"}, {"nccl", "cuda"}},
      {"runtime/comm/redis", {"runtime/comm"}, {"redis"}},
      // Registers whichever backends and stores were built, for executables and the engine.
      {"runtime/comm/builtin",
       {"runtime/comm", "runtime/comm/gloo", "runtime/comm/nccl", "runtime/comm/redis"},
       {}},
      {"runtime/engine",
       {"runtime/checkpoint", "runtime/config", "runtime/elasticity", "runtime/comm",
        "runtime/live", "runtime/accel"},
       {"torch", "json"}},
      // The agent's pure parts: no processes, no sockets, no files of its own (event log aside).
      {"runtime/agent",
       {"runtime/config", "runtime/elasticity", "runtime/comm", "runtime/live"},
       {}},
      {"sim",
       {"runtime/common", "runtime/config", "runtime/elasticity", "runtime/comm", "runtime/live",
        "runtime/agent"},
       {"json"}},  // scenario files and JSON results
      // Everything that touches real processes; the only module that may fork and exec.
      {"runtime/launcher",
       {"runtime/agent", "runtime/checkpoint", "runtime/comm", "runtime/live", "runtime/elasticity",
        "runtime/config", "runtime/accel"},
       {"json"}},
      {"planner", {"sim", "runtime/elasticity", "runtime/config"}, {"json"}},
      {"gui", {"planner", "sim", "runtime/config"}, {"qt", "json"}},
      // Product tools over the runtime (comm benchmark, simulator calibration).
      {"tools", {"runtime/launcher", "runtime/comm", "sim"}, {"json"}},
      // The executable: argv -> one library call. Any product module, no tests or benchmarks,
      // and third-party headers only its own (CLI11, JSON output).
      {"cli",
       {"runtime/launcher", "runtime/comm/builtin", "runtime/comm/redis", "runtime/engine", "tools",
        "planner"},
       {"cli11", "json", "mpi"}},
      // Benchmarks may use any product module and the benchmark and JSON libraries; only the
      // engine's benchmark may use LibTorch (and its CUDA allocator).
      {"bench",
       {"runtime/launcher", "runtime/comm/builtin", "runtime/comm/redis", "runtime/engine", "tools",
        "planner"},
       {"testing", "json", "cli11"}},
      {"bench/engine", {"bench"}, {"testing", "json", "cli11", "torch"}},
      // The Python package: bindings over the pure modules; pybind11 and JSON only here.
      {"python", {"planner", "sim", "runtime/elasticity", "runtime/config"}, {"pybind11", "json"}},
      {"tests", {"*"}, {"*"}},
      {"examples", {"*"}, {"*"}},
  };
  return kModules;
}

const Module* findModule(const std::string& folder) {
  for (const Module& m : modules()) {
    if (m.folder == folder)
      return &m;
  }
  return nullptr;
}

// Everything a module may include: itself plus the transitive closure of its dependencies.
std::set<std::string> reachable(const Module& m) {
  std::set<std::string> out = {m.folder};
  std::vector<std::string> todo = m.deps;
  while (!todo.empty()) {
    const std::string next = todo.back();
    todo.pop_back();
    if (!out.insert(next).second)
      continue;
    if (next == "runtime/common")
      continue;
    if (const Module* dep = findModule(next)) {
      todo.insert(todo.end(), dep->deps.begin(), dep->deps.end());
    }
  }
  // Every module may use the common layer.
  out.insert("runtime/common");
  return out;
}

// The third-party room an angle-bracket include belongs to, or "" for the standard library and
// system headers that belong to no room.
std::string roomOf(const std::string& header) {
  static const std::vector<std::pair<std::regex, std::string>> kRooms = {
      {std::regex(R"(^(torch|ATen|c10|caffe2)/)"), "torch"},
      {std::regex(R"(^gloo/)"), "gloo"},
      {std::regex(R"(^hiredis/)"), "redis"},
      {std::regex(R"(^nccl(_net)?\.h$)"), "nccl"},
      {std::regex(
           R"(^(cuda|cuda_runtime|cuda_runtime_api|cuda_fp16|cuda_bf16|cublas\w*)\.h$|^cuda/)"),
       "cuda"},
      {std::regex(R"(^Q[A-Za-z]+$|^Qt[A-Za-z]+/)"), "qt"},
      {std::regex(R"(^nlohmann/)"), "json"},
      {std::regex(R"(^openssl/)"), "openssl"},
      {std::regex(R"(^CLI/)"), "cli11"},
      {std::regex(R"(^(gtest|gmock|rapidcheck|benchmark)/|^rapidcheck\.h$)"), "testing"},
      {std::regex(R"(^fmt/)"), "fmt"},
      {std::regex(R"(^spdlog/)"), "spdlog"},
      {std::regex(R"(^mpi\.h$)"), "mpi"},
      {std::regex(R"(^pybind11/)"), "pybind11"},
  };
  for (const auto& [pattern, room] : kRooms) {
    if (std::regex_search(header, pattern))
      return room;
  }
  return "";
}

bool isSource(const std::filesystem::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".hpp" || ext == ".h" || ext == ".cpp" || ext == ".cc" || ext == ".cu";
}

}  // namespace

std::string moduleOf(const std::string& relativePath) {
  std::string best;
  for (const Module& m : modules()) {
    const std::string prefix = m.folder + "/";
    if (relativePath.rfind(prefix, 0) == 0 && m.folder.size() > best.size()) {
      best = m.folder;
    }
  }
  return best;
}

std::vector<Violation> checkLayering(const std::filesystem::path& root) {
  static const std::regex kInclude(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  // Calls that start a process: only the launcher's spawner makes them (clone by the global
  // qualifier or its syscall number, so that a tensor's .clone() is not one).
  static const std::regex kSpawn(
      R"(\b(v?fork|exec(l|lp|le|v|vp|vpe)|posix_spawnp?|popen|system)\s*\(|::\s*clone3?\s*\(|\bSYS_clone3?\b)");
  // std::filesystem by name or header: not where a LibTorch process runs the code.
  static const std::regex kFilesystem(
      R"(\bstd\s*::\s*(experimental\s*::\s*)?filesystem\b|<filesystem>)");
  std::vector<Violation> out;
  for (const std::string top : {"runtime", "sim", "planner", "gui", "cli", "tools", "python",
                                "bench", "tests", "examples"}) {
    const std::filesystem::path dir = root / top;
    if (!std::filesystem::is_directory(dir))
      continue;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
      if (!entry.is_regular_file() || !isSource(entry.path()))
        continue;
      const std::string rel = std::filesystem::relative(entry.path(), root).generic_string();
      const std::string folder = moduleOf(rel);
      const Module* module = findModule(folder);
      if (module == nullptr) {
        out.push_back({rel, 0, "", "file is in no module of docs/architecture.md"});
        continue;
      }
      const bool anything = module->deps == std::vector<std::string>{"*"};
      const std::set<std::string> allowed = reachable(*module);
      const std::string fileName = entry.path().filename().string();
      std::ifstream in(entry.path());
      std::string text;
      int lineNo = 0;
      const bool product = folder != "tests" && folder != "bench" && folder != "examples";
      const bool noFilesystem =
          rel.rfind("runtime/engine/", 0) == 0 || rel.rfind("runtime/checkpoint/", 0) == 0 ||
          rel.rfind("runtime/common/", 0) == 0 || rel.rfind("examples/digits/", 0) == 0;
      while (std::getline(in, text)) {
        ++lineNo;
        std::smatch match;
        const std::string code = text.substr(0, text.find("//"));
        if (noFilesystem && std::regex_search(code, match, kFilesystem)) {
          out.push_back({rel, lineNo, match[0],
                         "std::filesystem is not used in runtime/engine, runtime/checkpoint, "
                         "runtime/common and examples/digits: LibTorch 2.11 exports its own "
                         "copies of its functions (docs/gpu.md); use "
                         "runtime/common/posix_files.hpp"});
          continue;
        }
        if (product && folder != "runtime/launcher") {
          if (std::regex_search(code, match, kSpawn)) {
            out.push_back({rel, lineNo, match[1],
                           "starting processes belongs to runtime/launcher (process.hpp)"});
            continue;
          }
        }
        if (!std::regex_search(text, match, kInclude))
          continue;
        const bool quoted = match[1] == "\"";
        const std::string header = match[2];
        if (quoted) {
          const std::string target = moduleOf(header);
          if (target.empty() || anything)
            continue;  // same-folder or generated includes
          if ((target == "tests" || target == "bench" || target == "cli") &&
              allowed.count(target) == 0) {
            out.push_back({rel, lineNo, header, folder + " may not include " + target});
          } else if (allowed.count(target) == 0) {
            out.push_back({rel, lineNo, header,
                           folder + " may not depend on " + target +
                               " (not below it in docs/architecture.md)"});
          }
          continue;
        }
        const std::string room = roomOf(header);
        if (room.empty() || anything)
          continue;
        const auto& rooms = module->thirdParty;
        bool ok = std::find(rooms.begin(), rooms.end(), room) != rooms.end() || room == "fmt" ||
                  room == "spdlog";
        if (room == "cuda" &&
            std::find(rooms.begin(), rooms.end(), "cuda-in-cuda-files") != rooms.end()) {
          ok = fileName.rfind("cuda_", 0) == 0;
        }
        if (!ok) {
          out.push_back(
              {rel, lineNo, header, "third-party room '" + room + "' is not allowed in " + folder});
        }
      }
    }
  }
  return out;
}

std::vector<std::string> unexpectedRootFiles(const std::filesystem::path& root) {
  static const std::set<std::string> kRootFiles = {
      ".clang-format",  ".gitignore",        ".git",  // .git is a file in a worktree
      "CMakeLists.txt", "CMakePresets.json", "README.md",
      "pyproject.toml"};  // `pip install .` (docs/python.md)
  // .gitignore's patterns for files (not those ending in '/', which name folders).
  std::vector<std::string> ignored;
  std::ifstream gitignore(root / ".gitignore");
  for (std::string line; std::getline(gitignore, line);) {
    if (line.empty() || line[0] == '#' || line.back() == '/')
      continue;
    ignored.push_back(line[0] == '/' ? line.substr(1) : line);
  }
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    if (entry.is_directory())
      continue;
    const std::string name = entry.path().filename().string();
    const bool known = kRootFiles.count(name) > 0 ||
                       std::any_of(ignored.begin(), ignored.end(), [&](const std::string& p) {
                         return ::fnmatch(p.c_str(), name.c_str(), 0) == 0;
                       });
    if (!known)
      out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace stretch::arch
