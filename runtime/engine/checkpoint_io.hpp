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
// Integrity, names and `latest`: runtime/checkpoint (manifest.hpp, layout.hpp), shared with the
// launcher; the names below are those, used here unqualified. loadVerifiedStateFile checks a file
// against its manifest record before it is unpickled; a missing, truncated, extended or altered
// file, an unreadable archive or a malformed manifest is a CheckpointError that names the file
// and says what is wrong. Nothing here aborts on garbage bytes: only CheckpointError escapes
// loading.

#include <ATen/core/ivalue.h>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/checkpoint/layout.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "runtime/common/error.hpp"

namespace stretch::engine {

// runtime/checkpoint's names, which the engine's code and tests use unqualified.
using checkpoint::CheckpointError;
using checkpoint::CheckpointManifest;
using checkpoint::FileRecord;
using checkpoint::modelStatesName;
using checkpoint::readLatest;
using checkpoint::readManifest;
using checkpoint::recordsFromJson;
using checkpoint::recordsToJson;
using checkpoint::sha256Hex;
using checkpoint::sha256OfFile;
using checkpoint::stretchVersionString;
using checkpoint::validateTag;
using checkpoint::verifyAll;
using checkpoint::verifyFile;
using checkpoint::writeFileAtomically;
using checkpoint::writeLatest;
using checkpoint::writeManifest;
using checkpoint::writeTextAtomically;
using checkpoint::zeroOptimStatesName;

// A state dict: string keys in sorted order; values are any IValue (tensors, numbers, strings,
// lists, nested dicts: see toIValue). Python sees a dict.
using StateDict = std::map<std::string, c10::IValue>;

// A Dict[str, Any] IValue holding the entries (the form pickle_save writes as a Python dict).
c10::IValue toIValue(const StateDict& dict);
// An empty Dict[str, Any]: how checkpoints and live recovery's state messages hold their entries.
c10::impl::GenericDict newStringDict();
// The entries of a dict IValue with string keys; CheckpointError naming `what` otherwise.
StateDict toStateDict(const c10::IValue& value, const std::string& what = "state");

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

// ---- verified loads ----

// verifyFile for `name` (CheckpointError when the manifest does not list it), then unpickles
// the bytes that were verified (the file is read once).
c10::IValue loadVerifiedStateFile(const std::string& tagDir, const CheckpointManifest& manifest,
                                  const std::string& name);
// loadVerifiedStateFile(parentPath(path), manifest, fileName(path)).
c10::IValue loadStateFile(const std::string& path, const CheckpointManifest& manifest);

}  // namespace stretch::engine
