#include "runtime/engine/checkpoint_io.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <memory>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/serialization/pickle.h>

#include "runtime/common/posix_files.hpp"

namespace stretch::engine {

namespace {

// Bounds on the small files of a checkpoint: a tag, and a list of file records.
constexpr std::uint64_t kMaxLatestBytes = 4096;
constexpr std::uint64_t kMaxManifestBytes = std::uint64_t{64} << 20;

std::string quoted(const std::string& path) {
  return "'" + path + "'";
}

std::string errnoText(int error) {
  return std::strerror(error);
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

// ---- SHA-256 ----

struct DigestDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) {
      throw InternalError("OpenSSL: cannot initialise a SHA-256 digest");
    }
  }
  void update(const void* data, std::size_t size) {
    if (size > 0 && EVP_DigestUpdate(ctx_.get(), data, size) != 1) {
      throw InternalError("OpenSSL: SHA-256 update failed");
    }
  }
  std::string hex() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int size = 0;
    if (EVP_DigestFinal_ex(ctx_.get(), digest.data(), &size) != 1) {
      throw InternalError("OpenSSL: SHA-256 final failed");
    }
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * size);
    for (unsigned int i = 0; i < size; ++i) {
      out.push_back(kHex[digest[i] >> 4]);
      out.push_back(kHex[digest[i] & 0xf]);
    }
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, DigestDeleter> ctx_;
};

bool isSha256Hex(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// ---- POSIX helpers ----

// Reads `fd` to its end in 64 KiB chunks, handing each to onChunk(data, size); a read error is
// a CheckpointError naming `path`.
template <class OnChunk>
void readChunks(int fd, const std::string& path, OnChunk&& onChunk) {
  std::array<char, 1 << 16> buffer{};
  for (;;) {
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      fail("cannot read checkpoint file " + quoted(path) + ": " + errnoText(errno));
    }
    if (got == 0) {
      return;
    }
    onChunk(buffer.data(), static_cast<std::size_t>(got));
  }
}

// Reads a whole regular file (a FIFO or device is refused, never waited on), of at most
// `maxBytes` when given. nullopt when it does not exist.
std::optional<std::string> readWholeFile(const std::string& path,
                                         std::optional<std::uint64_t> maxBytes = std::nullopt) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) {
    if (errno == ENOENT) {
      return std::nullopt;
    }
    fail("cannot open checkpoint file " + quoted(path) + ": " + errnoText(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    fail("cannot stat checkpoint file " + quoted(path) + ": " + errnoText(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    fail("checkpoint file " + quoted(path) + " is not a regular file");
  }
  const std::uint64_t limit = maxBytes.value_or(UINT64_MAX);
  if (static_cast<std::uint64_t>(st.st_size) > limit) {
    fail(fmt::format("checkpoint file {} is {} bytes, more than the {} such a file can hold",
                     quoted(path), st.st_size, limit));
  }
  std::string out;
  out.reserve(static_cast<std::size_t>(st.st_size));
  readChunks(fd.get(), path, [&](const char* data, std::size_t size) {
    if (out.size() + size > limit)
      fail(fmt::format("checkpoint file {} grew past {} bytes while read", quoted(path), limit));
    out.append(data, size);
  });
  return out;
}

// A manifest file name must stay inside the tag directory: relative, and no component empty,
// "." or "..".
bool isSafeRelativeName(const std::string& name) {
  if (name.empty() || name.find('\0') != std::string::npos || name.front() == '/') {
    return false;
  }
  std::size_t begin = 0;
  for (;;) {
    const std::size_t slash = name.find('/', begin);
    const std::string_view part =
        std::string_view(name).substr(begin, slash == std::string::npos ? slash : slash - begin);
    if (part.empty() || part == "." || part == "..") {
      return false;
    }
    if (slash == std::string::npos) {
      return true;
    }
    begin = slash + 1;
  }
}

void checkRecordAgainst(const std::string& file, const FileRecord& record, std::uint64_t bytes,
                        const std::function<std::string()>& digest) {
  if (bytes != record.bytes) {
    failDetail(file, std::to_string(bytes) + " bytes",
               std::to_string(record.bytes) + " bytes as listed in " +
                   CheckpointManifest::kFileName +
                   (bytes < record.bytes ? " (the file is truncated)"
                                         : " (the file is longer than written)"));
  }
  const std::string actual = digest();
  if (actual != record.sha256) {
    failDetail(file, "sha256 " + actual,
               "sha256 " + record.sha256 + " as listed in " + CheckpointManifest::kFileName +
                   " (the file is corrupt)");
  }
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

// ---- hashing and durable writes ----

std::string sha256Hex(std::string_view bytes) {
  Sha256 sha;
  sha.update(bytes.data(), bytes.size());
  return sha.hex();
}

std::string sha256OfFile(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) {
    fail("cannot open checkpoint file " + quoted(path) + ": " + errnoText(errno));
  }
  Sha256 sha;
  readChunks(fd.get(), path, [&](const char* data, std::size_t size) { sha.update(data, size); });
  return sha.hex();
}

FileRecord writeFileAtomically(const std::string& path, std::string_view bytes) {
  try {
    stretch::writeFileAtomically(path, bytes);
  } catch (const CheckpointError&) {
    throw;
  } catch (const IoError& e) {
    fail(e.what());
  }
  return FileRecord{fileName(path), bytes.size(), sha256Hex(bytes)};
}

void writeTextAtomically(const std::string& path, std::string_view text) {
  writeFileAtomically(path, text);
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
  const std::optional<std::string> bytes = readWholeFile(path);
  if (!bytes) {
    fail("checkpoint file " + quoted(path) + " is missing");
  }
  return deserializeState(std::vector<char>(bytes->begin(), bytes->end()),
                          "checkpoint file " + quoted(path));
}

StateDict loadStateDict(const std::string& path) {
  return toStateDict(loadStateFile(path), "checkpoint file " + quoted(path));
}

// ---- DeepSpeed's layout ----

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
  const bool bad = tag.empty() || tag == "." || tag == ".." ||
                   tag.find_first_of(std::string_view("/\n\r\0", 4)) != std::string::npos;
  if (bad) {
    failDetail("checkpoint tag", "'" + tag + "'",
               "a non-empty directory name without '/', NUL or line breaks, not '.' or '..'");
  }
}

std::optional<std::string> readLatest(const std::string& dir) {
  const std::string path = joinPath(dir, "latest");
  const std::optional<std::string> text = readWholeFile(path, kMaxLatestBytes);
  if (!text) {
    return std::nullopt;
  }
  static constexpr std::string_view kSpace = " \t\r\n\f\v";
  const std::size_t begin = text->find_first_not_of(kSpace);
  const std::size_t end = text->find_last_not_of(kSpace);
  const std::string tag = begin == std::string::npos ? "" : text->substr(begin, end - begin + 1);
  if (tag.empty() || tag == "." || tag == ".." ||
      tag.find_first_of(std::string_view("/\n\r\0", 4)) != std::string::npos) {
    failDetail(path, "'" + tag.substr(0, 80) + "'", "the tag of a checkpoint directory");
  }
  return tag;
}

void writeLatest(const std::string& dir, const std::string& tag) {
  validateTag(tag);
  writeTextAtomically(joinPath(dir, "latest"), tag);
}

// ---- manifest ----

std::string stretchVersionString() {
#ifdef STRETCH_VERSION
  return STRETCH_VERSION;
#else
  return "unknown";
#endif
}

void CheckpointManifest::add(FileRecord record) {
  for (FileRecord& existing : files) {
    if (existing.name == record.name) {
      existing = std::move(record);
      return;
    }
  }
  files.push_back(std::move(record));
}

const FileRecord* CheckpointManifest::find(std::string_view name) const {
  for (const FileRecord& r : files) {
    if (r.name == name) {
      return &r;
    }
  }
  return nullptr;
}

namespace {

nlohmann::ordered_json recordsArray(const std::vector<FileRecord>& records) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const FileRecord& r : records) {
    nlohmann::ordered_json f;
    f["name"] = r.name;
    f["bytes"] = r.bytes;
    f["sha256"] = r.sha256;
    list.push_back(std::move(f));
  }
  return list;
}

const nlohmann::json& field(const nlohmann::json& obj, const char* key) {
  static const nlohmann::json kMissing = nlohmann::json::value_t::discarded;
  const auto it = obj.find(key);
  return it == obj.end() ? kMissing : *it;
}

[[noreturn]] void badJson(const std::string& source, const std::string& key,
                          const nlohmann::json& value, const std::string& expected) {
  std::string shown = value.is_discarded() ? "missing" : value.dump();
  if (shown.size() > 80) {
    shown = shown.substr(0, 77) + "...";
  }
  failDetail(source + ": " + key, shown, expected);
}

nlohmann::json parseJson(std::string_view text, const std::string& source) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(source + " is not valid JSON: " + e.what());
  }
}

std::vector<FileRecord> readRecords(const nlohmann::json& list, const std::string& source,
                                    const std::string& prefix) {
  if (!list.is_array()) {
    badJson(source, prefix.empty() ? "<root>" : prefix, list, "an array");
  }
  std::vector<FileRecord> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string key = prefix + "[" + std::to_string(i) + "]";
    const nlohmann::json& f = list[i];
    if (!f.is_object()) {
      badJson(source, key, f, "an object with name, bytes and sha256");
    }
    FileRecord r;
    const nlohmann::json& name = field(f, "name");
    if (!name.is_string() || !isSafeRelativeName(name.get<std::string>())) {
      badJson(source, key + ".name", name, "a relative file name inside the tag directory");
    }
    r.name = name.get<std::string>();
    const nlohmann::json& bytes = field(f, "bytes");
    if (!bytes.is_number_unsigned()) {
      badJson(source, key + ".bytes", bytes, "a non-negative integer");
    }
    r.bytes = bytes.get<std::uint64_t>();
    const nlohmann::json& sha = field(f, "sha256");
    if (!sha.is_string() || !isSha256Hex(sha.get<std::string>())) {
      badJson(source, key + ".sha256", sha, "64 lower-case hex digits");
    }
    r.sha256 = sha.get<std::string>();
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

std::string recordsToJson(const std::vector<FileRecord>& records) {
  return recordsArray(records).dump();
}

std::vector<FileRecord> recordsFromJson(std::string_view text, const std::string& source) {
  return readRecords(parseJson(text, source), source, "");
}

std::string CheckpointManifest::toJson() const {
  nlohmann::ordered_json j;
  j["format"] = "stretch-checkpoint-manifest";
  j["format_version"] = kFormatVersion;
  j["stretch_version"] = version;
  j["tag"] = tag;
  j["dp_world_size"] = dpWorldSize;
  j["zero_stage"] = zeroStage;
  j["files"] = recordsArray(files);
  return j.dump(2) + "\n";
}

CheckpointManifest CheckpointManifest::fromJson(std::string_view text, const std::string& source) {
  const nlohmann::json j = parseJson(text, source);
  if (!j.is_object()) {
    badJson(source, "<root>", j, "an object");
  }
  const nlohmann::json& format = field(j, "format");
  if (!format.is_string() || format.get<std::string>() != "stretch-checkpoint-manifest") {
    badJson(source, "format", format, "\"stretch-checkpoint-manifest\"");
  }
  const nlohmann::json& formatVersion = field(j, "format_version");
  if (!formatVersion.is_number_integer() || formatVersion.get<std::int64_t>() != kFormatVersion) {
    badJson(source, "format_version", formatVersion, std::to_string(kFormatVersion));
  }
  CheckpointManifest m;
  const nlohmann::json& version = field(j, "stretch_version");
  if (!version.is_string()) {
    badJson(source, "stretch_version", version, "a string");
  }
  m.version = version.get<std::string>();
  const nlohmann::json& tag = field(j, "tag");
  if (!tag.is_string()) {
    badJson(source, "tag", tag, "a string");
  }
  m.tag = tag.get<std::string>();
  const nlohmann::json& world = field(j, "dp_world_size");
  if (!world.is_number_integer() || world.get<std::int64_t>() < 1) {
    badJson(source, "dp_world_size", world, "a positive integer");
  }
  m.dpWorldSize = world.get<std::int64_t>();
  const nlohmann::json& stage = field(j, "zero_stage");
  if (!stage.is_number_integer() || stage.get<std::int64_t>() < 0 ||
      stage.get<std::int64_t>() > 3) {
    badJson(source, "zero_stage", stage, "an integer in [0, 3]");
  }
  m.zeroStage = stage.get<int>();
  const nlohmann::json& list = field(j, "files");
  m.files = readRecords(list, source, "files");
  for (std::size_t i = 0; i < m.files.size(); ++i) {
    for (std::size_t k = 0; k < i; ++k) {
      if (m.files[k].name == m.files[i].name) {
        badJson(source, "files[" + std::to_string(i) + "].name", list[i]["name"],
                "a name listed once");
      }
    }
  }
  return m;
}

void writeManifest(const std::string& tagDir, const CheckpointManifest& manifest) {
  writeTextAtomically(joinPath(tagDir, CheckpointManifest::kFileName), manifest.toJson());
}

CheckpointManifest readManifest(const std::string& tagDir) {
  const std::string path = joinPath(tagDir, CheckpointManifest::kFileName);
  const std::optional<std::string> text = readWholeFile(path, kMaxManifestBytes);
  if (!text) {
    fail("checkpoint manifest " + quoted(path) +
         " is missing (the checkpoint is incomplete or was not written by Stretch)");
  }
  return CheckpointManifest::fromJson(*text, path);
}

void verifyFile(const std::string& tagDir, const FileRecord& record) {
  if (!isSafeRelativeName(record.name)) {
    failDetail("manifest file name", "'" + record.name + "'",
               "a relative file name inside the tag directory");
  }
  const std::string file = joinPath(tagDir, record.name);
  if (!pathExists(file)) {
    failDetail(file, "missing",
               "a file of " + std::to_string(record.bytes) + " bytes listed in " +
                   CheckpointManifest::kFileName);
  }
  if (!isRegularFile(file)) {
    failDetail(file, "not a regular file",
               "a file listed in " + std::string(CheckpointManifest::kFileName));
  }
  std::uint64_t size = 0;
  try {
    size = fileSize(file);
  } catch (const IoError& e) {
    fail(std::string("checkpoint file: ") + e.what());
  }
  checkRecordAgainst(file, record, size, [&] { return sha256OfFile(file); });
}

void verifyAll(const std::string& tagDir, const CheckpointManifest& manifest) {
  for (const FileRecord& r : manifest.files) {
    verifyFile(tagDir, r);
  }
}

c10::IValue loadVerifiedStateFile(const std::string& tagDir, const CheckpointManifest& manifest,
                                  const std::string& name) {
  const FileRecord* record = manifest.find(name);
  if (record == nullptr) {
    failDetail(joinPath(tagDir, name), "not listed",
               "a file listed in " + joinPath(tagDir, CheckpointManifest::kFileName));
  }
  if (!isSafeRelativeName(name)) {
    failDetail("manifest file name", "'" + name + "'",
               "a relative file name inside the tag directory");
  }
  const std::string file = joinPath(tagDir, name);
  const std::optional<std::string> bytes = readWholeFile(file);
  if (!bytes) {
    failDetail(file, "missing",
               "a file of " + std::to_string(record->bytes) + " bytes listed in " +
                   CheckpointManifest::kFileName);
  }
  checkRecordAgainst(file, *record, bytes->size(), [&] { return sha256Hex(*bytes); });
  return deserializeState(std::vector<char>(bytes->begin(), bytes->end()),
                          "checkpoint file " + quoted(file));
}

c10::IValue loadStateFile(const std::string& path, const CheckpointManifest& manifest) {
  return loadVerifiedStateFile(parentPath(path), manifest, fileName(path));
}

}  // namespace stretch::engine
