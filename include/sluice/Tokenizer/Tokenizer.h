//===- Tokenizer.h - Text to token ids --------------------------*- C++ -*-===//
//
// The tokenizers sluice-tokenize runs over a corpus: the byte-level one (a
// token per byte), SentencePiece models (Llama's and Gemma's
// tokenizer.model, through Debian's libsentencepiece) and byte-level BPE
// (GPT-2's vocab.json + merges.txt, or a Hugging Face tokenizer.json of
// that kind, Llama 3's included). Each encodes plain text -- no special
// tokens added -- exactly as the reference library does; the caller adds
// the document markers (getBeginOfText, getEndOfText).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_TOKENIZER_TOKENIZER_H
#define SLUICE_TOKENIZER_TOKENIZER_H

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::tok {

class Tokenizer {
public:
  virtual ~Tokenizer() = default;
  /// Appends `text`'s ids to `ids`; false with `error` set when the text
  /// holds what the tokenizer cannot encode.
  virtual bool encode(std::string_view text, std::vector<uint32_t> &ids,
                      std::string &error) const = 0;
  /// Appends the text of `ids` to `text` (sluice-tokenize --decode): the
  /// inverse of encode, as the reference libraries decode (SentencePiece's
  /// Decode, which drops its control tokens; byte-level BPE's bytes, added
  /// tokens as their text). False with `error` naming an id the
  /// vocabulary does not have.
  virtual bool decode(const std::vector<uint32_t> &ids, std::string &text,
                      std::string &error) const = 0;
  /// Every id is below this.
  virtual int64_t getVocabSize() const = 0;
  /// The id a document starts with (SentencePiece's <s>), if any.
  virtual std::optional<uint32_t> getBeginOfText() const = 0;
  /// The id after a document (</s>, <|endoftext|>), if any.
  virtual std::optional<uint32_t> getEndOfText() const = 0;
  /// "sentencepiece (bpe) 'tokenizer.model'", for messages and metadata.
  virtual std::string describe() const = 0;
  /// What loading found questionable but read as the reference library
  /// does (an added token's stated id it does not use), for the caller
  /// to print.
  virtual std::vector<std::string> getWarnings() const { return {}; }
};

/// A token per byte: vocabulary 256, no markers.
std::unique_ptr<Tokenizer> makeByteTokenizer();

/// Opens `path`: "byte"; a SentencePiece model file; a tokenizer.json;
/// a vocab.json (its merges.txt beside it); or a directory holding one of
/// tokenizer.json, tokenizer.model, vocab.json + merges.txt (a Hugging
/// Face model directory), in that order. Null with `error` naming the
/// file and what is wrong.
std::unique_ptr<Tokenizer> openTokenizer(const std::string &path,
                                         std::string &error);

} // namespace sluice::tok

#endif // SLUICE_TOKENIZER_TOKENIZER_H
