#include "runtime/launcher/token.hpp"

#include <random>

#include <fmt/format.h>

namespace stretch::launcher {

std::string randomToken() {
  std::random_device device;
  std::string token;
  for (int i = 0; i < 4; ++i)
    token += fmt::format("{:08x}", device());
  return token;
}

std::string maskToken(std::string text, const std::string& token) {
  if (token.empty())
    return text;
  for (auto at = text.find(token); at != std::string::npos; at = text.find(token, at))
    text.replace(at, token.size(), "<token>");
  return text;
}

}  // namespace stretch::launcher
