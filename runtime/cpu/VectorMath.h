//===- VectorMath.h - Softmax exponentials through vector math --*- C++ -*-===//
//
// The exponentials of the softmaxes (attention, cross-entropy) through
// glibc's vector expf, as the activations take theirs (Activation.cpp):
// in blocks of 8 elements from the start of the span, the last block
// padded, so an element's value depends on its input alone, not on where
// the span was cut -- a token slice, a shard or a thread's share sees the
// same exponentials the whole row does.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CPU_VECTORMATH_H
#define SLUICE_RUNTIME_CPU_VECTORMATH_H

#include <cstdint>

namespace sluice::rt::cpu {

/// out[i] = exp(in[i] - shift) for i < n (out may be in).
void expShifted(const float *in, float *out, int64_t n, float shift);

/// The sum over i < n of exp(in[i] - shift), in double: eight running
/// sums, one per lane, added in a fixed order at the end.
double sumExpShifted(const float *in, int64_t n, float shift);

} // namespace sluice::rt::cpu

#endif // SLUICE_RUNTIME_CPU_VECTORMATH_H
