#include "runtime/checkpoint/manifest.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <memory>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#ifndef STRETCH_CHECKPOINT_HAVE_OPENSSL
#define STRETCH_CHECKPOINT_HAVE_OPENSSL 0
#endif
#if STRETCH_CHECKPOINT_HAVE_OPENSSL
#include <openssl/evp.h>
#endif

#include "runtime/common/file_io.hpp"
#include "runtime/common/posix_files.hpp"

namespace stretch::checkpoint {

namespace {

// Bound on the manifest: a list of file records.
constexpr std::uint64_t kMaxManifestBytes = std::uint64_t{64} << 20;

std::string quoted(const std::string& path) {
  return "'" + path + "'";
}

[[noreturn]] void fail(const std::string& message) {
  throw CheckpointError(message);
}

[[noreturn]] void failDetail(std::string path, std::string value, std::string expected) {
  throw CheckpointError(ErrorDetail{std::move(path), std::move(value), std::move(expected)});
}

// ---- SHA-256 ----

#if STRETCH_CHECKPOINT_HAVE_OPENSSL
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
#else
class Sha256 {
 public:
  Sha256() {
    throw InternalError("SHA-256: this build of Stretch has no OpenSSL (install libssl-dev)");
  }
  void update(const void*, std::size_t) {}
  std::string hex() { return {}; }
};
#endif

bool isSha256Hex(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

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
      fail("cannot read checkpoint file " + quoted(path) + ": " + std::strerror(errno));
    }
    if (got == 0) {
      return;
    }
    onChunk(buffer.data(), static_cast<std::size_t>(got));
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
  if (!haveSha256())
    return;
  const std::string actual = digest();
  if (actual != record.sha256) {
    failDetail(file, "sha256 " + actual,
               "sha256 " + record.sha256 + " as listed in " + CheckpointManifest::kFileName +
                   " (the file is corrupt)");
  }
}

}  // namespace

// ---- hashing and durable writes ----

bool haveSha256() {
  return STRETCH_CHECKPOINT_HAVE_OPENSSL != 0;
}

std::string sha256Hex(std::string_view bytes) {
  Sha256 sha;
  sha.update(bytes.data(), bytes.size());
  return sha.hex();
}

std::string sha256OfFile(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) {
    fail("cannot open checkpoint file " + quoted(path) + ": " + std::strerror(errno));
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

std::optional<std::string> readCheckpointFile(const std::string& path) {
  try {
    return readFileIfExists(path, "checkpoint file", UINT64_MAX);
  } catch (const IoError& e) {
    fail(e.what());
  }
}

bool isSafeRelativeName(std::string_view name) {
  if (name.empty() || name.find('\0') != std::string_view::npos || name.front() == '/') {
    return false;
  }
  std::size_t begin = 0;
  for (;;) {
    const std::size_t slash = name.find('/', begin);
    const std::string_view part =
        name.substr(begin, slash == std::string_view::npos ? slash : slash - begin);
    if (part.empty() || part == "." || part == "..") {
      return false;
    }
    if (slash == std::string_view::npos) {
      return true;
    }
    begin = slash + 1;
  }
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
  std::optional<std::string> text;
  try {
    text = readFileIfExists(path, "checkpoint manifest", kMaxManifestBytes);
  } catch (const IoError& e) {
    fail(e.what());
  }
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

void verifyBytes(const std::string& file, const FileRecord& record, std::string_view bytes) {
  checkRecordAgainst(file, record, bytes.size(), [&] { return sha256Hex(bytes); });
}

}  // namespace stretch::checkpoint
