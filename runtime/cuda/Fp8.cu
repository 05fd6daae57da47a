//===- Fp8.cu - FP8 GEMMs and delayed scaling -----------------------------===//
//
// Kernels::gemmFp8 on a GPU: each operand's amax (one pass), then its
// quantization (DType.h's rounding: nearest even, saturating) into the
// layout cuBLASLt's FP8 kernels take -- op(A) as m rows of k and op(B)^T
// as n rows of k, k padded with zeros to a multiple of 16 -- and the FP8
// tensor-core GEMM with the inverse scales read from device memory, so no
// scale ever reaches the host. Where the GPU has no FP8 tensor cores
// (before compute capability 8.9), the shape is not a multiple of 16, or
// cuBLASLt has no algorithm, the quantized values are written in the
// activation type instead (exact: a power-of-two scale) and multiplied by
// the ordinary GEMM -- the same products, fp32 sums.
// SLUICE_FP8_TENSOR_CORES=0 takes that path everywhere (an A/B).
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "CudaKernels.h"

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>

namespace sluice::rt::cuda {

namespace {

__device__ __forceinline__ __nv_fp8_interpretation_t
interpretation(Fp8Format format) {
  return format == Fp8Format::E4M3 ? __NV_E4M3 : __NV_E5M2;
}

/// getFp8Scale on the device.
__device__ __forceinline__ float scaleFor(float amax, Fp8Format format) {
  if (!(amax > 0.0f) || !isfinite(amax))
    return 1.0f;
  float largest = format == Fp8Format::E4M3 ? 448.0f : 57344.0f;
  int exponent = 0;
  frexpf(largest / amax, &exponent);
  return ldexpf(1.0f, exponent - 1);
}

/// max |x| over a rows x cols matrix (leading dimension ld), into *out as
/// the bits of a non-negative float (their order is the floats'; a NaN's
/// bits exceed infinity's, so a NaN wins). A contiguous matrix is read as
/// one run: no index division per element.
template <class T>
__global__ void amaxKernel(const T *x, int64_t rows, int64_t cols, int64_t ld,
                           unsigned *out) {
  unsigned local = 0;
  if (ld == cols) {
    SLUICE_GRID_STRIDE(i, rows * cols) {
      local = max(local, __float_as_uint(fabsf(toFloat(x[i]))));
    }
  } else {
    SLUICE_GRID_STRIDE(i, rows * cols) {
      float magnitude = fabsf(toFloat(x[(i / cols) * ld + i % cols]));
      local = max(local, __float_as_uint(magnitude));
    }
  }
  for (int offset = 16; offset > 0; offset /= 2)
    local = max(local, __shfl_xor_sync(0xffffffffu, local, offset));
  if (threadIdx.x % 32 == 0 && local != 0)
    atomicMax(out, local);
}

constexpr int kTile = 32, kTileRows = 8;

/// out[r][j] (rows of `width`) = q(M[r][j] * s) for j < cols, 0 beyond,
/// where M is x (rows x cols, ld) or, `transposed`, x^T (x cols x rows);
/// Out is an FP8 byte or, dequantized (times 1 / s), the activation type.
/// The first thread records 1 / s and folds the call's amax into the
/// tensor's record. Blocks of 32 x 8 threads walk 32 x 32 tiles of out; a
/// transposed tile is read along x's rows into shared memory first, so both
/// the reads and the writes are coalesced (the direct transposed read
/// strided by ld made the FP8 step 1.7x slower than bf16's on an H200).
template <class T, class Out>
__global__ void quantizeKernel(const T *x, int64_t rows, int64_t cols,
                               int64_t ld, bool transposed, int64_t width,
                               float *record, const unsigned *callAmax,
                               Fp8Format format, Out *out, float *inverse) {
  __shared__ float tile[kTile][kTile + 1];
  float amax = __uint_as_float(*callAmax);
  float scale = record[0] > 0.0f ? record[0] : scaleFor(amax, format);
  float back = 1.0f / scale;
  if (blockIdx.x == 0 && threadIdx.x == 0 && threadIdx.y == 0) {
    *inverse = back;
    // An overlapped group's two lanes may fold into one record at once
    // (a weight's, from a forward and a backward): compare and swap, the
    // same rule as a plain "if (!(amax <= record[1])) record[1] = amax".
    auto *slot = reinterpret_cast<unsigned *>(record + 1);
    unsigned seen = *slot;
    while (!(amax <= __uint_as_float(seen))) {
      unsigned before = atomicCAS(slot, seen, __float_as_uint(amax));
      if (before == seen)
        break;
      seen = before;
    }
  }
  __nv_fp8_interpretation_t kind = interpretation(format);
  int64_t tilesAcross = (width + kTile - 1) / kTile;
  int64_t tiles = tilesAcross * ((rows + kTile - 1) / kTile);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    int64_t r0 = t / tilesAcross * kTile, j0 = t % tilesAcross * kTile;
    if (transposed) {  // uniform over the block: every thread syncs
      __syncthreads(); // the previous tile's readers are done
      for (int dy = threadIdx.y; dy < kTile; dy += kTileRows) {
        int64_t j = j0 + dy, r = r0 + threadIdx.x;
        tile[dy][threadIdx.x] =
            j < cols && r < rows ? toFloat(x[j * ld + r]) : 0.0f;
      }
      __syncthreads();
    }
    for (int dy = threadIdx.y; dy < kTile; dy += kTileRows) {
      int64_t r = r0 + dy, j = j0 + threadIdx.x;
      if (r >= rows || j >= width)
        continue;
      float value = transposed ? tile[threadIdx.x][dy]
                    : j < cols ? toFloat(x[r * ld + j])
                               : 0.0f;
      __nv_fp8_storage_t q =
          __nv_cvt_float_to_fp8(value * scale, __NV_SATFINITE, kind);
      if constexpr (sizeof(Out) == 1) {
        out[r * width + j] = q;
      } else {
        __half_raw half = __nv_cvt_fp8_to_halfraw(q, kind);
        out[r * width + j] = fromFloat<Out>(__half2float(__half(half)) * back);
      }
    }
  }
}

__global__ void updateScalesKernel(float *records, int64_t count,
                                   bool trained) {
  SLUICE_GRID_STRIDE(i, count) {
    float *record = records + i * kFp8RecordFloats;
    float largest = pushFp8Amax(record, trained);
    if (largest > 0.0f)
      record[0] = scaleFor(largest, record[2] == 448.0f ? Fp8Format::E4M3
                                                        : Fp8Format::E5M2);
  }
}

} // namespace

bool CudaKernels::isFp8TensorCoreEnabled() {
  return getEnvFlag("SLUICE_FP8_TENSOR_CORES", true);
}

bool CudaKernels::isSteadyCopyEnabled() {
  return getEnvFlag("SLUICE_FP8_STEADY_COPIES", true);
}

void CudaKernels::gemmFp8(bool transA, bool transB, int64_t m, int64_t n,
                          int64_t k, float alpha, DevicePtr a, int64_t lda,
                          const Fp8Operand &qa, DevicePtr b, int64_t ldb,
                          const Fp8Operand &qb, float beta, DevicePtr c,
                          int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  DType act = a.getType();
  // FP8 copies where cuBLASLt may multiply them: it is asked for a plan
  // after quantizing, with the real operands and scales (runFp8), so a
  // shape it refuses is quantized twice once, then never into FP8 again.
  int64_t padded = (k + 15) / 16 * 16;
  bool cores = fp8TensorCores && m % 16 == 0 && n % 16 == 0 &&
               gemmEngine->hasFp8Kernel(m, n, padded, qa.format, qb.format,
                                        c.getType(), ldc, beta != 0.0f);
  for (int attempt = cores ? 0 : 1; attempt < 2; ++attempt) {
    bool fp8 = attempt == 0;
    // Rows of the quantized copies: FP8 pads k to 16 bytes (cuBLASLt's
    // alignment); the activation-type copies keep k.
    int64_t width = fp8 ? padded : k;
    size_t element = fp8 ? 1 : size_t(getSize(act));
    size_t first = (size_t(m * width) * element + 255) / 256 * 256;
    size_t second = (size_t(n * width) * element + 255) / 256 * 256;
    // After the copies, 256-byte slots: the two call amaxes (uint bits),
    // then each inverse scale alone, as aligned as a buffer of its own
    // (cuBLASLt reads the scales; its heuristic assumes 256-byte alignment
    // of what it reads, and the H200 run that packed them 4 bytes apart
    // had every FP8 kernel refused -- a suspect, not a proven cause).
    constexpr size_t kSlot = 256;
    auto *base =
        static_cast<char *>(reserveScratch(errors, fp8Scratch, fp8ScratchBytes,
                                           first + second + 3 * kSlot, stream));
    if (!base)
      return;
    auto *amax = reinterpret_cast<unsigned *>(base + first + second);
    float *inverse[2] = {
        reinterpret_cast<float *>(base + first + second + kSlot),
        reinterpret_cast<float *>(base + first + second + 2 * kSlot)};
    SLUICE_CUDA_RECORD(errors,
                       cudaMemsetAsync(amax, 0, 2 * sizeof(unsigned), stream));
    // Stored shapes: A is (transA ? k x m : m x k), B (transB ? n x k :
    // k x n); the copies hold op(A) (m rows) and op(B)^T (n rows).
    struct Side {
      DevicePtr x;
      int64_t storedRows, storedCols, ld, rows;
      bool transposed;
      const Fp8Operand &operand;
      char *out;
    } sides[2] = {
        {a, transA ? k : m, transA ? m : k, lda, m, transA, qa, base},
        {b, transB ? n : k, transB ? k : n, ldb, n, !transB, qb, base + first}};
    for (int i = 0; i < 2; ++i) {
      Side &s = sides[i];
      // A steady operand (a weight within a step) is quantized into a copy
      // of its own by the step's first call and read from it by the rest:
      // the same bytes and inverse scale every call would write, without
      // reading the operand twice more per microbatch.
      if (fp8 && steadyCopiesOn && s.operand.steady) {
        SteadyCopy &copy =
            steadyCopies[{s.operand.record.get(), s.transposed, s.rows, width}];
        size_t bytes = (size_t(s.rows * width) + kSlot - 1) / kSlot * kSlot;
        int64_t now = fp8Generation->load();
        if (copy.generation == now && copy.bytes >= bytes + kSlot) {
          s.out = static_cast<char *>(copy.data);
          inverse[i] = reinterpret_cast<float *>(s.out + bytes);
          continue;
        }
        if (!reserveScratch(errors, copy.data, copy.bytes, bytes + kSlot,
                            stream))
          return;
        s.out = static_cast<char *>(copy.data);
        inverse[i] = reinterpret_cast<float *>(s.out + bytes);
        copy.generation = now;
      }
      SLUICE_DISPATCH_ACT(
          act, T,
          amaxKernel<T><<<std::min(gridFor(s.storedRows * s.storedCols), 1024u),
                          kThreads, 0, stream>>>(s.x.as<T>(), s.storedRows,
                                                 s.storedCols, s.ld, amax + i));
      SLUICE_LAUNCHED(errors);
      float *record = s.operand.record.f32();
      int64_t tiles =
          (s.rows + kTile - 1) / kTile * ((width + kTile - 1) / kTile);
      unsigned tileBlocks = unsigned(std::min<int64_t>(tiles, 1 << 16));
      dim3 tileThreads(kTile, kTileRows);
      if (fp8)
        SLUICE_DISPATCH_ACT(act, T,
                            quantizeKernel<T, __nv_fp8_storage_t>
                            <<<tileBlocks, tileThreads, 0, stream>>>(
                                s.x.as<T>(), s.rows, k, s.ld, s.transposed,
                                width, record, amax + i, s.operand.format,
                                reinterpret_cast<__nv_fp8_storage_t *>(s.out),
                                inverse[i]));
      else
        SLUICE_DISPATCH_ACT(act, T,
                            quantizeKernel<T, T>
                            <<<tileBlocks, tileThreads, 0, stream>>>(
                                s.x.as<T>(), s.rows, k, s.ld, s.transposed,
                                width, record, amax + i, s.operand.format,
                                reinterpret_cast<T *>(s.out), inverse[i]));
      SLUICE_LAUNCHED(errors);
    }
    if (fp8 && gemmEngine->runFp8(stream, m, n, width, alpha, sides[0].out,
                                  qa.format, inverse[0], sides[1].out,
                                  qb.format, inverse[1], beta, c, ldc))
      return;
    if (fp8) // no FP8 algorithm: quantize again into the activation type
      continue;
    gemmEngine->run(stream, false, true, m, n, k, alpha, DevicePtr(base, act),
                    k, DevicePtr(base + first, act), k, beta, c, ldc);
  }
}

void CudaKernels::updateFp8Scales(DevicePtr records, int64_t count,
                                  bool trained) {
  // The step ends: the next one's scales (and weights) are new.
  ++*fp8Generation;
  if (count <= 0)
    return;
  updateScalesKernel<<<gridFor(count), kThreads, 0, stream>>>(records.f32(),
                                                              count, trained);
  SLUICE_LAUNCHED(errors);
}

} // namespace sluice::rt::cuda
