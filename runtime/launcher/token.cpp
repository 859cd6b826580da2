#include "runtime/launcher/token.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "runtime/common/error.hpp"

namespace stretch::launcher {

namespace {

// mkdir with mode 0700 unless it exists; then it must be a directory of ours, made private.
void makePrivateDirectory(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
    throw IoError(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
    throw IoError(
        fmt::format("{} must be a directory owned by this user (for the job's store "
                    "token)",
                    path));
  }
  if ((st.st_mode & 077) != 0 && ::chmod(path.c_str(), 0700) != 0)
    throw IoError(fmt::format("cannot make {} private: {}", path, std::strerror(errno)));
}

}  // namespace

void writePrivateFile(const std::string& path, const std::string& text) {
  ::unlink(path.c_str());  // never write through an existing file or link
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    throw IoError(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      throw IoError(fmt::format("cannot write {}: {}", path, std::strerror(err)));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0)
    throw IoError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
}

TokenFile::TokenFile(const std::string& token) {
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') {
    throw IoError(
        "HOME is not set: pdsh agents read the job's store token from a file in the home "
        "directory");
  }
  const std::string stretchDir = std::string(home) + "/.stretch";
  const std::string tokens = stretchDir + "/tokens";
  makePrivateDirectory(stretchDir);
  makePrivateDirectory(tokens);
  path_ = tokens + "/job-" + randomToken().substr(0, 16);
  writePrivateFile(path_, token + "\n");
}

TokenFile::~TokenFile() {
  ::unlink(path_.c_str());
}

std::string randomToken() {
  std::random_device device;
  std::string token;
  for (int i = 0; i < 4; ++i)
    token += fmt::format("{:08x}", device());
  return token;
}

std::string maskToken(std::string text, const std::string& token) {
  if (token.empty())
    return text;
  for (auto at = text.find(token); at != std::string::npos; at = text.find(token, at))
    text.replace(at, token.size(), "<token>");
  return text;
}

void checkTokenStrength(const std::string& token, const std::string& source) {
  if (token.size() < kMinTokenLength) {
    throw ConfigError(ErrorDetail{
        source, fmt::format("a token of {} character(s)", token.size()),
        fmt::format("at least {} characters, e.g. `openssl rand -hex 16`", kMinTokenLength)});
  }
  const auto blank = static_cast<std::size_t>(std::count_if(token.begin(), token.end(), [](char c) {
    return std::isspace(static_cast<unsigned char>(c));
  }));
  if (token.size() - blank < kMinTokenLength) {
    throw ConfigError(ErrorDetail{
        source,
        blank == token.size()
            ? fmt::format("a token of {} character(s), all whitespace", token.size())
            : fmt::format("a token of {} character(s), {} of them whitespace", token.size(), blank),
        fmt::format("at least {} characters other than whitespace (spaces, tabs, line breaks), "
                    "e.g. `openssl rand -hex 16`",
                    kMinTokenLength)});
  }
}

}  // namespace stretch::launcher
