//===- Data.cpp - Token streams for training ------------------------------===//

#include "Data.h"

#include "InputFile.h"

#include "sluice/PlanFormat/TokenDataset.h"

#include "sluice/PlanFormat/Json.h"
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
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

/// Windows of seqLen + 1 tokens over documents concatenated: sample g
/// is window g % perEpoch of epoch g / perEpoch, whose documents are in
/// the order of a permutation drawn from (seed, epoch) -- or in file
/// order. Consecutive windows share one token (the last label of one is
/// the first input of the next).
class DocumentTokens final : public TokenSource {
public:
  DocumentTokens(std::shared_ptr<const std::vector<int32_t>> data,
                 std::vector<std::pair<int64_t, int64_t>> documents,
                 int64_t microbatches, bool shuffle, uint64_t seed)
      : data(std::move(data)), documents(std::move(documents)),
        microbatches(microbatches), shuffle(shuffle), seed(seed) {
    for (auto [first, count] : this->documents)
      total += count;
  }

  int64_t getTokenCount() const { return total; }

  void getBatch(int64_t step, int64_t mb, int64_t rows, int64_t seqLen,
                std::vector<int32_t> &tokens) override {
    tokens.resize(rows * (seqLen + 1));
    int64_t perEpoch = (total - 1) / seqLen;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t sample = (step * microbatches + mb) * rows + r;
      setEpoch(sample / perEpoch);
      int64_t at = sample % perEpoch * seqLen;
      // The document holding position `at` of the epoch's stream.
      size_t d = size_t(std::upper_bound(starts.begin(), starts.end(), at) -
                        starts.begin() - 1);
      for (int64_t t = 0; t <= seqLen; ++t, ++at) {
        while (at >= starts[d] + documents[order[d]].second)
          ++d;
        tokens[r * (seqLen + 1) + t] =
            (*data)[documents[order[d]].first + (at - starts[d])];
      }
    }
  }

private:
  /// The documents' order in `epoch` and where each starts in its stream.
  void setEpoch(int64_t epoch) {
    if (epoch == current && !order.empty())
      return;
    current = epoch;
    order.resize(documents.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    if (shuffle) // Fisher-Yates, drawn from (seed, epoch)
      for (size_t i = order.size(); i > 1; --i) {
        uint64_t h = mix(mix(seed ^ 0x5eedda7aULL) ^ uint64_t(epoch)) ^ i;
        std::swap(order[i - 1], order[mix(h) % i]);
      }
    starts.assign(order.size(), 0);
    for (size_t i = 1; i < order.size(); ++i)
      starts[i] = starts[i - 1] + documents[order[i - 1]].second;
  }

  std::shared_ptr<const std::vector<int32_t>> data;
  /// (first token, token count) of each document, in file order.
  std::vector<std::pair<int64_t, int64_t>> documents;
  int64_t microbatches;
  bool shuffle;
  uint64_t seed;
  int64_t total = 0, current = -1;
  std::vector<size_t> order;
  std::vector<int64_t> starts;
};

/// Little-endian unsigned of `width` bytes at `p`.
uint64_t readLittle(const unsigned char *p, size_t width) {
  uint64_t v = 0;
  for (size_t b = 0; b < width; ++b)
    v |= uint64_t(p[b]) << (8 * b);
  return v;
}
} // namespace

std::unique_ptr<TokenSource> makeSyntheticTokens(uint64_t seed, int64_t vocab,
                                                 int64_t microbatches) {
  return std::make_unique<SyntheticTokens>(seed, vocab, microbatches);
}

namespace {

/// Where a data file's tokens are and how they are stored.
struct TokenLayout {
  std::string dtype;    // uint16 or uint32
  size_t at = 0;        // the first token's byte
  size_t count = 0;     // tokens
  int64_t vocab = 0;    // what a dataset's header declares (0: raw file)
  std::vector<uint64_t> offsets; // document boundaries, 0 ... count
};

/// A token dataset's header and document offsets (sluice-tokenize's
/// format), checked against the file's size before anything is summed.
Status readDatasetLayout(const std::vector<unsigned char> &bytes,
                         const DataOptions &o, TokenLayout &layout,
                         DataSummary &summary) {
  const std::string &path = o.path;
  if (!o.rawDtype.empty())
    return Status::error("'" + path + "' is a token dataset whose header "
                         "gives its element type: drop --data-dtype");
  uint64_t length = readLittle(bytes.data() + 8, 8);
  try {
    if (length > bytes.size() - 16)
      throw std::out_of_range("the header runs past the end");
    nlohmann::json header =
        parseJson(bytes.begin() + 16, bytes.begin() + 16 + int64_t(length));
    // A count the header gives: a whole number from `low` (get<> would
    // truncate 1.5 and wrap -1 into a size).
    auto whole = [&](const char *key, int64_t low) {
      const nlohmann::json &v = header.at(key);
      if (!v.is_number_integer() || v.get<int64_t>() < low)
        throw std::out_of_range(std::string("its header's '") + key +
                                "' is " + v.dump() +
                                ", not a whole number from " +
                                std::to_string(low));
      return v.get<int64_t>();
    };
    if (header.at("format") != "sluice-tokens" || whole("version", 0) < 1 ||
        whole("version", 0) > kTokenDatasetVersion)
      throw std::out_of_range("not a version " +
                              std::to_string(kTokenDatasetVersion) +
                              " token dataset");
    layout.dtype = header.at("dtype").get<std::string>();
    summary.tokenizer = header.value("tokenizer", std::string());
    summary.tokenizerFile = header.value("tokenizer_file", std::string());
    layout.count = size_t(whole("tokens", 0));
    size_t documents = size_t(whole("documents", 0));
    layout.vocab = whole("vocab", 1);
    // The tokenizer's first and last tokens: null where it has none, else
    // a token of the vocabulary.
    for (auto [key, id] : {std::pair{"tokenizer_bos", &summary.tokenizerBos},
                           std::pair{"tokenizer_eos", &summary.tokenizerEos}})
      if (header.contains(key) && !header[key].is_null()) {
        *id = whole(key, 0);
        if (*id >= layout.vocab)
          throw std::out_of_range(std::string("its header's '") + key +
                                  "' is " + std::to_string(*id) +
                                  ", past its vocabulary of " +
                                  std::to_string(layout.vocab));
      }
    if (layout.vocab > o.vocab)
      return Status::error(
          "data file '" + path + "' was tokenized with a vocabulary of " +
          std::to_string(layout.vocab) + " (" +
          header.value("tokenizer", std::string("?")) +
          "), larger than the model's " + std::to_string(o.vocab));
    size_t at = getTokenDatasetOffsetsAt(length);
    size_t width = layout.dtype == "uint32" ? 4 : 2;
    if (layout.dtype != "uint16" && layout.dtype != "uint32")
      throw std::out_of_range("unknown dtype '" + layout.dtype + "'");
    // Each term against the file before any sum: counts the header
    // makes up must not wrap around into a size that looks right.
    size_t count = layout.count;
    if (at > bytes.size() || documents >= (bytes.size() - at) / 8 ||
        count > (bytes.size() - at) / width ||
        at + (documents + 1) * 8 + count * width != bytes.size())
      throw std::out_of_range("its size is not what its header says (" +
                              std::to_string(documents) + " documents, " +
                              std::to_string(count) + " tokens in " +
                              std::to_string(bytes.size()) + " bytes)");
    std::vector<uint64_t> &offsets = layout.offsets;
    for (size_t d = 0; d <= documents; ++d)
      offsets.push_back(readLittle(bytes.data() + at + d * 8, 8));
    layout.at = at + (documents + 1) * 8;
    for (size_t d = 0; d < documents; ++d)
      if (offsets[d] > offsets[d + 1])
        throw std::out_of_range("its document offsets decrease");
    if (offsets.front() != 0 || offsets.back() != count)
      throw std::out_of_range("its document offsets do not span its tokens");
  } catch (const std::exception &e) {
    return Status::error("data file '" + path +
                         "' is not a valid token dataset: " + e.what());
  }
  return Status::ok();
}

/// A raw file of little-endian tokens: one document, --data-dtype wide.
Status readRawLayout(const std::vector<unsigned char> &bytes,
                     const DataOptions &o, TokenLayout &layout) {
  const std::string &path = o.path, &dtype = o.rawDtype;
  if (dtype.empty())
    return Status::error(
        "data file '" + path + "' is not a token dataset (sluice-tokenize "
        "writes those); a raw file of little-endian tokens needs "
        "--data-dtype uint16 or uint32");
  if (dtype != "uint32" && dtype != "uint16")
    return Status::error("unknown --data-dtype '" + dtype +
                         "' (expected uint32 or uint16)");
  size_t width = dtype == "uint32" ? 4 : 2;
  if (bytes.size() % width != 0)
    return Status::error("data file '" + path + "' has " +
                         std::to_string(bytes.size()) +
                         " bytes, not a whole number of " + dtype + " tokens");
  layout.dtype = dtype;
  layout.count = bytes.size() / width;
  layout.offsets = {0, layout.count};
  return Status::ok();
}

/// The tokens as int32, each checked against the vocabularies.
Status decodeTokens(const std::vector<unsigned char> &bytes,
                    const TokenLayout &layout, const DataOptions &o,
                    std::vector<int32_t> &tokens) {
  size_t width = layout.dtype == "uint32" ? 4 : 2;
  tokens.resize(layout.count);
  for (size_t i = 0; i < layout.count; ++i) {
    uint64_t token = readLittle(bytes.data() + layout.at + i * width, width);
    if (layout.vocab > 0 && int64_t(token) >= layout.vocab)
      return Status::error("data file '" + o.path + "': token " +
                           std::to_string(token) + " at offset " +
                           std::to_string(i) + " is not below the vocabulary " +
                           "size its header declares, " +
                           std::to_string(layout.vocab));
    if (int64_t(token) >= o.vocab)
      return Status::error("data file '" + o.path + "': token " +
                           std::to_string(token) + " at offset " +
                           std::to_string(i) + " is not below the vocabulary " +
                           "size " + std::to_string(o.vocab));
    tokens[i] = int32_t(token);
  }
  return Status::ok();
}

} // namespace

Status openTokenData(const DataOptions &o, std::unique_ptr<TokenSource> &train,
                     std::unique_ptr<TokenSource> &validation,
                     DataSummary &summary) {
  const std::string &path = o.path;
  // One file of tokens (sluice-tokenize writes one from a corpus).
  std::ifstream in;
  if (Status st = openInputFile(path, "data file", in); !st)
    return st;
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  bool dataset = bytes.size() >= 16 &&
                 std::memcmp(bytes.data(), kTokenDatasetMagic, 8) == 0;
  TokenLayout layout;
  if (Status st = dataset ? readDatasetLayout(bytes, o, layout, summary)
                          : readRawLayout(bytes, o, layout);
      !st)
    return st;
  auto data = std::make_shared<std::vector<int32_t>>();
  if (Status st = decodeTokens(bytes, layout, o, *data); !st)
    return st;
  // The held-out part: the last tokens, cut inside a document if need be.
  const std::vector<uint64_t> &offsets = layout.offsets;
  int64_t count = int64_t(layout.count);
  int64_t held = int64_t(std::ceil(o.validationFraction * double(count)));
  int64_t cut = count - held;
  std::vector<std::pair<int64_t, int64_t>> trainDocs, validationDocs;
  for (size_t d = 0; d + 1 < offsets.size(); ++d) {
    int64_t first = int64_t(offsets[d]), last = int64_t(offsets[d + 1]);
    if (first < cut && std::min(last, cut) > first)
      trainDocs.push_back({first, std::min(last, cut) - first});
    if (last > cut && last > std::max(first, cut))
      validationDocs.push_back({std::max(first, cut), last - std::max(first, cut)});
  }
  auto tooShort = [&](const char *part, int64_t tokens) {
    return Status::error("data file '" + path + "' holds " +
                         std::to_string(tokens) + " " + part +
                         " tokens, fewer than one sequence of " +
                         std::to_string(o.seqLen + 1) +
                         (held > 0 ? " (--val-fraction sets the split)" : ""));
  };
  if (cut < o.seqLen + 1)
    return tooShort(held > 0 ? "training" : "", cut);
  if (held > 0 && held < o.seqLen + 1)
    return tooShort("validation", held);
  summary.documents = int64_t(offsets.size()) - 1;
  summary.trainTokens = cut;
  summary.validationTokens = held;
  train = std::make_unique<DocumentTokens>(data, std::move(trainDocs),
                                           o.microbatches, true, o.seed);
  validation.reset();
  if (held > 0)
    validation = std::make_unique<DocumentTokens>(
        data, std::move(validationDocs), o.microbatches, false, o.seed);
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
