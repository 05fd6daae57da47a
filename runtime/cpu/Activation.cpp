//===- Activation.cpp - GELU, SwiGLU and GeGLU on the host ----------------===//
//
// The feed-forward block's activations, plain and gated, and their
// gradients.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "Threads.h"

#include <algorithm>
#include <cmath>

namespace sluice::rt {

namespace {
// sqrt(2 / pi), the GELU tanh approximation's constant.
constexpr float kGeluScale = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
// 1 / sqrt(2) and 1 / sqrt(2 pi), of the exact GELU.
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
} // namespace

// glibc's vector math (libmvec): declared SIMD-callable, as its own
// headers do only under -ffast-math, so that the loops below call the
// 4-wide (SSE, baseline x86-64) or 8-wide (AVX2) expf/tanhf/erff without
// fast math's other licences. Accurate to a few ulp, like the scalar ones.
extern "C" {
__attribute__((simd("notinbranch"))) float expf(float);
__attribute__((simd("notinbranch"))) float tanhf(float);
__attribute__((simd("notinbranch"))) float erff(float);
}

namespace {

constexpr int64_t kLanes = 8;

/// act(x) and act'(x) of a gate over kLanes elements, one vector function
/// call per lane group -- the same function for every element wherever it
/// sits in the array (the tail is padded into a block), so a split of the
/// work over slices or shards gives each element the same value.
__attribute__((always_inline)) inline void
gate(GateActivation act, const float *x, float *value, float *slope) {
  if (act == GateActivation::Silu) {
#pragma omp simd
    for (int64_t i = 0; i < kLanes; ++i) {
      float sigmoid = 1.0f / (1.0f + expf(-x[i]));
      value[i] = x[i] * sigmoid;
      slope[i] = sigmoid * (1.0f + x[i] * (1.0f - sigmoid));
    }
    return;
  }
  if (act == GateActivation::GeluErf) {
    // x * Phi(x); Phi'(x) is the normal density.
#pragma omp simd
    for (int64_t i = 0; i < kLanes; ++i) {
      float phi = 0.5f * (1.0f + erff(x[i] * kInvSqrt2));
      value[i] = x[i] * phi;
      slope[i] = phi + x[i] * kInvSqrt2Pi * expf(-0.5f * x[i] * x[i]);
    }
    return;
  }
#pragma omp simd
  for (int64_t i = 0; i < kLanes; ++i) {
    float xi = x[i];
    float t = tanhf(kGeluScale * (xi + kGeluCubic * xi * xi * xi));
    float dInner = kGeluScale * (1.0f + 3.0f * kGeluCubic * xi * xi);
    value[i] = 0.5f * xi * (1.0f + t);
    slope[i] = 0.5f * (1.0f + t) + 0.5f * xi * (1.0f - t * t) * dInner;
  }
}

/// The kLanes elements of `from` at `at` (zero past n), as a block.
__attribute__((always_inline)) inline const float *
block(const float *from, int64_t at, int64_t n, float *pad) {
  if (at + kLanes <= n)
    return from + at;
  for (int64_t i = 0; i < kLanes; ++i)
    pad[i] = at + i < n ? from[at + i] : 0.0f;
  return pad;
}

/// The four activation loops, each built for baseline x86-64 and for AVX2
/// and chosen when the program loads (function multiversioning).
__attribute__((target_clones("avx2", "default"))) void
geluForwardLoop(GateActivation act, const float *u, float *g, int64_t n) {
  float pad[kLanes], value[kLanes], slope[kLanes];
  for (int64_t at = 0; at < n; at += kLanes) {
    gate(act, block(u, at, n, pad), value, slope);
    for (int64_t i = 0; i < kLanes && at + i < n; ++i)
      g[at + i] = value[i];
  }
}

__attribute__((target_clones("avx2", "default"))) void
geluBackwardLoop(GateActivation act, const float *u, const float *dg, float *du,
                 int64_t n) {
  float pad[kLanes], value[kLanes], slope[kLanes];
  for (int64_t at = 0; at < n; at += kLanes) {
    gate(act, block(u, at, n, pad), value, slope);
    for (int64_t i = 0; i < kLanes && at + i < n; ++i)
      du[at + i] = dg[at + i] * slope[i];
  }
}

__attribute__((target_clones("avx2", "default"))) void
gatedForwardLoop(GateActivation act, const float *z, const float *u, float *g,
                 int64_t n) {
  float pad[kLanes], value[kLanes], slope[kLanes];
  for (int64_t at = 0; at < n; at += kLanes) {
    gate(act, block(z, at, n, pad), value, slope);
    for (int64_t i = 0; i < kLanes && at + i < n; ++i)
      g[at + i] = value[i] * u[at + i];
  }
}

__attribute__((target_clones("avx2", "default"))) void
gatedBackwardLoop(GateActivation act, const float *z, const float *u,
                  const float *dg, float *dz, float *du, int64_t n) {
  float pad[kLanes], value[kLanes], slope[kLanes];
  for (int64_t at = 0; at < n; at += kLanes) {
    gate(act, block(z, at, n, pad), value, slope);
    for (int64_t i = 0; i < kLanes && at + i < n; ++i) {
      dz[at + i] = dg[at + i] * u[at + i] * slope[i];
      du[at + i] = dg[at + i] * value[i];
    }
  }
}

/// Calls body(at, count) over parts of [0, n) split over the kernel
/// threads at block boundaries, so each element stays in the block it
/// has without threads (the same value either way).
template <class Body> void split(int64_t n, Body body) {
  int64_t blocks = (n + kLanes - 1) / kLanes;
  cpu::parallelFor(blocks, 2048, [&](int64_t from, int64_t to) {
    int64_t at = from * kLanes;
    body(at, std::min(n, to * kLanes) - at);
  });
}

} // namespace

void CpuKernels::geluForward(GateActivation act, DevicePtr uPtr, DevicePtr gPtr,
                             int64_t n) {
  const float *u = uPtr.as<float>();
  float *g = gPtr.as<float>();
  split(n, [&](int64_t at, int64_t m) {
    geluForwardLoop(act, u + at, g + at, m);
  });
}

void CpuKernels::geluBackward(GateActivation act, DevicePtr uPtr,
                              DevicePtr dgPtr, DevicePtr duPtr, int64_t n) {
  const float *u = uPtr.as<float>(), *dg = dgPtr.as<float>();
  float *du = duPtr.as<float>();
  split(n, [&](int64_t at, int64_t m) {
    geluBackwardLoop(act, u + at, dg + at, du + at, m);
  });
}

void CpuKernels::gatedForward(GateActivation act, DevicePtr zPtr,
                              DevicePtr uPtr, DevicePtr gPtr, int64_t n) {
  const float *z = zPtr.as<float>(), *u = uPtr.as<float>();
  float *g = gPtr.as<float>();
  split(n, [&](int64_t at, int64_t m) {
    gatedForwardLoop(act, z + at, u + at, g + at, m);
  });
}

void CpuKernels::gatedBackward(GateActivation act, DevicePtr zPtr,
                               DevicePtr uPtr, DevicePtr dgPtr, DevicePtr dzPtr,
                               DevicePtr duPtr, int64_t n) {
  const float *z = zPtr.as<float>(), *u = uPtr.as<float>(),
              *dg = dgPtr.as<float>();
  float *dz = dzPtr.as<float>(), *du = duPtr.as<float>();
  split(n, [&](int64_t at, int64_t m) {
    gatedBackwardLoop(act, z + at, u + at, dg + at, dz + at, du + at, m);
  });
}

} // namespace sluice::rt
