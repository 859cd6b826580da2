#include "tests/arch/layering.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/test_support.hpp"

namespace stretch::arch {
namespace {

TEST(Layering, RepositoryFollowsTheModuleMap) {
  const auto violations = checkLayering(test::sourceDir());
  for (const Violation& v : violations) {
    ADD_FAILURE() << v.file << ":" << v.line << ": #include " << v.include << ": " << v.reason;
  }
  EXPECT_TRUE(violations.empty());
}

TEST(Layering, TheRootHoldsOnlyKnownFiles) {
  for (const std::string& name : unexpectedRootFiles(test::sourceDir())) {
    ADD_FAILURE() << name
                  << ": unexpected file at the repository root (move it into a folder, delete "
                     "it, or name it in kRootFiles of tests/arch/layering.cpp)";
  }
}

// tests/test_costs.cmake orders the slowest tests first by name; CTest ignores a name that is not
// a test, so a renamed test would silently lose its place. Every name there must be a gtest
// TEST/TEST_F in tests/ or an add_test(NAME ...) in a tests/ CMakeLists.txt.
TEST(Layering, EveryTestGivenACostExists) {
  namespace fs = std::filesystem;
  const fs::path tests = test::sourceDir() / "tests";
  std::string sources;
  for (const auto& entry : fs::recursive_directory_iterator(tests)) {
    const auto ext = entry.path().extension();
    if (entry.is_regular_file() && (ext == ".cpp" || entry.path().filename() == "CMakeLists.txt"))
      sources += test::readFile(entry.path());
  }
  std::istringstream costs(test::readFile(tests / "test_costs.cmake"));
  const std::regex entryLine(R"(^\s+([A-Za-z0-9_]+)(?:\.([A-Za-z0-9_]+))? [0-9]+\)?$)");
  int named = 0;
  for (std::string line; std::getline(costs, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, entryLine))
      continue;
    ++named;
    const std::string name = m[2].matched ? m[1].str() + "." + m[2].str() : m[1].str();
    const bool found =
        m[2].matched
            ? sources.find("TEST(" + m[1].str() + ", " + m[2].str() + ")") != std::string::npos ||
                  sources.find("TEST_F(" + m[1].str() + ", " + m[2].str() + ")") !=
                      std::string::npos
            : sources.find("add_test(NAME " + name) != std::string::npos;
    EXPECT_TRUE(found) << name
                       << " in tests/test_costs.cmake is not a test: rename or remove the entry";
  }
  EXPECT_GE(named, 10) << "tests/test_costs.cmake lists fewer tests than expected";
}

TEST(Layering, ModuleOfPrefersTheDeepestFolder) {
  EXPECT_EQ(moduleOf("runtime/comm/gloo/gloo_backend.cpp"), "runtime/comm/gloo");
  EXPECT_EQ(moduleOf("runtime/comm/store.hpp"), "runtime/comm");
  EXPECT_EQ(moduleOf("runtime/elasticity/detail/valid_sizes.hpp"), "runtime/elasticity");
  EXPECT_EQ(moduleOf("docs/architecture.md"), "");
}

// ---- The folder READMEs' "May include" paragraphs ---------------------------------------
//
// Every module folder's README says, in a paragraph starting "**May include:**", which modules
// its code may include. That paragraph must name every runtime module the folder's own files
// include (a sub-module's files are its own), and every module it names must be one the layering
// table above lets the folder include. "runtime/*" names every runtime module, "anything" every
// module.

// The "**May include:**" paragraph of a README: up to a blank line or a "**Must not" (cli's
// README has both on one line); "" when there is none.
std::string mayIncludeParagraph(const std::string& text) {
  const auto start = text.find("**May include:**");
  if (start == std::string::npos)
    return "";
  const auto end = std::min(text.find("\n\n", start), text.find("**Must not", start));
  return end == std::string::npos ? text.substr(start) : text.substr(start, end - start);
}

// The modules a paragraph names, as moduleOf names their folders ("runtime/comm core",
// "runtime/comm's TcpStore" and "sim/" name runtime/comm and sim), plus "runtime/*" and "*"
// ("anything") as given.
std::set<std::string> namedModules(const std::string& paragraph) {
  static const std::regex kToken(
      R"((^|[^A-Za-z0-9_/])((runtime|sim|planner|gui|cli|tools|python|bench|tests|examples)(/[A-Za-z0-9_*]+)*))");
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(paragraph.begin(), paragraph.end(), kToken);
       it != std::sregex_iterator(); ++it) {
    const std::string token = (*it)[2];
    if (token == "runtime/*") {
      out.insert(token);
    } else if (const std::string module = moduleOf(token + "/x.hpp"); !module.empty()) {
      out.insert(module);
    }
  }
  if (paragraph.find("anything") != std::string::npos)
    out.insert("*");
  return out;
}

bool namesModule(const std::set<std::string>& named, const std::string& module) {
  return named.count("*") > 0 || named.count(module) > 0 ||
         (module.rfind("runtime/", 0) == 0 && named.count("runtime/*") > 0);
}

// The module folders that have a README, with its text.
std::map<std::string, std::string> moduleReadmes(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  std::map<std::string, std::string> out;
  for (const std::string top : {"runtime", "sim", "planner", "gui", "cli", "tools", "python",
                                "bench", "tests", "examples"}) {
    if (!fs::is_directory(root / top))
      continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      if (!entry.is_regular_file() || entry.path().filename() != "README.md")
        continue;
      const std::string folder = fs::relative(entry.path().parent_path(), root).generic_string();
      if (moduleOf(folder + "/README.md") == folder)
        out.emplace(folder, test::readFile(entry.path()));
    }
  }
  return out;
}

// The runtime modules other than itself that a module folder's own files include, each with the
// first file:line that does.
std::map<std::string, std::string> runtimeIncludes(const std::filesystem::path& root,
                                                   const std::string& folder) {
  namespace fs = std::filesystem;
  static const std::regex kInclude(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() ||
        (ext != ".hpp" && ext != ".h" && ext != ".cpp" && ext != ".cc" && ext != ".cu"))
      continue;
    const std::string rel = fs::relative(entry.path(), root).generic_string();
    if (moduleOf(rel) != folder)
      continue;
    std::ifstream in(entry.path());
    int lineNo = 0;
    for (std::string line; std::getline(in, line);) {
      ++lineNo;
      std::smatch match;
      if (!std::regex_search(line, match, kInclude))
        continue;
      const std::string target = moduleOf(match[1]);
      if (target.rfind("runtime/", 0) == 0 && target != folder)
        out.emplace(target, rel + ":" + std::to_string(lineNo));
    }
  }
  return out;
}

TEST(Layering, ReadmeMayIncludeParagraphsAreParsed) {
  const std::string text =
      "intro\n\n**May include:** runtime/config, runtime/comm core (`Store`), sim/,\n"
      "runtime/comm's `TcpStore`, `<fmt/...>`. **Must not include:** planner/\n\nmore";
  const std::string paragraph = mayIncludeParagraph(text);
  EXPECT_EQ(paragraph.find("planner"), std::string::npos) << paragraph;
  EXPECT_EQ(namedModules(paragraph),
            (std::set<std::string>{"runtime/config", "runtime/comm", "sim"}));
  EXPECT_TRUE(mayIncludeParagraph("no such line").empty());
  const auto any = namedModules("**May include:** any product module (runtime/*, tools/)");
  EXPECT_TRUE(namesModule(any, "runtime/live"));
  EXPECT_TRUE(namesModule(any, "tools"));
  EXPECT_FALSE(namesModule(any, "sim"));
  EXPECT_TRUE(namesModule(namedModules("**May include:** anything"), "sim"));
}

TEST(Layering, ReadmesNameWhatTheirModulesIncludeAndTheTableAllows) {
  namespace fs = std::filesystem;
  const fs::path root = test::sourceDir();
  const auto readmes = moduleReadmes(root);
  EXPECT_GE(readmes.size(), 15u) << "fewer module READMEs than expected";
  // Each module a README names goes into a scratch tree as an include from that folder; the
  // layering checker then says which the table does not allow.
  const fs::path probe =
      fs::temp_directory_path() /
      ("stretch-readme-probe-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::remove_all(probe);
  int probes = 0;
  for (const auto& [folder, text] : readmes) {
    const std::string paragraph = mayIncludeParagraph(text);
    if (paragraph.empty()) {
      ADD_FAILURE() << folder << "/README.md has no \"**May include:**\" paragraph";
      continue;
    }
    const std::set<std::string> named = namedModules(paragraph);
    for (const auto& [module, where] : runtimeIncludes(root, folder)) {
      EXPECT_TRUE(namesModule(named, module))
          << where << " includes " << module << ", which " << folder
          << "/README.md's \"May include\" paragraph does not name";
    }
    for (const std::string& module : named) {
      if (module == "*" || module == "runtime/*" || module == folder ||
          module.rfind(folder + "/", 0) == 0)
        continue;  // wildcards, and the folder itself or its own sub-modules
      const fs::path file = probe / folder / ("readme_probe_" + std::to_string(probes++) + ".cpp");
      fs::create_directories(file.parent_path());
      std::ofstream(file) << "#include \"" << module << "/readme_probe.hpp\"\n";
    }
  }
  EXPECT_GT(probes, 10);
  for (const Violation& v : checkLayering(probe)) {
    ADD_FAILURE() << moduleOf(v.file) << "/README.md names " << moduleOf(v.include)
                  << " under \"May include\", which the layering table (tests/arch/layering.cpp) "
                     "does not allow: "
                  << v.reason;
  }
  fs::remove_all(probe);
}

// The checker must catch each kind of violation in a tree built for the purpose.
class LayeringViolations : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ =
        std::filesystem::temp_directory_path() /
        ("stretch-layering-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) {
    const auto path = root_ / rel;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  std::vector<Violation> check() { return checkLayering(root_); }
  std::filesystem::path root_;
};

TEST_F(LayeringViolations, AStrayFileAtTheRootIsCaught) {
  write(".gitignore", "/build*/\ncompile_commands.json\ncrash-*\n");
  write("CMakeLists.txt", "");
  write("compile_commands.json", "[]");
  write("crash-1234", "");
  write("agent2.txt", "stretch agent: error: ...");
  EXPECT_EQ(unexpectedRootFiles(root_), std::vector<std::string>{"agent2.txt"});
}

TEST_F(LayeringViolations, UpwardIncludeIsCaught) {
  write("runtime/config/x.cpp", "#include \"runtime/elasticity/solver.hpp\"\n");
  const auto v = check();
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].file, "runtime/config/x.cpp");
  EXPECT_EQ(v[0].line, 1);
}

TEST_F(LayeringViolations, RuntimeMayNotIncludeTheSimulatorOrTests) {
  write("runtime/agent/a.cpp",
        "#include \"sim/scheduler.hpp\"\n#include \"tests/support/x.hpp\"\n");
  EXPECT_EQ(check().size(), 2u);
}

TEST_F(LayeringViolations, ThirdPartyHeadersStayInTheirRooms) {
  write("runtime/elasticity/s.cpp", "#include <torch/torch.h>\n#include <nlohmann/json.hpp>\n");
  write("sim/s.cpp", "#include <gloo/allreduce.h>\n#include <QWidget>\n");
  write("runtime/accel/accelerator.cpp", "#include <cuda_runtime.h>\n");
  EXPECT_EQ(check().size(), 5u);
}

TEST_F(LayeringViolations, OnlyTheLauncherStartsProcesses) {
  write("cli/c.cpp", "int main() { if (fork() == 0) execvp(\"x\", nullptr); }\n");
  write("sim/s.cpp", "auto* p = ::popen(\"ls\", \"r\");\n// fork() in a comment is fine\n");
  write("tools/t.cpp", "int r = std::system(\"true\");\n");
  write("runtime/launcher/process.cpp", "pid_t pid = ::fork();\nexecvpe(a, b, c);\n");
  write("tests/t.cpp", "pid_t pid = ::fork();\n");
  write("planner/p.cpp", "pid_t pid = ::clone(f, stack, SIGCHLD, nullptr);\nauto t = x.clone();\n");
  write("gui/g.cpp", "long r = syscall(SYS_clone3, &args, sizeof args);\n");
  const auto v = check();
  ASSERT_EQ(v.size(), 5u);
  for (const auto& x : v)
    EXPECT_NE(x.reason.find("runtime/launcher"), std::string::npos) << x.file;
}

TEST_F(LayeringViolations, TheExecutableAndBenchmarksKeepThirdPartyHeadersInTheirRooms) {
  write("cli/report.cpp", "#include <gloo/config.h>\n#include <hiredis/hiredis.h>\n");
  write("cli/bench.cpp", "#include \"bench/comm/x.hpp\"\n#include \"tests/support/y.hpp\"\n");
  write("bench/sim_bench.cpp", "#include <torch/torch.h>\n");
  write("tools/t.cpp", "#include \"planner/plan.hpp\"\n");  // tools sit below the planner
  EXPECT_EQ(check().size(), 6u);
}

TEST_F(LayeringViolations, NoStdFilesystemWhereLibTorchRuns) {
  write("runtime/engine/e.cpp",
        "#include <filesystem>\nnamespace fs = std::filesystem;\n"
        "void f() { std::filesystem::remove_all(\"x\"); }\n"
        "// std::filesystem in a comment is fine\n");
  write("runtime/common/c.hpp", "void g(const std::filesystem::path& p);\n");
  write("examples/digits/d.cpp", "auto p = std :: filesystem::path(\"x\");\n");
  // Elsewhere it stays allowed (the launcher, the simulator, tests, other examples).
  write("runtime/launcher/l.cpp", "#include <filesystem>\nstd::filesystem::path p;\n");
  write("sim/s.cpp", "#include <filesystem>\n");
  write("tests/t.cpp", "std::filesystem::remove_all(p);\n");
  write("examples/other/o.cpp", "#include <filesystem>\n");
  const auto v = check();
  ASSERT_EQ(v.size(), 5u);
  for (const auto& x : v) {
    EXPECT_TRUE(x.file.rfind("runtime/engine/", 0) == 0 || x.file == "runtime/common/c.hpp" ||
                x.file == "examples/digits/d.cpp")
        << x.file;
    EXPECT_NE(x.reason.find("posix_files.hpp"), std::string::npos) << x.reason;
  }
}

TEST_F(LayeringViolations, AllowedIncludesPass) {
  write("runtime/engine/e.cpp",
        "#include <torch/torch.h>\n#include \"runtime/comm/backend.hpp\"\n#include "
        "\"runtime/common/error.hpp\"\n#include <vector>\n");
  write("runtime/accel/cuda_accelerator.cpp", "#include <cuda_runtime.h>\n");
  write("gui/main.cpp",
        "#include <QApplication>\n#include \"planner/plan.hpp\"\n"
        "#include \"runtime/config/ds_config.hpp\"\n");
  write("runtime/launcher/l.cpp", "#include \"runtime/comm/store.hpp\"\n");  // via agent
  write("tests/anything.cpp", "#include \"sim/x.hpp\"\n#include <gloo/x.h>\n");
  write("cli/main.cpp",
        "#include <CLI/CLI.hpp>\n#include \"tools/comm_bench.hpp\"\n"
        "#include \"runtime/launcher/launch.hpp\"\n#include \"cli/commands.hpp\"\n");
  write("bench/engine/e.cpp", "#include <torch/torch.h>\n#include <benchmark/benchmark.h>\n");
  const auto v = check();
  for (const auto& x : v)
    ADD_FAILURE() << x.file << ": " << x.include << ": " << x.reason;
}

}  // namespace
}  // namespace stretch::arch
