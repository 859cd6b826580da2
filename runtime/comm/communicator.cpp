#include "runtime/comm/communicator.hpp"
