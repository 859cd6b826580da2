#pragma once
// Worker output into rank log files through the agent. Each worker writes its stdout and stderr
// into one pipe; a thread of the agent drains every pipe into its log file. A write that fails
// (a full disk, a quota, an I/O error) is reported once per file, loudly, and the pipe keeps
// being drained, so the worker never blocks on its output and trains on; lost() then says what
// was lost, for the launcher's exit status. A file that frees up takes the output again.
//
// Thread-safe: the agent's thread adds sinks and asks; the pump's own thread moves the bytes.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace stretch::launcher {

class LogPump {
 public:
  LogPump();
  // Drains what the pipes hold (their writers are gone: the workers were stopped) and ends.
  ~LogPump();
  LogPump(const LogPump&) = delete;
  LogPump& operator=(const LogPump&) = delete;

  struct Sink {
    int id = -1;
    int writeFd = -1;  // the pipe's write end, for the child's stdout and stderr; the caller
                       // closes it once the child started
    // What was wrong with the log file, already reported on the agent's stderr (for the event
    // log); empty when nothing was.
    std::string problem;
  };
  // Opens `path` for appending (created when missing; never through a link or anything else
  // planted there: openLogFile in process.hpp) and a pipe into it. A log that cannot be created
  // (a full disk, a directory that is not there) is reported, and the pipe is drained all the
  // same with its bytes counted as lost (lost() lists it): logging never stops a worker. Error
  // only when the pipe cannot be made.
  Sink add(const std::string& path);
  // Waits up to `timeout` until every writer of sink `id` has closed the pipe and its bytes are
  // in the file (a worker's children may hold it longer). True when they are.
  bool settle(int id, std::chrono::milliseconds timeout);
  // One line per log file that lost output: "<path>: <reason>; <N> bytes lost".
  std::vector<std::string> lost() const;

 private:
  struct Source {
    std::string path;
    int readFd = -1;
    int fileFd = -1;
    std::uint64_t lostBytes = 0;
    std::string error;  // the first write error
    bool ended = false;
  };
  void run();
  // Moves what `s` holds into its file; false at the pipe's end.
  bool drain(Source& s);
  void write(Source& s, const char* data, std::size_t size);
  void end(Source& s);

  mutable std::mutex mutex_;
  std::condition_variable endedCv_;
  std::map<int, Source> sources_;
  int nextId_ = 0;
  int wakeFd_ = -1;  // eventfd: a sink was added, or the pump stops
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace stretch::launcher
