// Unit tests of the launcher front end: hostfile, filters (DeepSpeed's tests/unit/launcher/
// test_run.py cases, with the ones Stretch turns into errors marked), world info, worker
// environment and the runner command lines.

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <fmt/format.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "runtime/launcher/hostfile.hpp"
#include "runtime/launcher/launch.hpp"
#include "runtime/launcher/launch_error.hpp"
#include "runtime/launcher/remote.hpp"
#include "runtime/launcher/worker_env.hpp"

namespace stretch::launcher {
namespace {

using ::testing::HasSubstr;

// The message of the exception E that f throws ("" and a test failure if none).
template <typename E = LaunchError, typename F>
std::string errorOf(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected an exception";
  return {};
}

using Hosts = std::vector<std::pair<std::string, std::vector<int>>>;

ActiveResources filter(const ResourcePool& pool, std::string_view include,
                       std::string_view exclude = "", std::optional<int> numNodes = std::nullopt,
                       std::optional<int> numGpus = std::nullopt) {
  return applyFilters(pool, include, exclude, numNodes, numGpus);
}

std::string filterError(const ResourcePool& pool, std::string_view include,
                        std::string_view exclude = "", std::optional<int> numNodes = std::nullopt,
                        std::optional<int> numGpus = std::nullopt) {
  return errorOf([&] { applyFilters(pool, include, exclude, numNodes, numGpus); });
}

std::string hostfileError(std::string_view text) {
  return errorOf([&] { parseHostfile(text, "hosts"); });
}

const ResourcePool kLocal = {{"worker-0", 4}};
const ResourcePool kTwo = {{"worker-0", 4}, {"worker-1", 4}};

// ---- Hostfile -------------------------------------------------------------------------------

// DeepSpeed's test_hostfile_good: indentation, blank lines, comments, an IP address.
TEST(Hostfile, DeepSpeedGoodHostfile) {
  const std::string text =
      "worker-0 slots=16\n"
      "    worker-1 slots=16\n"
      "\n"
      "# worker-3 slots=16\n"
      "worker-2\tslots=16   \n"
      "  # indented comment\n"
      "123.23.12.10 slots=2\n";
  const ResourcePool pool = parseHostfile(text, "hosts");
  const ResourcePool expected = {
      {"worker-0", 16}, {"worker-1", 16}, {"worker-2", 16}, {"123.23.12.10", 2}};
  EXPECT_EQ(pool, expected);
}

TEST(Hostfile, TrailingCommentsCrlfAndNoFinalNewline) {
  EXPECT_EQ(parseHostfile("w1 slots=2 # two GPUs\r\nw0 slots=8#x\r\nw2 slots=1", "h"),
            (ResourcePool{{"w1", 2}, {"w0", 8}, {"w2", 1}}));
}

TEST(Hostfile, KeepsFileOrder) {
  EXPECT_EQ(parseHostfile("b slots=1\na slots=2\nc_1.x slots=3\n", "h"),
            (ResourcePool{{"b", 1}, {"a", 2}, {"c_1.x", 3}}));
}

TEST(Hostfile, DuplicateHost) {
  EXPECT_EQ(hostfileError("worker-0 slots=4\nworker-1 slots=4\nworker-0 slots=2\n"),
            "hosts:3 = worker-0: expected each host listed once (worker-0 is already on line 1)");
}

// DeepSpeed's test_hostfiles_bad lines, and lines DeepSpeed reads only partly.
TEST(Hostfile, BadLines) {
  const std::string expected =
      "expected a line \"HOSTNAME slots=N\" (a host name, whitespace, slots=N and nothing else "
      "but a # comment), a # comment or a blank line";
  EXPECT_EQ(hostfileError("w0 slots=1\nthis is bad slots=1\n"),
            "hosts:2 = \"this is bad slots=1\": " + expected);
  EXPECT_EQ(hostfileError("missingslots\n"), "hosts:1 = \"missingslots\": " + expected);
  EXPECT_EQ(hostfileError("w1 slots = 2"), "hosts:1 = \"w1 slots = 2\": " + expected);
  EXPECT_EQ(hostfileError("w1 max_slots=2"), "hosts:1 = \"w1 max_slots=2\": " + expected);
  // DeepSpeed ignores the trailing text of these.
  EXPECT_EQ(hostfileError("w1 slots=2 max_slots=4"),
            "hosts:1 = \"w1 slots=2 max_slots=4\": " + expected);
  EXPECT_EQ(hostfileError("\n\nw1 slots=2 extra # c"),
            "hosts:3 = \"w1 slots=2 extra\": " + expected);
}

TEST(Hostfile, SlotsMustBeAPositiveInteger) {
  const std::string expected = "expected slots to be a positive integer (at most 4096)";
  EXPECT_EQ(hostfileError("w1 slots=0"), "hosts:1 = slots=0: " + expected);        // DeepSpeed: ok
  EXPECT_EQ(hostfileError("w1 slots=4abc"), "hosts:1 = slots=4abc: " + expected);  // DS: 4
  EXPECT_EQ(hostfileError("w1 slots=-1"), "hosts:1 = slots=-1: " + expected);
  EXPECT_EQ(hostfileError("w1 slots="), "hosts:1 = slots=: " + expected);
  EXPECT_EQ(hostfileError("w1 slots=4097"), "hosts:1 = slots=4097: " + expected);
  EXPECT_EQ(hostfileError("w1 slots=99999999999999999999"),
            "hosts:1 = slots=99999999999999999999: " + expected);
  EXPECT_EQ(parseHostfile("w1 slots=4096", "h").front().slots, 4096);
}

TEST(Hostfile, HostNamesThatWouldBeOptionsOrSeparators) {
  const std::string expected =
      "expected a host name of letters, digits, '.', '-' and '_' that does not start with '-' "
      "or '.'";
  EXPECT_EQ(hostfileError("-oProxyCommand=evil slots=1"),
            "hosts:1 = \"-oProxyCommand=evil\": " + expected);
  EXPECT_EQ(hostfileError("user@host slots=1"), "hosts:1 = \"user@host\": " + expected);
  EXPECT_EQ(hostfileError("w0 slots=1\nh:1 slots=1"), "hosts:2 = \"h:1\": " + expected);
  EXPECT_EQ(hostfileError("$(reboot) slots=1"), "hosts:1 = \"$(reboot)\": " + expected);
  EXPECT_EQ(hostfileError(".hidden slots=1"), "hosts:1 = \".hidden\": " + expected);
}

TEST(Hostfile, EmptyOrOnlyComments) {
  const std::string expected = "hosts = no hosts: expected at least one line \"HOSTNAME slots=N\"";
  EXPECT_EQ(hostfileError(""), expected);
  EXPECT_EQ(hostfileError("\n  \n# nothing here\n\t\n"), expected);
}

TEST(Hostfile, MixedGoodAndBad) {
  EXPECT_THAT(hostfileError("worker-0 slots=16\nworker-1 slots=16\nworker-2\n"),
              HasSubstr("hosts:3 = \"worker-2\": expected a line"));
}

TEST(Hostfile, ControlCharactersAreEscapedInMessages) {
  EXPECT_THAT(hostfileError("w\x01 x slots=1"), HasSubstr("\"w\\x01 x slots=1\""));
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ =
        std::filesystem::temp_directory_path() /
        ("stretch_launcher_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

using LoadHostfile = TempDir;

TEST_F(LoadHostfile, ReadsAFileAndNamesItInErrors) {
  const auto good = dir_ / "hostfile";
  std::ofstream(good) << "w0 slots=2\nw1 slots=2\n";
  EXPECT_EQ(loadHostfile(good), (ResourcePool{{"w0", 2}, {"w1", 2}}));

  const auto bad = dir_ / "bad";
  std::ofstream(bad) << "w0 slots=2\nw0 slots=2\n";
  EXPECT_THAT(errorOf([&] { loadHostfile(bad); }), HasSubstr(bad.string() + ":2 = w0: expected"));
}

TEST_F(LoadHostfile, UnreadableIsIoError) {
  const auto missing = dir_ / "missing";
  EXPECT_EQ(errorOf<IoError>([&] { loadHostfile(missing); }),
            "cannot read hostfile " + missing.string() + ": No such file or directory");
  EXPECT_EQ(errorOf<IoError>([&] { loadHostfile(dir_); }),
            "cannot read hostfile " + dir_.string() + ": Is a directory");
}

TEST(LocalResourcePool, DeepSpeedDefaultWithoutHostfile) {
  EXPECT_EQ(localResourcePool(8), (ResourcePool{{"localhost", 8}}));
  EXPECT_EQ(localResourcePool(1), (ResourcePool{{"localhost", 1}}));
  EXPECT_THAT(errorOf([] { localResourcePool(0); }),
              HasSubstr("local slots = 0: expected at least one GPU"));
  EXPECT_THAT(errorOf([] { localResourcePool(5000); }), HasSubstr("expected at most 4096"));
}

TEST(LaunchErrorTest, IsAConfigErrorWithItsOwnKindAndDetail) {
  try {
    parseHostfile("", "hosts");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.kind(), "LaunchError");
    ASSERT_TRUE(e.detail().has_value());
    EXPECT_EQ(e.detail()->path, "hosts");
  }
}

// ---- Filters: DeepSpeed's test_run.py ---------------------------------------------------------

TEST(Filters, DeepSpeedParserLocal) {
  EXPECT_EQ(filter(kLocal, "").hosts, (Hosts{{"worker-0", {0, 1, 2, 3}}}));
  EXPECT_EQ(filter(kLocal, "", "worker-0:1").hosts, (Hosts{{"worker-0", {0, 2, 3}}}));
  EXPECT_EQ(filter(kLocal, "", "worker-0:1,2").hosts, (Hosts{{"worker-0", {0, 3}}}));
  EXPECT_EQ(filter(kLocal, "worker-0:1").hosts, (Hosts{{"worker-0", {1}}}));
  EXPECT_EQ(filter(kLocal, "worker-0").hosts, (Hosts{{"worker-0", {0, 1, 2, 3}}}));
}

// DeepSpeed merges repeated slots ("worker-0:1,1" -> [1], "worker-0:1@worker-0:0,1" -> [0, 1])
// and returns {} when everything is excluded; Stretch rejects all four.
TEST(Filters, DeepSpeedParserLocalCasesThatAreErrorsInStretch) {
  const std::string twice =
      "expected every slot named once (a host without slots names all of them), found "
      "worker-0:1 twice";
  EXPECT_EQ(filterError(kLocal, "worker-0:1,1"), "--include = worker-0:1,1: " + twice);
  EXPECT_EQ(filterError(kLocal, "worker-0:1@worker-0:0,1"),
            "--include = worker-0:1@worker-0:0,1: " + twice);
  const std::string nothing =
      "expected at least one slot left to run on, but it excludes every slot";
  EXPECT_EQ(filterError(kLocal, "", "worker-0"), "--exclude = worker-0: " + nothing);
  EXPECT_EQ(filterError(kLocal, "", "worker-0:0,1,2,3"),
            "--exclude = worker-0:0,1,2,3: " + nothing);
}

TEST(Filters, DeepSpeedParserMultinode) {
  EXPECT_EQ(filter(kTwo, "worker-1:0,3").hosts, (Hosts{{"worker-1", {0, 3}}}));
  EXPECT_EQ(filter(kTwo, "", "worker-1").hosts, (Hosts{{"worker-0", {0, 1, 2, 3}}}));
  EXPECT_EQ(filter(kTwo, "", "worker-0:0,1@worker-1:3").hosts,
            (Hosts{{"worker-0", {2, 3}}, {"worker-1", {0, 1, 2}}}));
}

TEST(Filters, DeepSpeedParserErrors) {
  EXPECT_EQ(filterError(kTwo, "jeff"),
            "--include = jeff: expected host names of the resource pool (worker-0, worker-1), "
            "found \"jeff\"");
  EXPECT_EQ(filterError(kTwo, "", "jeff"),
            "--exclude = jeff: expected host names of the resource pool (worker-0, worker-1), "
            "found \"jeff\"");
  EXPECT_EQ(filterError(kTwo, "worker-1:4"),
            "--include = worker-1:4: expected slot indices of worker-1 in 0..3 (it has 4 slots), "
            "found 4");
  EXPECT_EQ(filterError(kTwo, "", "worker-1:4"),
            "--exclude = worker-1:4: expected slot indices of worker-1 in 0..3 (it has 4 slots), "
            "found 4");
  EXPECT_THAT(filterError(kTwo, "", "worker-1@worker-0:1@5"),
              HasSubstr("--exclude = worker-1@worker-0:1@5: expected host names of the resource "
                        "pool (worker-0, worker-1), found \"5\""));
}

TEST(Filters, DeepSpeedMutuallyExclusive) {
  EXPECT_EQ(filterError(kTwo, "worker-0", "worker-1"),
            "--exclude = worker-1: expected no --exclude together with --include = worker-0 (they "
            "are mutually exclusive)");
}

// DeepSpeed's test_num_plus_parser: "Cannot specify num_nodes/gpus with include/exclude".
TEST(Filters, DeepSpeedNumPlusParser) {
  const ResourcePool pool = {{"localhost", 2}};
  EXPECT_EQ(filterError(pool, "localhost", "", 1),
            "--num_nodes = 1: expected no --num_nodes/--num_gpus together with --include (it "
            "already chooses the hosts and slots)");
  EXPECT_EQ(filterError(pool, "localhost", "", 1, 1),
            "--num_nodes = 1: expected no --num_nodes/--num_gpus together with --include (it "
            "already chooses the hosts and slots)");
  EXPECT_EQ(filterError(pool, "localhost", "", std::nullopt, 1),
            "--num_gpus = 1: expected no --num_nodes/--num_gpus together with --include (it "
            "already chooses the hosts and slots)");
  EXPECT_THAT(filterError(pool, "", "localhost", 1),
              HasSubstr("--num_nodes = 1: expected no --num_nodes/--num_gpus together with "
                        "--exclude"));
  EXPECT_THAT(filterError(pool, "", "localhost", 1, 1), HasSubstr("--num_nodes = 1: expected no"));
  EXPECT_THAT(filterError(pool, "", "localhost", std::nullopt, 1),
              HasSubstr("--num_gpus = 1: expected no --num_nodes/--num_gpus together with "
                        "--exclude"));
  // The conflict is reported before anything else is looked at (DeepSpeed's order).
  EXPECT_THAT(filterError(pool, "nosuchhost", "", 0), HasSubstr("--num_nodes = 0: expected no"));
}

// Issue #6671 / PR #8239: at DeepSpeed HEAD a bare host in --include yields no slots and a slot
// index is checked against the include string itself. Stretch has the documented semantics.
TEST(Filters, BareHostMeansAllSlotsAndSlotsAreCheckedAgainstThePool) {
  EXPECT_EQ(filter(kTwo, "worker-1@worker-0").hosts,
            (Hosts{{"worker-0", {0, 1, 2, 3}}, {"worker-1", {0, 1, 2, 3}}}));
  EXPECT_THAT(filterError(kTwo, "worker-1:7"),
              HasSubstr("expected slot indices of worker-1 in 0..3 (it has 4 slots), found 7"));
}

TEST(Filters, ResultIsInPoolOrderWithSlotsAscending) {
  EXPECT_EQ(filter(kTwo, "worker-1:3,1@worker-0:2").hosts,
            (Hosts{{"worker-0", {2}}, {"worker-1", {1, 3}}}));
  EXPECT_EQ(filter(kTwo, "worker-0:3@worker-0:0").hosts, (Hosts{{"worker-0", {0, 3}}}));
}

TEST(Filters, BareAndSlottedSameHostIsADuplicate) {
  // DeepSpeed: "w0:1@w0" merges to [1] (a quirk); here the bare host names slot 1 again.
  EXPECT_THAT(filterError(kTwo, "worker-0:1@worker-0"), HasSubstr("found worker-0:1 twice"));
  EXPECT_THAT(filterError(kTwo, "worker-0@worker-0"), HasSubstr("found worker-0:0 twice"));
}

TEST(Filters, SyntaxErrors) {
  const std::string syntax = "expected NAME[:SLOT[,SLOT...]] specs separated by '@', found ";
  EXPECT_EQ(filterError(kTwo, "worker-0@@worker-1"),
            "--include = worker-0@@worker-1: " + syntax + "an empty spec");
  EXPECT_EQ(filterError(kTwo, "@worker-0"), "--include = @worker-0: " + syntax + "an empty spec");
  EXPECT_EQ(filterError(kTwo, "worker-0@"), "--include = worker-0@: " + syntax + "an empty spec");
  EXPECT_EQ(filterError(kTwo, "worker-0:1:2"),
            "--include = worker-0:1:2: " + syntax + "\"worker-0:1:2\" with more than one ':'");
  EXPECT_EQ(filterError(kTwo, ":1"), "--include = :1: " + syntax + "\":1\" without a host name");
  const std::string slot =
      "expected slot indices (non-negative integers) after \"worker-0:\", found ";
  EXPECT_EQ(filterError(kTwo, "worker-0:"), "--include = worker-0:: " + slot + "\"\"");
  EXPECT_EQ(filterError(kTwo, "worker-0:x"), "--include = worker-0:x: " + slot + "\"x\"");
  EXPECT_EQ(filterError(kTwo, "worker-0:-1"), "--include = worker-0:-1: " + slot + "\"-1\"");
  EXPECT_EQ(filterError(kTwo, "worker-0:1,,2"), "--include = worker-0:1,,2: " + slot + "\"\"");
  EXPECT_EQ(filterError(kTwo, "worker-0: 1"), "--include = worker-0: 1: " + slot + "\" 1\"");
  EXPECT_THAT(filterError(kTwo, "worker-0:99999999999"),
              HasSubstr("in 0..3 (it has 4 slots), found 99999999999"));
}

TEST(Filters, UnknownHostSuggestsTheClosestName) {
  EXPECT_EQ(filterError(kTwo, "woker-1"),
            "--include = woker-1: expected host names of the resource pool (worker-0, worker-1), "
            "found \"woker-1\" (did you mean \"worker-1\"?)");
}

TEST(Filters, LongPoolsAreShortenedInMessages) {
  ResourcePool pool;
  for (int i = 0; i < 20; ++i) {
    pool.push_back({fmt::format("n{}", i), 1});
  }
  EXPECT_THAT(filterError(pool, "zzz"),
              HasSubstr("(n0, n1, n2, n3, n4, n5, n6, n7, ... (20 hosts)), found \"zzz\""));
}

TEST(Filters, NumNodesKeepsTheFirstHosts) {
  const ResourcePool pool = {{"a", 2}, {"b", 4}, {"c", 1}};
  EXPECT_EQ(filter(pool, "", "", 2).hosts, (Hosts{{"a", {0, 1}}, {"b", {0, 1, 2, 3}}}));
  EXPECT_EQ(filter(pool, "", "", 3).hosts.size(), 3u);
  EXPECT_EQ(filterError(pool, "", "", 4),
            "--num_nodes = 4: expected at most 3, the number of hosts in the resource pool (a, "
            "b, c)");
  EXPECT_EQ(filterError(pool, "", "", 0), "--num_nodes = 0: expected a positive integer");
  EXPECT_EQ(filterError(pool, "", "", -1), "--num_nodes = -1: expected a positive integer");
  // DeepSpeed without a hostfile: "Num nodes is >1 but no extra nodes available via hostfile".
  EXPECT_THAT(filterError(localResourcePool(4), "", "", 2),
              HasSubstr("--num_nodes = 2: expected at most 1, the number of hosts"));
}

TEST(Filters, NumGpusKeepsTheFirstSlotsOfEveryHost) {
  const ResourcePool pool = {{"a", 2}, {"b", 4}, {"c", 1}};
  EXPECT_EQ(filter(pool, "", "", 2, 2).hosts, (Hosts{{"a", {0, 1}}, {"b", {0, 1}}}));
  EXPECT_EQ(filter(pool, "", "", std::nullopt, 1).hosts,
            (Hosts{{"a", {0}}, {"b", {0}}, {"c", {0}}}));
  // DeepSpeed gives every host range(num_gpus) unchecked.
  EXPECT_EQ(filterError(pool, "", "", std::nullopt, 2),
            "--num_gpus = 2: expected at most 1: host c has 1 slot");
  EXPECT_EQ(filterError(pool, "", "", 1, 3),
            "--num_gpus = 3: expected at most 2: host a has 2 slots");
  EXPECT_EQ(filterError(pool, "", "", std::nullopt, 0),
            "--num_gpus = 0: expected a positive integer");
}

// ---- World info ------------------------------------------------------------------------------

const ActiveResources kDeepSpeedExample = {{{"w0", {0, 1}}, {"w1", {2, 3, 5}}}};

TEST(WorldInfo, MatchesDeepSpeedsEncoding) {
  EXPECT_EQ(encodeWorldInfo(kDeepSpeedExample), R"({"w0": [0, 1], "w1": [2, 3, 5]})");
  EXPECT_EQ(encodeWorldInfoBase64(kDeepSpeedExample),
            "eyJ3MCI6IFswLCAxXSwgIncxIjogWzIsIDMsIDVdfQ==");
}

TEST(WorldInfo, DecodesBothForms) {
  EXPECT_EQ(decodeWorldInfo(R"({"w0": [0, 1], "w1": [2, 3, 5]})"), kDeepSpeedExample);
  EXPECT_EQ(decodeWorldInfo("eyJ3MCI6IFswLCAxXSwgIncxIjogWzIsIDMsIDVdfQ=="), kDeepSpeedExample);
  EXPECT_EQ(decodeWorldInfo("eyJ3MCI6IFswLCAxXSwgIncxIjogWzIsIDMsIDVdfQ"), kDeepSpeedExample);
  EXPECT_EQ(decodeWorldInfo(R"(  {"b":[3,1],"a":[0]} )"),
            (ActiveResources{{{"b", {3, 1}}, {"a", {0}}}}));
}

TEST(WorldInfo, PaddingVariants) {
  for (const ActiveResources& r :
       {ActiveResources{{{"a", {0}}}}, ActiveResources{{{"ab", {0}}}},
        ActiveResources{{{"abc", {0}}}}, ActiveResources{{{"h.1", {7, 0, 3}}, {"h_2", {1}}}}}) {
    EXPECT_EQ(decodeWorldInfo(encodeWorldInfoBase64(r)), r) << encodeWorldInfo(r);
  }
}

TEST(WorldInfo, RejectsWhatLaunchCouldNotRun) {
  const auto err = [](std::string_view text) { return errorOf([&] { decodeWorldInfo(text); }); };
  // launch.py's default "None" decodes as base64 to bytes that are no JSON.
  EXPECT_THAT(err("None"), HasSubstr("--world_info = None: expected valid JSON ("));
  EXPECT_THAT(err("{\"w0\": [0"), HasSubstr("expected valid JSON ("));
  EXPECT_EQ(err(""),
            "--world_info = : expected a JSON object {\"host\": [slots]} or its base64 encoding "
            "(DeepSpeed's form)");
  EXPECT_THAT(err("not base64!"), HasSubstr("or its base64 encoding"));
  EXPECT_EQ(err("{}"),
            "--world_info = {}: expected a non-empty JSON object {\"host\": [slots], ...}");
  EXPECT_THAT(err("{\"w0\": 3}"),
              HasSubstr("expected a non-empty array of slot indices for w0, found 3"));
  EXPECT_THAT(err("{\"w0\": []}"),
              HasSubstr("expected a non-empty array of slot indices for w0, found []"));
  EXPECT_THAT(err("{\"w0\": [0], \"w0\": [1]}"),
              HasSubstr("expected each host once, found \"w0\" twice"));
  EXPECT_THAT(err("{\"w0\": [1, 1]}"), HasSubstr("expected each slot of w0 once, found 1 twice"));
  EXPECT_THAT(err("{\"w0\": [-1]}"), HasSubstr("expected slot indices of w0 in 0..4095, found -1"));
  EXPECT_THAT(err("{\"w0\": [1.5]}"),
              HasSubstr("expected slot indices of w0 in 0..4095, found 1.5"));
  EXPECT_THAT(err("{\"w0\": [true]}"), HasSubstr("found true"));
  EXPECT_THAT(err("{\"w0\": [4096]}"), HasSubstr("found 4096"));
  EXPECT_THAT(err("{\"-oX\": [0]}"), HasSubstr("expected a host name of letters, digits"));
  // Nested objects may repeat keys; only the top level names hosts.
  EXPECT_THAT(err("{\"w0\": [{\"a\": 1, \"a\": 2}]}"), HasSubstr("expected slot indices of w0"));
}

TEST(WorldInfo, SizesAndSequentialGlobalRanks) {
  const ActiveResources r = {{{"a", {0, 1, 2}}, {"b", {4, 5}}}};
  EXPECT_EQ(worldSize(r), 5);
  EXPECT_EQ(globalRank(r, 0, 0), 0);
  EXPECT_EQ(globalRank(r, 0, 2), 2);
  // DeepSpeed's launch.py: LOCAL_RANK = RANK % 3 -> ranks 3, 4 get local ranks 0, 1 ... with 2
  // local procs RANK % 2 gives 1, 0. Stretch: local rank k is global rank 3 + k.
  EXPECT_EQ(globalRank(r, 1, 0), 3);
  EXPECT_EQ(globalRank(r, 1, 1), 4);
  EXPECT_THROW(globalRank(r, 2, 0), InternalError);
  EXPECT_THROW(globalRank(r, 1, 2), InternalError);
  EXPECT_THROW(globalRank(r, 0, -1), InternalError);
}

TEST(WorldInfo, AllResources) {
  EXPECT_EQ(allResources({{"a", 2}, {"b", 1}}).hosts, (Hosts{{"a", {0, 1}}, {"b", {0}}}));
}

// ---- Worker environment ----------------------------------------------------------------------

WorkerEnvSpec exampleSpec() {
  WorkerEnvSpec spec;
  spec.nodeRank = 1;
  spec.numNodes = 2;
  spec.localRank = 1;
  spec.localWorldSize = 2;
  spec.globalRank = 4;
  spec.worldSize = 5;
  spec.masterAddr = "10.0.0.1";
  spec.masterPort = 29501;
  spec.restartCount = 2;
  spec.maxRestarts = 100;
  spec.storeToken = "0123abcd";
  return spec;
}

TEST(WorkerEnv, EveryVariable) {
  const std::map<std::string, std::string> expected = {
      {"RANK", "4"},
      {"LOCAL_RANK", "1"},
      {"WORLD_SIZE", "5"},
      {"LOCAL_WORLD_SIZE", "2"},
      {"GROUP_RANK", "1"},
      {"CROSS_RANK", "1"},
      {"CROSS_SIZE", "2"},
      {"MASTER_ADDR", "10.0.0.1"},
      {"MASTER_PORT", "29501"},
      {"STRETCH_RESTART_COUNT", "2"},
      {"STRETCH_MAX_RESTARTS", "100"},
      {"STRETCH_STORE_TOKEN", "0123abcd"},
  };
  EXPECT_EQ(workerEnvironment(exampleSpec()), expected);
}

TEST(WorkerEnv, OptionalVariablesOnlyWhenGiven) {
  WorkerEnvSpec spec = exampleSpec();
  EXPECT_EQ(workerEnvironment(spec).count("CUDA_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(workerEnvironment(spec).count("DEEPSPEED_ELASTICITY_CONFIG"), 0u);
  spec.cudaVisibleDevices = std::vector<int>{4, 5};
  spec.elasticityConfigJson = R"({"enabled": true, "max_train_batch_size": 64})";
  const auto env = workerEnvironment(spec);
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "4,5");
  EXPECT_EQ(env.at("DEEPSPEED_ELASTICITY_CONFIG"), *spec.elasticityConfigJson);
  spec.cudaVisibleDevices = std::vector<int>{};
  EXPECT_EQ(workerEnvironment(spec).at("CUDA_VISIBLE_DEVICES"), "");
}

// The one path from a generation to a worker: the controller's StartWorkers and the job's
// settings become each worker's variables, the batch only when the job has a config.
TEST(WorkerEnv, AGenerationBecomesEachWorkersVariables) {
  agent::StartWorkers start;
  start.generation = 3;
  start.worldSize = 5;
  start.dataParallelSize = 5;
  start.restartCount = 2;
  start.batch = config::BatchTriple{60, 4, 3};
  start.nodes = {{"a", 0, 0, 3}, {"b", 1, 3, 2}};
  JobSettings job;
  job.masterPort = 29600;
  job.maxRestarts = 10;
  job.token = "t0k";
  job.batchFromConfig = true;
  const auto env = jobWorkerEnvironment(job, start, start.nodes[1], 2, 1, "10.0.0.1",
                                        std::vector<int>{6, 7, 8}, nullptr);
  EXPECT_EQ(env.at("RANK"), "4");
  EXPECT_EQ(env.at("LOCAL_RANK"), "1");
  EXPECT_EQ(env.at("WORLD_SIZE"), "5");
  EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(env.at("GROUP_RANK"), "1");
  EXPECT_EQ(env.at("CROSS_SIZE"), "2");
  EXPECT_EQ(env.at("MASTER_ADDR"), "10.0.0.1");
  EXPECT_EQ(env.at("MASTER_PORT"), "29600");
  EXPECT_EQ(env.at("STRETCH_RESTART_COUNT"), "2");
  EXPECT_EQ(env.at("STRETCH_STORE_TOKEN"), "t0k");
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "6,7");  // the node's first two slots
  EXPECT_EQ(env.at("STRETCH_GENERATION"), "3");
  EXPECT_EQ(env.at("STRETCH_TRAIN_BATCH_SIZE"), "60");
  EXPECT_EQ(env.at("STRETCH_MICRO_BATCH_SIZE"), "4");
  EXPECT_EQ(env.at("STRETCH_GRADIENT_ACCUMULATION_STEPS"), "3");

  job.batchFromConfig = false;  // no --config: no batch to promise
  const auto bare =
      jobWorkerEnvironment(job, start, start.nodes[0], 2, 0, "10.0.0.1", std::nullopt, nullptr);
  EXPECT_EQ(bare.count("STRETCH_TRAIN_BATCH_SIZE"), 0u);
  EXPECT_EQ(bare.count("STRETCH_MICRO_BATCH_SIZE"), 0u);
  EXPECT_EQ(bare.count("CUDA_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(bare.at("STRETCH_GENERATION"), "3");
  EXPECT_EQ(bare.at("RANK"), "0");
}

TEST(WorkerEnv, InconsistentSpecsAreBugs) {
  const auto bad = [](auto change) {
    WorkerEnvSpec spec = exampleSpec();
    change(spec);
    return errorOf<InternalError>([&] { workerEnvironment(spec); });
  };
  EXPECT_THAT(bad([](WorkerEnvSpec& s) { s.localRank = 2; }), HasSubstr("local rank"));
  EXPECT_THAT(bad([](WorkerEnvSpec& s) { s.globalRank = 5; }), HasSubstr("global rank"));
  EXPECT_THAT(bad([](WorkerEnvSpec& s) { s.nodeRank = 2; }), HasSubstr("node rank"));
  EXPECT_THAT(bad([](WorkerEnvSpec& s) { s.masterPort = 0; }), HasSubstr("master port"));
  EXPECT_THAT(bad([](WorkerEnvSpec& s) { s.masterPort = 70000; }), HasSubstr("master port"));
  EXPECT_THAT(bad([](WorkerEnvSpec& s) { s.restartCount = 101; }), HasSubstr("restart count"));
  EXPECT_THAT(bad([](WorkerEnvSpec& s) { s.masterAddr.clear(); }), HasSubstr("master address"));
  EXPECT_THAT(bad([](WorkerEnvSpec& s) {
                s.cudaVisibleDevices = std::vector<int>{1, 1};
              }),
              HasSubstr("listed twice"));
  EXPECT_THAT(bad([](WorkerEnvSpec& s) { s.cudaVisibleDevices = std::vector<int>{-1}; }),
              HasSubstr("device index"));
}

// ---- Runner command lines --------------------------------------------------------------------

TEST(ShellQuote, Words) {
  EXPECT_EQ(shellQuote(""), "''");
  EXPECT_EQ(shellQuote("abc"), "abc");
  EXPECT_EQ(shellQuote("/usr/bin/stretch"), "/usr/bin/stretch");
  EXPECT_EQ(shellQuote("--node_rank"), "--node_rank");
  EXPECT_EQ(shellQuote("host-1:0,1@h2"), "host-1:0,1@h2");
  EXPECT_EQ(shellQuote("a=b"), "'a=b'");  // would be an assignment as the first word
  EXPECT_EQ(shellQuote("a b"), "'a b'");
  EXPECT_EQ(shellQuote("it's"), "'it'\"'\"'s'");
  EXPECT_EQ(shellQuote("$(rm -rf /)"), "'$(rm -rf /)'");
  EXPECT_EQ(shellQuote("`id`;x&&y|z>w<v"), "'`id`;x&&y|z>w<v'");
  EXPECT_EQ(shellQuote("~"), "'~'");
  EXPECT_EQ(shellQuote("#c"), "'#c'");
  EXPECT_EQ(shellQuote("*"), "'*'");
  EXPECT_EQ(shellQuote("a\nb"), "'a\nb'");
  EXPECT_THAT(errorOf([] { shellQuote(std::string("a\0b", 3)); }),
              HasSubstr("command-line argument = a string with a NUL byte: expected no NUL byte"));
  EXPECT_EQ(shellJoin({"env", "A=1", "x y", ""}), "env 'A=1' 'x y' ''");
}

TEST(RunnerKindTest, Names) {
  EXPECT_EQ(parseRunnerKind("pdsh"), RunnerKind::Pdsh);
  EXPECT_EQ(parseRunnerKind("PDSH"), RunnerKind::Pdsh);
  EXPECT_EQ(parseRunnerKind("OpenMPI"), RunnerKind::OpenMpi);
  EXPECT_EQ(parseRunnerKind("ssh"), RunnerKind::Ssh);
  EXPECT_EQ(parseRunnerKind("local"), RunnerKind::Local);
  EXPECT_EQ(parseRunnerKind("netns"), RunnerKind::Netns);
  EXPECT_EQ(parseRunnerKind("mpirun"), RunnerKind::OpenMpi);
  EXPECT_EQ(toString(RunnerKind::OpenMpi), "openmpi");
  EXPECT_EQ(errorOf([] { parseRunnerKind("mvapich"); }),
            "--launcher = mvapich: expected one of local, ssh, pdsh, openmpi (or mpirun), netns, "
            "slurm (DeepSpeed's mvapich, mpich and impi launchers are not supported)");
}

RemoteLaunchSpec exampleLaunch(RunnerKind runner) {
  RemoteLaunchSpec spec;
  spec.runner = runner;
  spec.hosts = {"w0", "w1"};
  spec.agentArgv = {"/opt/stretch/bin/stretch",
                    "agent",
                    "--node_rank",
                    std::string(kNodeRankPlaceholder),
                    "--",
                    "train.py",
                    "--lr=0.1",
                    "100%"};
  spec.exports = {{"PYTHONPATH", "/job dir"}, {"NCCL_DEBUG", "INFO"}};
  spec.workDir = "/job dir";
  return spec;
}

TEST(Runners, Local) {
  const auto launches = buildNodeLaunches(exampleLaunch(RunnerKind::Local));
  ASSERT_EQ(launches.size(), 2u);
  const std::vector<std::string> argv1 = {"/opt/stretch/bin/stretch",
                                          "agent",
                                          "--node_rank",
                                          "1",
                                          "--",
                                          "train.py",
                                          "--lr=0.1",
                                          "100%"};
  EXPECT_EQ(launches[1].argv, argv1);
  EXPECT_EQ(launches[0].argv[3], "0");
  EXPECT_EQ(launches[0].env, exampleLaunch(RunnerKind::Local).exports);
  EXPECT_EQ(launches[1].nodeRanks, std::vector<std::size_t>{1});
}

TEST(Runners, Ssh) {
  RemoteLaunchSpec spec = exampleLaunch(RunnerKind::Ssh);
  spec.sshPort = 2222;
  spec.launcherArgs = {"-i", "/keys/id"};
  spec.exports["EVIL"] = "x'; rm -rf / #";
  const auto launches = buildNodeLaunches(spec);
  ASSERT_EQ(launches.size(), 2u);
  const std::vector<std::string> expected = {
      "ssh",
      "-i",
      "/keys/id",
      "-o",
      "BatchMode=yes",
      "-o",
      "StrictHostKeyChecking=accept-new",
      "-p",
      "2222",
      "w1",
      "cd '/job dir' && exec env EVIL='x'\"'\"'; rm -rf / #' NCCL_DEBUG=INFO PYTHONPATH='/job "
      "dir' /opt/stretch/bin/stretch agent --node_rank 1 -- train.py '--lr=0.1' 100%"};
  EXPECT_EQ(launches[1].argv, expected);
  EXPECT_TRUE(launches[1].env.empty());
  EXPECT_EQ(launches[0].argv[9], "w0");
  EXPECT_THAT(launches[0].argv[10], HasSubstr("--node_rank 0 --"));
}

TEST(Runners, SshWithoutWorkDirOrExports) {
  RemoteLaunchSpec spec = exampleLaunch(RunnerKind::Ssh);
  spec.workDir.clear();
  spec.exports.clear();
  spec.hosts = {"w0"};
  EXPECT_EQ(buildNodeLaunches(spec)[0].argv.back(),
            "exec /opt/stretch/bin/stretch agent --node_rank 0 -- train.py '--lr=0.1' 100%");
}

TEST(Runners, Pdsh) {
  RemoteLaunchSpec spec = exampleLaunch(RunnerKind::Pdsh);
  spec.exports["FMT"] = "%h-%n";
  const auto launches = buildNodeLaunches(spec);
  ASSERT_EQ(launches.size(), 1u);
  const std::vector<std::string> expected = {
      "pdsh",
      "-S",
      "-f",
      "1024",
      "-w",
      "w0,w1",
      "cd '/job dir' && env FMT=%%h-%%n NCCL_DEBUG=INFO PYTHONPATH='/job dir' "
      "/opt/stretch/bin/stretch agent --node_rank %n -- train.py '--lr=0.1' 100%%"};
  EXPECT_EQ(launches[0].argv, expected);
  EXPECT_EQ(launches[0].env, (std::map<std::string, std::string>{{"PDSH_RCMD_TYPE", "ssh"}}));
  EXPECT_EQ(launches[0].nodeRanks, (std::vector<std::size_t>{0, 1}));

  spec.sshPort = 22022;
  spec.launcherArgs = {"-R", "ssh"};
  const auto withPort = buildNodeLaunches(spec);
  EXPECT_EQ(withPort[0].env.at("PDSH_SSH_ARGS_APPEND"), "-p 22022");
  EXPECT_EQ(withPort[0].argv[6], "-R");
  EXPECT_EQ(withPort[0].argv[7], "ssh");
}

TEST(Runners, PdshFanOutCoversEveryHost) {
  RemoteLaunchSpec spec = exampleLaunch(RunnerKind::Pdsh);
  spec.hosts.clear();
  for (int i = 0; i < 1500; ++i) {
    spec.hosts.push_back(fmt::format("n{}", i));
  }
  EXPECT_EQ(buildNodeLaunches(spec)[0].argv[3], "1500");
}

TEST(Runners, OpenMpi) {
  const auto launches = buildNodeLaunches(exampleLaunch(RunnerKind::OpenMpi));
  ASSERT_EQ(launches.size(), 1u);
  const std::vector<std::string> expected = {
      "mpirun",
      "-n",
      "2",
      "--map-by",
      "node",
      "--bind-to",
      "none",
      "--host",
      "w0:1,w1:1",
      "--wdir",
      "/job dir",
      "-x",
      "NCCL_DEBUG",
      "-x",
      "PYTHONPATH",
      "sh",
      "-c",
      "exec /opt/stretch/bin/stretch agent --node_rank \"$OMPI_COMM_WORLD_RANK\" -- train.py "
      "'--lr=0.1' 100%"};
  EXPECT_EQ(launches[0].argv, expected);
  EXPECT_EQ(launches[0].env, exampleLaunch(RunnerKind::OpenMpi).exports);
  EXPECT_EQ(launches[0].nodeRanks, (std::vector<std::size_t>{0, 1}));
}

TEST(Runners, OpenMpiWithoutPlaceholderRunsTheAgentDirectly) {
  RemoteLaunchSpec spec = exampleLaunch(RunnerKind::OpenMpi);
  spec.agentArgv = {"stretch", "agent", "a b"};
  spec.workDir.clear();
  spec.exports.clear();
  spec.launcherArgs = {"--allow-run-as-root"};
  const std::vector<std::string> expected = {
      "mpirun",    "-n",    "2",      "--map-by",  "node",
      "--bind-to", "none",  "--host", "w0:1,w1:1", "--allow-run-as-root",
      "stretch",   "agent", "a b"};
  EXPECT_EQ(buildNodeLaunches(spec)[0].argv, expected);
}

TEST(Runners, Netns) {
  RemoteLaunchSpec spec = exampleLaunch(RunnerKind::Netns);
  spec.netnsNames = {{"w0", "stretch-ns-0"}};
  const auto launches = buildNodeLaunches(spec);
  ASSERT_EQ(launches.size(), 2u);
  const std::vector<std::string> expected0 = {
      "ip",       "netns",       "exec", "stretch-ns-0", "/opt/stretch/bin/stretch",
      "agent",    "--node_rank", "0",    "--",           "train.py",
      "--lr=0.1", "100%"};
  EXPECT_EQ(launches[0].argv, expected0);
  EXPECT_EQ(launches[1].argv[3], "w1");  // unmapped: the host name
  EXPECT_EQ(launches[1].argv[7], "1");
  EXPECT_EQ(launches[1].env, spec.exports);
}

TEST(Runners, BadInput) {
  RemoteLaunchSpec spec = exampleLaunch(RunnerKind::Ssh);
  spec.exports["BAD-NAME"] = "1";
  EXPECT_EQ(errorOf([&] { buildNodeLaunches(spec); }),
            "environment variable name = BAD-NAME: expected letters, digits and '_', not starting "
            "with a digit");
  spec = exampleLaunch(RunnerKind::Ssh);
  spec.exports["1X"] = "1";
  EXPECT_THAT(errorOf([&] { buildNodeLaunches(spec); }), HasSubstr("= 1X: expected letters"));
  spec = exampleLaunch(RunnerKind::Ssh);
  spec.exports["X"] = std::string("a\0b", 3);
  EXPECT_EQ(errorOf([&] { buildNodeLaunches(spec); }),
            "X = a value with a NUL byte: expected no NUL byte");
  spec = exampleLaunch(RunnerKind::Ssh);
  spec.hosts = {"-oProxyCommand=evil"};
  EXPECT_THAT(errorOf([&] { buildNodeLaunches(spec); }),
              HasSubstr("host = -oProxyCommand=evil: expected letters, digits"));
  spec = exampleLaunch(RunnerKind::Ssh);
  spec.sshPort = 0;
  EXPECT_EQ(errorOf([&] { buildNodeLaunches(spec); }),
            "--ssh_port = 0: expected a TCP port in 1..65535");
  spec = exampleLaunch(RunnerKind::Local);
  spec.agentArgv.push_back(std::string("\0", 1));
  EXPECT_THAT(errorOf([&] { buildNodeLaunches(spec); }), HasSubstr("NUL byte"));
  spec = exampleLaunch(RunnerKind::Netns);
  spec.netnsNames = {{"w1", "../etc"}};
  EXPECT_THAT(errorOf([&] { buildNodeLaunches(spec); }),
              HasSubstr("network namespace = ../etc: expected letters"));
}

TEST(Runners, MalformedSpecsAreBugs) {
  RemoteLaunchSpec spec = exampleLaunch(RunnerKind::Local);
  spec.hosts.clear();
  EXPECT_THROW(buildNodeLaunches(spec), InternalError);
  spec = exampleLaunch(RunnerKind::Local);
  spec.agentArgv.clear();
  EXPECT_THROW(buildNodeLaunches(spec), InternalError);
  spec = exampleLaunch(RunnerKind::Local);
  spec.agentArgv = {"-x"};
  EXPECT_THROW(buildNodeLaunches(spec), InternalError);
}

// ---- Slurm runner ---------------------------------------------------------------------------

TEST(SlurmRunner, NameAndProgram) {
  EXPECT_EQ(parseRunnerKind("slurm"), RunnerKind::Slurm);
  EXPECT_EQ(parseRunnerKind("SLURM"), RunnerKind::Slurm);
  EXPECT_EQ(toString(RunnerKind::Slurm), "slurm");
}

TEST(SlurmRunner, OneSrunStartsOneAgentPerNodeWithTheRankFromSlurmProcid) {
  RemoteLaunchSpec spec = exampleLaunch(RunnerKind::Slurm);
  spec.hosts = {"gpu7", "gpu2", "gpu10"};  // node-rank order, not Slurm's
  spec.exports["STRETCH_STORE_TOKEN"] = "s3cret";
  const auto launches = buildNodeLaunches(spec);
  ASSERT_EQ(launches.size(), 1u);
  const std::vector<std::string> expected = {
      "srun",
      "--nodes=3",
      "--ntasks=3",
      "--ntasks-per-node=1",
      "--nodelist=gpu7,gpu2,gpu10",
      "--distribution=arbitrary",
      "--kill-on-bad-exit=0",
      "--input=none",
      "--chdir=/job dir",
      "--export=ALL",
      "sh",
      "-c",
      "exec /opt/stretch/bin/stretch agent --node_rank \"$SLURM_PROCID\" -- train.py "
      "'--lr=0.1' 100%"};
  EXPECT_EQ(launches[0].argv, expected);
  // The exports (the token among them) travel in srun's environment, never in its argv.
  EXPECT_EQ(launches[0].env, spec.exports);
  for (const auto& arg : launches[0].argv)
    EXPECT_EQ(arg.find("s3cret"), std::string::npos) << arg;
  EXPECT_EQ(launches[0].nodeRanks, (std::vector<std::size_t>{0, 1, 2}));
}

TEST(SlurmRunner, LauncherArgsComeLastAndNoPlaceholderRunsTheAgentDirectly) {
  RemoteLaunchSpec spec = exampleLaunch(RunnerKind::Slurm);
  spec.agentArgv = {"stretch", "agent", "a b"};
  spec.workDir.clear();
  spec.exports.clear();
  spec.launcherArgs = {"--partition=gpu", "--comment", "x y"};
  const std::vector<std::string> expected = {"srun",
                                             "--nodes=2",
                                             "--ntasks=2",
                                             "--ntasks-per-node=1",
                                             "--nodelist=w0,w1",
                                             "--distribution=arbitrary",
                                             "--kill-on-bad-exit=0",
                                             "--input=none",
                                             "--export=ALL",
                                             "--partition=gpu",
                                             "--comment",
                                             "x y",
                                             "stretch",
                                             "agent",
                                             "a b"};
  EXPECT_EQ(buildNodeLaunches(spec)[0].argv, expected);
}

TEST(SlurmRunner, BadHostsAreRejectedLikeTheOtherRunners) {
  RemoteLaunchSpec spec = exampleLaunch(RunnerKind::Slurm);
  spec.hosts = {"w0", "--nodelist=evil"};
  EXPECT_THAT(errorOf([&] { buildNodeLaunches(spec); }),
              HasSubstr("host = --nodelist=evil: expected letters"));
}

using Names = std::vector<std::string>;

TEST(SlurmHostlist, ExpandsSlurmsCompressedSyntax) {
  EXPECT_EQ(expandSlurmHostlist("gpu5"), Names{"gpu5"});
  EXPECT_EQ(expandSlurmHostlist("node[01-03,07],gpu5"),
            (Names{"node01", "node02", "node03", "node07", "gpu5"}));
  EXPECT_EQ(expandSlurmHostlist("n[8-10]"), (Names{"n8", "n9", "n10"}));
  EXPECT_EQ(expandSlurmHostlist("n[08-10]"), (Names{"n08", "n09", "n10"}));
  EXPECT_EQ(expandSlurmHostlist("n[098-101]"), (Names{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(expandSlurmHostlist("rack[1-2]-n[1-2]"),
            (Names{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}));
  EXPECT_EQ(expandSlurmHostlist("[1-2]x"), (Names{"1x", "2x"}));
  EXPECT_EQ(expandSlurmHostlist("a,b[3],c-d.e_f"), (Names{"a", "b3", "c-d.e_f"}));
  // Order kept, duplicates dropped.
  EXPECT_EQ(expandSlurmHostlist("b,a[1-2],a1,b"), (Names{"b", "a1", "a2"}));
  EXPECT_EQ(expandSlurmHostlist("n[0-99999]").size(), 100000u);
}

TEST(SlurmHostlist, MalformedListsAreErrorsNamingTheVariable) {
  for (const std::string bad :
       {"", ",", "a,", ",a", "a,,b", "n[", "n]", "n[1-2", "n[1-2]]", "n[[1]]", "n[]", "n[a]",
        "n[1-]", "n[-1]", "n[3-1]", "n[1,]", "n[1-2-3]", "n[0-1000000]", "a[0-999]b[0-9999]"}) {
    EXPECT_THAT(errorOf([&] { expandSlurmHostlist(bad); }),
                HasSubstr("SLURM_JOB_NODELIST = " + bad + ": expected a Slurm host list"))
        << bad;
  }
}

// Two workers on a one-GPU machine share it (the way to test elasticity there): say so at launch.
TEST(SharedDevices, MoreWorkersThanDevicesAreNotedNamingTheDevice) {
  const auto one = sharedDevicesNote(2, "cuda", 1);
  ASSERT_TRUE(one.has_value());
  EXPECT_THAT(*one, HasSubstr("--num_gpus 2 is more than the 1 cuda device visible here"));
  EXPECT_THAT(*one, HasSubstr("2 workers share cuda:0"));
  EXPECT_THAT(*one, HasSubstr("Gloo staged in host memory"));
  EXPECT_THAT(sharedDevicesNote(8, "cuda", 4).value_or(""), HasSubstr("8 workers share 4 devices"));
  EXPECT_FALSE(sharedDevicesNote(4, "cuda", 4).has_value());
  EXPECT_FALSE(sharedDevicesNote(4, "cpu", 0).has_value());
  EXPECT_FALSE(sharedDevicesNote(4, "cuda", 0).has_value());
}

// Rank 0 binds --master_port at every restart; in the ephemeral range an outgoing connection
// can take it in between (seen in CI: every restart failed "Address already in use").
TEST(MasterPort, APortInTheEphemeralRangeIsWarnedAbout) {
  const PortRange range = parsePortRange("32768\t60999\n");
  const auto warning = ephemeralPortWarning(40000, range);
  ASSERT_TRUE(warning.has_value());
  EXPECT_THAT(*warning, HasSubstr("--master_port 40000"));
  EXPECT_THAT(*warning, HasSubstr("32768-60999"));
  EXPECT_THAT(*warning, HasSubstr("below 32768"));
  EXPECT_TRUE(ephemeralPortWarning(32768, range).has_value());
  EXPECT_TRUE(ephemeralPortWarning(60999, range).has_value());
  EXPECT_FALSE(ephemeralPortWarning(29500, range).has_value());
  EXPECT_FALSE(ephemeralPortWarning(61000, range).has_value());
  EXPECT_THAT(ephemeralPortWarning(20000, parsePortRange("10000 20000")).value_or(""),
              HasSubstr("10000-20000"));
}

}  // namespace
}  // namespace stretch::launcher
