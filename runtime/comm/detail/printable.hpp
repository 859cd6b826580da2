#pragma once
// How the stores (TCPStore, RedisStore) show keys and values in error messages: keys and values
// are bytes, so they are escaped (\xNN for anything but printable ASCII, backslash and double
// quote) and cut short after 80 bytes with the full size appended. Private to runtime/comm and its
// store modules.

#include <cstddef>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace stretch::comm::detail {

inline std::string printable(std::string_view text) {
  constexpr std::size_t kMaxShown = 80;
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\' && c != '"')
      out.push_back(static_cast<char>(c));
    else
      out += fmt::format("\\x{:02x}", c);
  }
  if (text.size() > kMaxShown)
    out += fmt::format("...({} bytes)", text.size());
  return out;
}

}  // namespace stretch::comm::detail
