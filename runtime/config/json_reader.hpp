#pragma once
// Private to runtime/config: an adaptor over nlohmann::json that parses Stretch's relaxed JSON
// (comments, trailing commas) strictly enough for configs, and reads typed values while tracking
// the JSON path, so that every error names "<path> = <value as written>: expected <what>".
//
// Never include this from a public header: nlohmann is a private dependency of stretch_config.
// Everything here throws only stretch::Error children (ConfigError, or ElasticityConfigError for
// readers created with ErrorKind::Elasticity).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace stretch::config::detail {

using Json = nlohmann::json;

// Deeper nesting is rejected while parsing, before any recursive code sees the document.
inline constexpr std::size_t kMaxNestingDepth = 64;
// Unknown / ignored key warnings list at most this many paths, then "and N more".
inline constexpr std::size_t kMaxListedKeys = 50;

// A parsed document. Integers are stored as int64 (literals outside int64 are rejected), floats
// as finite doubles whose literal text is kept for error messages.
struct JsonDocument {
  Json root;
  std::unordered_map<std::string, std::string> floatText;  // path → literal as written
};

// Replaces every comma that is followed (ignoring whitespace and comments) by '}' or ']' with a
// space, outside strings and comments. A comma directly after '[', '{' or another comma is left
// alone, so "[,]" and "[1,,]" stay errors. Offsets are unchanged, so line:column positions in
// later syntax errors still point into the original text.
std::string removeTrailingCommas(std::string_view text);

// Parses relaxed JSON. pathPrefix ("" or "elasticity") is prepended to every recorded path.
// Throws ConfigError: "<source>:<line>:<col>: invalid JSON: <reason>", duplicate keys, nesting
// deeper than kMaxNestingDepth, integers outside int64, floats outside the double range, a top
// level that is not an object.
JsonDocument parseJsonDocument(std::string_view text, std::string_view source,
                               std::string_view pathPrefix);

enum class ErrorKind { Config, Elasticity };

// Throws the error class that matches kind.
[[noreturn]] void throwDetail(ErrorKind kind, std::string path, std::string value,
                              std::string expected);

// Which keys an object may hold. known: read by Stretch. ignored: DeepSpeed keys Stretch does not
// use (an entry ending in '*' matches every key with that prefix).
struct KeySet {
  std::span<const std::string_view> known;
  std::span<const std::string_view> ignored;
};

// Collects unknown and ignored keys across a whole parse and turns them into one warning each.
// Only the first kMaxListedKeys of each kind are kept (the rest are counted), so that a hostile
// document with a million keys costs neither memory nor did-you-mean searches.
class KeyReport {
 public:
  // True while another unknown key would still be listed (callers skip the hint search if not).
  bool listsMoreUnknown() const noexcept { return unknown_.size() < kMaxListedKeys; }
  void addUnknown(std::string path, std::optional<std::string> hint);
  void addIgnored(std::string path);
  std::vector<std::string> warnings() const;

 private:
  std::vector<std::string> unknown_;  // already formatted, with the hint
  std::vector<std::string> ignored_;
  std::size_t unknownCount_ = 0;
  std::size_t ignoredCount_ = 0;
};

struct IntRule {
  std::int64_t min;
  std::int64_t max;
  std::string_view expected;        // "a positive integer", "an integer in [0, 3]"
  bool allowIntegralFloat = false;  // sizes DeepSpeed users write as 5e8
  bool nullIsAbsent = false;
};

struct NumberRule {
  double min;
  bool minExclusive;
  std::string_view expected;  // "a number >= 0"
};

// Reads one JSON object. Holds references: the document and report must outlive the reader.
class ObjectReader {
 public:
  ObjectReader(const JsonDocument& document, const Json& object, std::string path, ErrorKind kind,
               KeyReport& report);

  const std::string& path() const noexcept { return path_; }
  ErrorKind kind() const noexcept { return kind_; }
  std::string childPath(std::string_view key) const;

  // The value at key, or nullptr when absent.
  const Json* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  std::optional<bool> readBool(std::string_view key) const;
  std::optional<std::int64_t> readInt(std::string_view key, const IntRule& rule) const;
  // A finite number (integers accepted) >= / > rule.min.
  std::optional<double> readNumber(std::string_view key, const NumberRule& rule) const;
  std::optional<std::string> readString(std::string_view key) const;

  // The nested object at key, read with childKind; error when it is present but not an object.
  std::optional<ObjectReader> readObject(std::string_view key, ErrorKind childKind,
                                         bool nullIsAbsent = false) const;

  // The value as the user wrote it: float literals verbatim, strings quoted, containers compact
  // and shortened.
  std::string written(const Json& value, const std::string& valuePath) const;

  [[noreturn]] void fail(std::string_view key, std::string_view expected) const;
  [[noreturn]] void failValue(const std::string& valuePath, const Json& value,
                              std::string_view expected) const;

  // Reports every key of the object that is not in keys.known.
  void reportKeys(const KeySet& keys) const;

  const JsonDocument& document() const noexcept { return *document_; }
  KeyReport& report() const noexcept { return *report_; }

 private:
  const JsonDocument* document_;
  const Json* object_;
  std::string path_;
  ErrorKind kind_;
  KeyReport* report_;
};

// Reads an element of an array as an integer (used for list-valued keys).
std::int64_t readIntElement(const ObjectReader& owner, const Json& value,
                            const std::string& valuePath, const IntRule& rule);

// Shortens text for messages (fuzzed input can hold megabyte strings).
std::string shorten(std::string_view text, std::size_t limit = 80);

}  // namespace stretch::config::detail
