#pragma once
// STRETCH_DS_CONFIG: for every generation, a copy of the job's DeepSpeed config with the batch
// the elastic solver chose for that generation's world size, so a DeepSpeed script runs with
// `--deepspeed_config $STRETCH_DS_CONFIG` unchanged:
//  - train_batch_size, train_micro_batch_size_per_gpu and gradient_accumulation_steps set to
//    the generation's batch triple;
//  - the `elasticity` block removed: DeepSpeed since #8563 rejects a leftover one, and older
//    DeepSpeed rejects batch keys beside an enabled one (the agent already applied it; the
//    block itself still reaches workers as DEEPSPEED_ELASTICITY_CONFIG);
//  - every other key as the user wrote it (comments, which the config loader allows, dropped:
//    the copy is plain JSON for DeepSpeed and Python).
// Each node writes its own copies (nodes need not share a file system): in the log directory
// when there is one (ds_config.generation_<G>.json, kept as a record of the run), else in a
// private directory under $TMPDIR that goes away with the agent. Files are written atomically
// (temporary file, fsync, rename), so a worker never reads half a config.
//
// Writing a copy never ends the job (a full log directory used to kill a healthy job at its next
// generation): a copy that cannot be written in the log directory is reported (stderr,
// takeProblems for the event log, lostOutput for the exit status) and written to a private
// directory under $TMPDIR instead; when that fails too the generation's workers get no
// STRETCH_DS_CONFIG and read the batch from STRETCH_TRAIN_BATCH_SIZE & co. as they always can.

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/config/batch.hpp"

namespace stretch::launcher {

// The generation's config text (pretty-printed JSON). Throws ConfigError when configJson is not
// a JSON object.
std::string generationConfigText(const std::string& configJson, const config::BatchTriple& batch);

// The per-generation copies one agent writes. Thread-safe.
class GenerationConfigs {
 public:
  // dir "": a private directory (mode 0700) under $TMPDIR, removed by the destructor.
  GenerationConfigs(std::string configJson, std::string dir);
  ~GenerationConfigs();
  GenerationConfigs(const GenerationConfigs&) = delete;
  GenerationConfigs& operator=(const GenerationConfigs&) = delete;

  // The path of generation `generation`'s copy, written on the first call for that generation;
  // empty when it could be written nowhere (reported, see above). Never throws IoError.
  std::string pathFor(std::uint64_t generation, const config::BatchTriple& batch);
  // What could not be written since the last call, one line each, already on stderr.
  std::vector<std::string> takeProblems();
  // Every copy that could not be written where it belongs, since the object was made.
  std::vector<std::string> lostOutput() const;

 private:
  std::string configJson_;
  std::string dir_;
  bool ownsDir_ = false;
  std::string fallbackDir_;  // made at the first copy the log directory refused
  mutable std::mutex mutex_;
  std::vector<std::string> problems_;
  std::vector<std::string> lost_;
  std::uint64_t written_ = 0;  // the last generation written (0: none)
  std::string path_;
};

}  // namespace stretch::launcher
