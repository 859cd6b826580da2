#pragma once
// The limits both ends of a TCPStore enforce (runtime/comm/tcp_store.hpp): option validation,
// the frame cap, key and value sizes. The client checks before sending so that the caller gets
// the error without a round trip; the server checks again because a client may not be ours.
// Private to runtime/comm.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/comm/tcp_store.hpp"

namespace stretch::comm::detail::tcpstore {

// The largest key and value limits TcpStoreOptions may ask for (1 GiB).
inline constexpr std::size_t kMaxValueLimit = std::size_t{1} << 30;

// Throws StoreError naming `name` and the offending option.
void validateOptions(const TcpStoreOptions& options, std::string_view name);
// The longest frame a request within the options' key and value limits can need.
std::size_t frameLimit(const TcpStoreOptions& options);
// nullopt when the key / value is acceptable, else the reason (naming the key).
std::optional<std::string> keyProblem(std::string_view key, std::size_t maxKeyBytes);
std::optional<std::string> valueProblem(std::string_view key, std::string_view value,
                                        std::size_t maxValueBytes);

}  // namespace stretch::comm::detail::tcpstore
