#include "runtime/common/file_io.hpp"

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "runtime/common/error.hpp"
#include "runtime/common/posix_files.hpp"

namespace stretch {

namespace {

[[noreturn]] void cannotRead(const std::string& path, std::string_view what,
                             std::string_view reason) {
  throw IoError(fmt::format("cannot read {}{}{}: {}", what, what.empty() ? "" : " ", path, reason));
}

[[noreturn]] void cannotRead(const std::string& path, std::string_view what, int error) {
  cannotRead(path, what, std::strerror(error));
}

const char* kindOf(mode_t mode) {
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

[[noreturn]] void tooLong(const std::string& path, std::string_view what, std::uint64_t bytes,
                          std::uint64_t limit, bool atLeast) {
  cannotRead(path, what,
             fmt::format("it is {}{} bytes, more than the limit of {} bytes (set {} to read "
                         "larger files)",
                         atLeast ? "at least " : "", bytes, limit, kMaxInputBytesVariable));
}

}  // namespace

std::uint64_t maxInputBytes() {
  const char* text = std::getenv(kMaxInputBytesVariable);
  if (text == nullptr || *text == '\0')
    return kDefaultMaxInputBytes;
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || value == 0 || text[0] == '-') {
    throw IoError(ErrorDetail{kMaxInputBytesVariable, text, "a positive number of bytes"});
  }
  return value;
}

namespace {

std::optional<std::string> readFileOrMissing(const std::string& path, std::string_view what,
                                             std::optional<std::uint64_t> maxBytes,
                                             bool missingIsNullopt) {
  const std::uint64_t limit = maxBytes.value_or(maxInputBytes());
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) {
    if (errno == ENOENT && missingIsNullopt)
      return std::nullopt;
    cannotRead(path, what, errno);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    cannotRead(path, what, errno);
  if (S_ISDIR(st.st_mode))
    cannotRead(path, what, EISDIR);
  if (!S_ISREG(st.st_mode))
    cannotRead(path, what, fmt::format("it is {}, not a regular file", kindOf(st.st_mode)));
  if (static_cast<std::uint64_t>(st.st_size) > limit)
    tooLong(path, what, static_cast<std::uint64_t>(st.st_size), limit, false);
  std::string text;
  text.reserve(static_cast<std::size_t>(st.st_size));
  std::array<char, 65536> buffer{};
  for (;;) {
    const ssize_t got = ::read(fd.get(), buffer.data(), buffer.size());
    if (got < 0) {
      if (errno == EINTR)
        continue;
      cannotRead(path, what, errno);
    }
    if (got == 0)
      return text;
    if (text.size() + static_cast<std::size_t>(got) > limit)
      tooLong(path, what, text.size() + static_cast<std::size_t>(got), limit, true);
    text.append(buffer.data(), static_cast<std::size_t>(got));
  }
}

}  // namespace

std::string readFile(const std::string& path, std::string_view what,
                     std::optional<std::uint64_t> maxBytes) {
  return *readFileOrMissing(path, what, maxBytes, false);
}

std::optional<std::string> readFileIfExists(const std::string& path, std::string_view what,
                                            std::optional<std::uint64_t> maxBytes) {
  return readFileOrMissing(path, what, maxBytes, true);
}

}  // namespace stretch
