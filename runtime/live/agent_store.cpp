#include "runtime/live/agent_store.hpp"

#include <cstdlib>
#include <exception>
#include <string>

#include "runtime/common/error.hpp"
#include "runtime/common/worker_variables.hpp"

namespace stretch::live {

std::optional<comm::TcpStoreOptions> agentStoreFromEnvironment() {
  const char* address = std::getenv(worker_env::kAgentStore);
  if (address == nullptr || *address == '\0')
    return std::nullopt;
  const std::string text = address;
  const auto colon = text.rfind(':');
  int port = 0;
  try {
    if (colon != std::string::npos && colon > 0)
      port = std::stoi(text.substr(colon + 1));
  } catch (const std::exception&) {
    port = 0;
  }
  if (port < 1 || port > 65535)
    throw ConfigError(ErrorDetail{worker_env::kAgentStore, text, "HOST:PORT"});
  comm::TcpStoreOptions options;
  options.host = text.substr(0, colon);
  options.port = port;
  const char* token = std::getenv(worker_env::kStoreToken);
  options.token = token != nullptr ? token : "";
  return options;
}

}  // namespace stretch::live
