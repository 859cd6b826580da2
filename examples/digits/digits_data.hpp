#pragma once
// The handwritten-digits data set (fixtures/data/digits/digits.csv.gz: 1,797 rows of 64 pixels
// in 0..16 and a label) as an engine::TensorDataset: pixels scaled to [0, 1] as fp32 [N, 64],
// labels as int64 [N].

#include <cstdint>
#include <string>

#include "runtime/engine/data.hpp"

namespace stretch::examples {

// Rows [begin, end) of the file (end = -1: to the end). Throws IoError naming the file and line
// when it is missing or malformed.
engine::TensorDataset loadDigits(const std::string& path, std::int64_t begin = 0,
                                 std::int64_t end = -1);

}  // namespace stretch::examples
