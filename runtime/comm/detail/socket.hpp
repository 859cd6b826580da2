#pragma once
// POSIX socket and file-descriptor helpers shared by the TCPStore server and client (and by the
// tests that play hostile clients). Private to runtime/comm: not part of the public interface.
//
// Nothing here throws except listenOn(); the I/O helpers report an IoStatus plus errno so that
// callers can word their own errors (they know the store, the operation and the peer).

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace stretch::comm::detail {

using SteadyClock = std::chrono::steady_clock;

// Owns one file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other)
      reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  int release() noexcept { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

// strerror text for an errno value, thread-safe ("Connection refused").
std::string errnoText(int err);

// "host:port", with brackets around IPv6 literals ("[::1]:29500").
std::string formatEndpoint(std::string_view host, int port);

bool setNonBlocking(int fd) noexcept;
bool setNoDelay(int fd) noexcept;

// A non-blocking, close-on-exec listening socket bound to exactly host:port (port 0: the kernel
// picks one). Throws StoreError "<what>: cannot listen on host:port: <reason>".
UniqueFd listenOn(const std::string& host, int port, std::string_view what);
// The local port of a bound socket, or -1.
int localPort(int fd) noexcept;

// One connection attempt to host:port (every address host resolves to, in order) that gives up
// at `deadline`. Returns a connected, non-blocking socket with TCP_NODELAY set, or an invalid fd
// with `err` set to the errno of the last failure (ETIMEDOUT at the deadline, EHOSTUNREACH-like
// codes from the kernel; resolver failures set errText instead and err to 0).
UniqueFd connectOnce(const std::string& host, int port, SteadyClock::time_point deadline, int& err,
                     std::string& errText);

enum class IoStatus { Ok, Timeout, Closed, Error };

// Sends all `size` bytes of a non-blocking socket before `deadline` (MSG_NOSIGNAL: a closed peer
// gives Closed/Error, never SIGPIPE). On Error, `err` holds errno.
IoStatus sendAll(int fd, const char* data, std::size_t size, SteadyClock::time_point deadline,
                 int& err);
// Receives exactly `size` bytes before `deadline`; Closed when the peer shut down first.
IoStatus recvAll(int fd, char* data, std::size_t size, SteadyClock::time_point deadline, int& err);

// Waits until the socket is readable (data, end of stream or error) without consuming anything.
IoStatus waitReadable(int fd, SteadyClock::time_point deadline, int& err);

// Milliseconds from now to `deadline` for poll(): 0 when passed, rounded up, capped at INT_MAX.
int pollTimeoutMs(SteadyClock::time_point deadline) noexcept;

}  // namespace stretch::comm::detail
