//===- Elementwise.cuh - Element-wise kernels -------------------*- C++ -*-===//
//
// Additions, conversions, fills, strided copies, bias rows and column sums,
// GELU and the gated activations (SiLU, tanh GELU), and rotary positions:
// the math of CpuKernels (runtime/cpu/CpuKernels.cpp) element by element,
// in fp32 whatever the storage type.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_ELEMENTWISE_CUH
#define SLUICE_RUNTIME_CUDA_ELEMENTWISE_CUH

#include "Common.cuh"

#include <cstdint>
#include <initializer_list>
#include <utility>

namespace sluice::rt::cuda {

// sqrt(2 / pi) and the cubic term of the GELU tanh approximation (GPT-2).
constexpr float kGeluScale = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
// 1 / sqrt(2) and 1 / sqrt(2 pi), of the exact GELU.
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

/// act(x) and act'(x) of a gate, as CpuKernels computes them.
__device__ __forceinline__ void gate(GateActivation act, float x, float &value,
                                     float &slope) {
  if (act == GateActivation::Silu) {
    float sigmoid = 1.0f / (1.0f + expf(-x));
    value = x * sigmoid;
    slope = sigmoid * (1.0f + x * (1.0f - sigmoid));
    return;
  }
  if (act == GateActivation::GeluErf) {
    // x * Phi(x); Phi'(x) is the normal density.
    float phi = 0.5f * (1.0f + erff(x * kInvSqrt2));
    value = x * phi;
    slope = phi + x * kInvSqrt2Pi * expf(-0.5f * x * x);
    return;
  }
  float inner = kGeluScale * (x + kGeluCubic * x * x * x);
  float t = tanhf(inner);
  float dInner = kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
  value = 0.5f * x * (1.0f + t);
  slope = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dInner;
}

template <class T, class X>
__global__ void addKernel(T *y, const X *x, int64_t n) {
  SLUICE_GRID_STRIDE(i, n)
  y[i] = fromFloat<T>(toFloat(y[i]) + toFloat(x[i]));
}

/// Soft-capping over rows x cols of an [rows, ld] matrix, or (grad) its
/// derivative from the capped values.
template <class T>
__global__ void softcapKernel(T *x, int64_t rows, int64_t cols, int64_t ld,
                              float cap) {
  SLUICE_GRID_STRIDE(i, rows * cols) {
    int64_t at = (i / cols) * ld + i % cols;
    x[at] = fromFloat<T>(cap * tanhf(toFloat(x[at]) / cap));
  }
}

template <class T>
__global__ void softcapGradKernel(const T *capped, T *grad, int64_t rows,
                                  int64_t cols, int64_t ld, float cap) {
  SLUICE_GRID_STRIDE(i, rows * cols) {
    int64_t at = (i / cols) * ld + i % cols;
    float t = toFloat(capped[at]) / cap;
    grad[at] = fromFloat<T>(toFloat(grad[at]) * (1.0f - t * t));
  }
}

template <class T> __global__ void scaleKernel(T *y, float factor, int64_t n) {
  SLUICE_GRID_STRIDE(i, n)
  y[i] = fromFloat<T>(toFloat(y[i]) * factor);
}

/// Zeroes the hidden-wide rows whose token is `token`.
template <class T>
__global__ void zeroTokenRowsKernel(const int32_t *tokens, int64_t stride,
                                    int64_t length, int32_t token,
                                    int64_t hidden, T *x, int64_t n) {
  SLUICE_GRID_STRIDE(i, n) {
    int64_t row = i / hidden, r = row / length, t = row % length;
    if (tokens[r * stride + t] == token)
      x[i] = fromFloat<T>(0.0f);
  }
}

/// y += x in bf16 Packs (residual connections: n a multiple of eight).
template <class T>
__global__ void addPackedKernel(T *y, const T *x, int64_t n) {
  using P = Pack<T>;
  SLUICE_GRID_STRIDE(i, n / P::kSize) {
    P yp = reinterpret_cast<P *>(y)[i], xp = reinterpret_cast<const P *>(x)[i];
#pragma unroll
    for (int k = 0; k < P::kSize; ++k)
      yp.v[k] = fromFloat<T>(toFloat(yp.v[k]) + toFloat(xp.v[k]));
    reinterpret_cast<P *>(y)[i] = yp;
  }
}

__global__ void convertKernel(void *y, DType yType, const void *x, DType xType,
                              int64_t n) {
  SLUICE_GRID_STRIDE(i, n) storeAny(y, yType, i, loadAny(x, xType, i));
}

__global__ void fillKernel(void *y, DType type, double value, int64_t n) {
  SLUICE_GRID_STRIDE(i, n) storeAny(y, type, i, value);
}

__global__ void stridedKernel(void *dst, DType dstType, const void *src,
                              DType srcType, StridedCopy c) {
  int64_t n = c.batches * c.rows * c.cols;
  SLUICE_GRID_STRIDE(i, n) {
    int64_t col = i % c.cols, row = (i / c.cols) % c.rows,
            batch = i / (c.cols * c.rows);
    storeAny(dst, dstType, batch * c.dstBatch + row * c.dstRow + col,
             loadAny(src, srcType, batch * c.srcBatch + row * c.srcRow + col));
  }
}

/// Four consecutive elements, loaded and stored at once (8 bytes of bf16,
/// 16 of fp32).
template <class T> struct alignas(4 * sizeof(T)) Quad { T v[4]; };

/// Whether every pointer is aligned to a Quad of its type and every
/// element count and stride a multiple of four.
inline bool
canQuad(std::initializer_list<std::pair<const void *, int64_t>> pointers,
        std::initializer_list<int64_t> counts) {
  for (auto [p, size] : pointers)
    if (reinterpret_cast<uintptr_t>(p) % uintptr_t(4 * size) != 0)
      return false;
  for (int64_t n : counts)
    if (n % 4 != 0)
      return false;
  return true;
}

/// stridedKernel four elements a thread, with 32-bit index arithmetic (the
/// 64-bit divisions of the general kernel made the key/value cache copies
/// four times slower than memory allows): for `quads` < 2^32, columns,
/// strides and pointers in whole Quads.
template <class D, class S>
__global__ void stridedQuadKernel(D *dst, const S *src, StridedCopy c,
                                  uint32_t quadsPerRow, uint32_t rows,
                                  uint32_t quads) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < quads;
       i += blockDim.x * gridDim.x) {
    uint32_t col = 4 * (i % quadsPerRow), rest = i / quadsPerRow;
    uint32_t row = rest % rows, batch = rest / rows;
    Quad<S> in = *reinterpret_cast<const Quad<S> *>(src + batch * c.srcBatch +
                                                    row * c.srcRow + col);
    Quad<D> out;
#pragma unroll
    for (int k = 0; k < 4; ++k)
      out.v[k] = fromFloat<D>(toFloat(in.v[k]));
    *reinterpret_cast<Quad<D> *>(dst + batch * c.dstBatch + row * c.dstRow +
                                 col) = out;
  }
}

template <class T, class V>
__global__ void addRowVectorKernel(T *x, const V *v, int64_t rows,
                                   int64_t cols) {
  SLUICE_GRID_STRIDE(i, rows * cols)
  x[i] = fromFloat<T>(toFloat(x[i]) + toFloat(v[i % cols]));
}

/// out[c] += sum over a chunk of rows of x[r][c]: one thread per column and
/// chunk, the chunks' partial sums added atomically.
template <class T>
__global__ void columnSumsKernel(const T *x, int64_t rows, int64_t cols,
                                 int64_t chunk, float *out) {
  int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols)
    return;
  int64_t first = int64_t(blockIdx.y) * chunk;
  int64_t last = first + chunk < rows ? first + chunk : rows;
  float sum = 0;
  for (int64_t r = first; r < last; ++r)
    sum += toFloat(x[r * cols + c]);
  atomicAdd(out + c, sum);
}

template <class T>
__global__ void geluForwardKernel(GateActivation act, const T *u, T *g,
                                  int64_t n) {
  SLUICE_GRID_STRIDE(i, n) {
    float value, slope;
    gate(act, toFloat(u[i]), value, slope);
    g[i] = fromFloat<T>(value);
  }
}

template <class T>
__global__ void geluBackwardKernel(GateActivation act, const T *u, const T *dg,
                                   T *du, int64_t n) {
  SLUICE_GRID_STRIDE(i, n) {
    float value, slope;
    gate(act, toFloat(u[i]), value, slope);
    du[i] = fromFloat<T>(toFloat(dg[i]) * slope);
  }
}

/// g = act(z) * u. With `Packed`, each thread takes Packs (n a multiple of
/// the pack size, pointers aligned): element-wise kernels on bf16 reach
/// the memory's bandwidth only with 16-byte accesses.
template <class T, bool Packed>
__global__ void gatedForwardKernel(GateActivation act, const T *z, const T *u,
                                   T *g, int64_t n) {
  if constexpr (Packed) {
    using P = Pack<T>;
    SLUICE_GRID_STRIDE(i, n / P::kSize) {
      P zp = reinterpret_cast<const P *>(z)[i],
        up = reinterpret_cast<const P *>(u)[i], gp;
#pragma unroll
      for (int k = 0; k < P::kSize; ++k) {
        float value, slope;
        gate(act, toFloat(zp.v[k]), value, slope);
        gp.v[k] = fromFloat<T>(value * toFloat(up.v[k]));
      }
      reinterpret_cast<P *>(g)[i] = gp;
    }
  } else {
    SLUICE_GRID_STRIDE(i, n) {
      float value, slope;
      gate(act, toFloat(z[i]), value, slope);
      g[i] = fromFloat<T>(value * toFloat(u[i]));
    }
  }
}

template <class T, bool Packed>
__global__ void gatedBackwardKernel(GateActivation act, const T *z, const T *u,
                                    const T *dg, T *dz, T *du, int64_t n) {
  if constexpr (Packed) {
    using P = Pack<T>;
    SLUICE_GRID_STRIDE(i, n / P::kSize) {
      P zp = reinterpret_cast<const P *>(z)[i],
        up = reinterpret_cast<const P *>(u)[i],
        gp = reinterpret_cast<const P *>(dg)[i], dzp, dup;
#pragma unroll
      for (int k = 0; k < P::kSize; ++k) {
        float value, slope;
        gate(act, toFloat(zp.v[k]), value, slope);
        float d = toFloat(gp.v[k]);
        dzp.v[k] = fromFloat<T>(d * toFloat(up.v[k]) * slope);
        dup.v[k] = fromFloat<T>(d * value);
      }
      reinterpret_cast<P *>(dz)[i] = dzp;
      reinterpret_cast<P *>(du)[i] = dup;
    }
  } else {
    SLUICE_GRID_STRIDE(i, n) {
      float value, slope;
      gate(act, toFloat(z[i]), value, slope);
      float d = toFloat(dg[i]);
      dz[i] = fromFloat<T>(d * toFloat(u[i]) * slope);
      du[i] = fromFloat<T>(d * value);
    }
  }
}

/// The rotation of every position below `positions` and pair i < half:
/// (cos, sin) of position * theta^(-2i / headDim), computed in double as
/// on the CPU (positions reach 10^5 and every slice of a sequence must see
/// the same rotation), then rounded to float -- once per table, not once
/// per element and step (double pow/sin/cos cost ~4% of a 1B model's step).
__global__ void rotaryTableKernel(float2 *table, int64_t first,
                                  int64_t positions, int64_t half,
                                  const double *frequency, double magnitude) {
  SLUICE_GRID_STRIDE(index, (positions - first) * half) {
    int64_t i = index % half, p = first + index / half;
    double angle = double(p) * frequency[i];
    // YaRN scales the rotation (Rotary::magnitude; 1 otherwise).
    table[p * half + i] = make_float2(float(cos(angle) * magnitude),
                                      float(sin(angle) * magnitude));
  }
}

/// One thread per (row, token, head, pair i < headDim / 2), reading the
/// rotation from the table of rotaryTableKernel.
template <class T>
__global__ void rotateKernel(T *x, int64_t rows, int64_t tokens, int64_t offset,
                             int64_t heads, int64_t headDim, int64_t stride,
                             const float2 *table, bool inverse) {
  int64_t half = headDim / 2;
  SLUICE_GRID_STRIDE(index, rows * tokens * heads * half) {
    int64_t i = index % half, h = (index / half) % heads,
            t = (index / (half * heads)) % tokens,
            r = index / (half * heads * tokens);
    float2 cs = table[(offset + t) * half + i];
    float c = cs.x, s = inverse ? -cs.y : cs.y;
    T *v = x + (r * tokens + t) * stride + h * headDim;
    float a = toFloat(v[i]), b = toFloat(v[i + half]);
    v[i] = fromFloat<T>(a * c - b * s);
    v[i + half] = fromFloat<T>(b * c + a * s);
  }
}

/// rotateKernel four pairs a thread (i .. i + 3 with i + half .. i + half +
/// 3), with 32-bit index arithmetic: for half and stride multiples of four,
/// x aligned to a Quad, and rows * tokens * heads * half / 4 < 2^32. The
/// one-pair kernel spent more on 64-bit divisions than on memory (57 us a
/// call against ~15 for its bytes, the 1B step's trace).
template <class T>
__global__ void rotateQuadKernel(T *x, uint32_t tokens, uint32_t offset,
                                 uint32_t heads, uint32_t half, int64_t stride,
                                 uint32_t headDim, const float2 *table,
                                 bool inverse, uint32_t quads) {
  uint32_t perHead = half / 4;
  for (uint32_t index = blockIdx.x * blockDim.x + threadIdx.x; index < quads;
       index += blockDim.x * gridDim.x) {
    uint32_t i = 4 * (index % perHead), rest = index / perHead;
    uint32_t h = rest % heads;
    rest /= heads;
    uint32_t t = rest % tokens, r = rest / tokens;
    T *v = x + (int64_t(r) * tokens + t) * stride + int64_t(h) * headDim;
    Quad<T> a = *reinterpret_cast<const Quad<T> *>(v + i);
    Quad<T> b = *reinterpret_cast<const Quad<T> *>(v + i + half);
    // Four float2 of the table: 32 bytes, two float4.
    const float4 *row = reinterpret_cast<const float4 *>(
        table + (int64_t(offset) + t) * half + i);
    float4 lo = row[0], hi = row[1];
    float c[4] = {lo.x, lo.z, hi.x, hi.z}, sn[4] = {lo.y, lo.w, hi.y, hi.w};
    Quad<T> ra, rb;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float s = inverse ? -sn[k] : sn[k];
      float av = toFloat(a.v[k]), bv = toFloat(b.v[k]);
      ra.v[k] = fromFloat<T>(av * c[k] - bv * s);
      rb.v[k] = fromFloat<T>(bv * c[k] + av * s);
    }
    *reinterpret_cast<Quad<T> *>(v + i) = ra;
    *reinterpret_cast<Quad<T> *>(v + i + half) = rb;
  }
}

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_ELEMENTWISE_CUH
