#pragma once
// Reading a whole file: the one place that opens, reads and reports an unreadable file, for every
// module that loads a document (configs, hostfiles, scenarios, job files, cluster presets,
// failure traces and cause tables, token files). No std::filesystem: see
// runtime/common/posix_files.hpp.
//
// Bounded: only regular files are read (a FIFO, a device such as /dev/zero or a socket is refused
// before a byte is read, so neither hangs nor grows without end), and at most a size limit:
// kDefaultMaxInputBytes, or STRETCH_MAX_INPUT_BYTES when set (for a failure trace or scenario
// larger than 64 MiB). A file that grows past the limit while it is read is refused too.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace stretch {

inline constexpr std::uint64_t kDefaultMaxInputBytes = std::uint64_t{64} << 20;
inline constexpr const char* kMaxInputBytesVariable = "STRETCH_MAX_INPUT_BYTES";

// STRETCH_MAX_INPUT_BYTES when it holds a positive integer (bytes; IoError naming it otherwise),
// else kDefaultMaxInputBytes.
std::uint64_t maxInputBytes();

// The file's bytes, unchanged (binary mode: no newline translation, NUL bytes kept). Throws
// IoError "cannot read <what> <path>: <reason>" ("cannot read <path>: <reason>" when what is
// empty) when the file is missing, not readable, a directory, not a regular file, longer than
// `maxBytes` (maxInputBytes() when nullopt) or fails while being read; the reason is the
// system's (strerror) or says which limit was passed and how to raise it.
std::string readFile(const std::string& path, std::string_view what = {},
                     std::optional<std::uint64_t> maxBytes = std::nullopt);

// readFile, except that a path that does not exist (ENOENT: the file or a directory above it is
// missing) is nullopt instead of an error: for a file whose absence is a state, not a fault (a
// checkpoint directory's `latest`). Everything else readFile refuses is still an IoError.
std::optional<std::string> readFileIfExists(const std::string& path, std::string_view what = {},
                                            std::optional<std::uint64_t> maxBytes = std::nullopt);

}  // namespace stretch
