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
struct SliceShape {
  int64_t rows = 1, tokens = 0, offset = 0;
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
