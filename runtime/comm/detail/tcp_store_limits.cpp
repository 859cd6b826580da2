#include "runtime/comm/detail/tcp_store_limits.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "runtime/comm/detail/printable.hpp"
#include "runtime/comm/detail/tcp_store_protocol.hpp"
#include "runtime/comm/errors.hpp"

namespace stretch::comm::detail::tcpstore {

void validateOptions(const TcpStoreOptions& options, std::string_view name) {
  if (options.maxKeyBytes == 0 || options.maxKeyBytes > kMaxValueLimit) {
    throw StoreError(fmt::format("{}: maxKeyBytes = {}: expected 1 to {}", name,
                                 options.maxKeyBytes, kMaxValueLimit));
  }
  if (options.maxValueBytes > kMaxValueLimit) {
    throw StoreError(fmt::format("{}: maxValueBytes = {}: expected at most {} (1 GiB)", name,
                                 options.maxValueBytes, kMaxValueLimit));
  }
  if (options.maxConnections < 1) {
    throw StoreError(fmt::format("{}: maxConnections = {}: expected a positive count", name,
                                 options.maxConnections));
  }
  if (options.token.size() > kMaxTokenBytes) {
    throw StoreError(fmt::format("{}: token of {} bytes: expected at most {} bytes", name,
                                 options.token.size(), kMaxTokenBytes));
  }
  if (!options.token.empty() && std::all_of(options.token.begin(), options.token.end(), [](char c) {
        return std::isspace(static_cast<unsigned char>(c)) != 0;
      })) {
    throw StoreError(fmt::format(
        "{}: token of {} bytes, all whitespace: expected no token (\"\") or the job's token "
        "(for launched jobs STRETCH_STORE_TOKEN; `stretch launch` draws a random one)",
        name, options.token.size()));
  }
  if (options.handshakeTimeout.count() <= 0 || options.timeout.count() < 0) {
    throw StoreError(fmt::format(
        "{}: handshakeTimeout = {}, timeout = {}: expected positive "
        "durations",
        name, formatDuration(options.handshakeTimeout), formatDuration(options.timeout)));
  }
}

std::size_t frameLimit(const TcpStoreOptions& options) {
  return 2 * options.maxValueBytes + options.maxKeyBytes + kFrameOverhead;
}

std::optional<std::string> keyProblem(std::string_view key, std::size_t maxKeyBytes) {
  if (key.empty())
    return std::string("key = \"\": expected a non-empty key");
  if (key.size() > maxKeyBytes) {
    return fmt::format("key \"{}\" of {} bytes exceeds the {}-byte limit", printable(key),
                       key.size(), maxKeyBytes);
  }
  return std::nullopt;
}

std::optional<std::string> valueProblem(std::string_view key, std::string_view value,
                                        std::size_t maxValueBytes) {
  if (value.size() > maxValueBytes) {
    return fmt::format("value of {} bytes for key \"{}\" exceeds the {}-byte limit", value.size(),
                       printable(key), maxValueBytes);
  }
  return std::nullopt;
}

}  // namespace stretch::comm::detail::tcpstore
