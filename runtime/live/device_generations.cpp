#include "runtime/live/device_generations.hpp"
