// Where a worker finds its agent's store (runtime/live/agent_store.hpp): STRETCH_AGENT_STORE and
// STRETCH_STORE_TOKEN, read once for the C++ engine and stretch.torch alike.

#include "runtime/live/agent_store.hpp"

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "runtime/common/error.hpp"

namespace stretch::live {
namespace {

// Sets (or unsets, for nullptr) the two variables for one test and restores them after.
class AgentStoreVariables {
 public:
  AgentStoreVariables(const char* address, const char* token) {
    set("STRETCH_AGENT_STORE", address);
    set("STRETCH_STORE_TOKEN", token);
  }
  ~AgentStoreVariables() {
    ::unsetenv("STRETCH_AGENT_STORE");
    ::unsetenv("STRETCH_STORE_TOKEN");
  }
  AgentStoreVariables(const AgentStoreVariables&) = delete;
  AgentStoreVariables& operator=(const AgentStoreVariables&) = delete;

 private:
  static void set(const char* name, const char* value) {
    if (value == nullptr)
      ::unsetenv(name);
    else
      ::setenv(name, value, 1);
  }
};

TEST(AgentStore, HostPortAndTokenComeFromTheLaunchersVariables) {
  AgentStoreVariables v("10.0.0.7:29511", "s3cret-token");
  const auto options = agentStoreFromEnvironment();
  ASSERT_TRUE(options);
  EXPECT_EQ(options->host, "10.0.0.7");
  EXPECT_EQ(options->port, 29511);
  EXPECT_EQ(options->token, "s3cret-token");
  EXPECT_FALSE(options->isServer);
}

TEST(AgentStore, AnIPv6HostKeepsItsColonsAndAMissingTokenIsEmpty) {
  AgentStoreVariables v("::1:4000", nullptr);
  const auto options = agentStoreFromEnvironment();
  ASSERT_TRUE(options);
  EXPECT_EQ(options->host, "::1");
  EXPECT_EQ(options->port, 4000);
  EXPECT_EQ(options->token, "");
}

TEST(AgentStore, NoVariableMeansNoLiveCapableLauncher) {
  {
    AgentStoreVariables v(nullptr, "t");
    EXPECT_FALSE(agentStoreFromEnvironment());
  }
  AgentStoreVariables v("", "t");
  EXPECT_FALSE(agentStoreFromEnvironment());
}

TEST(AgentStore, AValueThatIsNotHostPortNamesTheVariable) {
  for (const char* bad : {"localhost", ":29500", "host:0", "host:65536", "host:port", "host:"}) {
    AgentStoreVariables v(bad, nullptr);
    try {
      agentStoreFromEnvironment();
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("STRETCH_AGENT_STORE"), std::string::npos) << what;
      EXPECT_NE(what.find("HOST:PORT"), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace stretch::live
