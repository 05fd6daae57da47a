//===- Regions.h - A slice's shape and the regions of a buffer --*- C++ -*-===//
//
// The primitives the state layout (Layout.h) and the block features'
// regions (Feature.h) are written in: a token slice's shape, the element
// type a region holds, and the arena that lays regions out, each aligned.
// Header-only and plain C++.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_BLOCKS_REGIONS_H
#define SLUICE_BLOCKS_REGIONS_H

#include "sluice/PlanFormat/DType.h"
#include "sluice/PlanFormat/ModelConfig.h"

#include <algorithm>
#include <cstdint>

namespace sluice::rt {

/// What one pass computes: `tokens` tokens from position `offset` of each
/// of `rows` sequences (a token slice of a microbatch, or all of it).
/// Under context parallelism the slice's tokens split over
/// `contextShards` ranks: the slice is cut into 2 x contextShards equal
/// chunks, rank i holds chunks i and 2 contextShards - 1 - i (Megatron-LM's
/// causal balance), and `tokens` is the rank's two chunks, side by side in
/// each row; `offset` stays the slice's first position in the sequence.
struct SliceShape {
  int64_t rows = 1, tokens = 0, offset = 0;
  int64_t contextShards = 1;
  /// The slice's tokens per row on all the context-parallel ranks.
  int64_t getSliceTokens() const { return tokens * contextShards; }
  /// Where the slice starts in a rank's tokens of a row (each earlier
  /// slice gave it 1/contextShards of its tokens).
  int64_t getLocalOffset() const { return offset / contextShards; }
  /// A chunk's tokens (each rank's `tokens` are two).
  int64_t getChunkTokens() const { return tokens / 2; }
  /// The slice's chunk that rank `rank`'s `part`-th (0 or 1) chunk is,
  /// and its first position in the sequence.
  int64_t getChunk(int64_t rank, int part) const {
    return part == 0 ? rank : 2 * contextShards - 1 - rank;
  }
  int64_t getChunkOffset(int64_t rank, int part) const {
    return offset + getChunk(rank, part) * getChunkTokens();
  }
};

/// The rows x tokens of slice `s` a shard of `model` holds outside the
/// tensor-parallel regions: all of them, or its 1/sequenceShards under
/// sequence parallelism.
inline int64_t getLocalTokens(const ModelConfig &model, const SliceShape &s) {
  return s.rows * s.tokens / std::max(1, model.sequenceShards);
}

/// Every region of a buffer starts at a multiple of this many bytes.
constexpr int64_t kRegionAlignment = 256;

/// What a region holds, and so its element type.
enum class Storage : uint8_t {
  Activation, // the precision's activation type
  Fp32,       // statistics, logits, accumulators
};

inline DType getType(Storage storage, const Precision &precision) {
  return storage == Storage::Fp32 ? kStatisticType : precision.activations;
}

/// Lays regions out one after the other, each aligned: the byte offset of
/// every region and the total.
class Arena {
public:
  explicit Arena(const Precision &precision) : precision(precision) {}
  /// Appends `count` elements of `storage`; returns their byte offset.
  int64_t take(int64_t count, Storage storage) {
    int64_t at =
        (used + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment;
    used = at + count * getSize(getType(storage, precision));
    return at;
  }
  int64_t getBytes() const { return used; }
  const Precision &getPrecision() const { return precision; }

private:
  Precision precision;
  int64_t used = 0;
};

} // namespace sluice::rt

#endif // SLUICE_BLOCKS_REGIONS_H
