#pragma once
// File-system operations on plain POSIX calls (open, write, fsync, mkdir, rename, stat, opendir,
// unlink, rmdir) with plain std::string paths: no std::filesystem, whose functions are
// out-of-line symbols of the C++ runtime. PyTorch 2.11's libtorch.so exports its own copies of
// them, and calls from a program linked against it bind to those copies and crash (docs/gpu.md);
// code that runs in a LibTorch process (the engine's checkpoints, the examples) uses these
// instead, and so can code without LibTorch (the launcher).
//
// Paths are used as given: relative ones resolve against the working directory. Failures are
// IoError naming the path and the system's reason (strerror), e.g.
//   cannot create directory 'ckpt/global_step5': 'ckpt': Not a directory

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stretch {

// ---- path strings (no system calls) ----

// `base` + "/" + `name` with one '/' between them; `name` alone when it is absolute or `base` is
// empty; `base` alone when `name` is empty.
std::string joinPath(std::string_view base, std::string_view name);
// The part before the last '/' (its trailing '/'s dropped; "/" for a name directly under the
// root; "" when there is no '/'): "a/b/c" -> "a/b", "/a" -> "/", "a" -> "". As
// std::filesystem::path::parent_path for paths without "." or ".." tricks.
std::string parentPath(std::string_view path);
// The part after the last '/': "a/b" -> "b", "a" -> "a", "a/" -> "" (a directory, no file name).
std::string fileName(std::string_view path);

// ---- queries (stat, which follows symbolic links) ----

// False when stat fails for any reason (missing, a component not a directory, no permission).
bool pathExists(const std::string& path);
bool isRegularFile(const std::string& path);
bool isDirectory(const std::string& path);
// The size in bytes of a regular file (after symbolic links). IoError when it cannot be stat'ed
// or is not a regular file.
std::uint64_t fileSize(const std::string& path);
// The names in a directory, without "." and "..", sorted. IoError when it cannot be read.
std::vector<std::string> listDirectory(const std::string& path);

// ---- changes ----

// mkdir -p: creates `path` and its missing parents (mode 0777 less the umask). Nothing to do
// when it is a directory already; IoError when a component exists and is not a directory or
// cannot be created.
void makeDirectories(const std::string& path);
// Removes a file, symbolic link or empty directory. False when nothing was there; IoError
// otherwise (e.g. a non-empty directory).
bool removePath(const std::string& path);
// rm -rf: removes `path` and, when it is a directory, everything below it; symbolic links are
// removed, never followed. Returns how many entries were removed (0 when nothing was there).
// IoError naming the entry that could not be removed.
std::uint64_t removeTree(const std::string& path);
// rename(2): atomic within one file system; replaces an existing file `to`.
void renamePath(const std::string& from, const std::string& to);
// fsync of a directory, making renames and creations in it durable. File systems that cannot
// sync directories (EINVAL, EROFS) are not an error.
void syncDirectory(const std::string& dir);

// Writes `bytes` durably: to "<path>.tmp.<pid>.<k>" in the same directory (k counts writes in
// the process, so threads never collide), fsync'ed, renamed over `path`, and the directory
// fsync'ed; missing parent directories are created first. After a crash `path` holds the old or
// the new complete contents, never a torn file. IoError on any failure (the temporary file is
// removed), e.g. when `path` names a directory or ends in '/'.
void writeFileAtomically(const std::string& path, std::string_view bytes);

// A file descriptor closed on destruction; close() closes now and reports close(2)'s result
// (NFS reports write errors there). A negative descriptor is held as "none".
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  int close();

 private:
  int fd_;
};

}  // namespace stretch
