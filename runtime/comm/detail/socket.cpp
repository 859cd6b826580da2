#include "runtime/comm/detail/socket.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <climits>
#include <fmt/format.h>

#include "runtime/comm/errors.hpp"

namespace stretch::comm::detail {

void UniqueFd::reset(int fd) noexcept {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = fd;
}

std::string errnoText(int err) {
  char buffer[256] = {};
  // GNU strerror_r returns the message (possibly a static string, not `buffer`).
  const char* text = ::strerror_r(err, buffer, sizeof buffer);
  return text != nullptr ? std::string(text) : fmt::format("errno {}", err);
}

std::string formatEndpoint(std::string_view host, int port) {
  if (host.find(':') != std::string_view::npos)
    return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

bool setNonBlocking(int fd) noexcept {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

bool setNoDelay(int fd) noexcept {
  const int one = 1;
  return ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0;
}

namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const noexcept { ::freeaddrinfo(info); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

// Resolves host:port; on failure returns null and sets errText.
AddrInfoPtr resolve(const std::string& host, int port, bool passive, std::string& errText) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    errText = fmt::format("cannot resolve host \"{}\": {}", host,
                          rc == EAI_SYSTEM ? errnoText(errno) : std::string(::gai_strerror(rc)));
    return nullptr;
  }
  return AddrInfoPtr(result);
}

}  // namespace

UniqueFd listenOn(const std::string& host, int port, std::string_view what) {
  const std::string endpoint = formatEndpoint(host, port);
  if (host.empty()) {
    throw StoreError(
        fmt::format("{}: host = \"\": expected an address to listen on (use "
                    "127.0.0.1 for single-node jobs, 0.0.0.0 for every interface)",
                    what));
  }
  if (port < 0 || port > 65535) {
    throw StoreError(fmt::format("{}: port = {}: expected 0 (any free port) to 65535", what, port));
  }
  std::string errText;
  AddrInfoPtr infos = resolve(host, port, /*passive=*/false, errText);
  if (!infos)
    throw StoreError(fmt::format("{}: cannot listen on {}: {}", what, endpoint, errText));
  int lastErr = 0;
  for (addrinfo* info = infos.get(); info != nullptr; info = info->ai_next) {
    UniqueFd fd(::socket(info->ai_family, info->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                         info->ai_protocol));
    if (!fd.valid()) {
      lastErr = errno;
      continue;
    }
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (info->ai_family == AF_INET6) {
      // "::1" must mean exactly ::1, not also the IPv4-mapped addresses.
      ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    }
    if (::bind(fd.get(), info->ai_addr, info->ai_addrlen) != 0 ||
        ::listen(fd.get(), SOMAXCONN) != 0) {
      lastErr = errno;
      continue;
    }
    return fd;
  }
  throw StoreError(fmt::format("{}: cannot listen on {}: {}", what, endpoint, errnoText(lastErr)));
}

int localPort(int fd) noexcept {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return -1;
  if (addr.ss_family == AF_INET)
    return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return -1;
}

int pollTimeoutMs(SteadyClock::time_point deadline) noexcept {
  const auto now = SteadyClock::now();
  if (deadline <= now)
    return 0;
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now).count();
  const long long ms = (us + 999) / 1000;
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

UniqueFd connectOnce(const std::string& host, int port, SteadyClock::time_point deadline, int& err,
                     std::string& errText) {
  err = 0;
  errText.clear();
  AddrInfoPtr infos = resolve(host, port, /*passive=*/false, errText);
  if (!infos)
    return UniqueFd();
  for (addrinfo* info = infos.get(); info != nullptr; info = info->ai_next) {
    UniqueFd fd(::socket(info->ai_family, info->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                         info->ai_protocol));
    if (!fd.valid()) {
      err = errno;
      continue;
    }
    setNoDelay(fd.get());
    if (::connect(fd.get(), info->ai_addr, info->ai_addrlen) == 0)
      return fd;
    if (errno != EINPROGRESS) {
      err = errno;
      continue;
    }
    pollfd pfd{fd.get(), POLLOUT, 0};
    int rc = 0;
    do {
      rc = ::poll(&pfd, 1, pollTimeoutMs(deadline));
    } while (rc < 0 && errno == EINTR);
    if (rc == 0) {
      err = ETIMEDOUT;
      continue;
    }
    if (rc < 0) {
      err = errno;
      continue;
    }
    int soError = 0;
    socklen_t len = sizeof soError;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &soError, &len) != 0)
      soError = errno;
    if (soError == 0)
      return fd;
    err = soError;
  }
  return UniqueFd();
}

namespace {

// Waits until fd is ready for `events` or the deadline passes.
IoStatus waitReady(int fd, short events, SteadyClock::time_point deadline, int& err) {
  for (;;) {
    pollfd pfd{fd, events, 0};
    const int rc = ::poll(&pfd, 1, pollTimeoutMs(deadline));
    if (rc > 0)
      return IoStatus::Ok;  // errors and hang-ups surface in the next send/recv
    if (rc == 0)
      return IoStatus::Timeout;
    if (errno != EINTR) {
      err = errno;
      return IoStatus::Error;
    }
  }
}

}  // namespace

IoStatus waitReadable(int fd, SteadyClock::time_point deadline, int& err) {
  return waitReady(fd, POLLIN, deadline, err);
}

IoStatus sendAll(int fd, const char* data, std::size_t size, SteadyClock::time_point deadline,
                 int& err) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::send(fd, data + done, size - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const IoStatus status = waitReady(fd, POLLOUT, deadline, err);
      if (status != IoStatus::Ok)
        return status;
      continue;
    }
    err = n < 0 ? errno : EPIPE;
    return (err == EPIPE || err == ECONNRESET) ? IoStatus::Closed : IoStatus::Error;
  }
  return IoStatus::Ok;
}

IoStatus recvAll(int fd, char* data, std::size_t size, SteadyClock::time_point deadline, int& err) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::recv(fd, data + done, size - done, 0);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) {
      err = 0;
      return IoStatus::Closed;
    }
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      const IoStatus status = waitReady(fd, POLLIN, deadline, err);
      if (status != IoStatus::Ok)
        return status;
      continue;
    }
    err = errno;
    return err == ECONNRESET ? IoStatus::Closed : IoStatus::Error;
  }
  return IoStatus::Ok;
}

}  // namespace stretch::comm::detail
