#include "runtime/config/json_reader.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "runtime/common/error.hpp"
#include "runtime/common/strings.hpp"

namespace stretch::config::json {

namespace {

bool isJsonSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// Skips whitespace and comments from i; returns the offset of the next significant character
// (or text.size()). An unterminated comment runs to the end: the parser reports it.
std::size_t skipInsignificant(std::string_view text, std::size_t i) {
  while (i < text.size()) {
    if (isJsonSpace(text[i])) {
      ++i;
    } else if (text[i] == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      const std::size_t end = text.find('\n', i + 2);
      i = end == std::string_view::npos ? text.size() : end + 1;
    } else if (text[i] == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      const std::size_t end = text.find("*/", i + 2);
      i = end == std::string_view::npos ? text.size() : end + 2;
    } else {
      break;
    }
  }
  return i;
}

struct LineColumn {
  std::size_t line = 1;
  std::size_t column = 1;
};

// 1-based line and byte column of offset, counting '\n' like nlohmann's lexer.
LineColumn lineColumnAt(std::string_view text, std::size_t offset) {
  offset = std::min(offset, text.size());
  LineColumn lc;
  std::size_t lineStart = 0;
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++lc.line;
      lineStart = i + 1;
    }
  }
  lc.column = offset - lineStart + 1;
  return lc;
}

// An input iterator that publishes how far nlohmann's lexer has read, so that SAX events (which
// carry no position) can still be reported with line:column.
class TrackingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackingIterator(const char* position, const char** furthest)
      : position_(position), furthest_(furthest) {}

  reference operator*() const { return *position_; }
  TrackingIterator& operator++() {
    ++position_;
    *furthest_ = position_;
    return *this;
  }
  TrackingIterator operator++(int) {
    TrackingIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const TrackingIterator& other) const { return position_ == other.position_; }
  bool operator!=(const TrackingIterator& other) const { return position_ != other.position_; }

 private:
  const char* position_;
  const char** furthest_;
};

// The reason in nlohmann's message: "[json.exception.parse_error.101] parse error at line 2,
// column 9: <why>" or "[json.exception.out_of_range.406] <why>".
std::string reasonOf(const nlohmann::detail::exception& ex) {
  const std::string what = ex.what();
  if (const std::size_t column = what.find(", column "); column != std::string::npos) {
    if (const std::size_t colon = what.find(": ", column); colon != std::string::npos) {
      return what.substr(colon + 2);
    }
  } else if (const std::size_t bracket = what.find("] "); bracket != std::string::npos) {
    return what.substr(bracket + 2);
  }
  return what;
}

// "<source>:<line>:<col>: invalid JSON: <reason>" for a parser error at position (the count of
// characters read, the failing one included).
[[noreturn]] void throwInvalidJson(std::string_view text, std::string_view source,
                                   std::size_t position, const nlohmann::detail::exception& ex) {
  // nlohmann's own "line L, column C" says column 0 when the failing character is a newline, so
  // the position is recomputed from the offset.
  const LineColumn lc = lineColumnAt(text, position == 0 ? 0 : position - 1);
  throw ConfigError(fmt::format("{}:{}:{}: invalid JSON: {}", source, lc.line, lc.column,
                                shorten(reasonOf(ex), 200)));
}

bool looksIntegral(std::string_view literal) {
  return literal.find_first_of(".eE") == std::string_view::npos;
}

// Builds the DOM (like nlohmann's json_sax_dom_parser) while rejecting what configs must not hold.
class DocumentBuilder {
 public:
  DocumentBuilder(std::string_view text, std::string_view source, std::string_view prefix,
                  const char** furthest)
      : text_(text), source_(source), prefix_(prefix), furthest_(furthest) {}

  JsonDocument take() { return std::move(document_); }

  bool null() { return addValue(Json(nullptr)); }
  bool boolean(bool value) { return addValue(Json(value)); }
  bool number_integer(Json::number_integer_t value) {  // NOLINT(readability-identifier-naming)
    return addValue(Json(value));
  }
  bool number_unsigned(Json::number_unsigned_t value) {  // NOLINT(readability-identifier-naming)
    if (value > static_cast<Json::number_unsigned_t>(std::numeric_limits<std::int64_t>::max())) {
      throw ConfigError(ErrorDetail{currentPath(), std::to_string(value),
                                    "an integer that fits in 64 bits (at most 2^63-1)"});
    }
    return addValue(Json(static_cast<std::int64_t>(value)));
  }
  bool number_float(Json::number_float_t value,  // NOLINT(readability-identifier-naming)
                    const Json::string_t& literal) {
    if (looksIntegral(literal)) {
      // nlohmann turns integers beyond 64 bits into doubles; a config never means that.
      throw ConfigError(ErrorDetail{currentPath(), shorten(literal),
                                    "an integer that fits in 64 bits (at most 2^63-1)"});
    }
    if (!std::isfinite(value)) {
      throw ConfigError(
          ErrorDetail{currentPath(), shorten(literal), "a number within the double range"});
    }
    document_.floatText.emplace(currentPath(), literal);
    return addValue(Json(value));
  }
  bool string(Json::string_t& value) { return addValue(Json(std::move(value))); }
  bool binary(Json::binary_t& /*value*/) { return addValue(Json(nullptr)); }

  bool start_object(std::size_t /*elements*/) {  // NOLINT(readability-identifier-naming)
    return openContainer(Json::object(), false);
  }
  bool end_object() {  // NOLINT(readability-identifier-naming)
    closeContainer();
    return true;
  }
  bool start_array(std::size_t /*elements*/) {  // NOLINT(readability-identifier-naming)
    return openContainer(Json::array(), true);
  }
  bool end_array() {  // NOLINT(readability-identifier-naming)
    closeContainer();
    return true;
  }

  bool key(Json::string_t& name) {
    Json& object = *stack_.back();
    frames_.back().key = name;
    if (object.contains(name)) {
      // The lexer has just consumed the closing quote; point at the opening one.
      const std::size_t end = offsetRead();
      const LineColumn lc = lineColumnAt(text_, keyStart(end));
      throw ConfigError(
          fmt::format("{}:{}:{}: duplicate key \"{}\" at {} (DeepSpeed rejects "
                      "duplicate keys too; keep one)",
                      source_, lc.line, lc.column, shorten(name), currentPath()));
    }
    element_ = &object[name];
    return true;
  }

  bool parse_error(std::size_t position,  // NOLINT(readability-identifier-naming)
                   const std::string& /*lastToken*/, const nlohmann::detail::exception& ex) {
    throwInvalidJson(text_, source_, position, ex);
  }

 private:
  struct Frame {
    bool isArray = false;
    std::size_t index = 0;  // arrays: index of the next element
    std::string key;        // objects: the key being read
  };

  std::size_t offsetRead() const { return static_cast<std::size_t>(*furthest_ - text_.data()); }

  // Offset of the opening quote of the key whose closing quote ends just before end.
  std::size_t keyStart(std::size_t end) const {
    if (end < 2) {
      return 0;
    }
    std::size_t i = end - 2;  // last character inside the key
    while (i > 0) {
      if (text_[i] == '"') {
        std::size_t slashes = 0;
        while (slashes < i && text_[i - 1 - slashes] == '\\') {
          ++slashes;
        }
        if (slashes % 2 == 0) {
          return i;
        }
      }
      --i;
    }
    return 0;
  }

  std::string currentPath() const {
    std::string path(prefix_);
    for (const Frame& frame : frames_) {
      if (frame.isArray) {
        path += fmt::format("[{}]", frame.index);
      } else {
        if (!path.empty()) {
          path += '.';
        }
        path += shorten(frame.key);
      }
    }
    return path;
  }

  // Places value where the parser is, returns its address.
  Json* place(Json&& value) {
    if (stack_.empty()) {
      document_.root = std::move(value);
      return &document_.root;
    }
    Json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      ++frames_.back().index;
      return &parent.back();
    }
    *element_ = std::move(value);
    return element_;
  }

  bool addValue(Json&& value) {
    place(std::move(value));
    return true;
  }

  bool openContainer(Json&& empty, bool isArray) {
    if (stack_.size() >= kMaxNestingDepth) {
      const LineColumn lc = lineColumnAt(text_, offsetRead() == 0 ? 0 : offsetRead() - 1);
      throw ConfigError(fmt::format("{}:{}:{}: nesting deeper than {} levels at {}", source_,
                                    lc.line, lc.column, kMaxNestingDepth,
                                    stack_.empty() ? std::string("top level") : currentPath()));
    }
    // Arrays advance their index only once the element is complete, so paths inside it are right.
    Json* slot = nullptr;
    if (!stack_.empty() && stack_.back()->is_array()) {
      stack_.back()->push_back(std::move(empty));
      slot = &stack_.back()->back();
    } else {
      slot = place(std::move(empty));
    }
    stack_.push_back(slot);
    frames_.push_back(Frame{isArray, 0, {}});
    return true;
  }

  void closeContainer() {
    stack_.pop_back();
    frames_.pop_back();
    if (!stack_.empty() && stack_.back()->is_array()) {
      ++frames_.back().index;
    }
  }

  std::string_view text_;
  std::string_view source_;
  std::string_view prefix_;
  const char** furthest_;
  JsonDocument document_;
  std::vector<Json*> stack_;  // open containers; a parent never changes while a child is open
  std::vector<Frame> frames_;
  Json* element_ = nullptr;  // the object slot the next value goes into
};

const char* typeName(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return "a number";
    default:
      return "a value";
  }
}

bool matchesIgnored(std::string_view key, std::span<const std::string_view> ignored) {
  return std::any_of(ignored.begin(), ignored.end(), [key](std::string_view entry) {
    if (!entry.empty() && entry.back() == '*') {
      return key.substr(0, entry.size() - 1) == entry.substr(0, entry.size() - 1);
    }
    return key == entry;
  });
}

std::string joinListed(const std::vector<std::string>& items, std::size_t total) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) {
      out += ", ";
    }
    out += items[i];
  }
  if (total > items.size()) {
    out += fmt::format(" and {} more", total - items.size());
  }
  return out;
}

// The value as compact JSON for messages, shortened; invalid UTF-8 replaced.
std::string compactJson(const Json& value) {
  return shorten(value.dump(-1, ' ', false, Json::error_handler_t::replace));
}

}  // namespace

std::string shorten(std::string_view text, std::size_t limit) {
  if (text.size() <= limit) {
    return std::string(text);
  }
  return std::string(text.substr(0, limit)) + "...";
}

std::string removeTrailingCommas(std::string_view text) {
  std::string out(text);
  char lastSignificant = '\0';
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') {
      // Skip the string, escapes included; an unterminated one runs to the end.
      ++i;
      while (i < text.size() && text[i] != '"') {
        i += text[i] == '\\' ? 2 : 1;
      }
      i = std::min(i + 1, text.size());
      lastSignificant = '"';
      continue;
    }
    if (isJsonSpace(c) ||
        (c == '/' && i + 1 < text.size() && (text[i + 1] == '/' || text[i + 1] == '*'))) {
      i = std::max(skipInsignificant(text, i), i + 1);
      continue;
    }
    if (c == ',' && lastSignificant != '[' && lastSignificant != '{' && lastSignificant != ',') {
      const std::size_t next = skipInsignificant(text, i + 1);
      if (next < text.size() && (text[next] == '}' || text[next] == ']')) {
        out[i] = ' ';
        lastSignificant = ' ';
        ++i;
        continue;
      }
    }
    lastSignificant = c;
    ++i;
  }
  return out;
}

JsonDocument parseJsonDocument(std::string_view text, std::string_view source,
                               std::string_view pathPrefix) {
  const std::string cleaned = removeTrailingCommas(text);
  const char* furthest = cleaned.data();
  DocumentBuilder builder(cleaned, source, pathPrefix, &furthest);
  const char* begin = cleaned.data();
  const char* end = cleaned.data() + cleaned.size();
  try {
    Json::sax_parse(TrackingIterator(begin, &furthest), TrackingIterator(end, &furthest), &builder,
                    nlohmann::json::input_format_t::json, /*strict=*/true,
                    /*ignore_comments=*/true);
  } catch (const Json::exception& ex) {
    throw ConfigError(fmt::format("{}: invalid JSON: {}", source, shorten(reasonOf(ex), 200)));
  }
  JsonDocument document = builder.take();
  if (!document.root.is_object()) {
    throw ConfigError(fmt::format("{}: the top level must be a JSON object, not {}", source,
                                  typeName(document.root)));
  }
  return document;
}

Json parseJson(std::string_view text, std::string_view source, bool allowComments) {
  try {
    return Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/true, allowComments);
  } catch (const Json::parse_error& ex) {
    throwInvalidJson(text, source, ex.byte, ex);
  } catch (const Json::exception& ex) {  // no position (a number out of the double range)
    throw ConfigError(fmt::format("{}: invalid JSON: {}", source, shorten(reasonOf(ex), 200)));
  }
}

[[noreturn]] void throwDetail(ErrorKind kind, std::string path, std::string value,
                              std::string expected) {
  ErrorDetail detail{std::move(path), std::move(value), std::move(expected)};
  if (kind == ErrorKind::Elasticity) {
    throw ElasticityConfigError(std::move(detail));
  }
  throw ConfigError(std::move(detail));
}

[[noreturn]] void throwValue(std::string path, const Json& value, std::string_view expected,
                             ErrorKind kind) {
  throwDetail(kind, std::move(path), compactJson(value), std::string(expected));
}

std::string indexPath(std::string_view path, std::size_t index) {
  return fmt::format("{}[{}]", path, index);
}

void KeyReport::addUnknown(std::string path, std::optional<std::string> hint) {
  ++unknownCount_;
  if (unknown_.size() >= kMaxListedKeys) {
    return;
  }
  if (hint) {
    path += fmt::format(" (did you mean \"{}\"?)", *hint);
  }
  unknown_.push_back(std::move(path));
}

void KeyReport::addIgnored(std::string path) {
  ++ignoredCount_;
  if (ignored_.size() < kMaxListedKeys) {
    ignored_.push_back(std::move(path));
  }
}

std::vector<std::string> KeyReport::warnings() const {
  std::vector<std::string> out;
  if (unknownCount_ > 0) {
    out.push_back("unknown keys (ignored): " + joinListed(unknown_, unknownCount_));
  }
  // One warning per ignored key, so that each names the key and says it has no effect.
  for (const auto& path : ignored_) {
    out.push_back(path + ": a DeepSpeed key Stretch does not implement; it has no effect");
  }
  if (ignoredCount_ > ignored_.size()) {
    out.push_back(fmt::format("and {} more DeepSpeed keys Stretch does not implement",
                              ignoredCount_ - ignored_.size()));
  }
  return out;
}

ObjectReader::ObjectReader(const JsonDocument* document, const Json& object, std::string path,
                           ErrorKind kind, KeyReport* report)
    : document_(document), object_(&object), path_(std::move(path)), kind_(kind), report_(report) {}

ObjectReader::ObjectReader(const JsonDocument& document, const Json& object, std::string path,
                           ErrorKind kind, KeyReport& report)
    : ObjectReader(&document, object, std::move(path), kind, &report) {}

ObjectReader::ObjectReader(const Json& value, std::string path, std::string_view expected,
                           ErrorKind kind)
    : ObjectReader(nullptr, value, std::move(path), kind, nullptr) {
  if (!value.is_object()) {
    throwValue(path_.empty() ? "(top level)" : path_, value, expected, kind_);
  }
}

void ObjectReader::markRead(std::string_view key) const {
  if (read_.find(key) == read_.end()) {
    read_.emplace(key);
  }
}

std::string ObjectReader::childPath(std::string_view key) const {
  if (path_.empty()) {
    return shorten(key);
  }
  return path_ + "." + shorten(key);
}

const Json* ObjectReader::find(std::string_view key) const {
  markRead(key);
  const auto it = object_->find(key);
  return it == object_->end() ? nullptr : &*it;
}

std::string ObjectReader::written(const Json& value, const std::string& valuePath) const {
  if (value.is_number_float() && document_ != nullptr) {
    const auto it = document_->floatText.find(valuePath);
    if (it != document_->floatText.end()) {
      return shorten(it->second);
    }
  }
  return compactJson(value);
}

void ObjectReader::failValue(const std::string& valuePath, const Json& value,
                             std::string_view expected) const {
  throwDetail(kind_, valuePath, written(value, valuePath), std::string(expected));
}

void ObjectReader::fail(std::string_view key, std::string_view expected) const {
  const Json* value = find(key);
  const std::string path = childPath(key);
  if (value == nullptr) {
    throwDetail(kind_, path, std::string(kMissing), std::string(expected));
  }
  failValue(path, *value, expected);
}

void ObjectReader::failAs(std::string_view key, std::string shown,
                          std::string_view expected) const {
  throwDetail(kind_, childPath(key), std::move(shown), std::string(expected));
}

std::optional<bool> ObjectReader::readBool(std::string_view key) const {
  const Json* value = find(key);
  if (value == nullptr) {
    return std::nullopt;
  }
  if (!value->is_boolean()) {
    fail(key, "true or false");
  }
  return value->get<bool>();
}

std::int64_t readIntElement(const ObjectReader& owner, const Json& value,
                            const std::string& valuePath, const IntRule& rule) {
  std::int64_t result = 0;
  if (value.is_number_unsigned() &&
      value.get<std::uint64_t>() >
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    owner.failValue(valuePath, value, rule.expected);  // parseJson keeps integers up to 2^64-1
  }
  if (value.is_number_integer()) {
    result = value.get<std::int64_t>();
  } else if (value.is_number_float() && rule.allowIntegralFloat) {
    const double d = value.get<double>();
    // 2^63 is exactly representable; anything below it converts without overflow.
    if (d != std::trunc(d) || d < -9223372036854775808.0 || d >= 9223372036854775808.0) {
      owner.failValue(valuePath, value, rule.expected);
    }
    result = static_cast<std::int64_t>(d);
  } else {
    owner.failValue(valuePath, value, rule.expected);
  }
  if (result < rule.min || result > rule.max) {
    owner.failValue(valuePath, value, rule.expected);
  }
  return result;
}

std::optional<std::int64_t> ObjectReader::readInt(std::string_view key, const IntRule& rule) const {
  const Json* value = find(key);
  if (value == nullptr || (rule.nullIsAbsent && value->is_null())) {
    return std::nullopt;
  }
  return readIntElement(*this, *value, childPath(key), rule);
}

std::optional<double> ObjectReader::readNumber(std::string_view key, const NumberRule& rule) const {
  const Json* value = find(key);
  if (value == nullptr) {
    return std::nullopt;
  }
  if (!value->is_number()) {
    fail(key, rule.expected);
  }
  const double d = value->get<double>();
  if (!std::isfinite(d) || d < rule.min || (rule.minExclusive && d == rule.min) || d > rule.max) {
    fail(key, rule.expected);
  }
  return d;
}

std::optional<std::string> ObjectReader::readString(std::string_view key) const {
  const Json* value = find(key);
  if (value == nullptr) {
    return std::nullopt;
  }
  if (!value->is_string()) {
    fail(key, "a string");
  }
  return value->get<std::string>();
}

std::optional<ObjectReader> ObjectReader::readObject(std::string_view key, ErrorKind childKind,
                                                     bool nullIsAbsent) const {
  return readChild(key, childKind, "an object", nullIsAbsent);
}

std::optional<ObjectReader> ObjectReader::readObject(std::string_view key,
                                                     std::string_view expected) const {
  return readChild(key, kind_, expected, /*nullIsAbsent=*/false);
}

std::optional<ObjectReader> ObjectReader::readChild(std::string_view key, ErrorKind childKind,
                                                    std::string_view expected,
                                                    bool nullIsAbsent) const {
  const Json* value = find(key);
  if (value == nullptr || (nullIsAbsent && value->is_null())) {
    return std::nullopt;
  }
  const std::string path = childPath(key);
  if (!value->is_object()) {
    throwDetail(childKind, path, written(*value, path), std::string(expected));
  }
  return ObjectReader(document_, *value, path, childKind, report_);
}

void ObjectReader::reportKeys(const KeySet& keys) const {
  if (report_ == nullptr) {
    throw InternalError(fmt::format("{}: reportKeys on a reader without a key report", path_));
  }
  for (const auto& [key, value] : object_->items()) {
    if (std::find(keys.known.begin(), keys.known.end(), key) != keys.known.end()) {
      continue;
    }
    if (matchesIgnored(key, keys.ignored)) {
      report_->addIgnored(childPath(key));
      continue;
    }
    // Bounded: a fuzzed megabyte key would make the edit distance slow for no useful hint.
    std::optional<std::string> hint;
    if (key.size() <= 128 && report_->listsMoreUnknown()) {
      std::vector<std::string_view> candidates(keys.known.begin(), keys.known.end());
      for (std::string_view ignored : keys.ignored) {
        if (ignored.empty() || ignored.back() != '*') {
          candidates.push_back(ignored);
        }
      }
      hint = closestMatch(key, candidates);
    }
    report_->addUnknown(childPath(key), std::move(hint));
  }
}

void ObjectReader::warnUnread(std::vector<std::string>& warnings) const {
  for (const auto& [key, value] : object_->items()) {
    if (read_.find(key) == read_.end()) {
      warnings.push_back(childPath(key) + ": unknown key, ignored");
    }
  }
}

void ObjectReader::rejectUnknown(std::span<const std::string_view> known,
                                 std::string_view expected) const {
  for (const auto& [key, value] : object_->items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      failValue(childPath(key), value, expected);
    }
  }
}

}  // namespace stretch::config::json
