//===- Tokenizer.cpp - Opening a tokenizer by path ------------------------===//

#include "Tokenizers.h"

#include <filesystem>
#include <fstream>

namespace sluice::tok {

namespace fs = std::filesystem;

namespace {
class ByteTokenizer final : public Tokenizer {
public:
  bool encode(std::string_view text, std::vector<uint32_t> &ids,
              std::string &) const override {
    for (char c : text)
      ids.push_back(uint8_t(c));
    return true;
  }
  bool decode(const std::vector<uint32_t> &ids, std::string &text,
              std::string &error) const override {
    for (uint32_t id : ids) {
      if (id > 255) {
        error = "id " + std::to_string(id) + " is not a byte (0 to 255)";
        return false;
      }
      text += char(id);
    }
    return true;
  }
  int64_t getVocabSize() const override { return 256; }
  std::optional<uint32_t> getBeginOfText() const override {
    return std::nullopt;
  }
  std::optional<uint32_t> getEndOfText() const override {
    return std::nullopt;
  }
  std::string describe() const override { return "byte"; }
};

/// Whether `path` starts like JSON (a tokenizer.json or vocab.json) rather
/// than a SentencePiece model (a binary protobuf).
bool looksLikeJson(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  char c = 0;
  while (in.get(c))
    if (!std::isspace(static_cast<unsigned char>(c)))
      return c == '{';
  return false;
}
} // namespace

std::unique_ptr<Tokenizer> makeByteTokenizer() {
  return std::make_unique<ByteTokenizer>();
}

std::unique_ptr<Tokenizer> openTokenizer(const std::string &path,
                                         std::string &error) {
  if (path == "byte")
    return makeByteTokenizer();
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const char *file : {"tokenizer.json", "tokenizer.model", "vocab.json"})
      if (fs::exists(fs::path(path) / file, ec))
        return openTokenizer((fs::path(path) / file).string(), error);
    error = "'" + path + "' holds no tokenizer.json, tokenizer.model or "
            "vocab.json";
    return nullptr;
  }
  if (!fs::exists(path, ec)) {
    error = "no tokenizer '" + path + "' (a tokenizer.model, tokenizer.json, "
            "vocab.json, a directory holding one, or byte)";
    return nullptr;
  }
  if (!looksLikeJson(path))
    return openSentencePiece(path, error);
  if (fs::path(path).filename() == "vocab.json")
    return openVocabAndMerges(
        path, (fs::path(path).parent_path() / "merges.txt").string(), error);
  return openTokenizerJson(path, error);
}

} // namespace sluice::tok
