#pragma once
// Numbers as the plan's text shows them (the recommendation's reasons and the reports).

#include <string>
#include <string_view>

namespace stretch::planner {

// "never" (not finite), "3.2 <dayUnit>" from 48 h on, "5.5 h" from 1 h, else "40 min".
std::string hoursText(double hours, std::string_view dayUnit);
// "never", "2.5 h" from 120 min, "12.5 min" from 1 min, else seconds with secondsDecimals.
std::string minutesText(double minutes, int secondsDecimals);
// 1234567 -> "1,234,567" (rounded); "-" when not finite.
std::string grouped(double x);

}  // namespace stretch::planner
