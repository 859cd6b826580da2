#pragma once
// A checkpoint's manifest: what makes a step directory a completed checkpoint, and the checks
// that its files are the ones written. Below the engine (which writes and loads checkpoints) and
// the launcher (which reports which checkpoint a start resumes from): no LibTorch here.
//
// Integrity. tagDir/manifest.json lists every file of the checkpoint with its size and SHA-256
// plus metadata (Stretch version, world size, ZeRO stage, tag). The engine writes it after every
// file it lists is durable, so a step directory without one is a save that never completed.
// verifyFile checks a file against its record; a missing, truncated, extended or altered file or
// a malformed manifest is a CheckpointError that names the file and says what is wrong.
//
// SHA-256 is OpenSSL's (EVP). A build without OpenSSL (possible only without LibTorch, whose
// builds require it: then no engine writes or loads checkpoints in this build) has no digests:
// haveSha256() is false, sha256Hex throws, and verifyFile checks presence and size only.
//
// Paths are plain strings and every file operation is a POSIX call (runtime/common/
// posix_files.hpp), never std::filesystem: the engine calls this from LibTorch processes
// (docs/gpu.md).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/error.hpp"

namespace stretch::checkpoint {

// A checkpoint file or directory is missing, truncated, corrupt, unreadable or unwritable.
STRETCH_DECLARE_ERROR(CheckpointError, IoError);

// ---- hashing and durable writes ----

// Whether this build computes SHA-256 (it was built with OpenSSL).
bool haveSha256();
// Lower-case hex SHA-256 (OpenSSL EVP). InternalError without OpenSSL.
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

// stretch::writeFileAtomically (to "<path>.tmp.<pid>.<k>", fsync'ed, renamed over path, the
// directory fsync'ed; creates missing parent directories) with the record of what was written
// (name = path's file name). CheckpointError on any failure; the temporary file is removed.
FileRecord writeFileAtomically(const std::string& path, std::string_view bytes);
void writeTextAtomically(const std::string& path, std::string_view text);

// Whether a manifest may list `name`: relative, inside the tag directory (no component empty,
// "." or "..").
bool isSafeRelativeName(std::string_view name);

// ---- manifest ----

// The version written into manifests: the project version when the build defines
// STRETCH_VERSION for this module, else "unknown".
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
// CheckpointError when tagDir/manifest.json is missing, unreadable (more than 64 MiB, not a
// regular file) or malformed.
CheckpointManifest readManifest(const std::string& tagDir);

// A JSON array of records, for sending one rank's records to the manifest writer (surrounding
// whitespace, e.g. padding to a common length, is ignored when reading).
std::string recordsToJson(const std::vector<FileRecord>& records);
std::vector<FileRecord> recordsFromJson(std::string_view text,
                                        const std::string& source = "file records");

// Checks tagDir/record.name against the record: a safe name, present, a regular file,
// record.bytes long, same SHA-256 (when haveSha256()).
void verifyFile(const std::string& tagDir, const FileRecord& record);
// verifyFile for every record of the manifest.
void verifyAll(const std::string& tagDir, const CheckpointManifest& manifest);
// Checks `bytes`, the content of `file` read by the caller (which then uses exactly what was
// checked), against its record: size, then SHA-256 (when haveSha256()).
void verifyBytes(const std::string& file, const FileRecord& record, std::string_view bytes);

// The whole of a checkpoint file (any size; a FIFO or device is refused, never waited on);
// nullopt when it does not exist, CheckpointError when it cannot be read.
std::optional<std::string> readCheckpointFile(const std::string& path);

}  // namespace stretch::checkpoint
