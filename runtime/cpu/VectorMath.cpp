//===- VectorMath.cpp - Softmax exponentials through vector math ----------===//

#include "VectorMath.h"

#include <cmath>

// glibc's vector math (libmvec), declared SIMD-callable as Activation.cpp
// does: 4-wide (SSE, baseline x86-64) or 8-wide (AVX2) expf.
extern "C" {
__attribute__((simd("notinbranch"))) float expf(float);
}

namespace sluice::rt::cpu {
namespace {

constexpr int64_t kLanes = 8;

/// exp(x[i] - shift) of one block, through one vector call per lane group.
__attribute__((always_inline)) inline void expBlock(const float *x, float shift,
                                                    float *e) {
#pragma omp simd
  for (int64_t i = 0; i < kLanes; ++i)
    e[i] = expf(x[i] - shift);
}

/// The block of `in` at `at`, padded past n with -inf (whose exponential
/// is 0).
__attribute__((always_inline)) inline const float *
block(const float *in, int64_t at, int64_t n, float *pad) {
  if (at + kLanes <= n)
    return in + at;
  for (int64_t i = 0; i < kLanes; ++i)
    pad[i] = at + i < n ? in[at + i] : -INFINITY;
  return pad;
}

} // namespace

__attribute__((target_clones("avx2", "default"))) void
expShifted(const float *in, float *out, int64_t n, float shift) {
  float pad[kLanes], e[kLanes];
  for (int64_t at = 0; at < n; at += kLanes) {
    expBlock(block(in, at, n, pad), shift, e);
    for (int64_t i = 0; i < kLanes && at + i < n; ++i)
      out[at + i] = e[i];
  }
}

__attribute__((target_clones("avx2", "default"))) double
sumExpShifted(const float *in, int64_t n, float shift) {
  float pad[kLanes], e[kLanes];
  double lanes[kLanes] = {};
  for (int64_t at = 0; at < n; at += kLanes) {
    expBlock(block(in, at, n, pad), shift, e);
#pragma omp simd
    for (int64_t i = 0; i < kLanes; ++i)
      lanes[i] += double(e[i]);
  }
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

} // namespace sluice::rt::cpu
