#include "runtime/launcher/process.hpp"

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <fstream>
#include <mutex>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <string_view>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>

#include <fmt/format.h>

#include "runtime/common/error.hpp"

extern char** environ;

namespace stretch::launcher {

namespace {

// argv and envp as the NUL-terminated arrays execvpe wants, built before fork (the child may
// only call async-signal-safe functions).
struct ExecArgs {
  std::vector<std::string> storage;
  std::vector<char*> argv;
  std::vector<char*> envp;
};

ExecArgs buildExecArgs(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& extra) {
  ExecArgs out;
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos)
      env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  for (const auto& [k, v] : extra)
    env[k] = v;
  out.storage.reserve(argv.size() + env.size());
  for (const auto& a : argv)
    out.storage.push_back(a);
  for (const auto& [k, v] : env)
    out.storage.push_back(k + "=" + v);
  for (std::size_t i = 0; i < argv.size(); ++i)
    out.argv.push_back(out.storage[i].data());
  out.argv.push_back(nullptr);
  for (std::size_t i = argv.size(); i < out.storage.size(); ++i)
    out.envp.push_back(out.storage[i].data());
  out.envp.push_back(nullptr);
  return out;
}

void closeFd(int& fd) {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

// Pipes and files opened for one spawn, closed on every path out.
struct Fds {
  int log = -1;
  int in[2] = {-1, -1};
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  ~Fds() {
    for (int* fd : {&log, &in[0], &in[1], &out[0], &out[1], &err[0], &err[1]})
      closeFd(*fd);
  }
};

void writeAll(int fd, const char* text) {
  (void)!::write(fd, text, std::strlen(text));
}

// What the child of spawnProcess needs between clone and exec, prepared by the parent: the
// child only reads it and makes async-signal-safe calls.
struct ChildSetup {
  const SpawnOptions* options = nullptr;
  const Fds* fds = nullptr;
  const ExecArgs* args = nullptr;
  const char* execError = nullptr;
  pid_t parent = 0;
};

// The child, on a stack of its own, sharing the parent's memory until it execs (CLONE_VM |
// CLONE_VFORK, as posix_spawn does): no copy of the launcher's page tables, so starting 2,048
// node agents costs the launcher a fraction of what fork did (docs/launch.md, "The control
// plane's traffic"). Every signal arrives blocked (cloneChild) and handlers are reset before it
// is unblocked, so no handler of the parent ever runs in this memory.
int childMain(void* arg) {
  const ChildSetup& setup = *static_cast<const ChildSetup*>(arg);
  const SpawnOptions& options = *setup.options;
  const Fds& fds = *setup.fds;
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction current {};
    if (sig == SIGKILL || sig == SIGSTOP || ::sigaction(sig, nullptr, &current) != 0)
      continue;
    const bool handled = (current.sa_flags & SA_SIGINFO) != 0 ||
                         (current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN);
    if (handled || sig == SIGPIPE) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      ::sigaction(sig, &dfl, nullptr);
    }
  }
  if (options.ignoredSignal != 0)
    ::signal(options.ignoredSignal, SIG_IGN);
  if (options.ownProcessGroup)
    ::setpgid(0, 0);
  if (options.parentDeathSignal != 0) {
    ::prctl(PR_SET_PDEATHSIG, options.parentDeathSignal);
    if (::getppid() != setup.parent)
      ::_exit(127);  // the parent died between clone and prctl
  }
  if (options.stdinData) {
    ::dup2(fds.in[0], STDIN_FILENO);
  } else if (options.stdinNull) {
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0)
      ::dup2(null, STDIN_FILENO);
  }
  if (fds.log >= 0 || options.outputFd >= 0) {
    const int out = fds.log >= 0 ? fds.log : options.outputFd;
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
  } else if (options.pipeOutput) {
    ::dup2(fds.out[1], STDOUT_FILENO);
    ::dup2(fds.err[1], STDERR_FILENO);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execvpe(setup.args->argv[0], setup.args->argv.data(), setup.args->envp.data());
  const int err = errno;
  writeAll(STDERR_FILENO, setup.execError);
  // strerrordesc_np, not strerror: strerror translates through gettext, which takes locks and may
  // allocate, and the parent's other threads run on in this memory (only the cloning thread
  // waits), so a lock one of them holds would hang the child and the thread that started it.
  const char* description = ::strerrordesc_np(err);
  writeAll(STDERR_FILENO, description != nullptr ? description : "unknown error");
  writeAll(STDERR_FILENO, "\n");
  ::_exit(127);
}

// Starts childMain(setup) and returns its pid once it has exec'd or exited, or -errno. The
// calling thread's signals are blocked meanwhile (and restored); its stack is a mapping of its
// own, large enough for execvpe's PATH search and script fallback.
pid_t cloneChild(ChildSetup& setup) {
  constexpr std::size_t kStackBytes = 256 * 1024;
  void* stack = ::mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
  if (stack == MAP_FAILED)
    return -errno;
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = ::clone(childMain, static_cast<char*>(stack) + kStackBytes,
                            CLONE_VM | CLONE_VFORK | SIGCHLD, &setup);
  const int err = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::munmap(stack, kStackBytes);
  return pid < 0 ? -err : pid;
}

// ---- the orphan guard ----

// The guard's message that names what its groups are (never a group: pgids are positive).
constexpr std::int32_t kGroupsMessage = INT32_MIN;

std::mutex gGuardMutex;
int gGuardFd = -1;       // this process's end of the socket pair with its guard
pid_t gGuardOwner = -1;  // the process that made the guard (a fork must make its own)

// Reads exactly `size` bytes (async-signal-safe); false at the end of the stream or an error.
bool readExact(int fd, void* data, std::size_t size) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t got = ::read(fd, p, size);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return false;
    p += got;
    size -= static_cast<std::size_t>(got);
  }
  return true;
}

// Appends the decimal digits of `value` to `out` at `at` (async-signal-safe).
std::size_t appendNumber(char* out, std::size_t at, std::uint64_t value) {
  char digits[24];
  std::size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  while (n > 0)
    out[at++] = digits[--n];
  return at;
}

std::size_t appendText(char* out, std::size_t at, const char* text) {
  while (*text != '\0')
    out[at++] = *text++;
  return at;
}

// The event log's record of a launcher that ended without stopping its workers (the guard
// killed `groups` process groups of `what`: "worker", "node agent"), as agent::EventLog writes an
// "interrupted" record.
void recordOrphans(int fd, int groups, const char* what) {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  char line[512];
  std::size_t n = appendText(line, 0, "{\"time_ns\":");
  n = appendNumber(line, n,
                   static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ULL +
                       static_cast<std::uint64_t>(now.tv_nsec));
  n = appendText(line, n,
                 ",\"event\":\"interrupted\",\"reason\":\"the launcher ended without stopping its "
                 "workers (killed by SIGKILL, or a crash); its orphan guard killed ");
  n = appendNumber(line, n, static_cast<std::uint64_t>(groups));
  n = appendText(line, n, " ");
  n = appendText(line, n, what);
  n = appendText(line, n, " process group(s)\"}\n");
  (void)!::write(fd, line, n);
}

// The guard's life, forked from a process that may have threads: async-signal-safe calls only.
// Messages: a positive int32 (guard this group), a negative one (forget it), 0 followed by an
// int32 length and that many bytes (the event log to record the end in; length 0: none), or
// kGroupsMessage followed by the same (what the groups are, for the record).
[[noreturn]] void guardMain(int socket) {
  // A session (and so a process group) of its own: a signal to the launcher's process group
  // (`kill -9 -- -PGID`, `timeout -s KILL`, the terminal's Ctrl-C) must not reach the guard,
  // whose whole purpose is to outlive the launcher.
  ::setsid();
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU})
    ::sigaction(sig, &ignore, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Nothing of the parent's stays open here (its pipes and sockets would never see their end).
  const int keep = ::fcntl(socket, F_DUPFD, 64);
  if (::close_range(0, static_cast<unsigned>(keep) - 1, 0) != 0 ||
      ::close_range(static_cast<unsigned>(keep) + 1, ~0U, 0) != 0) {
    for (int fd = 0; fd < 65536; ++fd) {
      if (fd != keep)
        ::close(fd);
    }
  }
  const int null = ::open("/dev/null", O_RDWR);  // 0
  ::dup2(null, 1);
  ::dup2(null, 2);
  constexpr int kMaxGroups = 8192;
  pid_t groups[kMaxGroups];
  int count = 0;
  int events = -1;
  char what[64] = "worker";
  for (;;) {
    std::int32_t message = 0;
    if (!readExact(keep, &message, sizeof message))
      break;  // the parent is gone
    if (message == 0 || message == kGroupsMessage) {
      std::int32_t length = 0;
      char text[4096];
      if (!readExact(keep, &length, sizeof length) || length < 0 ||
          length >= static_cast<std::int32_t>(sizeof text) ||
          !readExact(keep, text, static_cast<std::size_t>(length)))
        break;
      text[length] = '\0';
      if (message == kGroupsMessage) {
        std::size_t i = 0;
        for (; i + 1 < sizeof what && text[i] != '\0'; ++i)
          what[i] = text[i];
        what[i] = '\0';
        continue;
      }
      if (events >= 0)
        ::close(events);
      events = -1;
      if (length > 0)  // as the launcher opened it
        events = ::open(text, O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC);
    } else if (message > 0 && count < kMaxGroups) {
      groups[count++] = message;
    } else if (message < 0) {
      for (int i = 0; i < count; ++i) {
        if (groups[i] == -message) {
          groups[i] = groups[--count];
          break;
        }
      }
    }
  }
  for (int i = 0; i < count; ++i)
    ::kill(-groups[i], SIGKILL);
  if (count > 0 && events >= 0)
    recordOrphans(events, count, what);
  ::_exit(0);
}

void tellGuard(std::string_view message, bool start) {
  const std::lock_guard lock(gGuardMutex);
  if (gGuardFd >= 0 && gGuardOwner != ::getpid()) {
    ::close(gGuardFd);  // inherited through a fork: the guard of another process
    gGuardFd = -1;
  }
  if (gGuardFd < 0) {
    if (!start)
      return;
    int pair[2] = {-1, -1};
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
      throw Error(fmt::format("orphan guard: socketpair: {}", std::strerror(errno)));
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int err = errno;
      ::close(pair[0]);
      ::close(pair[1]);
      throw Error(fmt::format("orphan guard: fork: {}", std::strerror(err)));
    }
    if (pid == 0) {
      // Forked twice, so that the guard is nobody's child here (a launcher's children are its
      // workers).
      const pid_t guard = ::fork();
      if (guard == 0)
        guardMain(pair[1]);
      ::_exit(guard < 0 ? 1 : 0);
    }
    ::close(pair[1]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    gGuardFd = pair[0];
    gGuardOwner = ::getpid();
  }
  (void)!::send(gGuardFd, message.data(), message.size(), MSG_NOSIGNAL);
}

std::string int32Bytes(std::int32_t value) {
  return std::string(reinterpret_cast<const char*>(&value), sizeof value);
}

}  // namespace

void guardProcessGroup(pid_t pgid) {
  tellGuard(int32Bytes(static_cast<std::int32_t>(pgid)), true);
}

void forgetProcessGroup(pid_t pgid) {
  tellGuard(int32Bytes(-static_cast<std::int32_t>(pgid)), false);
}

void guardEventLog(const std::string& path) {
  if (path.empty() || path.size() >= 4096)
    return;
  tellGuard(int32Bytes(0) + int32Bytes(static_cast<std::int32_t>(path.size())) + path, true);
}

void forgetEventLog() {
  tellGuard(int32Bytes(0) + int32Bytes(0), false);
}

void nameGuardedGroups(std::string_view what) {
  const std::string text(what.substr(0, 63));
  tellGuard(int32Bytes(kGroupsMessage) + int32Bytes(static_cast<std::int32_t>(text.size())) + text,
            true);
}

OpenedLog openLogFile(const std::string& path) {
  OpenedLog out;
  // O_NONBLOCK: a FIFO planted at the path must not block the open (no effect on files).
  constexpr int kAppend = O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  const auto clearNonblock = [](int fd) {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0)
      ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  };
  int fd = ::open(path.c_str(), kAppend | O_CREAT, 0644);
  if (fd >= 0) {
    struct stat st {};
    const bool known = ::fstat(fd, &st) == 0;
    // A regular file of its own, or a character device (only root makes one: /dev/null).
    if (known && ((S_ISREG(st.st_mode) && st.st_nlink == 1) || S_ISCHR(st.st_mode))) {
      clearNonblock(fd);
      out.fd = fd;
      return out;
    }
    ::close(fd);
    if (known && S_ISBLK(st.st_mode)) {
      out.note = "it is a block device; nothing was written to it";
      return out;
    }
    out.note = known && S_ISREG(st.st_mode) ? "it was a hard link to a file with other names"
                                            : "it was not a regular file";
  } else if (errno == ELOOP || errno == ENXIO) {
    out.note = errno == ELOOP ? "it was a symbolic link" : "it was a FIFO";
  } else {
    out.note = std::strerror(errno);
    return out;  // nothing at the path to replace (a full disk, a directory that went)
  }
  // Never written through: the link (or the file with other names) is removed, never followed,
  // and the log created afresh; a path planted again meanwhile fails O_EXCL.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    out.note = "it is a directory";
    return out;
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    out.note += fmt::format(" that cannot be removed ({}); nothing was written through it",
                            std::strerror(errno));
    return out;
  }
  fd = ::open(path.c_str(), kAppend | O_CREAT | O_EXCL, 0644);
  if (fd < 0) {
    out.note += fmt::format(
        "; after removing it, creating the file failed ({}); nothing was "
        "written through it",
        std::strerror(errno));
    return out;
  }
  clearNonblock(fd);
  out.fd = fd;
  out.note += "; removed it (never written through) and created a new file";
  return out;
}

std::string ProcessExit::describe() const {
  if (signaled)
    return fmt::format("killed by signal {} ({})", signal(), strsignal(signal()));
  return fmt::format("exit status {}", code);
}

ProcessExit ProcessExit::fromWaitStatus(int status) {
  ProcessExit e;
  if (WIFSIGNALED(status)) {
    e.signaled = true;
    e.code = 128 + WTERMSIG(status);
  } else {
    e.code = WEXITSTATUS(status);
  }
  return e;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept {
  *this = std::move(other);
}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    release();
    pid_ = std::exchange(other.pid_, -1);
    group_ = other.group_;
    guarded_ = std::exchange(other.guarded_, false);
    outFd_ = std::exchange(other.outFd_, -1);
    errFd_ = std::exchange(other.errFd_, -1);
    exit_ = std::exchange(other.exit_, std::nullopt);
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  release();
}

void ChildProcess::release() {
  if (running()) {
    signal(SIGKILL);
    wait();
  }
  if (guarded_) {
    signal(SIGKILL);  // what the child started and left behind
    forgetProcessGroup(pid_);
    guarded_ = false;
  }
  closeStdout();
  closeStderr();
  pid_ = -1;
}

void ChildProcess::closeStdout() {
  closeFd(outFd_);
}

void ChildProcess::closeStderr() {
  closeFd(errFd_);
}

std::optional<ProcessExit> ChildProcess::poll() {
  if (!running())
    return std::nullopt;
  int status = 0;
  const pid_t rc = ::waitpid(pid_, &status, WNOHANG);
  if (rc != pid_)
    return std::nullopt;
  exit_ = ProcessExit::fromWaitStatus(status);
  return exit_;
}

ProcessExit ChildProcess::wait() {
  if (!running())
    return exit_.value_or(ProcessExit{});
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  exit_ = ProcessExit::fromWaitStatus(status);
  return *exit_;
}

void ChildProcess::signal(int sig) const {
  if (pid_ <= 0)
    return;
  if (group_)
    ::kill(-pid_, sig);
  else if (!exit_)
    ::kill(pid_, sig);
}

ChildProcess spawnProcess(const SpawnOptions& options) {
  if (options.argv.empty() || options.argv.front().empty())
    throw ConfigError("program to run: empty (expected a program and its arguments)");
  if (int(!options.logFile.empty()) + int(options.pipeOutput) + int(options.outputFd >= 0) > 1)
    throw InternalError("spawnProcess: logFile, pipeOutput and outputFd exclude each other");
  const std::string& program = options.argv.front();
  ExecArgs args = buildExecArgs(options.argv, options.env);
  Fds fds;
  if (!options.logFile.empty()) {
    OpenedLog opened = openLogFile(options.logFile.string());
    if (opened.fd < 0)
      throw IoError(
          fmt::format("{}: cannot create the log file: {}", options.logFile.string(), opened.note));
    fds.log = opened.fd;
  }
  auto makePipe = [&](int(&p)[2]) {
    if (::pipe2(p, O_CLOEXEC) != 0)
      throw Error(fmt::format("cannot start {}: pipe: {}", program, std::strerror(errno)));
  };
  if (options.stdinData)
    makePipe(fds.in);
  if (options.pipeOutput) {
    makePipe(fds.out);
    makePipe(fds.err);
  }
  const std::string execError = options.execErrorPrefix + "cannot execute " + program + ": ";
  ChildSetup setup;
  setup.options = &options;
  setup.fds = &fds;
  setup.args = &args;
  setup.execError = execError.c_str();
  setup.parent = ::getpid();
  const pid_t pid = cloneChild(setup);
  if (pid < 0)
    throw Error(fmt::format("cannot start {}: clone: {}", program, std::strerror(-pid)));
  if (options.ownProcessGroup)
    ::setpgid(pid, pid);  // also from the parent, so signal() works before the child ran
  ChildProcess child;
  child.pid_ = pid;
  child.group_ = options.ownProcessGroup;
  if (options.ownProcessGroup && options.groupDiesWithParent) {
    guardProcessGroup(pid);
    child.guarded_ = true;
  }
  if (options.pipeOutput) {
    child.outFd_ = std::exchange(fds.out[0], -1);
    child.errFd_ = std::exchange(fds.err[0], -1);
  }
  if (options.stdinData) {
    closeFd(fds.in[0]);
    const std::string data = *options.stdinData + "\n";
    // A child that exits without reading gets EPIPE here, not a SIGPIPE for this process. One
    // thread at a time (the launcher starts its agents from several): each restores what it
    // found, so the disposition never stays SIG_IGN.
    static std::mutex sigpipeMutex;
    std::lock_guard lock(sigpipeMutex);
    const auto old = ::signal(SIGPIPE, SIG_IGN);
    [[maybe_unused]] const auto written = ::write(fds.in[1], data.data(), data.size());
    ::signal(SIGPIPE, old);
  }
  return child;
}

bool waitForAll(std::vector<ChildProcess*> processes, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (true) {
    bool all = true;
    for (ChildProcess* p : processes) {
      p->poll();
      all = all && !p->running();
    }
    if (all)
      return true;
    if (std::chrono::steady_clock::now() >= until)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void stopAll(std::vector<ChildProcess*> processes, std::chrono::milliseconds grace) {
  bool any = false;
  for (ChildProcess* p : processes) {
    if (p->running()) {
      p->signal(SIGTERM);
      any = true;
    }
  }
  if (any)
    waitForAll(processes, grace);
  for (ChildProcess* p : processes) {
    p->signal(SIGKILL);
    p->wait();
  }
}

namespace {

// runCaptured's log, opened for appending without writing through what someone planted at the
// path (calibration.log sits in a directory the user names): O_NOFOLLOW refuses a symbolic link,
// O_NONBLOCK keeps a FIFO from blocking the open, and only a regular file with no other names or
// a character device (/dev/null) is taken. Throws IoError naming the path and what was there.
int openCapturedLog(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(),
                        O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    throw IoError(fmt::format("{}: cannot open for writing: {}", path.string(),
                              err == ELOOP ? "it is a symbolic link; nothing was written through it"
                                           : std::strerror(err)));
  }
  struct stat st {};
  const bool known = ::fstat(fd, &st) == 0;
  if (known && ((S_ISREG(st.st_mode) && st.st_nlink == 1) || S_ISCHR(st.st_mode))) {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0)
      ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
  }
  ::close(fd);
  throw IoError(
      fmt::format("{}: cannot open for writing: {}; nothing was written to it", path.string(),
                  known && S_ISREG(st.st_mode) ? "it is a hard link to a file with other names"
                                               : "it is not a regular file"));
}

}  // namespace

Captured runCaptured(const std::vector<std::string>& argv, const std::filesystem::path& stderrLog) {
  SpawnOptions options;
  options.argv = argv;
  options.pipeOutput = true;
  options.stdinNull = true;
  int logFd = stderrLog.empty() ? -1 : openCapturedLog(stderrLog);
  struct LogCloser {
    int& fd;
    ~LogCloser() { closeFd(fd); }
  } closer{logFd};
  ChildProcess child = spawnProcess(options);
  Captured result;
  char buffer[65536];
  while (child.stdoutFd() >= 0 || child.stderrFd() >= 0) {
    pollfd fds[2] = {{child.stdoutFd(), POLLIN, 0}, {child.stderrFd(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      throw Error(fmt::format("{}: poll on its output: {}", argv.front(), std::strerror(errno)));
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0)
        continue;
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        const std::string_view data(buffer, static_cast<std::size_t>(n));
        if (i == 0) {
          result.out.append(data);
        } else {
          const int to = logFd >= 0 ? logFd : STDERR_FILENO;
          for (std::size_t done = 0; done < data.size();) {
            const ssize_t w = ::write(to, data.data() + done, data.size() - done);
            if (w < 0 && errno == EINTR)
              continue;
            if (w <= 0)
              break;  // a full disk loses the child's stderr, not its output or exit
            done += static_cast<std::size_t>(w);
          }
        }
      } else if (n == 0 || errno != EINTR) {
        i == 0 ? child.closeStdout() : child.closeStderr();
      }
    }
  }
  result.exit = child.wait();
  return result;
}

}  // namespace stretch::launcher
