#include "runtime/common/file_io.hpp"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "runtime/common/error.hpp"
#include "runtime/common/posix_files.hpp"

namespace stretch {

namespace {

[[noreturn]] void cannotRead(const std::string& path, std::string_view what, int error) {
  throw IoError(fmt::format("cannot read {}{}{}: {}", what, what.empty() ? "" : " ", path,
                            std::strerror(error)));
}

}  // namespace

std::string readFile(const std::string& path, std::string_view what) {
  // fopen succeeds on a directory and only the first read fails: say so up front.
  if (isDirectory(path)) {
    cannotRead(path, what, EISDIR);
  }
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                             &std::fclose);
  if (!file) {
    cannotRead(path, what, errno);
  }
  std::string text;
  std::array<char, 65536> buffer{};
  std::size_t got = 0;
  errno = 0;
  while ((got = std::fread(buffer.data(), 1, buffer.size(), file.get())) > 0) {
    text.append(buffer.data(), got);
  }
  if (std::ferror(file.get()) != 0) {
    cannotRead(path, what, errno != 0 ? errno : EIO);
  }
  return text;
}

}  // namespace stretch
