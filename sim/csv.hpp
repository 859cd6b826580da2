#pragma once
// CSV fields as RFC 4180 writes them, for every CSV file Stretch writes (the simulator's
// timeline, the planner's report).

#include <string>
#include <string_view>

namespace stretch::sim {

// `text` as one CSV field: unchanged unless it holds a comma, a double quote, a line feed or a
// carriage return; then in double quotes, with each double quote doubled (RFC 4180, 2.6 and 2.7).
std::string csvField(std::string_view text);

}  // namespace stretch::sim
