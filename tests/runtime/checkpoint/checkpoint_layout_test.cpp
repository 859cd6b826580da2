// runtime/checkpoint without LibTorch: tag names, `latest`'s strictness, the candidates a load
// tries, and the resume point the launcher reports: the first candidate whose manifest and files
// the engine would accept (a manifest-less directory is no candidate, a corrupt, truncated or
// incomplete newest checkpoint is skipped).

#include <cstdint>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/checkpoint/layout.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "runtime/common/posix_files.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::checkpoint {
namespace {

std::string under(const test::TempDir& dir, const std::string& relative) {
  return joinPath(dir.path().string(), relative);
}

void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A checkpoint as the engine writes it, without LibTorch: the files, then the manifest, then
// (when `makeLatest`) dir/latest.
void writeCheckpoint(const std::string& dir, const std::string& tag, bool makeLatest = true) {
  const std::string tagDir = joinPath(dir, tag);
  CheckpointManifest manifest;
  manifest.tag = tag;
  manifest.dpWorldSize = 2;
  manifest.zeroStage = 1;
  manifest.add(writeFileAtomically(joinPath(tagDir, modelStatesName()), "model of " + tag));
  for (int rank = 0; rank < 2; ++rank) {
    manifest.add(writeFileAtomically(joinPath(tagDir, zeroOptimStatesName(rank)),
                                     "optimizer shard " + std::to_string(rank) + " of " + tag));
  }
  writeManifest(tagDir, manifest);
  if (makeLatest)
    writeLatest(dir, tag);
}

void flipByteOf(const std::string& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(2);
  const char c = static_cast<char>(f.get());
  f.seekp(2);
  f.put(static_cast<char>(c ^ 0x5a));
}

// global_step40, 80 and 120 of a job, latest naming 120.
struct ThreeCheckpoints {
  test::TempDir dir{"stretch-ckpt-layout"};
  ThreeCheckpoints() {
    for (const char* tag : {"global_step40", "global_step80", "global_step120"})
      writeCheckpoint(path(), tag);
  }
  std::string path() const { return dir.path().string(); }
  std::string at(const std::string& relative) const { return under(dir, relative); }
};

TEST(CheckpointTags, DefaultTagsAreGlobalStepAndAPlainDecimalNumber) {
  EXPECT_EQ(defaultTag(0), "global_step0");
  EXPECT_EQ(defaultTag(120), "global_step120");
  EXPECT_EQ(defaultTagStep("global_step42"), std::optional<std::int64_t>(42));
  EXPECT_EQ(defaultTagStep("global_step0"), std::optional<std::int64_t>(0));
  EXPECT_EQ(defaultTagStep("global_step007"), std::optional<std::int64_t>(7));
  EXPECT_EQ(defaultTagStep("global_step999999999999999999"),
            std::optional<std::int64_t>(999999999999999999));
  // What the launcher's old stoll accepted and the engine never did.
  for (const char* other : {"global_step", "global_step-1", "global_step+1", "global_step 1",
                            "global_step1x", "global_step1 ", "global_step0x10",
                            "global_step1234567890123456789", "Global_step1", "best", ""}) {
    EXPECT_EQ(defaultTagStep(other), std::nullopt) << other;
  }
  EXPECT_EQ(modelStatesName(), "mp_rank_00_model_states.pt");
  EXPECT_EQ(zeroOptimStatesName(3), "zero_pp_rank_3_mp_rank_00_optim_states.pt");
  EXPECT_EQ(zeroOptimStatesName(1, 0, true), "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt");
  EXPECT_EQ(test::errorOf<CheckpointError>([] { validateTag("a/b"); }),
            "checkpoint tag = 'a/b': expected a non-empty directory name without '/', NUL or "
            "line breaks, not '.' or '..'");
  for (const std::string& bad :
       std::vector<std::string>{"", ".", "..", "a/b", "a\nb", "a\rb", std::string("a\0b", 3)})
    EXPECT_NE(test::errorOf<CheckpointError>([&] { validateTag(bad); }), "") << bad;
  EXPECT_NO_THROW(validateTag("global_step10"));
}

TEST(CheckpointLatest, StripsWhitespaceAndRefusesWhatIsNoTag) {
  test::TempDir dir("stretch-ckpt-layout");
  const std::string d = dir.path().string();
  EXPECT_EQ(readLatest(d), std::nullopt);
  EXPECT_EQ(readLatest(under(dir, "nowhere")), std::nullopt);
  writeLatest(d, "global_step100");
  EXPECT_EQ(test::readFileIfAny(dir.path() / "latest"), "global_step100");  // no newline
  EXPECT_EQ(readLatest(d), "global_step100");
  writeBytes(under(dir, "latest"), " \t global_step7\r\n\f\v");  // DeepSpeed strips
  EXPECT_EQ(readLatest(d), "global_step7");
  writeBytes(under(dir, "latest"), "my tag\n");  // inner spaces are the tag's
  EXPECT_EQ(readLatest(d), "my tag");
  writeBytes(under(dir, "latest"), " \n");
  EXPECT_NE(test::errorOf<CheckpointError>([&] {
              readLatest(d);
            }).find("expected the tag of a checkpoint directory"),
            std::string::npos);
  for (const std::string& bad : {"../elsewhere", "a/b", "a\nb", ".", ".."}) {
    writeBytes(under(dir, "latest"), bad);
    EXPECT_NE(test::errorOf<CheckpointError>([&] { readLatest(d); }), "") << bad;
  }
  // At most kMaxLatestBytes, whitespace included.
  writeBytes(under(dir, "latest"), std::string(kMaxLatestBytes - 3, ' ') + "tag");
  EXPECT_EQ(readLatest(d), "tag");
  writeBytes(under(dir, "latest"), std::string(kMaxLatestBytes, ' ') + "tag");
  EXPECT_NE(test::errorOf<CheckpointError>([&] {
              readLatest(d);
            }).find("more than the limit of 4096 bytes"),
            std::string::npos);
  // Not a regular file: refused, never waited on.
  ASSERT_TRUE(removePath(under(dir, "latest")));
  ASSERT_EQ(::mkfifo(under(dir, "latest").c_str(), 0644), 0);
  EXPECT_NE(test::errorOf<CheckpointError>([&] { readLatest(d); }).find("FIFO"), std::string::npos);
  ASSERT_TRUE(removePath(under(dir, "latest")));
  makeDirectories(under(dir, "latest"));
  EXPECT_NE(test::errorOf<CheckpointError>([&] { readLatest(d); }).find("Is a directory"),
            std::string::npos);
}

TEST(CheckpointCandidates, LatestThenOlderDefaultTagsWithAManifestNewestFirst) {
  test::TempDir dir("stretch-ckpt-layout");
  for (const char* d : {"global_step5", "global_step20", "global_step100", "global_step7x", "best",
                        "global_step3"}) {
    makeDirectories(under(dir, d));
    writeBytes(under(dir, std::string(d) + "/" + CheckpointManifest::kFileName), "{}");
  }
  // Saves that never completed: no manifest (or one that is not a file).
  makeDirectories(under(dir, "global_step200"));
  writeBytes(under(dir, "global_step200/" + modelStatesName()), "partial");
  makeDirectories(under(dir, "global_step300/" + std::string(CheckpointManifest::kFileName)));
  writeBytes(under(dir, "global_step400"), "a file, not a directory");
  const std::string d = dir.path().string();
  EXPECT_EQ(loadCandidates(d).tags, (std::vector<std::string>{"global_step100", "global_step20",
                                                              "global_step5", "global_step3"}));
  EXPECT_EQ(loadCandidates(d).latestProblem, "missing");
  writeLatest(d, "global_step20");
  EXPECT_EQ(loadCandidates(d).tags,
            (std::vector<std::string>{"global_step20", "global_step5", "global_step3"}));
  EXPECT_EQ(loadCandidates(d).latestProblem, "");
  // latest's tag is tried even without a manifest (the load then says what is missing).
  writeLatest(d, "global_step200");
  EXPECT_EQ(loadCandidates(d).tags,
            (std::vector<std::string>{"global_step200", "global_step100", "global_step20",
                                      "global_step5", "global_step3"}));
  writeLatest(d, "best");
  EXPECT_EQ(loadCandidates(d).tags.size(), 5u);
  EXPECT_EQ(loadCandidates(d).tags.front(), "best");
  writeBytes(under(dir, "latest"), "../x");
  EXPECT_EQ(loadCandidates(d).tags.size(), 4u);
  EXPECT_NE(loadCandidates(d).latestProblem.find("latest"), std::string::npos);
  EXPECT_TRUE(loadCandidates(under(dir, "nowhere")).tags.empty());
}

TEST(CheckpointResumePoint, IsLatestsCheckpointWhenItIsComplete) {
  ThreeCheckpoints c;
  EXPECT_EQ(resumePoint(c.path()), (ResumePoint{"global_step120", 120}));
  EXPECT_NO_THROW(checkCheckpoint(c.at("global_step120")));
  test::TempDir empty("stretch-ckpt-layout");
  EXPECT_EQ(resumePoint(empty.path().string()), std::nullopt);
  EXPECT_EQ(resumePoint(under(empty, "nowhere")), std::nullopt);
  // A tag of another form: resumed from, with no step.
  writeCheckpoint(c.path(), "best");
  EXPECT_EQ(resumePoint(c.path()), (ResumePoint{"best", std::nullopt}));
}

TEST(CheckpointResumePoint, ACorruptNewestCheckpointIsSkipped) {
  if (!haveSha256())
    GTEST_SKIP() << "built without OpenSSL: no digests to check";
  ThreeCheckpoints c;
  flipByteOf(c.at("global_step120/" + zeroOptimStatesName(1)));
  EXPECT_EQ(resumePoint(c.path()), (ResumePoint{"global_step80", 80}));
  EXPECT_NE(test::errorOf<CheckpointError>([&] {
              checkCheckpoint(c.at("global_step120"));
            }).find("(the file is corrupt)"),
            std::string::npos);
  flipByteOf(c.at("global_step80/" + modelStatesName()));
  EXPECT_EQ(resumePoint(c.path()), (ResumePoint{"global_step40", 40}));
  flipByteOf(c.at("global_step40/" + modelStatesName()));
  EXPECT_EQ(resumePoint(c.path()), std::nullopt);
}

TEST(CheckpointResumePoint, TruncatedMissingOrUnlistedFilesAreSkipped) {
  ThreeCheckpoints c;
  ASSERT_EQ(::truncate(c.at("global_step120/" + modelStatesName()).c_str(), 3), 0);
  EXPECT_EQ(resumePoint(c.path()), (ResumePoint{"global_step80", 80}));
  EXPECT_NE(test::errorOf<CheckpointError>([&] {
              checkCheckpoint(c.at("global_step120"));
            }).find("(the file is truncated)"),
            std::string::npos);
  ASSERT_TRUE(removePath(c.at("global_step80/" + zeroOptimStatesName(0))));
  EXPECT_EQ(resumePoint(c.path()), (ResumePoint{"global_step40", 40}));
  // A manifest that does not list the model's file: no rank could load it.
  CheckpointManifest m = readManifest(c.at("global_step40"));
  m.files.erase(m.files.begin());
  writeManifest(c.at("global_step40"), m);
  EXPECT_NE(test::errorOf<CheckpointError>([&] {
              checkCheckpoint(c.at("global_step40"));
            }).find("not listed"),
            std::string::npos);
  EXPECT_EQ(resumePoint(c.path()), std::nullopt);
}

TEST(CheckpointResumePoint, AManifestLessDirectoryIsNoCheckpoint) {
  ThreeCheckpoints c;
  // A save of step 160 that died before its manifest and latest.
  makeDirectories(c.at("global_step160"));
  writeBytes(c.at("global_step160/" + modelStatesName()), "partial");
  EXPECT_EQ(resumePoint(c.path()), (ResumePoint{"global_step120", 120}));
  // Without latest: the newest with a manifest, not the partial one.
  ASSERT_TRUE(removePath(c.at("latest")));
  EXPECT_EQ(resumePoint(c.path()), (ResumePoint{"global_step120", 120}));
  // latest naming a directory whose manifest was lost: the older ones.
  writeLatest(c.path(), "global_step120");
  ASSERT_TRUE(removePath(c.at("global_step120/" + std::string(CheckpointManifest::kFileName))));
  EXPECT_NE(test::errorOf<CheckpointError>([&] {
              checkCheckpoint(c.at("global_step120"));
            }).find("is missing"),
            std::string::npos);
  EXPECT_EQ(resumePoint(c.path()), (ResumePoint{"global_step80", 80}));
  // A malformed manifest is no better.
  writeBytes(c.at("global_step80/" + std::string(CheckpointManifest::kFileName)), "{\"format\"");
  EXPECT_EQ(resumePoint(c.path()), (ResumePoint{"global_step40", 40}));
}

// A program of its own (a PyTorch script) keeping DeepSpeed's layout writes no manifest: the
// launcher reports the step latest names, as the program loads it.
TEST(CheckpointResumePoint, AProgramsOwnCheckpointsResumeFromLatestsStep) {
  test::TempDir dir("stretch-ckpt-layout");
  const std::string root = dir.path().string();
  for (const char* step : {"global_step40", "global_step80"}) {
    makeDirectories(root + "/" + step);
    writeBytes(root + "/" + step + "/model.pt", "weights");
  }
  writeLatest(root, "global_step80");
  EXPECT_EQ(resumePoint(root), (ResumePoint{"global_step80", 80}));
  // A directory that holds Stretch checkpoints too follows the engine's rules instead (above).
}

TEST(CheckpointResumePoint, AnUnusableLatestFallsBackToTheNewestCompleteCheckpoint) {
  ThreeCheckpoints c;
  writeBytes(c.at("latest"), "../../etc");
  EXPECT_EQ(resumePoint(c.path()), (ResumePoint{"global_step120", 120}));
  writeLatest(c.path(), "global_step999");  // names a checkpoint that is not there
  EXPECT_EQ(resumePoint(c.path()), (ResumePoint{"global_step120", 120}));
  writeLatest(c.path(), "global_step80");  // older ones only below latest's step
  EXPECT_EQ(resumePoint(c.path()), (ResumePoint{"global_step80", 80}));
}

}  // namespace
}  // namespace stretch::checkpoint
