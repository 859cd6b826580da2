#pragma once
// A text corpus as a character-level language-modelling data set (bytes are the characters):
//
//   vocabulary   the distinct bytes of the whole text, in increasing order; token = its index;
//   windows      window i is tokens [i*context, i*context + context + 1): inputs are its first
//                `context` tokens, targets the same shifted by one; every whole window is used;
//   split        window i is validation when i % 10 == 9, training otherwise.
//
// bench/gpt_peer/gpt_peer.py builds the same windows in Python, so that both sides see the same
// samples in the same (DistributedSampler) order.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/engine/data.hpp"

namespace stretch::examples {

struct CharCorpus {
  std::string path;
  std::int64_t bytes = 0;
  std::vector<unsigned char> vocabulary;  // token -> byte
  double unigramEntropy = 0;              // nats per character, over the whole text
  engine::TensorDataset train;            // int64 [N, context] inputs and targets
  engine::TensorDataset validation;

  std::int64_t vocabSize() const { return static_cast<std::int64_t>(vocabulary.size()); }
  // Token ids of `text`; bytes outside the vocabulary are dropped.
  std::vector<std::int64_t> encode(const std::string& text) const;
  std::string decode(const std::vector<std::int64_t>& tokens) const;
};

// Reads `path` (plain text or gzip) and cuts it into windows of `context` tokens. IoError naming
// the file when it cannot be read or is too short for one training and one validation window.
CharCorpus loadCharCorpus(const std::string& path, std::int64_t context);

}  // namespace stretch::examples
