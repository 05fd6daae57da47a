//===- Activation.cpp - GELU, SwiGLU and GeGLU on the host ----------------===//
//
// The feed-forward block's activations, plain and gated, and their
// gradients.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"

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

namespace {
/// act(x) and act'(x) of a gate.
inline void gate(GateActivation act, float x, float &value, float &slope) {
  if (act == GateActivation::Silu) {
    float sigmoid = 1.0f / (1.0f + std::exp(-x));
    value = x * sigmoid;
    slope = sigmoid * (1.0f + x * (1.0f - sigmoid));
    return;
  }
  if (act == GateActivation::GeluErf) {
    // x * Phi(x); Phi'(x) is the normal density.
    float phi = 0.5f * (1.0f + std::erf(x * kInvSqrt2));
    value = x * phi;
    slope = phi + x * kInvSqrt2Pi * std::exp(-0.5f * x * x);
    return;
  }
  float inner = kGeluScale * (x + kGeluCubic * x * x * x);
  float t = std::tanh(inner);
  float dInner = kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
  value = 0.5f * x * (1.0f + t);
  slope = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dInner;
}
} // namespace

void CpuKernels::geluForward(GateActivation act, DevicePtr uPtr, DevicePtr gPtr,
                             int64_t n) {
  const float *u = uPtr.as<float>();
  float *g = gPtr.as<float>();
  for (int64_t i = 0; i < n; ++i) {
    float slope;
    gate(act, u[i], g[i], slope);
  }
}

void CpuKernels::geluBackward(GateActivation act, DevicePtr uPtr,
                              DevicePtr dgPtr, DevicePtr duPtr, int64_t n) {
  const float *u = uPtr.as<float>();
  const float *dg = dgPtr.as<float>();
  float *du = duPtr.as<float>();
  for (int64_t i = 0; i < n; ++i) {
    float value, slope;
    gate(act, u[i], value, slope);
    du[i] = dg[i] * slope;
  }
}

void CpuKernels::gatedForward(GateActivation act, DevicePtr zPtr,
                              DevicePtr uPtr, DevicePtr gPtr, int64_t n) {
  const float *z = zPtr.as<float>();
  const float *u = uPtr.as<float>();
  float *g = gPtr.as<float>();
  for (int64_t i = 0; i < n; ++i) {
    float value, slope;
    gate(act, z[i], value, slope);
    g[i] = value * u[i];
  }
}

void CpuKernels::gatedBackward(GateActivation act, DevicePtr zPtr,
                               DevicePtr uPtr, DevicePtr dgPtr, DevicePtr dzPtr,
                               DevicePtr duPtr, int64_t n) {
  const float *z = zPtr.as<float>();
  const float *u = uPtr.as<float>();
  const float *dg = dgPtr.as<float>();
  float *dz = dzPtr.as<float>();
  float *du = duPtr.as<float>();
  for (int64_t i = 0; i < n; ++i) {
    float value, slope;
    gate(act, z[i], value, slope);
    dz[i] = dg[i] * u[i] * slope;
    du[i] = dg[i] * value;
  }
}

} // namespace sluice::rt
