#pragma once
// Small text helpers shared by the config layer, the CLI and every hand-written JSON writer.

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace stretch {

// Levenshtein distance (insert, delete, substitute; each costs 1).
std::size_t editDistance(std::string_view a, std::string_view b);

// The candidate closest to word, if it is close enough to be a plausible typo: distance at most
// max(2, word.size() / 3), compared case-insensitively. Ties go to the earlier candidate.
std::optional<std::string> closestMatch(std::string_view word,
                                        std::span<const std::string_view> candidates);

// text as a JSON string literal, quotes included, escaped per RFC 8259: quote and backslash, the
// control characters U+0000-U+001F and DEL (backspace, form feed, newline, carriage return and
// tab by their short escapes, the rest as six-character escapes). Valid UTF-8 passes through
// unchanged; every byte that does not start a valid sequence (overlong forms, surrogates, code
// points above U+10FFFF, truncated sequences) becomes the escape of U+FFFD, so that any JSON
// parser reads the result. For writers that may not use the JSON library (runtime/agent) or
// write JSON text directly (Chrome traces).
std::string jsonQuote(std::string_view text);

}  // namespace stretch
