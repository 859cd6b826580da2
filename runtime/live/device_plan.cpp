#include "runtime/live/device_plan.hpp"
