#include "runtime/checkpoint/layout.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <utility>

#include <fmt/format.h>

#include "runtime/common/file_io.hpp"
#include "runtime/common/posix_files.hpp"

namespace stretch::checkpoint {

namespace {

constexpr std::string_view kDefaultTagPrefix = "global_step";

bool isBadTag(const std::string& tag) {
  return tag.empty() || tag == "." || tag == ".." ||
         tag.find_first_of(std::string_view("/\n\r\0", 4)) != std::string::npos;
}

}  // namespace

std::string defaultTag(std::int64_t step) {
  return fmt::format("{}{}", kDefaultTagPrefix, step);
}

std::optional<std::int64_t> defaultTagStep(std::string_view tag) {
  if (!tag.starts_with(kDefaultTagPrefix))
    return std::nullopt;
  const std::string_view digits = tag.substr(kDefaultTagPrefix.size());
  if (digits.empty() || digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  return std::stoll(std::string(digits));
}

std::string modelStatesName(int mpRank) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "mp_rank_%02d_model_states.pt", mpRank);
  return buf;
}

std::string zeroOptimStatesName(int dpRank, int mpRank, bool bf16) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%szero_pp_rank_%d_mp_rank_%02d_optim_states.pt",
                bf16 ? "bf16_" : "", dpRank, mpRank);
  return buf;
}

void validateTag(const std::string& tag) {
  if (isBadTag(tag)) {
    throw CheckpointError(
        ErrorDetail{"checkpoint tag", "'" + tag + "'",
                    "a non-empty directory name without '/', NUL or line breaks, not '.' or '..'"});
  }
}

std::optional<std::string> readLatest(const std::string& dir) {
  const std::string path = joinPath(dir, kLatestFileName);
  std::optional<std::string> text;
  try {
    text = readFileIfExists(path, "checkpoint tag file", kMaxLatestBytes);
  } catch (const IoError& e) {
    throw CheckpointError(e.what());
  }
  if (!text) {
    return std::nullopt;
  }
  static constexpr std::string_view kSpace = " \t\r\n\f\v";
  const std::size_t begin = text->find_first_not_of(kSpace);
  const std::size_t end = text->find_last_not_of(kSpace);
  const std::string tag = begin == std::string::npos ? "" : text->substr(begin, end - begin + 1);
  if (isBadTag(tag)) {
    throw CheckpointError(
        ErrorDetail{path, "'" + tag.substr(0, 80) + "'", "the tag of a checkpoint directory"});
  }
  return tag;
}

void writeLatest(const std::string& dir, const std::string& tag) {
  validateTag(tag);
  writeTextAtomically(joinPath(dir, kLatestFileName), tag);
}

LoadCandidates loadCandidates(const std::string& dir) {
  LoadCandidates out;
  if (!isDirectory(dir))
    return out;
  std::optional<std::int64_t> below;
  try {
    if (const auto latest = readLatest(dir)) {
      out.tags.push_back(*latest);
      below = defaultTagStep(*latest);
    } else {
      out.latestProblem = "missing";
    }
  } catch (const CheckpointError& e) {
    out.latestProblem = e.what();
  }
  std::vector<std::pair<std::int64_t, std::string>> older;
  std::vector<std::string> entries;
  try {
    entries = listDirectory(dir);
  } catch (const IoError&) {
    return out;  // the load of latest's tag reports the unreadable directory
  }
  for (const std::string& name : entries) {
    // A directory without a manifest is a save that never completed, not a checkpoint.
    const auto step = defaultTagStep(name);
    if (step && (!below || *step < *below) && (out.tags.empty() || name != out.tags.front()) &&
        isRegularFile(joinPath(joinPath(dir, name), CheckpointManifest::kFileName)))
      older.emplace_back(*step, name);
  }
  std::sort(older.begin(), older.end(), std::greater<>());
  for (auto& [step, name] : older)
    out.tags.push_back(std::move(name));
  return out;
}

void checkCheckpoint(const std::string& tagDir) {
  const CheckpointManifest manifest = readManifest(tagDir);
  if (manifest.find(modelStatesName()) == nullptr) {
    throw CheckpointError(
        ErrorDetail{joinPath(tagDir, modelStatesName()), "not listed",
                    "a file listed in " + joinPath(tagDir, CheckpointManifest::kFileName)});
  }
  verifyAll(tagDir, manifest);
}

std::optional<ResumePoint> resumePoint(const std::string& dir) {
  const LoadCandidates candidates = loadCandidates(dir);
  // A directory with no manifest anywhere was not written by the Stretch engine: a program that
  // keeps DeepSpeed's layout (latest, global_step<N>) with files of its own, such as a PyTorch
  // script under `stretch launch`. It loads what latest names; there is nothing to verify.
  if (candidates.latestProblem.empty() && candidates.tags.size() == 1 &&
      !isRegularFile(
          joinPath(joinPath(dir, candidates.tags.front()), CheckpointManifest::kFileName)))
    return ResumePoint{candidates.tags.front(), defaultTagStep(candidates.tags.front())};
  for (const std::string& tag : candidates.tags) {
    try {
      checkCheckpoint(joinPath(dir, tag));
    } catch (const Error&) {
      continue;  // the engine skips it too, and says why
    }
    return ResumePoint{tag, defaultTagStep(tag)};
  }
  return std::nullopt;
}

}  // namespace stretch::checkpoint
