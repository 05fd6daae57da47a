//===- TokenDataset.h - A tokenized corpus on disk --------------*- C++ -*-===//
//
// What sluice-tokenize writes and sluice-run --data reads: the tokens of a
// corpus, its document boundaries, and in a header the element type, the
// vocabulary and the tokenizer, so that a reader never guesses. Little
// endian:
//
//   8 bytes   "SLUICETK"
//   u64       L, the length of the JSON header
//   L bytes   {"format": "sluice-tokens", "version": 1,
//              "dtype": "uint16" | "uint32", "vocab": V,
//              "documents": D, "tokens": N, "tokenizer": "...",
//              "bos": id | null, "eos": id | null}
//   zeros     to the next multiple of 8 bytes
//   u64       D + 1 document offsets, in tokens: document d is tokens
//             [offset[d], offset[d + 1]); offset[D] = N
//   N tokens  of dtype (a document's markers, bos and eos, included)
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_PLANFORMAT_TOKENDATASET_H
#define SLUICE_PLANFORMAT_TOKENDATASET_H

#include <cstdint>

namespace sluice {

constexpr char kTokenDatasetMagic[8] = {'S', 'L', 'U', 'I',
                                        'C', 'E', 'T', 'K'};
constexpr int kTokenDatasetVersion = 1;

/// Where the offsets start, after the magic, the length and a header of
/// `headerBytes`.
inline uint64_t getTokenDatasetOffsetsAt(uint64_t headerBytes) {
  return (16 + headerBytes + 7) / 8 * 8;
}

} // namespace sluice

#endif // SLUICE_PLANFORMAT_TOKENDATASET_H
