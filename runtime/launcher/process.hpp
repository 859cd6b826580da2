#pragma once
// The one place where Stretch starts programs: every worker, node agent, runner (ssh, pdsh,
// mpirun, ip netns exec), benchmark rank and calibration run goes through spawnProcess. Nothing
// else in cli/, runtime/, sim/, planner/ or gui/ calls fork or exec (the layering test holds it).
//
//  - spawnProcess() starts argv[0] (looked up in PATH when it has no '/'), with `env` added to
//    (and overriding) this process's environment, as posix_spawn does: a child that shares this
//    process's memory on a stack of its own until it execs (clone with CLONE_VM | CLONE_VFORK),
//    so no page tables are copied (the launcher starts 2,048 node agents in a fraction of the
//    time fork took). Only async-signal-safe calls run between clone and exec, with every signal
//    blocked until the handlers are reset, so it is safe from a process with threads.
//  - In the child, before exec: its own process group (so signal() reaches everything the
//    program starts), the parent-death signal (the kernel sends it when the thread that called
//    spawnProcess ends, so a launcher killed with SIGKILL leaves no orphans), the default signal
//    mask and SIGPIPE disposition, and the standard streams the options ask for.
//  - An exec failure shows up as exit code 127, with "<execErrorPrefix>cannot execute
//    <argv[0]>: <reason>" on the child's stderr (its log file when it has one).
//
// Errors: ConfigError for an empty argv; IoError when the log file cannot be opened; Error when
// pipe or clone fail. ChildProcess is not thread-safe: one thread owns it. Its destructor kills
// the process group (SIGKILL) and reaps the child when it is still running (a guarded group,
// groupDiesWithParent, also after the child ended): a ChildProcess never leaks a process.

#include <chrono>
#include <csignal>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace stretch::launcher {

struct SpawnOptions {
  std::vector<std::string> argv;           // the program and its arguments
  std::map<std::string, std::string> env;  // added to, and overriding, this environment
  // Where stdout and stderr go: inherited (the default); appended to logFile; or to two pipes the
  // caller reads (ChildProcess::stdoutFd/stderrFd). logFile and pipeOutput exclude each other.
  std::filesystem::path logFile;
  bool pipeOutput = false;
  // Or both into this descriptor (a LogPump's pipe), which the caller keeps and closes.
  int outputFd = -1;
  // stdin: inherited (the default); /dev/null; or a pipe that receives stdinData (then closed).
  bool stdinNull = false;
  std::optional<std::string> stdinData;
  int parentDeathSignal = SIGKILL;  // 0: the child may outlive this process
  bool ownProcessGroup = true;
  // With ownProcessGroup: the child's whole process group is SIGKILLed when this process ends,
  // however it ends (SIGKILL included), by a guard process (see guardProcessGroup). The
  // parent-death signal reaches the child only; this reaches what it started (a wrapper
  // script's training process, data-loader workers). Forgotten when the ChildProcess goes.
  bool groupDiesWithParent = false;
  // A signal the child starts with ignored (0: none). Workers start with the live-generation
  // signal (SIGUSR1) ignored: a program that speaks the live protocol installs its handler, and
  // a wrapper before it (`sh -c`), or a program that does not, is not killed when the agent
  // signals the worker's process group.
  int ignoredSignal = 0;
  std::string execErrorPrefix = "stretch: ";
};

// A log file the launcher names in a user's directory (a rank log, a spawn's logFile), opened
// for appending without ever writing through what someone planted there: O_NOFOLLOW, and a
// symbolic link, FIFO, socket or hard-linked file at the path is removed (never followed) and
// the file created afresh with O_EXCL. A regular file of its own is appended to (an earlier run's
// log), and so is a character device (only root can make one there: /dev/null); a block device
// or a directory is refused. fd: the descriptor (O_APPEND, close-on-exec), or -1; note: what was
// wrong at the path (with fd -1, why it could not be opened, as strerror says), empty when nothing
// was.
struct OpenedLog {
  int fd = -1;
  std::string note;
};
OpenedLog openLogFile(const std::string& path);

// How a process ended.
struct ProcessExit {
  int code = 0;  // the exit status, or 128 + signal number when a signal killed it
  bool signaled = false;
  int signal() const { return signaled ? code - 128 : 0; }
  bool ok() const { return !signaled && code == 0; }
  std::string describe() const;  // "exit status 3", "killed by signal 9 (Killed)"
  static ProcessExit fromWaitStatus(int status);
};

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // Read ends of the output pipes (pipeOutput), -1 otherwise or once closed. The caller reads
  // them; closeOutput() closes them (the destructor does too).
  int stdoutFd() const { return outFd_; }
  int stderrFd() const { return errFd_; }
  void closeStdout();
  void closeStderr();

  // Reaps the child without blocking; returns its exit the first time it is seen, nullopt
  // while it runs and on later calls.
  std::optional<ProcessExit> poll();
  // Blocks until the child ends (reaped once; later calls return the same exit).
  ProcessExit wait();
  bool running() const { return pid_ > 0 && !exit_; }
  // The exit, once reaped.
  const std::optional<ProcessExit>& exit() const { return exit_; }
  // Sends `sig` to the child's process group (its own group) or to the child; the group also
  // after the child itself was reaped, so that what it started can be reached.
  void signal(int sig) const;

 private:
  friend ChildProcess spawnProcess(const SpawnOptions& options);
  void release();
  pid_t pid_ = -1;
  bool group_ = false;
  bool guarded_ = false;
  int outFd_ = -1;
  int errFd_ = -1;
  std::optional<ProcessExit> exit_;
};

ChildProcess spawnProcess(const SpawnOptions& options);

// The orphan guard: a small process forked at the first call (per process) that holds a list of
// process groups and SIGKILLs every group still listed once this process has ended, whatever
// ended it: it notices by the end of a socket this process holds. It ignores the terminal's
// signals and runs only async-signal-safe calls. forget: the group was stopped (or its id may
// be reused soon).
void guardProcessGroup(pid_t pgid);
void forgetProcessGroup(pid_t pgid);
// The event log the guard appends an "interrupted" record to when it had groups to kill (the
// launcher ended without stopping its workers: SIGKILL, a crash); forgetEventLog: none any more
// (the job's final record is written, the groups left are being stopped).
void guardEventLog(const std::string& path);
void forgetEventLog();
// What the guarded groups are, for that record ("killed 2 <what> process group(s)"; at most 63
// characters): "worker" unless said otherwise (a multi-node launcher guards its node agents').
void nameGuardedGroups(std::string_view what);

// Waits up to `timeout` for every process to end (reaping them); true when all have.
bool waitForAll(std::vector<ChildProcess*> processes, std::chrono::milliseconds timeout);

// Stops the processes: SIGTERM to each running one's process group, SIGKILL after `grace` to
// those still running, then SIGKILL to every group (a program's children die with it even when
// it exited on SIGTERM), and reaps them all. Returns once every process has been reaped.
void stopAll(std::vector<ChildProcess*> processes, std::chrono::milliseconds grace);

// Runs argv to its end with stdout captured (stderr appended to `stderrLog`, or inherited when
// it is empty) and returns stdout and the exit. The log is never written through a symbolic
// link (O_NOFOLLOW), FIFO or hard link planted at its path: IoError naming the path instead,
// before argv is started.
struct Captured {
  std::string out;
  ProcessExit exit;
};
Captured runCaptured(const std::vector<std::string>& argv, const std::filesystem::path& stderrLog);

}  // namespace stretch::launcher
