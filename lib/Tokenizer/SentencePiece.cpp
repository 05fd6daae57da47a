//===- SentencePiece.cpp - SentencePiece models through libsentencepiece --===//
//
// Llama's and Gemma's tokenizer.model files, encoded by Google's library
// itself (Debian's libsentencepiece): the same code Python's sentencepiece
// and transformers' slow tokenizers call.
//
//===----------------------------------------------------------------------===//

#include "Tokenizers.h"

#include <sentencepiece_processor.h>

namespace sluice::tok {

namespace {
class SentencePiece final : public Tokenizer {
public:
  bool load(const std::string &path, std::string &error) {
    name = path;
    auto st = processor.Load(path);
    if (!st.ok()) {
      error = "cannot load '" + path + "' as a SentencePiece model: " +
              st.ToString();
      return false;
    }
    return true;
  }

  bool encode(std::string_view text, std::vector<uint32_t> &ids,
              std::string &error) const override {
    std::vector<int> out;
    auto st = processor.Encode(
        absl::string_view(text.data(), text.size()), &out);
    if (!st.ok()) {
      error = "'" + name + "' cannot encode the text: " + st.ToString();
      return false;
    }
    ids.insert(ids.end(), out.begin(), out.end());
    return true;
  }
  bool decode(const std::vector<uint32_t> &ids, std::string &text,
              std::string &error) const override {
    std::vector<int> pieces;
    for (uint32_t id : ids) {
      if (int64_t(id) >= getVocabSize()) {
        error = "id " + std::to_string(id) + " is not in the vocabulary of " +
                describe() + " (" + std::to_string(getVocabSize()) + ")";
        return false;
      }
      pieces.push_back(int(id));
    }
    std::string out;
    auto st = processor.Decode(pieces, &out);
    if (!st.ok()) {
      error = "'" + name + "' cannot decode the ids: " + st.ToString();
      return false;
    }
    text += out;
    return true;
  }
  int64_t getVocabSize() const override { return processor.GetPieceSize(); }
  std::optional<uint32_t> getBeginOfText() const override {
    return marker(processor.bos_id());
  }
  std::optional<uint32_t> getEndOfText() const override {
    return marker(processor.eos_id());
  }
  std::string describe() const override {
    return "SentencePiece '" + name + "'";
  }

private:
  static std::optional<uint32_t> marker(int id) {
    if (id < 0)
      return std::nullopt;
    return uint32_t(id);
  }
  std::string name;
  sentencepiece::SentencePieceProcessor processor;
};
} // namespace

std::unique_ptr<Tokenizer> openSentencePiece(const std::string &path,
                                             std::string &error) {
  auto t = std::make_unique<SentencePiece>();
  if (!t->load(path, error))
    return nullptr;
  return t;
}

} // namespace sluice::tok
