#include "runtime/agent/local_workers.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <fmt/format.h>

#include "runtime/common/error.hpp"

extern char** environ;

namespace stretch::agent {

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
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos)
      env[entry.substr(0, eq)] = entry.substr(eq + 1);
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

WorkerExit exitOf(const WorkerProcessSpec& spec, int status) {
  WorkerExit e;
  e.localRank = spec.localRank;
  e.globalRank = spec.globalRank;
  if (WIFSIGNALED(status)) {
    e.signaled = true;
    e.exitCode = 128 + WTERMSIG(status);
  } else {
    e.exitCode = WEXITSTATUS(status);
  }
  return e;
}

}  // namespace

std::string WorkerExit::describe() const {
  if (signaled) {
    const int sig = exitCode - 128;
    return fmt::format("killed by signal {} ({})", sig, strsignal(sig));
  }
  return fmt::format("exit status {}", exitCode);
}

LocalWorkerGroup::~LocalWorkerGroup() {
  stop(std::chrono::seconds(2));
}

void LocalWorkerGroup::start(const std::vector<std::string>& argv,
                             const std::vector<WorkerProcessSpec>& workers,
                             const std::filesystem::path& logDir, int attempt) {
  if (argv.empty())
    throw ConfigError("worker command: empty (expected a program and its arguments)");
  const pid_t agent = ::getpid();
  std::filesystem::path dir;
  if (!logDir.empty()) {
    dir = logDir / fmt::format("attempt_{}", attempt);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
      throw IoError(fmt::format("--log_dir {}: cannot create {}: {}", logDir.string(), dir.string(),
                                ec.message()));
  }
  for (const auto& spec : workers) {
    ExecArgs args = buildExecArgs(argv, spec.env);
    int logFd = -1;
    if (!dir.empty()) {
      const auto file = dir / fmt::format("rank_{}.log", spec.globalRank);
      logFd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (logFd < 0)
        throw IoError(fmt::format("{}: cannot create the worker log: {}", file.string(),
                                  std::strerror(errno)));
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int err = errno;
      if (logFd >= 0)
        ::close(logFd);
      throw Error(
          fmt::format("cannot start worker {}: fork: {}", spec.globalRank, std::strerror(err)));
    }
    if (pid == 0) {
      // Child: only async-signal-safe calls until exec.
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != agent)
        ::_exit(127);  // the agent died between fork and prctl
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::signal(SIGPIPE, SIG_DFL);
      if (logFd >= 0) {
        ::dup2(logFd, STDOUT_FILENO);
        ::dup2(logFd, STDERR_FILENO);
      }
      ::execvpe(args.argv[0], args.argv.data(), args.envp.data());
      const char* msg = "stretch agent: cannot execute the worker program: ";
      (void)!::write(STDERR_FILENO, msg, std::strlen(msg));
      const char* reason = std::strerror(errno);
      (void)!::write(STDERR_FILENO, reason, std::strlen(reason));
      (void)!::write(STDERR_FILENO, "\n", 1);
      ::_exit(127);
    }
    ::setpgid(pid, pid);  // also from the parent, so stop() works even before the child ran
    if (logFd >= 0)
      ::close(logFd);
    workers_.push_back({spec, pid, false});
  }
}

std::vector<WorkerExit> LocalWorkerGroup::poll() {
  std::vector<WorkerExit> exits;
  for (auto& w : workers_) {
    if (w.reaped)
      continue;
    int status = 0;
    const pid_t rc = ::waitpid(w.pid, &status, WNOHANG);
    if (rc == w.pid) {
      w.reaped = true;
      exits.push_back(exitOf(w.spec, status));
    }
  }
  return exits;
}

void LocalWorkerGroup::stop(std::chrono::milliseconds grace) {
  bool any = false;
  for (auto& w : workers_) {
    if (!w.reaped) {
      ::kill(-w.pid, SIGTERM);
      any = true;
    }
  }
  if (any) {
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (running() > 0 && std::chrono::steady_clock::now() < deadline) {
      poll();
      if (running() > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  for (auto& w : workers_) {
    // The group too: a worker's children die with it even when the worker exited on SIGTERM.
    ::kill(-w.pid, SIGKILL);
    if (!w.reaped) {
      int status = 0;
      ::waitpid(w.pid, &status, 0);
      w.reaped = true;
    }
  }
  workers_.clear();
}

int LocalWorkerGroup::running() const {
  int n = 0;
  for (const auto& w : workers_)
    n += w.reaped ? 0 : 1;
  return n;
}

std::vector<pid_t> LocalWorkerGroup::pids() const {
  std::vector<pid_t> out;
  for (const auto& w : workers_) {
    if (!w.reaped)
      out.push_back(w.pid);
  }
  return out;
}

}  // namespace stretch::agent
