#include "runtime/common/posix_files.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/common/error.hpp"

namespace stretch {

namespace {

std::string quoted(std::string_view path) {
  std::string out;
  out.reserve(path.size() + 2);
  out += '\'';
  out += path;
  out += '\'';
  return out;
}

[[noreturn]] void fail(const std::string& what, int error) {
  throw IoError(what + ": " + std::strerror(error));
}

class Dir {
 public:
  explicit Dir(DIR* dir) : dir_(dir) {}
  Dir(const Dir&) = delete;
  Dir& operator=(const Dir&) = delete;
  ~Dir() {
    if (dir_ != nullptr) {
      ::closedir(dir_);
    }
  }
  DIR* get() const { return dir_; }

 private:
  DIR* dir_;
};

// The entry names of an open directory, without "." and "..", in readdir order.
std::vector<std::string> readEntries(const std::string& path) {
  const Dir dir(::opendir(path.c_str()));
  if (dir.get() == nullptr) {
    fail("cannot open directory " + quoted(path), errno);
  }
  std::vector<std::string> names;
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(dir.get());
    if (entry == nullptr) {
      if (errno != 0) {
        fail("cannot read directory " + quoted(path), errno);
      }
      return names;
    }
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") {
      names.emplace_back(name);
    }
  }
}

bool statOf(const std::string& path, struct stat& st) {
  return !path.empty() && ::stat(path.c_str(), &st) == 0;
}

std::atomic<std::uint64_t> gTempCounter{0};

}  // namespace

// ---- path strings ----

std::string joinPath(std::string_view base, std::string_view name) {
  if (base.empty() || (!name.empty() && name.front() == '/')) {
    return std::string(name);
  }
  std::string out(base);
  if (name.empty()) {
    return out;
  }
  if (out.back() != '/') {
    out += '/';
  }
  out += name;
  return out;
}

std::string parentPath(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) {
    return {};
  }
  const std::size_t end = path.find_last_not_of('/', slash);
  if (end == std::string_view::npos) {
    return "/";
  }
  return std::string(path.substr(0, end + 1));
}

std::string fileName(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// ---- queries ----

bool pathExists(const std::string& path) {
  struct stat st {};
  return statOf(path, st);
}

bool isRegularFile(const std::string& path) {
  struct stat st {};
  return statOf(path, st) && S_ISREG(st.st_mode);
}

bool isDirectory(const std::string& path) {
  struct stat st {};
  return statOf(path, st) && S_ISDIR(st.st_mode);
}

std::uint64_t fileSize(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    fail("cannot get the size of " + quoted(path), errno);
  }
  if (!S_ISREG(st.st_mode)) {
    fail("cannot get the size of " + quoted(path),
         S_ISDIR(st.st_mode) ? EISDIR : EINVAL);  // as std::filesystem::file_size
  }
  return static_cast<std::uint64_t>(st.st_size);
}

std::vector<std::string> listDirectory(const std::string& path) {
  std::vector<std::string> names = readEntries(path);
  std::sort(names.begin(), names.end());
  return names;
}

// ---- changes ----

void makeDirectories(const std::string& path) {
  if (path.empty()) {
    throw IoError("cannot create directory '': expected a path");
  }
  if (isDirectory(path)) {
    return;
  }
  // Every prefix that ends before a '/', then the whole path; the root and empty components
  // ("a//b") are skipped.
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    const std::size_t slash = path.find('/', pos);
    const std::string prefix = slash == std::string::npos ? path : path.substr(0, slash);
    pos = slash == std::string::npos ? slash : slash + 1;
    if (prefix.empty() || prefix.back() == '/') {
      continue;
    }
    if (::mkdir(prefix.c_str(), 0777) == 0) {
      continue;
    }
    const int error = errno;
    struct stat st {};
    if (::stat(prefix.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      continue;  // there already (EEXIST), or made by someone else meanwhile
    }
    const int reason = error == EEXIST ? ENOTDIR : error;
    if (prefix == path) {
      fail("cannot create directory " + quoted(path), reason);
    }
    fail("cannot create directory " + quoted(path) + ": " + quoted(prefix), reason);
  }
}

bool removePath(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return false;
    }
    fail("cannot remove " + quoted(path), errno);
  }
  if ((S_ISDIR(st.st_mode) ? ::rmdir(path.c_str()) : ::unlink(path.c_str())) != 0) {
    if (errno == ENOENT) {
      return false;
    }
    fail("cannot remove " + quoted(path), errno);
  }
  return true;
}

std::uint64_t removeTree(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::lstat(path.c_str(), &st) != 0) {
    if (path.empty() || errno == ENOENT) {
      return 0;
    }
    fail("cannot remove " + quoted(path), errno);
  }
  std::uint64_t removed = 0;
  if (S_ISDIR(st.st_mode)) {
    for (const std::string& name : readEntries(path)) {
      removed += removeTree(joinPath(path, name));
    }
  }
  if (removePath(path)) {
    ++removed;
  }
  return removed;
}

void renamePath(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    fail("cannot rename " + quoted(from) + " to " + quoted(to), errno);
  }
}

void syncDirectory(const std::string& dir) {
  const Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) {
    fail("cannot open directory " + quoted(dir) + " to sync it", errno);
  }
  if (::fsync(fd.get()) != 0 && errno != EINVAL && errno != EROFS) {
    fail("cannot sync directory " + quoted(dir), errno);
  }
}

void writeFileAtomically(const std::string& path, std::string_view bytes) {
  if (fileName(path).empty()) {
    throw IoError("cannot write " + quoted(path) + ": expected a file path");
  }
  const std::string parent = parentPath(path);
  const std::string dir = parent.empty() ? std::string(".") : parent;
  makeDirectories(dir);
  // The temporary file is always new (O_EXCL, O_NOFOLLOW): a file or link someone planted at a
  // name it might take is never written through; the next name is tried instead.
  std::string tmp;
  int created = -1;
  for (int attempt = 0;; ++attempt) {
    tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
          std::to_string(gTempCounter.fetch_add(1));
    created = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (created >= 0) {
      break;
    }
    if (errno != EEXIST || attempt == 100) {
      fail("cannot create " + quoted(tmp), errno);
    }
  }
  {
    Fd fd(created);
    auto abandon = [&](const std::string& what, int error) {
      fd.close();
      ::unlink(tmp.c_str());
      fail("cannot " + what + " " + quoted(tmp) + " (for " + quoted(path) + ")", error);
    };
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t put = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
      if (put < 0) {
        if (errno == EINTR) {
          continue;
        }
        abandon("write", errno);
      }
      done += static_cast<std::size_t>(put);
    }
    if (::fsync(fd.get()) != 0) {
      abandon("sync", errno);
    }
    if (fd.close() != 0) {
      const int error = errno;
      ::unlink(tmp.c_str());
      fail("cannot close " + quoted(tmp) + " (for " + quoted(path) + ")", error);
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    fail("cannot rename " + quoted(tmp) + " to " + quoted(path), error);
  }
  syncDirectory(dir);
}

Fd::~Fd() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

int Fd::close() {
  const int rc = ::close(fd_);
  fd_ = -1;
  return rc;
}

}  // namespace stretch
