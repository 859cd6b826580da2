// DeepSpeed's launch.py command-line rules (worker_command.hpp): the Python interpreter in front
// of a .py PROGRAM or a --module, --local_rank=N after PROGRAM for non-elastic Python jobs, core
// lists and the cores each worker gets.

#include "runtime/launcher/worker_command.hpp"

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/launcher/launch_error.hpp"

namespace {

using stretch::launcher::CommandRules;
using stretch::launcher::LaunchError;
using stretch::launcher::WorkerCommand;
using Argv = std::vector<std::string>;

class WorkerCommandTest : public ::testing::Test {
 protected:
  void SetUp() override { ::unsetenv("STRETCH_PYTHON"); }
};

TEST_F(WorkerCommandTest, APythonScriptRunsUnbufferedUnderPython3WithItsLocalRank) {
  const WorkerCommand c = stretch::launcher::resolveWorkerCommand({"train.py", "--lr", "1"}, {});
  EXPECT_EQ(c.argv, (Argv{"python3", "-u", "train.py", "--lr", "1"}));
  EXPECT_EQ(c.programAt, 2u);
  const auto w = stretch::launcher::workerInvocation(c, 3, 4);
  EXPECT_EQ(w.argv, (Argv{"python3", "-u", "train.py", "--local_rank=3", "--lr", "1"}));
  EXPECT_TRUE(w.env.empty());
}

TEST_F(WorkerCommandTest, ModuleNoPythonNoLocalRankAndElasticFollowLaunchPy) {
  CommandRules module;
  module.module = true;
  EXPECT_EQ(stretch::launcher::workerInvocation(
                stretch::launcher::resolveWorkerCommand({"pkg.train", "x"}, module), 0, 1)
                .argv,
            (Argv{"python3", "-u", "-m", "pkg.train", "--local_rank=0", "x"}));
  CommandRules noPython;
  noPython.noPython = true;
  EXPECT_EQ(stretch::launcher::workerInvocation(
                stretch::launcher::resolveWorkerCommand({"./train.py", "x"}, noPython), 1, 2)
                .argv,
            (Argv{"./train.py", "x"}));
  CommandRules noLocalRank;
  noLocalRank.noLocalRank = true;
  EXPECT_EQ(stretch::launcher::resolveWorkerCommand({"t.py"}, noLocalRank).localRankAt,
            std::nullopt);
  CommandRules elastic;
  elastic.elastic = true;  // launch.py's elastic agent passes no --local_rank
  EXPECT_EQ(stretch::launcher::workerInvocation(
                stretch::launcher::resolveWorkerCommand({"t.py", "x"}, elastic), 1, 2)
                .argv,
            (Argv{"python3", "-u", "t.py", "x"}));
  // Any other program runs as is, with no --local_rank (it may not parse flags at all).
  EXPECT_EQ(stretch::launcher::workerInvocation(
                stretch::launcher::resolveWorkerCommand({"/bin/sh", "-c", "true"}, {}), 0, 1)
                .argv,
            (Argv{"/bin/sh", "-c", "true"}));
  ::setenv("STRETCH_PYTHON", "/opt/py/bin/python3", 1);
  EXPECT_EQ(stretch::launcher::resolveWorkerCommand({"t.py"}, elastic).argv,
            (Argv{"/opt/py/bin/python3", "-u", "t.py"}));
}

TEST_F(WorkerCommandTest, ContradictoryOrMalformedRulesAreLaunchErrorsNamingTheFlag) {
  CommandRules both;
  both.module = true;
  both.noPython = true;
  EXPECT_THROW(stretch::launcher::resolveWorkerCommand({"m"}, both), LaunchError);
  EXPECT_THROW(stretch::launcher::resolveWorkerCommand({}, {}), LaunchError);
  CommandRules listOnly;
  listOnly.bindCoreList = "0-3";
  try {
    stretch::launcher::resolveWorkerCommand({"x"}, listOnly);
    FAIL() << "a core list without --bind_cores_to_rank was accepted";
  } catch (const LaunchError& e) {
    EXPECT_NE(std::string(e.what()).find("--bind_cores_to_rank"), std::string::npos) << e.what();
  }
  for (const char* bad : {"", "a", "1-", "-1", "3-1", "0,,1", "1,2-x", "99999999"}) {
    EXPECT_THROW(stretch::launcher::parseCoreList(bad), LaunchError) << bad;
  }
}

TEST_F(WorkerCommandTest, CoreListsRoundTripAndSplitIntoEqualBlocks) {
  EXPECT_EQ(stretch::launcher::parseCoreList("0,2-5,3,9"), (std::vector<int>{0, 2, 3, 4, 5, 9}));
  EXPECT_EQ(stretch::launcher::formatCoreList({0, 2, 3, 4, 5, 9}), "0,2-5,9");
  EXPECT_EQ(stretch::launcher::formatCoreList({7}), "7");
  const std::vector<int> cores = {0, 1, 2, 3, 4, 5, 6};
  EXPECT_EQ(stretch::launcher::coresOfWorker(cores, 0, 3), (std::vector<int>{0, 1}));
  EXPECT_EQ(stretch::launcher::coresOfWorker(cores, 2, 3), (std::vector<int>{4, 5}));
  EXPECT_THROW(stretch::launcher::coresOfWorker({0, 1}, 0, 3), LaunchError);
}

TEST_F(WorkerCommandTest, BindingPrefixesNumactlOrTasksetAndSetsOmpThreads) {
  if (stretch::launcher::findExecutable("numactl").empty() &&
      stretch::launcher::findExecutable("taskset").empty())
    GTEST_SKIP() << "neither numactl nor taskset is installed";
  CommandRules bind;
  bind.bindCoresToRank = true;
  bind.bindCoreList = "4-7";
  const auto w = stretch::launcher::workerInvocation(
      stretch::launcher::resolveWorkerCommand({"prog"}, bind), 1, 2);
  ASSERT_EQ(w.argv.size(), 4u);
  EXPECT_TRUE(w.argv[0] == "numactl" || w.argv[0] == "taskset") << w.argv[0];
  EXPECT_EQ(w.argv[2], "6-7");
  EXPECT_EQ(w.argv[3], "prog");
  EXPECT_EQ(w.env.at("OMP_NUM_THREADS"), "2");
}

TEST_F(WorkerCommandTest, FindExecutableSearchesPathAndChecksTheExecuteBit) {
  EXPECT_EQ(stretch::launcher::findExecutable("/bin/sh"), "/bin/sh");
  EXPECT_FALSE(stretch::launcher::findExecutable("sh").empty());
  EXPECT_TRUE(stretch::launcher::findExecutable("/etc/hostname-no-such").empty());
  EXPECT_TRUE(stretch::launcher::findExecutable("/etc/passwd").empty());  // not executable
  EXPECT_TRUE(stretch::launcher::findExecutable("").empty());
}

}  // namespace

namespace {

TEST(ExpandWorkerVariables, ReplacesTheLaunchersVariablesInProgramArgumentsOnly) {
  const std::map<std::string, std::string> env = {{"STRETCH_DS_CONFIG", "/logs/ds.json"},
                                                  {"LOCAL_RANK", "3"}};
  const std::vector<std::string> argv = {"python3",
                                         "-u",
                                         "$LOCAL_RANK.py",
                                         "--deepspeed_config",
                                         "$STRETCH_DS_CONFIG",
                                         "--x=${LOCAL_RANK}/$HOME/${STRETCH_DS_CONFIG}",
                                         "$",
                                         "${LOCAL_RANK",
                                         "$LOCAL_RANKS"};
  EXPECT_EQ(stretch::launcher::expandWorkerVariables(argv, 2, env),
            (std::vector<std::string>{"python3", "-u", "$LOCAL_RANK.py", "--deepspeed_config",
                                      "/logs/ds.json", "--x=3/$HOME//logs/ds.json", "$",
                                      "${LOCAL_RANK", "$LOCAL_RANKS"}));
}

}  // namespace
