#include "examples/gpt/char_corpus.hpp"

#include <array>
#include <cmath>
#include <memory>
#include <zlib.h>

#include <fmt/format.h>
#include <torch/torch.h>

#include "runtime/common/error.hpp"

namespace stretch::examples {

namespace {

// gzopen reads gzip files and passes plain files through unchanged.
std::string readMaybeCompressed(const std::string& path) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file)
    throw IoError(fmt::format("{}: cannot open the text corpus", path));
  std::string text;
  std::array<char, 1 << 16> buffer{};
  for (;;) {
    const int n = gzread(file.get(), buffer.data(), static_cast<unsigned>(buffer.size()));
    if (n < 0) {
      int code = 0;
      throw IoError(
          fmt::format("{}: cannot read the text corpus: {}", path, gzerror(file.get(), &code)));
    }
    if (n == 0)
      break;
    text.append(buffer.data(), static_cast<std::size_t>(n));
  }
  return text;
}

}  // namespace

std::vector<std::int64_t> CharCorpus::encode(const std::string& text) const {
  std::array<std::int64_t, 256> index{};
  index.fill(-1);
  for (std::size_t i = 0; i < vocabulary.size(); ++i)
    index[vocabulary[i]] = static_cast<std::int64_t>(i);
  std::vector<std::int64_t> out;
  for (const char c : text) {
    if (const auto id = index[static_cast<unsigned char>(c)]; id >= 0)
      out.push_back(id);
  }
  return out;
}

std::string CharCorpus::decode(const std::vector<std::int64_t>& tokens) const {
  std::string out;
  for (const auto t : tokens) {
    if (t >= 0 && t < vocabSize())
      out.push_back(static_cast<char>(vocabulary[static_cast<std::size_t>(t)]));
  }
  return out;
}

CharCorpus loadCharCorpus(const std::string& path, std::int64_t context) {
  CharCorpus corpus;
  corpus.path = path;
  const std::string text = readMaybeCompressed(path);
  corpus.bytes = static_cast<std::int64_t>(text.size());

  std::array<std::int64_t, 256> counts{};
  for (const char c : text)
    ++counts[static_cast<unsigned char>(c)];
  for (std::size_t b = 0; b < counts.size(); ++b) {
    if (counts[b] == 0)
      continue;
    corpus.vocabulary.push_back(static_cast<unsigned char>(b));
    const double p = static_cast<double>(counts[b]) / static_cast<double>(text.size());
    corpus.unigramEntropy -= p * std::log(p);
  }
  const auto tokens = corpus.encode(text);

  const std::int64_t windows =
      text.empty() ? 0 : (static_cast<std::int64_t>(tokens.size()) - 1) / context;
  if (windows < 10) {
    throw IoError(fmt::format(
        "{}: {} bytes of text make {} windows of {} + 1 characters; at least 10 are needed (one "
        "in ten is held out for validation)",
        path, text.size(), windows < 0 ? 0 : windows, context));
  }
  std::vector<std::int64_t> trainRows;
  std::vector<std::int64_t> validationRows;
  for (std::int64_t i = 0; i < windows; ++i) {
    auto& rows = i % 10 == 9 ? validationRows : trainRows;
    rows.insert(rows.end(), tokens.begin() + i * context,
                tokens.begin() + i * context + context + 1);
  }
  const auto toDataset = [context](std::vector<std::int64_t>& rows) {
    const auto n = static_cast<std::int64_t>(rows.size()) / (context + 1);
    auto all = torch::from_blob(rows.data(), {n, context + 1}, torch::kInt64).clone();
    return engine::TensorDataset{all.narrow(1, 0, context).contiguous(),
                                 all.narrow(1, 1, context).contiguous()};
  };
  corpus.train = toDataset(trainRows);
  corpus.validation = toDataset(validationRows);
  return corpus;
}

}  // namespace stretch::examples
