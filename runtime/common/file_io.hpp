#pragma once
// Reading a whole file: the one place that opens, reads and reports an unreadable file, for every
// module that loads a document (configs, hostfiles, scenarios, job files, cluster presets,
// failure traces and cause tables). No std::filesystem: see runtime/common/posix_files.hpp.

#include <string>
#include <string_view>

namespace stretch {

// The file's bytes, unchanged (binary mode: no newline translation, NUL bytes kept). Blocks
// while it reads. Throws IoError "cannot read <what> <path>: <reason>" ("cannot read <path>:
// <reason>" when what is empty) when the file is missing, not readable, a directory or fails
// while being read; the reason is the system's (strerror).
std::string readFile(const std::string& path, std::string_view what = {});

}  // namespace stretch
