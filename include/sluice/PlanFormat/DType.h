//===- DType.h - Element types of a run -------------------------*- C++ -*-===//
//
// The element types the runtime stores and the precision a plan is
// compiled for. Header-only and dependency-free: the compiler sizes plan
// buffers with the same definitions (Layout.h).
//
// Mixed precision as Megatron-LM and torchtitan train (docs/precision.md):
// activations, their gradients, the messages between stages, key/value
// state and scratch are in the run's activation type (bf16 or fp32); the
// norm and softmax statistics and the logits are always fp32; master
// weights, gradients and both Adam moments are always fp32, and a bf16 run
// keeps a bf16 copy of the weights for its GEMMs.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_PLANFORMAT_DTYPE_H
#define SLUICE_PLANFORMAT_DTYPE_H

#include <cstdint>
#include <cstring>
#include <string>

namespace sluice::rt {

enum class DType : uint8_t { F32, BF16, F64, I32 };

/// Bytes of one element.
inline int64_t getSize(DType type) {
  switch (type) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::BF16:
    return 2;
  case DType::F64:
    return 8;
  }
  return 4;
}

inline const char *getName(DType type) {
  switch (type) {
  case DType::F32:
    return "f32";
  case DType::BF16:
    return "bf16";
  case DType::F64:
    return "f64";
  case DType::I32:
    return "i32";
  }
  return "?";
}

/// The element types of a plan's tensors (plan field `precision`).
struct Precision {
  /// Activations, their gradients, messages, key/value state, scratch.
  DType activations = DType::F32;

  static Precision fp32() { return {DType::F32}; }
  static Precision bf16() { return {DType::BF16}; }
  bool isMixed() const { return activations != DType::F32; }
  /// "fp32" or "bf16": the spelling of the plan file and the flags.
  const char *getName() const { return isMixed() ? "bf16" : "fp32"; }
  /// Parses "fp32" or "bf16"; false for anything else.
  static bool parse(const std::string &name, Precision &out) {
    if (name == "fp32")
      out = fp32();
    else if (name == "bf16")
      out = bf16();
    else
      return false;
    return true;
  }
  bool operator==(const Precision &o) const {
    return activations == o.activations;
  }
  bool operator!=(const Precision &o) const { return !(*this == o); }
};

/// A bf16 value as fp32 (exact: bf16 is an fp32's upper half).
inline float bf16ToFloat(uint16_t half) {
  uint32_t bits = uint32_t(half) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// An fp32 value rounded to bf16, to nearest even as CUDA's
/// __float2bfloat16_rn (a NaN stays a NaN).
inline uint16_t floatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

/// Master weights, gradients and Adam moments: fp32 in every precision.
constexpr DType kMasterType = DType::F32;
/// Norm and softmax statistics and logits: fp32 in every precision.
constexpr DType kStatisticType = DType::F32;

} // namespace sluice::rt

#endif // SLUICE_PLANFORMAT_DTYPE_H
