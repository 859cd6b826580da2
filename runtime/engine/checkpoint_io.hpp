#pragma once
// Durable, verified checkpoint files in DeepSpeed's layout (deepspeed_engine.md §5).
//
// Format. A state file is what torch::pickle_save writes: the zip archive torch.save writes, so
// Python's torch.load(path) opens it into the equivalent nested dict (tensors of any dtype,
// including fp16/bf16; int; float; bool; str; None; lists; tuples; dicts with str keys), and
// torch::pickle_load reads it back here. Tensors keep their device; save CPU tensors. A tensor
// that is a view saves its whole storage (torch.save does the same): clone views of flat buffers
// to write only their elements. Python's torch.save of a plain dict of tensors loads here too;
// see loadStateFile for what does not.
//
// Durability. Every file is written by stretch::writeFileAtomically (runtime/common/posix_files):
// to "<path>.tmp.<pid>.<k>" (k counts writes in the process, so thread-ranks never collide),
// fsync'ed, renamed over <path>, and the directory is fsync'ed: after a crash <path> holds
// either the old or the new complete file, never a torn one. dir/latest (the tag, no newline, as
// DeepSpeed writes it) is written the same way, last.
//
// Paths are plain strings and every file operation is a POSIX call (runtime/common/
// posix_files.hpp), never std::filesystem: PyTorch 2.11's libtorch.so exports its own copies of
// those functions and calls from here would bind to them (docs/gpu.md). The fs_trap_test
// (tests/runtime/engine) fails when a std::filesystem function is called on the checkpoint path.
//
// Integrity. dir/tag/manifest.json lists every file of the checkpoint with its size and SHA-256
// plus metadata (Stretch version, world size, ZeRO stage, tag). verifyFile checks a file against
// its record before it is unpickled; a missing, truncated, extended or altered file, an
// unreadable archive or a malformed manifest is a CheckpointError that names the file and says
// what is wrong. Nothing here aborts on garbage bytes: only CheckpointError escapes loading.
//
//   dir/latest                                        "global_step100"
//   dir/global_step100/manifest.json
//   dir/global_step100/mp_rank_00_model_states.pt     modelStatesName()
//   dir/global_step100/zero_pp_rank_3_mp_rank_00_optim_states.pt   zeroOptimStatesName(3)

#include <ATen/core/ivalue.h>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/error.hpp"

namespace stretch::engine {

// A checkpoint file or directory is missing, truncated, corrupt, unreadable or unwritable.
STRETCH_DECLARE_ERROR(CheckpointError, IoError);

// A state dict: string keys in sorted order; values are any IValue (tensors, numbers, strings,
// lists, nested dicts: see toIValue). Python sees a dict.
using StateDict = std::map<std::string, c10::IValue>;

// A Dict[str, Any] IValue holding the entries (the form pickle_save writes as a Python dict).
c10::IValue toIValue(const StateDict& dict);
// An empty Dict[str, Any]: how checkpoints and live recovery's state messages hold their entries.
c10::impl::GenericDict newStringDict();
// The entries of a dict IValue with string keys; CheckpointError naming `what` otherwise.
StateDict toStateDict(const c10::IValue& value, const std::string& what = "state");

// ---- hashing and durable writes ----

// Lower-case hex SHA-256 (OpenSSL EVP).
std::string sha256Hex(std::string_view bytes);
// SHA-256 of a file's contents, read in chunks. CheckpointError when unreadable.
std::string sha256OfFile(const std::string& path);

// What a manifest records about one file. name is relative to the tag directory.
struct FileRecord {
  std::string name;
  std::uint64_t bytes = 0;
  std::string sha256;
  friend bool operator==(const FileRecord&, const FileRecord&) = default;
};

// stretch::writeFileAtomically (see the header comment; creates missing parent directories)
// with the record of what was written (name = path's file name). CheckpointError on any
// failure; the temporary file is removed.
FileRecord writeFileAtomically(const std::string& path, std::string_view bytes);
void writeTextAtomically(const std::string& path, std::string_view text);

// ---- state files ----

// torch::pickle_save bytes of `value`.
std::vector<char> serializeState(const c10::IValue& value);
// torch::pickle_load of `bytes`; CheckpointError naming `what` when they are not a readable
// archive.
c10::IValue deserializeState(const std::vector<char>& bytes, const std::string& what);

FileRecord saveStateFile(const std::string& path, const c10::IValue& value);
FileRecord saveStateFile(const std::string& path, const StateDict& state);
// Reads and unpickles a file written by saveStateFile or by Python's torch.save of a dict of
// tensors / numbers / strings / lists / dicts. LibTorch 1.13's unpickler does not restore
// Python objects: an OrderedDict (what nn.Module.state_dict() returns) loads as None (Python
// side: torch.save(dict(model.state_dict()), path)) and other classes are a CheckpointError.
// No verification: use loadVerifiedStateFile for checkpoint files.
c10::IValue loadStateFile(const std::string& path);
// loadStateFile, then toStateDict.
StateDict loadStateDict(const std::string& path);

// ---- DeepSpeed's layout ----

// "mp_rank_00_model_states.pt"
std::string modelStatesName(int mpRank = 0);
// "zero_pp_rank_3_mp_rank_00_optim_states.pt"; with bf16, "bf16_zero_pp_rank_..." as DeepSpeed
// names the shards whenever bf16 is enabled.
std::string zeroOptimStatesName(int dpRank, int mpRank = 0, bool bf16 = false);
// The tag in dir/latest (surrounding whitespace removed, as DeepSpeed's .strip()), nullopt when
// there is no such file. CheckpointError when it is unreadable or holds no valid tag.
std::optional<std::string> readLatest(const std::string& dir);
// Writes dir/latest atomically; call it after every file of the tag is durable.
void writeLatest(const std::string& dir, const std::string& tag);
// Throws CheckpointError unless `tag` can name a directory: non-empty, no '/', no NUL or line
// break, not "." or "..".
void validateTag(const std::string& tag);

// ---- manifest ----

// The version written into manifests: the project version when the build defines
// STRETCH_VERSION for the engine, else "unknown".
std::string stretchVersionString();

struct CheckpointManifest {
  static constexpr const char* kFileName = "manifest.json";
  static constexpr int kFormatVersion = 1;

  std::string version = stretchVersionString();  // of the Stretch that wrote the checkpoint
  std::string tag;
  std::int64_t dpWorldSize = 0;
  int zeroStage = 0;
  std::vector<FileRecord> files;  // in the order added

  // Adds a record, replacing one of the same name.
  void add(FileRecord record);
  const FileRecord* find(std::string_view name) const;

  std::string toJson() const;
  // CheckpointError naming `source` and the offending key for malformed text, unknown format
  // versions, file names that leave the tag directory, bad sizes or digests.
  static CheckpointManifest fromJson(std::string_view text, const std::string& source);

  friend bool operator==(const CheckpointManifest&, const CheckpointManifest&) = default;
};

// tagDir/manifest.json, written atomically (write it after the files it lists).
void writeManifest(const std::string& tagDir, const CheckpointManifest& manifest);
// CheckpointError when tagDir/manifest.json is missing or malformed.
CheckpointManifest readManifest(const std::string& tagDir);

// A JSON array of records, for sending one rank's records to the manifest writer (surrounding
// whitespace, e.g. padding to a common length, is ignored when reading).
std::string recordsToJson(const std::vector<FileRecord>& records);
std::vector<FileRecord> recordsFromJson(std::string_view text,
                                        const std::string& source = "file records");

// Checks tagDir/record.name against the record: present, record.bytes long, same SHA-256.
void verifyFile(const std::string& tagDir, const FileRecord& record);
// verifyFile for every record of the manifest.
void verifyAll(const std::string& tagDir, const CheckpointManifest& manifest);
// verifyFile for `name` (CheckpointError when the manifest does not list it), then unpickles
// the bytes that were verified (the file is read once).
c10::IValue loadVerifiedStateFile(const std::string& tagDir, const CheckpointManifest& manifest,
                                  const std::string& name);
// loadVerifiedStateFile(parentPath(path), manifest, fileName(path)).
c10::IValue loadStateFile(const std::string& path, const CheckpointManifest& manifest);

}  // namespace stretch::engine
