//===- Tokenizers.h - The tokenizer kinds openTokenizer picks ---*- C++ -*-===//

#ifndef SLUICE_LIB_TOKENIZER_TOKENIZERS_H
#define SLUICE_LIB_TOKENIZER_TOKENIZERS_H

#include "sluice/Tokenizer/Tokenizer.h"

namespace sluice::tok {

std::unique_ptr<Tokenizer> openSentencePiece(const std::string &path,
                                             std::string &error);
std::unique_ptr<Tokenizer> openTokenizerJson(const std::string &path,
                                             std::string &error);
std::unique_ptr<Tokenizer> openVocabAndMerges(const std::string &vocab,
                                              const std::string &merges,
                                              std::string &error);

} // namespace sluice::tok

#endif // SLUICE_LIB_TOKENIZER_TOKENIZERS_H
