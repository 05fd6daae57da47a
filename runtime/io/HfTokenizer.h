//===- HfTokenizer.h - A dataset's tokenizer in a Hugging Face dir -*- C++ -*-===//
//
// sluice-run --save-hf writes weights and config.json; a user then wants
// `AutoTokenizer.from_pretrained(dir)` and generation to work on the same
// directory. The tokenizer a --data dataset was made with
// (sluice-tokenize records its file and its begin- and end-of-text ids)
// goes there too: its file as transformers names it, a
// tokenizer_config.json saying which class reads it and its special
// tokens, and the ids in config.json's bos_token_id and eos_token_id.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_HFTOKENIZER_H
#define SLUICE_RUNTIME_HFTOKENIZER_H

#include "Status.h"

#include <cstdint>
#include <string>

namespace sluice::rt {

struct TokenizerFiles {
  /// A SentencePiece model (tokenizer.model), a tokenizer.json, or a GPT-2
  /// vocab.json with merges.txt beside it.
  std::string file;
  int64_t bos = -1, eos = -1; // -1: none
};

/// Copies the tokenizer into the Hugging Face directory `dir` (which
/// holds config.json already) with its tokenizer_config.json, and sets
/// config.json's bos_token_id and eos_token_id where it has none.
/// `description` says what was written, for the run's last lines.
Status exportTokenizer(const std::string &dir, const TokenizerFiles &t,
                       std::string &description);

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_HFTOKENIZER_H
