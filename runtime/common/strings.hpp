#pragma once
// Small text helpers shared by the config layer and the CLI.

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

}  // namespace stretch
