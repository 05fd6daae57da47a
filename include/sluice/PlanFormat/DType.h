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

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>

namespace sluice::rt {

enum class DType : uint8_t { F32, BF16, F64, I32 };
/// The tables indexed by DType (here, and each transport's element types)
/// hold this many entries: a new type fails their static_asserts.
constexpr int kNumDTypes = int(DType::I32) + 1;

/// Bytes of one element.
inline int64_t getSize(DType type) {
  constexpr int64_t kSizes[] = {4, 2, 8, 4};
  static_assert(std::size(kSizes) == kNumDTypes);
  return kSizes[int(type)];
}

inline const char *getName(DType type) {
  constexpr const char *kNames[] = {"f32", "bf16", "f64", "i32"};
  static_assert(std::size(kNames) == kNumDTypes);
  return kNames[int(type)];
}

/// The element types of a plan's tensors (plan field `precision`).
struct Precision {
  /// Activations, their gradients, messages, key/value state, scratch.
  DType activations = DType::F32;
  /// The transformer layers' GEMMs take FP8 operands (E4M3 weights and
  /// activations, E5M2 gradients, per-tensor delayed scaling;
  /// docs/precision.md). Only with bf16 activations: the storage is a bf16
  /// plan's, so a bf16 plan runs in fp8 unchanged.
  bool fp8Gemms = false;

  static Precision fp32() { return {DType::F32}; }
  static Precision bf16() { return {DType::BF16}; }
  static Precision fp8() { return {DType::BF16, true}; }
  bool isMixed() const { return activations != DType::F32; }
  /// "fp32", "bf16" or "fp8": the spelling of the plan file and the flags.
  const char *getName() const {
    return fp8Gemms ? "fp8" : isMixed() ? "bf16" : "fp32";
  }
  /// Parses "fp32", "bf16" or "fp8"; false for anything else.
  static bool parse(const std::string &name, Precision &out) {
    if (name == "fp32")
      out = fp32();
    else if (name == "bf16")
      out = bf16();
    else if (name == "fp8")
      out = fp8();
    else
      return false;
    return true;
  }
  /// The same storage: one's buffers serve the other.
  bool sameStorage(const Precision &o) const {
    return activations == o.activations;
  }
  bool operator==(const Precision &o) const {
    return activations == o.activations && fp8Gemms == o.fp8Gemms;
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

/// The FP8 formats of a GEMM's operands under the fp8 precision
/// (Micikevicius et al., 2022, "FP8 Formats for Deep Learning"): E4M3
/// (largest 448, no infinities) for weights and activations, E5M2
/// (largest 57344, the range of fp16) for gradients.
enum class Fp8Format : uint8_t { E4M3, E5M2 };

inline float getFp8Max(Fp8Format format) {
  return format == Fp8Format::E4M3 ? 448.0f : 57344.0f;
}

/// `value` rounded to the nearest value of `format` (ties to even),
/// saturating at the largest finite one -- CUDA's __nv_cvt_float_to_fp8
/// with __NV_SATFINITE. Subnormals kept (E4M3's smallest is 2^-9, E5M2's
/// 2^-16); a NaN stays a NaN.
inline float roundToFp8(float value, Fp8Format format) {
  if (std::isnan(value))
    return value;
  float largest = getFp8Max(format), magnitude = std::fabs(value);
  if (magnitude >= largest)
    return std::copysign(largest, value);
  int mantissaBits = format == Fp8Format::E4M3 ? 3 : 2;
  int minExponent = format == Fp8Format::E4M3 ? -6 : -14;
  int exponent = 0;
  std::frexp(magnitude, &exponent); // magnitude in [2^(e-1), 2^e)
  // The spacing of the binade (subnormals: the lowest binade's).
  float quantum =
      std::ldexp(1.0f, std::max(exponent - 1, minExponent) - mantissaBits);
  float rounded = std::nearbyint(magnitude / quantum) * quantum;
  return std::copysign(std::min(rounded, largest), value);
}

/// The power of two an FP8 operand whose largest magnitude is `amax` is
/// multiplied by: the largest that keeps amax within the format (amax 0,
/// infinite or NaN: 1). A power of two, so that a quantized value times
/// 1 / scale is exact in bf16 and fp32 (docs/precision.md).
inline float getFp8Scale(float amax, Fp8Format format) {
  if (!(amax > 0.0f) || !std::isfinite(amax))
    return 1.0f;
  int exponent = 0;
  std::frexp(getFp8Max(format) / amax, &exponent); // in [2^(e-1), 2^e)
  return std::ldexp(1.0f, exponent - 1);
}

/// Master weights, gradients and Adam moments: fp32 in every precision.
constexpr DType kMasterType = DType::F32;
/// Norm and softmax statistics and logits: fp32 in every precision.
constexpr DType kStatisticType = DType::F32;

} // namespace sluice::rt

#endif // SLUICE_PLANFORMAT_DTYPE_H
