#include "tests/support/fake_communicator.hpp"
