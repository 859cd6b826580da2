#pragma once
// Reading the live module's small text records (device plans, what a member holds): fields split
// on one separator, and non-negative decimal numbers with nothing around them.

#include <cctype>
#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>
#include <vector>

namespace stretch::live::detail {

// A non-negative decimal number with nothing around it (no sign, no space), or nullopt.
template <typename Int>
std::optional<Int> number(std::string_view text) {
  Int value{};
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text.front())))
    return std::nullopt;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size())
    return std::nullopt;
  return value;
}

// The parts of `text` between `separator`s, empty ones included.
inline std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const auto end = text.find(separator, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string_view::npos)
      return parts;
    start = end + 1;
  }
}

}  // namespace stretch::live::detail
