// The example job end to end, as processes: it trains to the stated quality on one process and on
// two over Gloo, resumes from a checkpoint to exactly the result of an uninterrupted run, and its
// checkpoint opens in Python's torch.load and predicts the same digits in PyTorch.

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "tests/support/test_support.hpp"
#include "tests/support/torch_python.hpp"
#include "tools/rank_launcher.hpp"

namespace {

namespace fs = std::filesystem;

// Runs stretch-train-digits on `ranks` processes with `args` (plus --json) and returns rank 0's
// summary.
nlohmann::json train(int ranks, std::vector<std::string> args) {
  stretch::tools::RankLaunch launch;
  launch.executable = STRETCH_TRAIN_DIGITS;
  args.push_back("--json");
  launch.args = args;
  launch.worldSize = ranks;
  launch.deadline = std::chrono::steady_clock::now() + std::chrono::minutes(4);
  std::string summary;
  launch.onStdoutLine = [&](int rank, const std::string& line) {
    if (rank == 0 && !line.empty() && line.front() == '{')
      summary = line;
  };
  stretch::tools::runRanks(launch);
  return nlohmann::json::parse(summary);
}

// The stated quality of the example (docs/engine.md): 600 steps bring the training loss below
// 0.1 and the accuracy on the 297 held-out digits to at least 90%.
constexpr double kMaxFinalLoss = 0.1;
constexpr double kMinTestAccuracy = 0.90;

TEST(DigitsExample, OneProcessTrainsToTheStatedLossAndAccuracy) {
  const auto summary = train(1, {});
  EXPECT_EQ(summary["steps"], 600);
  EXPECT_EQ(summary["samples"], 600 * 64);
  EXPECT_LT(summary["final_loss"].get<double>(), kMaxFinalLoss) << summary.dump();
  EXPECT_GE(summary["test_accuracy"].get<double>(), kMinTestAccuracy) << summary.dump();
}

TEST(DigitsExample, TwoProcessesOverGlooTrainToTheSameQuality) {
  const auto summary = train(2, {});
  EXPECT_EQ(summary["world_size"], 2);
  EXPECT_EQ(summary["samples"], 600 * 64);
  EXPECT_LT(summary["final_loss"].get<double>(), kMaxFinalLoss) << summary.dump();
  EXPECT_GE(summary["test_accuracy"].get<double>(), kMinTestAccuracy) << summary.dump();
}

TEST(DigitsExample, ResumingFromACheckpointGivesExactlyTheUninterruptedResult) {
  stretch::test::TempDir dir("stretch-digits");
  const auto straight = train(1, {"--steps", "200"});
  train(1, {"--steps", "100", "--checkpoint-dir", dir.path().string(), "--save-at", "100"});
  ASSERT_TRUE(fs::exists(dir.path() / "latest"));
  const auto resumed =
      train(1, {"--steps", "200", "--checkpoint-dir", dir.path().string(), "--resume"});
  EXPECT_EQ(resumed["final_loss"], straight["final_loss"]);  // bitwise on the CPU
  EXPECT_EQ(resumed["test_accuracy"], straight["test_accuracy"]);
  EXPECT_EQ(resumed["samples"], straight["samples"]);
}

TEST(DigitsExample, ACheckpointWrittenOnTwoRanksResumesOnOne) {
  stretch::test::TempDir dir("stretch-digits");
  train(2, {"--steps", "100", "--checkpoint-dir", dir.path().string(), "--save-at", "100"});
  const auto resumed =
      train(1, {"--steps", "600", "--checkpoint-dir", dir.path().string(), "--resume"});
  EXPECT_EQ(resumed["steps"], 600);
  EXPECT_EQ(resumed["samples"], 600 * 64);
  EXPECT_LT(resumed["final_loss"].get<double>(), kMaxFinalLoss) << resumed.dump();
  EXPECT_GE(resumed["test_accuracy"].get<double>(), kMinTestAccuracy) << resumed.dump();
}

TEST(DigitsExample, PythonTorchLoadsTheCheckpointAndPredictsTheSameDigits) {
  if (const std::string why = stretch::test::torchUnavailableReason(); !why.empty())
    GTEST_SKIP() << why;
  const std::string python = stretch::test::torchPython();
  stretch::test::TempDir dir("stretch-digits");
  const auto summary =
      train(1, {"--steps", "150", "--checkpoint-dir", dir.path().string(), "--save-at", "150"});
  const fs::path script = dir.path() / "check.py";
  {
    std::FILE* f = std::fopen(script.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(R"(import gzip, sys, torch
ckpt = torch.load(sys.argv[1])
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 128)
        self.fc2 = torch.nn.Linear(128, 10)
    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))
net = Net()
net.load_state_dict(ckpt["module"])  # strict: every key and shape must match
rows = [list(map(int, line.split(b","))) for line in gzip.open(sys.argv[2])]
test = torch.tensor(rows[1500:], dtype=torch.float32)
with torch.no_grad():
    pred = net(test[:, :64] / 16).argmax(1)
print(ckpt["global_steps"], (pred == test[:, 64].long()).double().mean().item())
)",
               f);
    std::fclose(f);
  }
  const std::string command =
      python + " " + script.string() + " " +
      (dir.path() / "global_step150" / "mp_rank_00_model_states.pt").string() + " " +
      STRETCH_DIGITS_DATA + " > " + (dir.path() / "out.txt").string();
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::FILE* out = std::fopen((dir.path() / "out.txt").c_str(), "r");
  ASSERT_NE(out, nullptr);
  long steps = 0;
  double accuracy = 0;
  ASSERT_EQ(std::fscanf(out, "%ld %lf", &steps, &accuracy), 2);
  std::fclose(out);
  EXPECT_EQ(steps, 150);
  EXPECT_NEAR(accuracy, summary["test_accuracy"].get<double>(), 1e-12);
}

}  // namespace
