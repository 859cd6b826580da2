#include "examples/digits/digits_data.hpp"

#include <charconv>
#include <memory>
#include <string>
#include <vector>
#include <zlib.h>

#include <fmt/format.h>
#include <torch/torch.h>

#include "runtime/common/error.hpp"

namespace stretch::examples {

engine::TensorDataset loadDigits(const std::string& path, std::int64_t begin, std::int64_t end) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file) {
    throw IoError(
        fmt::format("{}: cannot open the digits data set (expected the gzip CSV "
                    "bundled in fixtures/data/digits)",
                    path));
  }
  std::vector<float> pixels;
  std::vector<std::int64_t> labels;
  std::vector<char> line(4096);
  std::int64_t row = 0;
  while (gzgets(file.get(), line.data(), static_cast<int>(line.size())) != nullptr) {
    const std::int64_t lineNo = row + 1;
    if (row++ < begin || (end >= 0 && row > end))
      continue;
    std::vector<int> values;
    const char* p = line.data();
    const char* stop = p + std::char_traits<char>::length(p);
    while (p < stop && *p != '\n' && *p != '\r') {
      int v = 0;
      const auto [next, ec] = std::from_chars(p, stop, v);
      if (ec != std::errc())
        throw IoError(fmt::format("{}:{}: expected comma-separated integers", path, lineNo));
      values.push_back(v);
      p = next;
      if (p < stop && *p == ',')
        ++p;
    }
    if (values.size() != 65 || values.back() < 0 || values.back() > 9) {
      throw IoError(fmt::format("{}:{}: expected 64 pixels and a label 0..9, got {} values", path,
                                lineNo, values.size()));
    }
    for (int i = 0; i < 64; ++i)
      pixels.push_back(static_cast<float>(values[static_cast<std::size_t>(i)]) / 16.0f);
    labels.push_back(values.back());
  }
  const auto n = static_cast<std::int64_t>(labels.size());
  if (n == 0)
    throw IoError(fmt::format("{}: no rows in [{}, {})", path, begin, end));
  return {torch::from_blob(pixels.data(), {n, 64}, torch::kFloat32).clone(),
          torch::from_blob(labels.data(), {n}, torch::kInt64).clone()};
}

}  // namespace stretch::examples
