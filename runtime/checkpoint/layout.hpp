#pragma once
// DeepSpeed's checkpoint directory layout (deepspeed_engine.md §5), and which checkpoint of a
// directory a load resumes from. One definition for the engine, which writes and loads
// checkpoints, and the launcher, whose event log names the step a start resumes from: both
// read `latest`, the tags and the manifests with these functions, so they cannot disagree.
//
//   dir/latest                                        "global_step100" (no newline)
//   dir/global_step100/manifest.json                  runtime/checkpoint/manifest.hpp
//   dir/global_step100/mp_rank_00_model_states.pt     modelStatesName()
//   dir/global_step100/zero_pp_rank_3_mp_rank_00_optim_states.pt   zeroOptimStatesName(3)
//
// Which checkpoints a load tries, newest first: dir/latest names the one to load; when it is
// missing, unreadable, or names a checkpoint that turns out missing or corrupt, the engine falls
// back to the global_step<N> directories older than it (every one when latest names none; only
// those with a manifest, i.e. saves that completed), newest first. A deleted `latest` therefore
// resumes from the newest complete checkpoint instead of training from step 0.
//
// Paths are plain strings and every file operation is a POSIX call (no std::filesystem: the
// engine calls this from LibTorch processes, docs/gpu.md). Nothing here needs LibTorch.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/checkpoint/manifest.hpp"

namespace stretch::checkpoint {

// The name of the file in a checkpoint directory that names the checkpoint to load.
inline constexpr const char* kLatestFileName = "latest";
// The most bytes dir/latest may hold (a tag and whitespace).
inline constexpr std::uint64_t kMaxLatestBytes = 4096;

// ---- names ----

// DeepSpeed's default tag of the checkpoint saved at global step `step`: "global_step<step>".
std::string defaultTag(std::int64_t step);
// N for DeepSpeed's default tag "global_step<N>" (N a non-negative decimal number of at most 18
// digits, no sign, no spaces), nullopt for any other name.
std::optional<std::int64_t> defaultTagStep(std::string_view tag);

// "mp_rank_00_model_states.pt"
std::string modelStatesName(int mpRank = 0);
// "zero_pp_rank_3_mp_rank_00_optim_states.pt"; with bf16, "bf16_zero_pp_rank_..." as DeepSpeed
// names the shards whenever bf16 is enabled.
std::string zeroOptimStatesName(int dpRank, int mpRank = 0, bool bf16 = false);

// Throws CheckpointError unless `tag` can name a directory: non-empty, no '/', no NUL or line
// break, not "." or "..".
void validateTag(const std::string& tag);

// ---- latest ----

// The tag in dir/latest (surrounding whitespace " \t\r\n\f\v" removed, as DeepSpeed's .strip()),
// nullopt when there is no such file. CheckpointError when it is unreadable (not a regular file,
// more than kMaxLatestBytes) or holds no valid tag (validateTag's rules).
std::optional<std::string> readLatest(const std::string& dir);
// Writes dir/latest atomically; call it after every file of the tag is durable.
void writeLatest(const std::string& dir, const std::string& tag);

// ---- which checkpoint a load uses ----

// The tags a load without an explicit tag tries, in order.
struct LoadCandidates {
  std::vector<std::string> tags;
  // Why dir/latest cannot be used ("" when it names tags.front()): "missing", or the
  // CheckpointError of an unreadable file.
  std::string latestProblem;
};
// dir/latest's tag first (when readable), then every global_step<N> directory with a manifest
// and N below latest's step (all of them when latest is missing, unreadable or not a global_step
// tag), newest first. A directory without a manifest is a save that never completed: not tried.
// Empty when there is nothing to try (no checkpoint was ever completed: the job starts afresh).
LoadCandidates loadCandidates(const std::string& dir);

// What the engine checks of a checkpoint before it reads any tensor: tagDir/manifest.json is
// readable and well-formed, lists modelStatesName(), and every file it lists is present, a
// regular file, of the listed size and SHA-256. CheckpointError naming the first problem
// otherwise. (The engine additionally unpickles the files and checks they fit its model.)
void checkCheckpoint(const std::string& tagDir);

// A checkpoint a load resumes from.
struct ResumePoint {
  std::string tag;                   // "global_step80", or latest's own tag
  std::optional<std::int64_t> step;  // defaultTagStep(tag): nullopt for a tag of another form
  friend bool operator==(const ResumePoint&, const ResumePoint&) = default;
};
// The first of loadCandidates(dir) that checkCheckpoint accepts: the checkpoint a load without
// a tag resumes from, unless its files change meanwhile or fail to unpickle. nullopt when there
// is none (the job starts afresh). A directory with no manifest at all (latest's checkpoint has
// none and no older one has one) is a program's own checkpoints in DeepSpeed's layout: latest's
// tag, unverified. Reads every file of the candidates it checks (the digests):
// as long as a load's verification, without the unpickling. Never throws for the directory's
// contents.
std::optional<ResumePoint> resumePoint(const std::string& dir);

}  // namespace stretch::checkpoint
