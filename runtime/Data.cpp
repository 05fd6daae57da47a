//===- Data.cpp - Token streams for training ------------------------------===//

#include "Data.h"

#include <fstream>
#include <iterator>

namespace sluice::rt {

namespace {
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

class SyntheticTokens final : public TokenSource {
public:
  SyntheticTokens(uint64_t seed, int64_t vocab, int64_t microbatches)
      : seed(seed), vocab(vocab), microbatches(microbatches) {}
  void getBatch(int64_t step, int64_t mb, int64_t rows, int64_t seqLen,
                std::vector<int32_t> &tokens) override {
    tokens.resize(rows * (seqLen + 1));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t t = 0; t <= seqLen; ++t) {
        uint64_t h = mix(
            mix(mix(seed ^ uint64_t(step * microbatches + mb)) ^ uint64_t(r)) ^
            uint64_t(t));
        tokens[r * (seqLen + 1) + t] = int32_t(h % uint64_t(vocab));
      }
  }

private:
  uint64_t seed;
  int64_t vocab, microbatches;
};

class FileTokens final : public TokenSource {
public:
  FileTokens(std::vector<int32_t> data, int64_t microbatches)
      : data(std::move(data)), microbatches(microbatches) {}
  void getBatch(int64_t step, int64_t mb, int64_t rows, int64_t seqLen,
                std::vector<int32_t> &tokens) override {
    tokens.resize(rows * (seqLen + 1));
    // Window w starts at w * seqLen: consecutive windows share one token
    // (the last label of one is the first input of the next).
    int64_t windows = (int64_t(data.size()) - 1) / seqLen;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t window = ((step * microbatches + mb) * rows + r) % windows;
      for (int64_t t = 0; t <= seqLen; ++t)
        tokens[r * (seqLen + 1) + t] = data[window * seqLen + t];
    }
  }

private:
  std::vector<int32_t> data;
  int64_t microbatches;
};
} // namespace

std::unique_ptr<TokenSource> makeSyntheticTokens(uint64_t seed, int64_t vocab,
                                                 int64_t microbatches) {
  return std::make_unique<SyntheticTokens>(seed, vocab, microbatches);
}

Status loadTokenFile(const std::string &path, const std::string &dtype,
                     int64_t vocab, int64_t seqLen, int64_t microbatches,
                     std::unique_ptr<TokenSource> &source) {
  if (dtype != "uint32" && dtype != "uint16")
    return Status::error("unknown --data-dtype '" + dtype +
                         "' (expected uint32 or uint16)");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("cannot open data file '" + path + "'");
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  size_t width = dtype == "uint32" ? 4 : 2;
  if (bytes.size() % width != 0)
    return Status::error("data file '" + path + "' has " +
                         std::to_string(bytes.size()) +
                         " bytes, not a whole number of " + dtype + " tokens");
  size_t count = bytes.size() / width;
  if (int64_t(count) < seqLen + 1)
    return Status::error("data file '" + path + "' holds " +
                         std::to_string(count) + " tokens, fewer than one " +
                         "sequence of " + std::to_string(seqLen + 1));
  std::vector<int32_t> data(count);
  for (size_t i = 0; i < count; ++i) {
    uint32_t token = 0;
    for (size_t b = 0; b < width; ++b)
      token |= uint32_t(bytes[i * width + b]) << (8 * b);
    if (int64_t(token) >= vocab)
      return Status::error("data file '" + path + "': token " +
                           std::to_string(token) + " at offset " +
                           std::to_string(i) + " is not below the vocabulary " +
                           "size " + std::to_string(vocab));
    data[i] = int32_t(token);
  }
  source = std::make_unique<FileTokens>(std::move(data), microbatches);
  return Status::ok();
}

namespace {
class ReplicaTokens final : public TokenSource {
public:
  ReplicaTokens(std::unique_ptr<TokenSource> all, int64_t first)
      : all(std::move(all)), first(first) {}
  void getBatch(int64_t step, int64_t microbatch, int64_t rows,
                int64_t seqLen, std::vector<int32_t> &tokens) override {
    all->getBatch(step, first + microbatch, rows, seqLen, tokens);
  }

private:
  std::unique_ptr<TokenSource> all;
  int64_t first;
};
} // namespace

std::unique_ptr<TokenSource> makeReplicaTokens(std::unique_ptr<TokenSource> all,
                                               int64_t replica,
                                               int64_t microbatches) {
  return std::make_unique<ReplicaTokens>(std::move(all),
                                         replica * microbatches);
}

} // namespace sluice::rt
