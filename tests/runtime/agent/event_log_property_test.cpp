// Every event-log line is JSON any parser reads, and valid UTF-8 text comes back unchanged
// (rapidcheck; replay with RC_PARAMS="seed=N").

#include <rapidcheck.h>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/agent/event_log.hpp"
#include "runtime/common/strings.hpp"

namespace stretch::agent {
namespace {

// UTF-8 of code points drawn from ASCII (controls included), Latin, CJK and emoji.
rc::Gen<std::string> genUtf8() {
  return rc::gen::map(
      rc::gen::container<std::vector<std::uint32_t>>(rc::gen::oneOf(
          rc::gen::inRange<std::uint32_t>(0, 0x80), rc::gen::inRange<std::uint32_t>(0x80, 0x800),
          rc::gen::inRange<std::uint32_t>(0x4E00, 0x9FFF),
          rc::gen::inRange<std::uint32_t>(0x1F600, 0x1F650))),
      [](const std::vector<std::uint32_t>& cps) {
        std::string out;
        for (const std::uint32_t cp : cps) {
          if (cp < 0x80) {
            out += static_cast<char>(cp);
          } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          }
        }
        return out;
      });
}

RC_GTEST_PROP(EventLogProperty, ValidUtf8RoundTrips, ()) {
  EventRecord r;
  r.time = Time{*rc::gen::arbitrary<std::int64_t>()};
  r.event = *genUtf8();
  r.reason = *genUtf8();
  r.nodes = *rc::gen::container<std::vector<std::string>>(genUtf8());
  if (*rc::gen::arbitrary<bool>()) {
    r.generation = *rc::gen::arbitrary<std::uint64_t>();
    r.worldSize = *rc::gen::arbitrary<std::int64_t>();
    r.restartCount = *rc::gen::arbitrary<std::int64_t>();
    r.resumeStep = *rc::gen::arbitrary<std::int64_t>();
    r.exitCode = *rc::gen::arbitrary<int>();
    r.batch = config::BatchTriple{*rc::gen::arbitrary<std::int64_t>(),
                                  *rc::gen::arbitrary<std::int64_t>(),
                                  *rc::gen::arbitrary<std::int64_t>()};
  }
  const std::string line = toJsonLine(r);
  RC_ASSERT(line.find('\n') == std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(line);
  RC_ASSERT(j.at("time_ns").get<std::int64_t>() == r.time.count());
  RC_ASSERT(j.at("event").get<std::string>() == r.event);
  RC_ASSERT(j.value("reason", std::string()) == r.reason);
  RC_ASSERT(j.value("nodes", std::vector<std::string>()) == r.nodes);
  if (r.generation) {
    RC_ASSERT(j.at("generation").get<std::uint64_t>() == *r.generation);
    RC_ASSERT(j.at("world_size").get<std::int64_t>() == *r.worldSize);
    RC_ASSERT(j.at("exit_code").get<int>() == *r.exitCode);
    RC_ASSERT(j.at("batch").at("gradient_accumulation_steps").get<std::int64_t>() ==
              r.batch->gradientAccumulation);
  }
}

RC_GTEST_PROP(EventLogProperty, AnyBytesGiveParsableJson, ()) {
  const std::string bytes = *rc::gen::container<std::string>(rc::gen::arbitrary<char>());
  const std::string literal = jsonQuote(bytes);
  const nlohmann::json j = nlohmann::json::parse(literal);  // throws on invalid JSON or UTF-8
  RC_ASSERT(j.is_string());
}

}  // namespace
}  // namespace stretch::agent
