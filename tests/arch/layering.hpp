#pragma once
// The layering rules of docs/architecture.md as data, and a checker that reads every source file
// of a tree and reports each include that breaks them:
//  1. a module includes only itself and the modules below it (its allowed dependencies, and
//     theirs, transitively);
//  2. third-party headers stay in their rooms (<torch/...> only in runtime/engine, <gloo/...> only
//     in runtime/comm/gloo, NCCL/CUDA only in runtime/comm/nccl and runtime/accel/cuda_* files,
//     Qt only in gui/, JSON only in runtime/config, CLI11 only in executables, test and
//     benchmark frameworks only in tests/ and bench/);
//  3. only runtime/launcher starts processes: no fork, exec*, posix_spawn, popen or system in
//     any other product folder (runtime, sim, planner, gui, cli, tools);
//  4. no std::filesystem (nor <filesystem>) in runtime/engine, runtime/common and
//     examples/digits: code that runs in a LibTorch process uses runtime/common/posix_files.hpp,
//     because PyTorch 2.11's libtorch.so exports its own copies of the std::filesystem functions
//     and calls bind to them (docs/gpu.md).

#include <filesystem>
#include <string>
#include <vector>

namespace stretch::arch {

struct Violation {
  std::string file;  // relative to the root
  int line;
  std::string include;
  std::string reason;
};

// Checks every .hpp/.h/.cpp/.cc/.cu file under the module folders of root.
std::vector<Violation> checkLayering(const std::filesystem::path& root);

// Regular files at the root that belong to no known kind: the root holds only the build's entry
// points, the README and the repository's own settings (kRootFiles), plus what .gitignore
// ignores there (a compile_commands.json link, fuzzer crash files). A captured log or a scratch
// file committed by accident is reported by name.
std::vector<std::string> unexpectedRootFiles(const std::filesystem::path& root);

// The module a path (relative to the root, '/'-separated) belongs to, or "" when it is in none.
std::string moduleOf(const std::string& relativePath);

}  // namespace stretch::arch
