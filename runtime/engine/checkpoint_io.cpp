#include "runtime/engine/checkpoint_io.hpp"

#include <string_view>

#include <fmt/format.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "runtime/common/posix_files.hpp"

namespace stretch::engine {

namespace {

std::string quoted(const std::string& path) {
  return "'" + path + "'";
}

// The first line of a LibTorch message (they append C++ stack traces).
std::string firstLine(std::string_view text) {
  const std::size_t end = text.find('\n');
  return std::string(text.substr(0, end));
}

[[noreturn]] void fail(const std::string& message) {
  throw CheckpointError(message);
}

[[noreturn]] void failDetail(std::string path, std::string value, std::string expected) {
  throw CheckpointError(ErrorDetail{std::move(path), std::move(value), std::move(expected)});
}

}  // namespace

c10::impl::GenericDict newStringDict() {
  return c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get());
}

// ---- state dicts ----

c10::IValue toIValue(const StateDict& dict) {
  c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
  for (const auto& [key, value] : dict) {
    out.insert(key, value);
  }
  return out;
}

StateDict toStateDict(const c10::IValue& value, const std::string& what) {
  if (!value.isGenericDict()) {
    fail(what + " is of type " + value.tagKind() + ", expected a dict with string keys");
  }
  StateDict out;
  for (const auto& entry : value.toGenericDict()) {
    if (!entry.key().isString()) {
      fail(what + " has a key of type " + entry.key().tagKind() +
           ", expected a dict with string keys");
    }
    out.emplace(entry.key().toStringRef(), entry.value());
  }
  return out;
}

// ---- state files ----

std::vector<char> serializeState(const c10::IValue& value) {
  try {
    return torch::jit::pickle_save(value);
  } catch (const std::exception& e) {
    fail("cannot serialise checkpoint state: " + firstLine(e.what()));
  }
}

c10::IValue deserializeState(const std::vector<char>& bytes, const std::string& what) {
  try {
    return torch::jit::pickle_load(bytes);
  } catch (const std::exception& e) {
    fail(what + " is not a readable torch.save / pickle_save archive (" +
         std::to_string(bytes.size()) + " bytes): " + firstLine(e.what()));
  }
}

FileRecord saveStateFile(const std::string& path, const c10::IValue& value) {
  const std::vector<char> bytes = serializeState(value);
  return writeFileAtomically(path, std::string_view(bytes.data(), bytes.size()));
}

FileRecord saveStateFile(const std::string& path, const StateDict& state) {
  return saveStateFile(path, toIValue(state));
}

c10::IValue loadStateFile(const std::string& path) {
  const std::optional<std::string> bytes = checkpoint::readCheckpointFile(path);
  if (!bytes) {
    fail("checkpoint file " + quoted(path) + " is missing");
  }
  return deserializeState(std::vector<char>(bytes->begin(), bytes->end()),
                          "checkpoint file " + quoted(path));
}

StateDict loadStateDict(const std::string& path) {
  return toStateDict(loadStateFile(path), "checkpoint file " + quoted(path));
}

// ---- verified loads ----

c10::IValue loadVerifiedStateFile(const std::string& tagDir, const CheckpointManifest& manifest,
                                  const std::string& name) {
  const FileRecord* record = manifest.find(name);
  if (record == nullptr) {
    failDetail(joinPath(tagDir, name), "not listed",
               "a file listed in " + joinPath(tagDir, CheckpointManifest::kFileName));
  }
  if (!checkpoint::isSafeRelativeName(name)) {
    failDetail("manifest file name", "'" + name + "'",
               "a relative file name inside the tag directory");
  }
  const std::string file = joinPath(tagDir, name);
  const std::optional<std::string> bytes = checkpoint::readCheckpointFile(file);
  if (!bytes) {
    failDetail(file, "missing",
               "a file of " + std::to_string(record->bytes) + " bytes listed in " +
                   CheckpointManifest::kFileName);
  }
  checkpoint::verifyBytes(file, *record, *bytes);
  return deserializeState(std::vector<char>(bytes->begin(), bytes->end()),
                          "checkpoint file " + quoted(file));
}

c10::IValue loadStateFile(const std::string& path, const CheckpointManifest& manifest) {
  return loadVerifiedStateFile(parentPath(path), manifest, fileName(path));
}

}  // namespace stretch::engine
