#pragma once
// A checkpoint directory as a whole (runtime/engine/checkpoint_io.hpp is one checkpoint):
//
//  - Which checkpoints a load tries, newest first: runtime/checkpoint/layout.hpp
//    (checkpoint::loadCandidates), shared with the launcher, whose event log names the step a
//    start resumes from (checkpoint::resumePoint). When dir/latest is missing, unreadable, or
//    names a checkpoint that turns out missing or corrupt, the engine falls back to older
//    global_step<N> directories with a manifest, newest first, and says so.
//  - Tidying after a save: a step directory a failed save left without its manifest (every
//    entry a checkpoint file or a temporary file of one) is removed once a later save has
//    completed; other directories are never touched.
//  - One job per directory: an advisory lock (flock(2) on dir/.stretch.lock, which names the job
//    that holds it). Every engine of a job takes or shares it at its first save or load, or
//    earlier (Engine::claimCheckpointDir, which the example jobs call at their start); an
//    engine of another job gets a CheckpointDirInUseError naming the holder. The lock ends with the
//    processes that hold it, so a crashed job never blocks its successor.
//
// Paths are plain strings and every file operation is a POSIX call (checkpoint_io.hpp says why).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/checkpoint/manifest.hpp"

namespace stretch::engine {

// Another job holds the checkpoint directory: the job cannot run as launched (the example jobs
// exit with worker_env::kExitCannotRun, and the launcher ends the job without a restart).
using checkpoint::CheckpointError;
STRETCH_DECLARE_ERROR(CheckpointDirInUseError, CheckpointError);

// Removes, under dir, every directory other than `keep` that has no manifest.json and holds
// only checkpoint files (*.pt) and temporary files of atomic writes ("<name>.tmp.<pid>.<k>"),
// and the temporary files of dir/latest. Returns the names removed. Never throws: a directory
// that cannot be read or removed is left as it is (the save it follows succeeded).
std::vector<std::string> removePartialCheckpoints(const std::string& dir, const std::string& keep);

// This process's job: "job <12 hex digits>" (a digest of STRETCH_STORE_TOKEN, which the
// launcher gives every worker of one job), else "group <MASTER_ADDR>:<MASTER_PORT>", else
// "process <pid> on <host>".
std::string currentJobId();

// The lock of one checkpoint directory, held (or shared with another engine of the same job)
// from construction to destruction.
class CheckpointDirLock {
 public:
  static constexpr const char* kFileName = ".stretch.lock";
  // Creates dir when missing. Takes the lock, or accepts that `job` holds it already; throws
  // CheckpointError naming dir, the holder and what to do when another job holds it, or when
  // the lock file cannot be created.
  CheckpointDirLock(const std::string& dir, const std::string& job);
  ~CheckpointDirLock();
  CheckpointDirLock(const CheckpointDirLock&) = delete;
  CheckpointDirLock& operator=(const CheckpointDirLock&) = delete;

  // Whether this object holds the flock (false: another engine of the job does).
  bool holder() const { return fd_ >= 0; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  int fd_ = -1;
};

}  // namespace stretch::engine
