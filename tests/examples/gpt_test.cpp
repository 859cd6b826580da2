// The GPT example job end to end, as processes: the small preset learns well below the unigram
// entropy of its corpus; one and two ranks, and ZeRO 0, 1 and 2, follow the same loss curve; a
// resumed run (dropout on) ends bitwise where an uninterrupted one does; activation
// checkpointing recomputes exactly; bad input is exit status 2 naming the problem.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "tests/support/test_support.hpp"
#include "tests/support/torch_python.hpp"
#include "tools/rank_launcher.hpp"

namespace {

namespace fs = std::filesystem;

// Runs stretch-train-gpt on `ranks` processes with `args` (plus --json, and --deterministic so
// that the bitwise comparisons hold on a GPU too) and returns rank 0's summary. With --json,
// stdout carries that summary alone (logs go to stderr): `| jq` works.
nlohmann::json train(int ranks, std::vector<std::string> args) {
  stretch::tools::RankLaunch launch;
  launch.executable = STRETCH_TRAIN_GPT;
  args.push_back("--json");
  args.push_back("--deterministic");
  launch.args = args;
  launch.worldSize = ranks;
  launch.env["OMP_NUM_THREADS"] = "1";  // ctest runs two tests at once on two cores
  launch.deadline = std::chrono::steady_clock::now() + std::chrono::minutes(6);
  std::string summary;
  std::vector<std::string> otherLines;
  launch.onStdoutLine = [&](int rank, const std::string& line) {
    if (rank == 0 && !line.empty() && line.front() == '{')
      summary = line;
    else if (!line.empty())
      otherLines.push_back(line);
  };
  stretch::tools::runRanks(launch);
  EXPECT_TRUE(otherLines.empty()) << "stdout besides the JSON summary: " << otherLines.front();
  return nlohmann::json::parse(summary);
}

// A model small enough for tests that compare runs: 2 layers, width 32, context 32, dropout 0.1.
std::vector<std::string> tiny(std::vector<std::string> more, const std::string& dropout = "0.1") {
  std::vector<std::string> args = {
      "--layers",  "2",     "--heads",      "2", "--width",     "32", "--context",      "32",
      "--dropout", dropout, "--eval-every", "0", "--log-every", "0",  "--sample-chars", "20"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// The small preset's config with `edit` applied, written to dir/name.
std::string configWith(const stretch::test::TempDir& dir, const std::string& name,
                       const std::function<void(nlohmann::json&)>& edit) {
  std::ifstream in(std::string(STRETCH_SOURCE) + "/fixtures/jobs/gpt/ds_config.json");
  auto config = nlohmann::json::parse(in, nullptr, true, /*ignore_comments=*/true);
  edit(config);
  const fs::path path = dir.path() / name;
  std::ofstream(path) << config.dump(2);
  return path.string();
}

void expectSameLosses(const nlohmann::json& a, const nlohmann::json& b, double tolerance) {
  ASSERT_EQ(a["losses"].size(), b["losses"].size());
  for (std::size_t i = 0; i < a["losses"].size(); ++i) {
    EXPECT_NEAR(a["losses"][i].get<double>(), b["losses"][i].get<double>(), tolerance)
        << "step " << i + 1;
  }
}

TEST(GptExample, TheSmallPresetLearnsWellBelowTheUnigramEntropy) {
  const auto summary = train(1, {"--eval-every", "0", "--log-every", "50"});
  std::printf(
      "small preset: %s steps, validation loss %.4f nats vs unigram entropy %.4f, "
      "%.0f tokens/s, step median %.3f s, peak RSS %.0f MiB\nsample: %s\n",
      summary["steps"].dump().c_str(), summary["validation_loss"].get<double>(),
      summary["unigram_entropy"].get<double>(), summary["tokens_per_second"].get<double>(),
      summary["step_seconds_median"].get<double>(),
      summary["peak_rss_bytes"].get<double>() / (1 << 20),
      summary["sample"].get<std::string>().c_str());
  EXPECT_EQ(summary["world_size"], 1);
  // docs/gpt.md states the preset's quality: below 2.4 nats, against 3.20 for the unigram model.
  EXPECT_LT(summary["validation_loss"].get<double>(), 2.4) << summary.dump();
  EXPECT_NEAR(summary["unigram_entropy"].get<double>(), 3.1975, 1e-4);
  EXPECT_EQ(summary["sample"].get<std::string>().rfind("The ", 0), 0u);
  EXPECT_EQ(summary["sample"].get<std::string>().size(), 4u + 200u);
}

TEST(GptExample, OneAndTwoRanksFollowTheSameLossCurveWithoutDropout) {
  const auto one = train(1, tiny({"--steps", "8"}, "0"));
  const auto two = train(2, tiny({"--steps", "8"}, "0"));
  EXPECT_EQ(one["gradient_accumulation_steps"], 2);
  EXPECT_EQ(two["gradient_accumulation_steps"], 1);
  EXPECT_EQ(two["world_size"], 2);
  expectSameLosses(one, two, 2e-5);
}

TEST(GptExample, ZeroStagesOneAndTwoFollowStageZero) {
  stretch::test::TempDir dir("stretch-gpt");
  std::vector<nlohmann::json> runs;
  for (int stage : {0, 1, 2}) {
    const auto config =
        configWith(dir, "stage" + std::to_string(stage) + ".json",
                   [stage](nlohmann::json& c) { c["zero_optimization"]["stage"] = stage; });
    runs.push_back(train(2, tiny({"--steps", "6", "--config", config})));
    EXPECT_EQ(runs.back()["zero_stage"], stage);
  }
  expectSameLosses(runs[0], runs[1], 2e-5);
  expectSameLosses(runs[0], runs[2], 2e-5);
}

TEST(GptExample, ResumingWithDropoutOnEndsBitwiseWhereAnUninterruptedRunDoes) {
  stretch::test::TempDir dir("stretch-gpt");
  const auto straight = train(2, tiny({"--steps", "10"}));
  const std::string ckpt = (dir.path() / "ckpt").string();
  train(2, tiny({"--steps", "5", "--checkpoint-dir", ckpt, "--save-at", "5"}));
  ASSERT_TRUE(fs::exists(dir.path() / "ckpt" / "latest"));
  const auto resumed = train(2, tiny({"--steps", "10", "--checkpoint-dir", ckpt, "--resume"}));
  EXPECT_EQ(resumed["weights_sha256"], straight["weights_sha256"]);
  EXPECT_EQ(resumed["samples"], straight["samples"]);
  EXPECT_EQ(resumed["final_loss"], straight["final_loss"]);
  // A checkpoint written by two ranks resumes on one (the dropout masks then differ).
  const auto alone = train(1, tiny({"--steps", "10", "--checkpoint-dir", ckpt, "--resume"}));
  EXPECT_EQ(alone["steps"], 10);
  EXPECT_EQ(alone["samples"], straight["samples"]);
}

TEST(GptExample, ActivationCheckpointingRecomputesExactly) {
  stretch::test::TempDir dir("stretch-gpt");
  const auto config = configWith(dir, "ac.json", [](nlohmann::json& c) {
    c["activation_checkpointing"] = nlohmann::json::object();
  });
  const auto plain = train(1, tiny({"--steps", "4"}));
  const auto checkpointed = train(1, tiny({"--steps", "4", "--config", config}));
  EXPECT_FALSE(plain["activation_checkpointing"].get<bool>());
  EXPECT_TRUE(checkpointed["activation_checkpointing"].get<bool>());
  // The same dropout masks and the same arithmetic: bitwise the same weights.
  EXPECT_EQ(checkpointed["weights_sha256"], plain["weights_sha256"]);
}

TEST(GptExample, ExportedInitialWeightsReloadIntoTheSameRun) {
  stretch::test::TempDir dir("stretch-gpt");
  const std::string init = (dir.path() / "init.pt").string();
  const auto exported = train(1, tiny({"--steps", "3", "--export-init", init}));
  ASSERT_TRUE(fs::exists(init));
  // Another seed would draw other weights; --init-from replaces them with the exported ones.
  const auto reloaded = train(1, tiny({"--steps", "3", "--init-from", init}));
  EXPECT_EQ(reloaded["weights_sha256"], exported["weights_sha256"]);
  if (stretch::test::torchUnavailableReason().empty()) {
    const auto run =
        stretch::test::runCommand(stretch::test::torchPython() +
                                  " -c 'import sys, torch; s = torch.load(sys.argv[1]); "
                                  "print(len(s), tuple(s[\"wte.weight\"].shape))' " +
                                  init);
    EXPECT_EQ(run.exitCode, 0);
    EXPECT_EQ(run.output, "28 (" + exported["vocabulary"].dump() + ", 32)\n");
  }
}

TEST(GptExample, BadInputIsExitStatusTwoNamingTheProblem) {
  stretch::test::TempDir dir("stretch-gpt");
  const auto run = [](const std::string& args) {
    return stretch::test::runCommand(std::string(STRETCH_TRAIN_GPT) + " " + args + " 2>&1");
  };
  auto r = run("--width 130 --heads 4");
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_NE(r.output.find("width"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("multiple of heads (4)"), std::string::npos) << r.output;

  r = run("--data " + (dir.path() / "missing.txt").string());
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_NE(r.output.find("missing.txt"), std::string::npos) << r.output;

  const fs::path tinyText = dir.path() / "tiny.txt";
  std::ofstream(tinyText) << "far too short";
  r = run("--data " + tinyText.string());
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_NE(r.output.find("at least 10 are needed"), std::string::npos) << r.output;

  const std::string init = (dir.path() / "init.pt").string();
  train(1, tiny({"--steps", "1", "--export-init", init}));
  r = run("--steps 1 --init-from " + init);  // the small preset: other shapes
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_NE(r.output.find("--init-from"), std::string::npos) << r.output;

  r = run("--resume");
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_NE(r.output.find("--checkpoint-dir"), std::string::npos) << r.output;
}

}  // namespace
