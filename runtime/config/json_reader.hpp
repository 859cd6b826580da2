#pragma once
// The one JSON reader of Stretch: parses JSON text and reads typed values out of objects while
// tracking the key path, so that every bad value is reported in the one error format,
//   <path> = <value as written>: expected <what>
// ("job.checkpoint.interval_minutes = -3: expected a positive number of minutes"), with a key
// that is absent shown as "(missing)". Used by runtime/config (DeepSpeed configs), sim/
// (scenario files, cluster presets, failure traces and cause tables) and planner/ (job files).
//
// Two parsers, one error format for bad syntax ("<source>:<line>:<col>: invalid JSON: <reason>"):
// parseJsonDocument for DeepSpeed configs (comments and trailing commas allowed, duplicate keys
// and integers outside int64 rejected, float literals kept for messages) and parseJson for the
// simulator's and planner's files (standard JSON as nlohmann reads it, comments on request).
// Two ways to report keys nobody reads: reportKeys (configs: the known and ignored DeepSpeed keys
// are listed, unknown ones become one warning with "did you mean") and warnUnread (scenario and
// job files: every key never looked up becomes "<path>: unknown key, ignored").
//
// Namespace stretch::config::json. Only for the modules that may use nlohmann (runtime/config's
// .cpp files, sim/, planner/); no other public header of runtime/config includes it. Everything
// here throws only stretch::Error children (ConfigError, or ElasticityConfigError for readers
// created with ErrorKind::Elasticity).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace stretch::config::json {

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

// Parses standard JSON (RFC 8259 as nlohmann reads it: any top-level value, the last of duplicate
// keys wins, integers up to 2^64-1; comments only with allowComments). Throws ConfigError
// "<source>:<line>:<col>: invalid JSON: <reason>" (without the position when the parser gives
// none, e.g. a number out of the double range).
Json parseJson(std::string_view text, std::string_view source, bool allowComments = false);

// The value shown for a key that must be present and is not.
inline constexpr std::string_view kMissing = "(missing)";

enum class ErrorKind { Config, Elasticity };

// Throws the error class that matches kind.
[[noreturn]] void throwDetail(ErrorKind kind, std::string path, std::string value,
                              std::string expected);

// Throws "<path> = <value as compact JSON, shortened>: expected <expected>" for a value outside
// any object reader (a whole file that must be an array, an element of a list).
[[noreturn]] void throwValue(std::string path, const Json& value, std::string_view expected,
                             ErrorKind kind = ErrorKind::Config);

// "path[index]", the path of an array element.
std::string indexPath(std::string_view path, std::size_t index);

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
  std::string_view expected;                             // "a number >= 0"
  double max = std::numeric_limits<double>::infinity();  // inclusive
};

// Reads one JSON object. Holds references: the value (and the document and report, when given)
// must outlive the reader. Every lookup (find, has, the read functions, accept) marks the key as
// read for warnUnread. Copyable; not thread-safe (the read marks are not).
class ObjectReader {
 public:
  // A reader over a parsed config document: float literals are quoted as written, unknown keys
  // go to report (reportKeys).
  ObjectReader(const JsonDocument& document, const Json& object, std::string path, ErrorKind kind,
               KeyReport& report);
  // A reader over any JSON value (scenario and job files): throws "<path> = <value>: expected
  // <expected>" when value is not an object. Unknown keys: warnUnread.
  ObjectReader(const Json& value, std::string path, std::string_view expected = "a JSON object",
               ErrorKind kind = ErrorKind::Config);
  ObjectReader(Json&& value, std::string path, std::string_view expected = "a JSON object",
               ErrorKind kind = ErrorKind::Config) = delete;  // would dangle

  const std::string& path() const noexcept { return path_; }
  ErrorKind kind() const noexcept { return kind_; }
  std::string childPath(std::string_view key) const;

  // The value at key, or nullptr when absent.
  const Json* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  std::optional<bool> readBool(std::string_view key) const;
  std::optional<std::int64_t> readInt(std::string_view key, const IntRule& rule) const;
  // A finite number (integers accepted) >= / > rule.min and <= rule.max.
  std::optional<double> readNumber(std::string_view key, const NumberRule& rule) const;
  std::optional<std::string> readString(std::string_view key) const;

  // The nested object at key, read with childKind; error when it is present but not an object.
  std::optional<ObjectReader> readObject(std::string_view key, ErrorKind childKind,
                                         bool nullIsAbsent = false) const;
  // The nested object at key, read with this reader's kind; "<path> = <value>: expected
  // <expected>" when it is present but not an object.
  std::optional<ObjectReader> readObject(std::string_view key, std::string_view expected) const;

  // Marks key as read without reading it (free text, or a key someone else reads).
  void accept(std::string_view key) const { markRead(key); }

  // The value as the user wrote it: float literals verbatim, strings quoted, containers compact
  // and shortened.
  std::string written(const Json& value, const std::string& valuePath) const;

  // "<path>.<key> = <value as written, or (missing)>: expected <expected>".
  [[noreturn]] void fail(std::string_view key, std::string_view expected) const;
  [[noreturn]] void failValue(const std::string& valuePath, const Json& value,
                              std::string_view expected) const;
  // "<path>.<key> = <shown>: expected <expected>", for a value described rather than quoted
  // ("3 name(s)") or one derived from several keys.
  [[noreturn]] void failAs(std::string_view key, std::string shown,
                           std::string_view expected) const;

  // Reports every key of the object that is not in keys.known.
  void reportKeys(const KeySet& keys) const;
  // Appends "<path>.<key>: unknown key, ignored" for every key never looked up, in key order.
  void warnUnread(std::vector<std::string>& warnings) const;
  // Throws "<path>.<key> = <value>: expected <expected>" for the first key not in known (files
  // where a typo must not pass silently, such as cluster presets).
  void rejectUnknown(std::span<const std::string_view> known, std::string_view expected) const;

 private:
  ObjectReader(const JsonDocument* document, const Json& object, std::string path, ErrorKind kind,
               KeyReport* report);
  void markRead(std::string_view key) const;
  std::optional<ObjectReader> readChild(std::string_view key, ErrorKind childKind,
                                        std::string_view expected, bool nullIsAbsent) const;

  const JsonDocument* document_;  // null: no literal texts (values shown as compact JSON)
  const Json* object_;
  std::string path_;
  ErrorKind kind_;
  KeyReport* report_;  // null: reportKeys is not available
  mutable std::set<std::string, std::less<>> read_;
};

// Reads an element of an array (or any value at valuePath) as an integer.
std::int64_t readIntElement(const ObjectReader& owner, const Json& value,
                            const std::string& valuePath, const IntRule& rule);

// Shortens text for messages (fuzzed input can hold megabyte strings).
std::string shorten(std::string_view text, std::size_t limit = 80);

}  // namespace stretch::config::json
