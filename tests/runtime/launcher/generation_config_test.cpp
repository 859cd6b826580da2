// STRETCH_DS_CONFIG (generation_config.hpp): the generation's copy of the job's DeepSpeed config
// has the generation's batch, no elasticity block and every other key unchanged; copies are
// written once per generation, and a private directory goes away with its owner.

#include "runtime/launcher/generation_config.hpp"

#include <string>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/common/posix_files.hpp"
#include "tests/support/test_support.hpp"

namespace {

using stretch::config::BatchTriple;
using stretch::launcher::GenerationConfigs;

const std::string kConfig = R"({
  "train_batch_size": 48,
  "optimizer": {"type": "Adam", "params": {"lr": 0.001}},
  "elasticity": {"enabled": true, "max_train_batch_size": 48, "micro_batch_sizes": [4, 8, 16],
                 "min_gpus": 1, "max_gpus": 4, "version": 0.2},
  "gradient_clipping": 1.0
})";

BatchTriple batch(std::int64_t train, std::int64_t micro, std::int64_t accumulation) {
  BatchTriple b;
  b.trainBatchSize = train;
  b.microBatchPerGpu = micro;
  b.gradientAccumulation = accumulation;
  return b;
}

TEST(GenerationConfig, SetsTheBatchDropsElasticityAndKeepsEverythingElse) {
  const auto text = stretch::launcher::generationConfigText(kConfig, batch(48, 8, 3));
  const auto json = nlohmann::json::parse(text);
  EXPECT_FALSE(json.contains("elasticity"));
  EXPECT_EQ(json["train_batch_size"], 48);
  EXPECT_EQ(json["train_micro_batch_size_per_gpu"], 8);
  EXPECT_EQ(json["gradient_accumulation_steps"], 3);
  EXPECT_EQ(json["optimizer"]["params"]["lr"], 0.001);
  EXPECT_EQ(json["gradient_clipping"], 1.0);
  EXPECT_EQ(json.size(), 5u);
  // The user's key order is kept (the copy reads like the original).
  EXPECT_LT(text.find("\"optimizer\""), text.find("\"gradient_clipping\""));
  EXPECT_THROW(stretch::launcher::generationConfigText("[1, 2]", batch(1, 1, 1)),
               stretch::ConfigError);
  EXPECT_THROW(stretch::launcher::generationConfigText("{oops", batch(1, 1, 1)),
               stretch::ConfigError);
}

TEST(GenerationConfig, OneFilePerGenerationInTheLogDirectory) {
  stretch::test::TempDir dir("stretch-gencfg");
  const std::string logs = (dir.path() / "logs").string();
  GenerationConfigs configs(kConfig, logs);
  const std::string first = configs.pathFor(1, batch(48, 16, 3));
  EXPECT_EQ(first, logs + "/ds_config.generation_1.json");
  EXPECT_EQ(configs.pathFor(1, batch(48, 16, 3)), first);
  const std::string second = configs.pathFor(2, batch(48, 8, 3));
  EXPECT_NE(second, first);
  EXPECT_EQ(nlohmann::json::parse(stretch::readFile(first))["train_micro_batch_size_per_gpu"], 16);
  EXPECT_EQ(nlohmann::json::parse(stretch::readFile(second))["train_micro_batch_size_per_gpu"], 8);
  EXPECT_EQ(stretch::listDirectory(logs).size(), 2u);  // no temporary file left behind
}

TEST(GenerationConfig, APrivateDirectoryIsRemovedWithItsOwner) {
  std::string path;
  {
    GenerationConfigs configs(kConfig, "");
    path = configs.pathFor(1, batch(48, 16, 3));
    struct stat st {};
    ASSERT_EQ(::stat(stretch::parentPath(path).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    EXPECT_TRUE(stretch::isRegularFile(path));
  }
  EXPECT_FALSE(stretch::pathExists(path));
  EXPECT_FALSE(stretch::pathExists(stretch::parentPath(path)));
}

}  // namespace
