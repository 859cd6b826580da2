// examples/python/train_ddp.py (plain PyTorch DDP over gloo, Debian's python3-torch) under
// `stretch launch`, end to end:
//  - the script's batch contract: the launcher's three variables, else STRETCH_DS_CONFIG's keys,
//    else --global_batch; a contract that does not multiply out is exit status 2;
//  - 1 and 2 workers train the same global batch alike (the solver's micro x accumulation); the
//    2-worker job names the script itself as PROGRAM, which the launcher runs under
//    STRETCH_PYTHON (the other jobs name the interpreter);
//  - a worker SIGKILLed mid-run (rank 0, which serves the torch store, or rank 1): the survivor
//    fails, the agent restarts the generation, it resumes from the last checkpoint, the global
//    batch never changes, and the result is bitwise an uninterrupted run's; the recovery time
//    (kill -> first step of the new generation) is printed;
//  - as root, two network-namespace hosts (`--launcher netns`): one host's agent SIGKILLed -> the
//    job goes on at world size 2 with the solver's batch for it, the host rejoins by hand
//    (`stretch agent`) -> the job grows back to 4; the global batch is 48 throughout.
// Skipped with the reason when /usr/bin/python3 cannot import torch. Every wait is bounded.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <signal.h>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "tests/cli/launch_support.hpp"
#include "tests/cli/netns_support.hpp"
#include "tests/support/test_support.hpp"
#include "tests/support/torch_python.hpp"

namespace {

using namespace stretch::test::launch;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kScript = std::string(STRETCH_SOURCE) + "/examples/python/train_ddp.py";
// Elasticity as the digits job's: global batch 48 on 1, 2, 3 or 4 workers.
const std::string kConfig = std::string(STRETCH_SOURCE) + "/examples/python/ds_config_elastic.json";
constexpr int kGlobalBatch = 48;
constexpr int kCheckpointEvery = 20;

// The solver's micro batch and accumulation for each world size of kConfig
// (`stretch elastic --config examples/python/ds_config_elastic.json`).
std::pair<int, int> solverBatch(int worldSize) {
  switch (worldSize) {
    case 1:
      return {16, 3};
    case 2:
      return {8, 3};
    case 3:
      return {16, 1};
    case 4:
      return {4, 3};
    default:
      return {0, 0};
  }
}

// The script reads its batch through the stretch package (docs/python.md): without the package
// (no pybind11-dev) the test is skipped, and with it the script and every worker a test launches
// find it on PYTHONPATH.
std::string pythonPackageMissing() {
  const fs::path dir = STRETCH_PYTHON_DIR;
  if (std::string(STRETCH_PYTHON_DIR).empty() || !fs::exists(dir / "stretch" / "__init__.py"))
    return "the stretch Python package was not built (install pybind11-dev)";
  ::setenv("PYTHONPATH", dir.c_str(), 1);
  return "";
}

#define SKIP_WITHOUT_TORCH()                                                \
  do {                                                                      \
    static const std::string why = stretch::test::torchUnavailableReason(); \
    if (!why.empty())                                                       \
      GTEST_SKIP() << why;                                                  \
    static const std::string package = pythonPackageMissing();              \
    if (!package.empty())                                                   \
      GTEST_SKIP() << package;                                              \
  } while (false)

// One line of the script's rank-0 log: its key=value pairs; the first key names the kind
// ("resumed_from", "step", "done").
struct LogLine {
  std::string kind;
  std::map<std::string, std::string> fields;
  std::string text;

  std::int64_t integer(const std::string& key) const {
    const auto it = fields.find(key);
    return it == fields.end() ? -1 : std::stoll(it->second);
  }
  double number(const std::string& key) const {
    const auto it = fields.find(key);
    return it == fields.end() ? -1.0 : std::stod(it->second);
  }
  std::string str(const std::string& key) const {
    const auto it = fields.find(key);
    return it == fields.end() ? "" : it->second;
  }
};

std::vector<LogLine> scriptLinesOf(const std::string& output) {
  std::vector<LogLine> out;
  std::istringstream in(output);
  std::string text;
  while (std::getline(in, text)) {
    std::istringstream words(text);
    LogLine line;
    line.text = text;
    std::string word;
    while (words >> word) {
      const auto eq = word.find('=');
      if (eq == std::string::npos || eq == 0) {
        if (line.kind.empty())
          line.kind = word;  // "done"
        continue;
      }
      if (line.kind.empty())
        line.kind = word.substr(0, eq);
      line.fields[word.substr(0, eq)] = word.substr(eq + 1);
    }
    // Only the script's own lines (a traceback or the launcher's lines have no time=).
    if (line.fields.count("time") != 0 && line.fields.count("generation") != 0)
      out.push_back(std::move(line));
  }
  return out;
}

std::vector<LogLine> scriptLines(const fs::path& log) {
  return scriptLinesOf(stretch::test::readFileIfAny(log));
}

fs::path rankZeroLog(const fs::path& dir, int generation) {
  return dir / "logs" / ("attempt_" + std::to_string(generation)) / "rank_0.log";
}

// Rank 0's lines of every generation that has a log, by generation.
std::map<int, std::vector<LogLine>> generations(const fs::path& dir) {
  std::map<int, std::vector<LogLine>> out;
  for (int g = 1; g < 100; ++g) {
    if (fs::exists(rankZeroLog(dir, g)))
      out[g] = scriptLines(rankZeroLog(dir, g));
  }
  return out;
}

std::optional<LogLine> lineOf(const std::vector<LogLine>& lines, const std::string& kind) {
  for (const auto& l : lines) {
    if (l.kind == kind)
      return l;
  }
  return std::nullopt;
}

// The first line of generation `generation` that `pred` accepts, within `limit`.
template <typename Pred>
std::optional<LogLine> waitForLine(const fs::path& dir, int generation, Pred pred,
                                   std::chrono::seconds limit = 60s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& l : scriptLines(rankZeroLog(dir, generation))) {
      if (pred(l))
        return l;
    }
    std::this_thread::sleep_for(20ms);
  }
  return std::nullopt;
}

// Every line rank 0's script logged in every generation: the same global batch, split as the
// solver says for the generation's world size; steps consecutive from the generation's resume
// point. Prints the generation's first and last lines. (expectConstantGlobalBatch checks the
// launcher's side, the event log.)
void expectScriptLogsKeepGlobalBatch(const fs::path& dir) {
  const auto gens = generations(dir);
  ASSERT_FALSE(gens.empty());
  for (const auto& [generation, lines] : gens) {
    const auto resumed = lineOf(lines, "resumed_from");
    if (!resumed)
      continue;  // stopped before it started training
    std::printf("generation %d: %s\n", generation, resumed->text.c_str());
    const int world = static_cast<int>(resumed->integer("world_size"));
    const auto [micro, accum] = solverBatch(world);
    std::int64_t expected = resumed->integer("resumed_from") + 1;
    const LogLine* last = nullptr;
    for (const auto& l : lines) {
      EXPECT_EQ(l.integer("generation"), generation) << l.text;
      EXPECT_EQ(l.integer("global_batch"), kGlobalBatch) << l.text;
      EXPECT_EQ(l.integer("world_size"), world) << l.text;
      EXPECT_EQ(l.integer("micro"), micro) << l.text;
      EXPECT_EQ(l.integer("accum"), accum) << l.text;
      EXPECT_EQ(l.integer("micro") * l.integer("accum") * l.integer("world_size"), kGlobalBatch);
      if (l.kind == "step") {
        if (last == nullptr)
          std::printf("generation %d: %s\n", generation, l.text.c_str());
        EXPECT_EQ(l.integer("step"), expected++) << l.text;
        last = &l;
      }
    }
    if (last != nullptr)
      std::printf("generation %d: %s\n", generation, last->text.c_str());
    if (const auto done = lineOf(lines, "done"))
      std::printf("generation %d: %s\n", generation, done->text.c_str());
  }
}

// How the job names its PROGRAM: the interpreter (`PYTHON -u train_ddp.py ...`), or the script
// itself (`train_ddp.py ...`, which the launcher runs as `$STRETCH_PYTHON -u train_ddp.py`).
enum class Program { Interpreter, Script };

// `stretch launch` options, then the script and its options.
std::vector<std::string> pythonJob(const fs::path& dir, std::vector<std::string> launcherOptions,
                                   int steps, std::vector<std::string> scriptOptions = {},
                                   Program program = Program::Interpreter) {
  std::vector<std::string> args = std::move(launcherOptions);
  const std::vector<std::string> launcher = {"--config",         kConfig,
                                             "--log_dir",        (dir / "logs").string(),
                                             "--event_log",      (dir / "events.jsonl").string(),
                                             "--checkpoint_dir", (dir / "ckpt").string()};
  args.insert(args.end(), launcher.begin(), launcher.end());
  if (program == Program::Interpreter) {
    args.push_back(stretch::test::torchPython());
    args.push_back("-u");
  }
  const std::vector<std::string> script = {kScript,
                                           "--steps",
                                           std::to_string(steps),
                                           "--checkpoint_dir",
                                           (dir / "ckpt").string(),
                                           "--checkpoint_every",
                                           std::to_string(kCheckpointEvery)};
  args.insert(args.end(), script.begin(), script.end());
  args.insert(args.end(), scriptOptions.begin(), scriptOptions.end());
  return args;
}

std::vector<std::string> oneNode(int slots) {
  return {"--num_gpus",    std::to_string(slots),      "--elastic",          "1:2",
          "--master_port", std::to_string(freePort()), "--monitor_interval", "1"};
}

// The last generation's `done` line of an uninterrupted run on `slots` workers of this machine.
LogLine straightRun(int slots, int steps) {
  stretch::test::TempDir dir("stretch-py-straight");
  Launch launch(dir.path(), pythonJob(dir.path(), oneNode(slots), steps));
  EXPECT_EQ(launch.wait(180s), 0) << launch.err();
  const auto done = lineOf(scriptLines(rankZeroLog(dir.path(), 1)), "done");
  EXPECT_TRUE(done.has_value()) << stretch::test::readFileIfAny(rankZeroLog(dir.path(), 1));
  return done.value_or(LogLine{});
}

// The reference for the kill trials: 2 workers, 300 steps, never interrupted (run once).
constexpr int kKillSteps = 300;
const LogLine& straightTwoWorkers() {
  static const LogLine done = straightRun(2, kKillSteps);
  return done;
}

// The launcher's child whose environment says RANK=rank.
pid_t workerWithRank(const Launch& launch, int rank) {
  for (const pid_t p : launch.workers()) {
    std::string env = stretch::test::readFileIfAny("/proc/" + std::to_string(p) + "/environ");
    std::istringstream vars(env);
    std::string var;
    while (std::getline(vars, var, '\0')) {
      if (var == "RANK=" + std::to_string(rank))
        return p;
    }
  }
  return -1;
}

// ---------------------------------------------------------------------------------------------
// The batch contract, with the script run directly as a one-process job (no launcher).

// The script's exit status and its stdout and stderr.
stretch::test::CommandResult runScript(const fs::path& dir, const std::string& env,
                                       const std::string& args) {
  // Nothing of the caller's environment decides the batch but `env`.
  const std::string command =
      "cd " + dir.string() +
      " && env -u STRETCH_TRAIN_BATCH_SIZE -u STRETCH_MICRO_BATCH_SIZE"
      " -u STRETCH_GRADIENT_ACCUMULATION_STEPS -u STRETCH_DS_CONFIG RANK=0 WORLD_SIZE=1"
      " MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
      std::to_string(freePort()) + " " + env + " timeout 120 " + stretch::test::torchPython() +
      " -u " + kScript + " --steps 3 " + args + " 2>&1";
  return stretch::test::runCommand(command);
}

std::optional<LogLine> firstLine(const std::string& output, const std::string& kind) {
  return lineOf(scriptLinesOf(output), kind);
}

// The run ended with status 0 and trained with this batch, from `source`.
void expectTrainedWith(const stretch::test::CommandResult& run, const std::string& source,
                       int globalBatch, int micro, int accum) {
  ASSERT_EQ(run.exitCode, 0) << run.output;
  const auto start = firstLine(run.output, "resumed_from");
  ASSERT_TRUE(start) << run.output;
  EXPECT_EQ(start->str("batch_source"), source);
  EXPECT_EQ(start->integer("global_batch"), globalBatch);
  EXPECT_EQ(start->integer("micro"), micro);
  EXPECT_EQ(start->integer("accum"), accum);
  EXPECT_TRUE(firstLine(run.output, "done")) << run.output;
}

// The run stopped with exit status 2 before training and said each of `why`.
void expectRefused(const stretch::test::CommandResult& run, const std::vector<std::string>& why) {
  EXPECT_EQ(run.exitCode, 2) << run.output;
  for (const auto& w : why)
    EXPECT_NE(run.output.find(w), std::string::npos) << run.output;
  EXPECT_FALSE(firstLine(run.output, "step")) << run.output;
}

TEST(PythonExample, BatchContractComesFromTheVariablesThenTheDsConfigThenTheFlag) {
  SKIP_WITHOUT_TORCH();
  stretch::test::TempDir dir("stretch-py-contract");
  const fs::path dsConfig = dir.path() / "ds_config.json";
  std::ofstream(dsConfig) << R"({"train_batch_size": 48, "train_micro_batch_size_per_gpu": 16,
                                 "gradient_accumulation_steps": 3})";
  {
    // No contract: --global_batch over WORLD_SIZE; DeepSpeed's --local_rank=N is accepted.
    const auto run = runScript(dir.path(), "", "--global_batch 24 --local_rank=0");
    ASSERT_NO_FATAL_FAILURE(expectTrainedWith(run, "global_batch", 24, 24, 1));
    EXPECT_EQ(firstLine(run.output, "resumed_from")->integer("resumed_from"), 0);
  }
  {
    // STRETCH_DS_CONFIG when the variables are absent.
    const auto run = runScript(dir.path(), "STRETCH_DS_CONFIG=" + dsConfig.string(), "");
    expectTrainedWith(run, "ds_config", 48, 16, 3);
  }
  {
    // The variables come first.
    const auto run = runScript(dir.path(),
                               "STRETCH_DS_CONFIG=" + dsConfig.string() +
                                   " STRETCH_TRAIN_BATCH_SIZE=32 STRETCH_MICRO_BATCH_SIZE=8"
                                   " STRETCH_GRADIENT_ACCUMULATION_STEPS=4",
                               "");
    expectTrainedWith(run, "env", 32, 8, 4);
  }
  {
    // micro x accum x world != train batch: a clear error, exit status 2, no training.
    const auto run = runScript(dir.path(),
                               "STRETCH_TRAIN_BATCH_SIZE=48 STRETCH_MICRO_BATCH_SIZE=8"
                               " STRETCH_GRADIENT_ACCUMULATION_STEPS=2",
                               "");
    expectRefused(run, {"batch contract violated", "= 16, but the train batch is 48"});
  }
  {
    const auto run = runScript(dir.path(), "STRETCH_TRAIN_BATCH_SIZE=48", "");
    expectRefused(run, {"batch contract incomplete"});
  }
  {
    const auto run = runScript(dir.path(), "WORLD_SIZE=5 RANK=0", "--global_batch 48");
    expectRefused(run, {"does not split evenly"});
  }
}

// ---------------------------------------------------------------------------------------------
// One machine.

TEST(PythonExample, OneAndTwoWorkersTrainTheSameGlobalBatchAlike) {
  SKIP_WITHOUT_TORCH();
  std::map<int, LogLine> done;
  for (const int workers : {1, 2}) {
    stretch::test::TempDir dir("stretch-py-workers");
    // 1 worker: the interpreter is the PROGRAM. 2 workers: the script is, and the launcher runs
    // it as `$STRETCH_PYTHON -u train_ddp.py` (its default, python3 on PATH, may lack torch).
    const Program program = workers == 1 ? Program::Interpreter : Program::Script;
    if (program == Program::Script)
      ::setenv("STRETCH_PYTHON", stretch::test::torchPython().c_str(), 1);
    Launch launch(dir.path(), pythonJob(dir.path(), oneNode(workers), 100, {}, program));
    ::unsetenv("STRETCH_PYTHON");
    ASSERT_EQ(launch.wait(180s), 0) << launch.err();
    expectScriptLogsKeepGlobalBatch(dir.path());
    const auto lines = scriptLines(rankZeroLog(dir.path(), 1));
    const auto start = lineOf(lines, "resumed_from");
    ASSERT_TRUE(start) << launch.err();
    EXPECT_EQ(start->str("batch_source"), "env");
    EXPECT_EQ(start->integer("world_size"), workers);
    const auto last = lineOf(lines, "done");
    ASSERT_TRUE(last) << stretch::test::readFileIfAny(rankZeroLog(dir.path(), 1));
    EXPECT_EQ(last->integer("steps"), 100);
    EXPECT_EQ(startsOf(dir.path() / "events.jsonl").size(), 1u);
    EXPECT_EQ(eventsOf(dir.path() / "events.jsonl").back()["event"], "finish");
    // The final checkpoint, in DeepSpeed's layout.
    EXPECT_EQ(stretch::test::readFileIfAny(dir.path() / "ckpt" / "latest"), "global_step100\n");
    EXPECT_TRUE(fs::exists(dir.path() / "ckpt" / "global_step100.pt"));
    done[workers] = *last;
  }
  std::printf("final loss with 1 and 2 workers: %.9f %.9f\n", done[1].number("loss"),
              done[2].number("loss"));
  // The same updates up to floating-point summation order.
  EXPECT_NEAR(done[2].number("loss"), done[1].number("loss"), 1e-5);
}

class PythonExampleKilledWorker : public ::testing::TestWithParam<int> {};

TEST_P(PythonExampleKilledWorker, RestartsResumesFromTheLastCheckpointAndKeepsTheGlobalBatch) {
  SKIP_WITHOUT_TORCH();
  const int victimRank = GetParam();
  const LogLine& expected = straightTwoWorkers();
  ASSERT_FALSE(expected.str("weights_sha256").empty());

  stretch::test::TempDir dir("stretch-py-kill");
  const fs::path events = dir.path() / "events.jsonl";
  Launch launch(dir.path(),
                pythonJob(dir.path(), oneNode(2), kKillSteps, {"--step_sleep", "0.02"}));
  // Mid-run, after a checkpoint: rank 0 has logged step 50 (checkpoints at 20 and 40).
  const auto before = waitForLine(
      dir.path(), 1, [](const LogLine& l) { return l.kind == "step" && l.integer("step") >= 50; });
  ASSERT_TRUE(before) << launch.err();
  const pid_t victim = workerWithRank(launch, victimRank);
  ASSERT_GT(victim, 0) << "no worker with RANK=" << victimRank;
  const double killedAt = wallNow();
  ASSERT_EQ(::kill(victim, SIGKILL), 0);

  const auto resumedStep =
      waitForLine(dir.path(), 2, [](const LogLine& l) { return l.kind == "step"; });
  ASSERT_TRUE(resumedStep) << launch.err();
  const double recovery = resumedStep->number("time") - killedAt;
  ASSERT_EQ(launch.wait(180s), 0) << launch.err();

  const auto gens = generations(dir.path());
  ASSERT_EQ(gens.size(), 2u) << launch.err();
  const auto start = lineOf(gens.at(2), "resumed_from");
  ASSERT_TRUE(start);
  const std::int64_t resumedFrom = start->integer("resumed_from");
  std::printf(
      "killed rank %d (pid %d) after step %lld: recovery (kill -> generation 2's first step) "
      "%.3f s, resumed from step %lld\n",
      victimRank, static_cast<int>(victim), static_cast<long long>(before->integer("step")),
      recovery, static_cast<long long>(resumedFrom));
  // Mostly `import torch` (about 1.4 s on an idle 2-core machine, 6-7 s under heavy load).
  EXPECT_LT(recovery, 30.0);
  EXPECT_GT(resumedFrom, 0);
  EXPECT_EQ(resumedFrom % kCheckpointEvery, 0);
  EXPECT_GE(resumedFrom, before->integer("step") / kCheckpointEvery * kCheckpointEvery);
  EXPECT_EQ(resumedStep->integer("step"), resumedFrom + 1);
  // The first generation never got past the kill by more than a few steps, and never finished.
  EXPECT_FALSE(lineOf(gens.at(1), "done"));
  expectScriptLogsKeepGlobalBatch(dir.path());

  // The agent saw the same: one restart at world size 2 with the solver's batch, resuming from
  // the step the script loaded.
  const auto starts = startsOf(events);
  ASSERT_EQ(starts.size(), 2u);
  for (const auto& s : starts)
    EXPECT_EQ(s["world_size"], 2);
  expectConstantGlobalBatch(events, kGlobalBatch, solverBatch);  // micro 8 x 3
  EXPECT_EQ(starts[1]["restart_count"], 1);
  EXPECT_EQ(starts[1]["resume_step"], resumedFrom);
  // Where the recovery time goes: the agent's restart, then the interpreter, `import torch`,
  // the rendezvous and the checkpoint load.
  const double restarted = starts[1]["time_ns"].get<double>() / 1e9;
  std::printf(
      "  kill -> agent's restart %.3f s; restart -> resumed_from logged %.3f s (import torch %s s, "
      "rendezvous %s s); -> first step %.3f s\n",
      restarted - killedAt, start->number("time") - restarted, start->str("import_s").c_str(),
      start->str("rendezvous_s").c_str(), resumedStep->number("time") - start->number("time"));

  // Bitwise the weights of the uninterrupted run.
  const auto done = lineOf(gens.at(2), "done");
  ASSERT_TRUE(done);
  EXPECT_EQ(done->integer("steps"), kKillSteps);
  EXPECT_EQ(done->str("weights_sha256"), expected.str("weights_sha256"));
  EXPECT_EQ(done->str("loss"), expected.str("loss"));
  EXPECT_TRUE(noneLeft(dir.path().string()));
}

INSTANTIATE_TEST_SUITE_P(Rank, PythonExampleKilledWorker, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return "Rank" + std::to_string(p.param);
                         });

// ---------------------------------------------------------------------------------------------
// Two network-namespace hosts (netns_support.hpp; no sshd).

// The generation a start_workers record started.
int generationOf(const nlohmann::json& start) {
  return start["generation"].get<int>();
}

TEST(PythonExampleNetns, HostLostThenRejoinsAndTheGlobalBatchNeverChanges) {
  SKIP_WITHOUT_TORCH();
  NetnsHosts net("stp", 232);  // not multinode_test's names and subnet
  if (!net.skipReason().empty())
    GTEST_SKIP() << net.skipReason();
  stretch::test::TempDir dir("stretch-py-netns");
  const fs::path events = dir.path() / "events.jsonl";
  const fs::path hostfile = writeHostfile(dir.path(), net.hosts());
  const int port = freePort();
  const int steps = 500;
  Launch launch(dir.path(), pythonJob(dir.path(),
                                      {"--hostfile", hostfile.string(), "--launcher", "netns",
                                       "--rdzv_addr", net.launcherAddress(), "--master_port",
                                       std::to_string(port), "--elastic", "1:2", "--last_call", "1",
                                       "--keepalive_timeout", "3", "--monitor_interval", "1"},
                                      steps, {"--step_sleep", "0.05"}));

  // Both hosts, world size 4; rank 0 on the first host, gloo on the namespace's own link.
  const auto first = waitForStart(events, [](const auto& s) { return s["world_size"] == 4; });
  ASSERT_FALSE(first.is_null()) << launch.err();
  const int g1 = generationOf(first);
  const auto before = waitForLine(
      dir.path(), g1, [](const LogLine& l) { return l.kind == "step" && l.integer("step") >= 30; });
  ASSERT_TRUE(before) << launch.err() << stretch::test::readFileIfAny(rankZeroLog(dir.path(), g1));
  const auto start1 = lineOf(scriptLines(rankZeroLog(dir.path(), g1)), "resumed_from");
  ASSERT_TRUE(start1);
  EXPECT_NE(start1->str("gloo_interface"), "lo");
  EXPECT_NE(start1->str("gloo_interface"), "default");

  // The second host's agent dies (its workers with it): world size 2 on the first host.
  const pid_t victim = agentPid(dir.path(), net.hosts()[1]);
  ASSERT_GT(victim, 0);
  const double killedAt = wallNow();
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const auto shrunk = waitForStart(events, [&](const auto& s) {
    return s["world_size"] == 2 && s["nodes"] == nlohmann::json::array({net.hosts()[0]});
  });
  ASSERT_FALSE(shrunk.is_null()) << launch.err();
  const int g2 = generationOf(shrunk);
  const auto shrunkStep =
      waitForLine(dir.path(), g2, [](const LogLine& l) { return l.kind == "step"; });
  ASSERT_TRUE(shrunkStep) << launch.err();
  std::printf(
      "host %s lost: world size 2 started after %.3f s, its first step %.3f s after the kill "
      "(resume step %s)\n",
      net.hosts()[1].c_str(), shrunk["time_ns"].get<double>() / 1e9 - killedAt,
      shrunkStep->number("time") - killedAt,
      shrunk.contains("resume_step") ? shrunk["resume_step"].dump().c_str() : "none");
  EXPECT_EQ(shrunkStep->integer("micro"), 8);
  EXPECT_EQ(shrunkStep->integer("accum"), 3);
  EXPECT_EQ(shrunkStep->integer("global_batch"), kGlobalBatch);
  // The small world checkpoints (rank 0 logs a step past the next multiple of
  // --checkpoint_every after saving it), then the host comes back as a new node.
  const std::int64_t smallCheckpoint =
      (shrunkStep->integer("step") / kCheckpointEvery + 1) * kCheckpointEvery;
  ASSERT_TRUE(waitForLine(dir.path(), g2, [&](const LogLine& l) {
    return l.kind == "step" && l.integer("step") > smallCheckpoint;
  })) << launch.err();

  const std::string rejoined = net.hosts()[1] + "-again";
  const double joinedAt = wallNow();
  Child joiner(dir.path(),
               {"ip", "netns", "exec", net.hosts()[1], STRETCH_CLI, "agent", "--rdzv",
                net.launcherAddress() + ":" + std::to_string(port + 1), "--node_id", rejoined,
                "--nproc", "2", "--token_file", (dir.path() / "logs" / "job_token").string(),
                "--log_dir", (dir.path() / "logs").string()},
               "joiner-");
  const auto grown = waitForStart(events, [&](const auto& s) {
    return s["world_size"] == 4 && s["nodes"] == nlohmann::json::array({net.hosts()[0], rejoined});
  });
  ASSERT_FALSE(grown.is_null()) << launch.err() << joiner.err();
  const int g3 = generationOf(grown);
  const auto grownStep =
      waitForLine(dir.path(), g3, [](const LogLine& l) { return l.kind == "step"; });
  ASSERT_TRUE(grownStep) << launch.err() << joiner.err();
  std::printf(
      "host rejoined as %s: world size 4 started after %.3f s, its first step %.3f s after the "
      "agent started (resume step %s)\n",
      rejoined.c_str(), grown["time_ns"].get<double>() / 1e9 - joinedAt,
      grownStep->number("time") - joinedAt,
      grown.contains("resume_step") ? grown["resume_step"].dump().c_str() : "none");
  EXPECT_EQ(grownStep->integer("micro"), 4);
  EXPECT_EQ(grownStep->integer("accum"), 3);
  // The large world loaded what the small world saved.
  EXPECT_GE(grownStep->integer("step"), smallCheckpoint + 1);

  ASSERT_EQ(launch.wait(240s), 0) << launch.err();
  EXPECT_EQ(joiner.wait(30s), 0) << joiner.err();
  expectScriptLogsKeepGlobalBatch(dir.path());
  // Every start: the solver's batch for its world size, global batch 48; the shrink resumed from
  // a checkpoint, and resume steps never go back.
  expectConstantGlobalBatch(events, kGlobalBatch, solverBatch);
  expectResumeStepsNeverGoBack(events);
  EXPECT_GT(
      lineOf(scriptLines(rankZeroLog(dir.path(), g2)), "resumed_from")->integer("resumed_from"), 0);
  // The growth did not count as a restart.
  EXPECT_EQ(grown["restart_count"], shrunk["restart_count"]);
  const auto gens = generations(dir.path());
  const auto done = lineOf(gens.rbegin()->second, "done");
  ASSERT_TRUE(done) << launch.err();
  EXPECT_EQ(done->integer("steps"), steps);
  EXPECT_EQ(done->integer("world_size"), 4);
  // Training the same global batch in the same order: the same model as an uninterrupted run,
  // up to floating-point summation order.
  const LogLine straight = straightRun(2, steps);
  std::printf("final loss %s, uninterrupted 2 workers %s\n", done->str("loss").c_str(),
              straight.str("loss").c_str());
  EXPECT_NEAR(done->number("loss"), straight.number("loss"), 1e-4);
  EXPECT_TRUE(noneLeft(dir.path().string()));
}

}  // namespace
