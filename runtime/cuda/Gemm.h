//===- Gemm.h - Row-major GEMMs through cuBLASLt ----------------*- C++ -*-===//
//
// Kernels::gemm's contract on a GPU: row-major C = alpha op(A) op(B) +
// beta C with A and B of one type (fp32 or bf16) and C of that type or
// fp32, accumulated in fp32 -- CUBLAS_COMPUTE_32F, so an fp32 run never
// uses TF32. cuBLASLt is column-major: a row-major C is the column-major
// C^T = op(B)^T op(A)^T, so the operands are passed swapped.
//
// Each shape, type, transposition and accumulate-or-overwrite gets its
// descriptors once and its algorithm on its first run: the heuristic's
// candidates are timed on the call's own operands (an output it accumulates
// into is replaced by scratch while timing) and the fastest is kept, unless
// SLUICE_GEMM_AUTOTUNE=0 keeps the heuristic's first choice -- cuBLASLt's
// ranking misses by up to a third for the fp32-accumulating weight-gradient
// shapes (bench/results/). Every candidate accumulates in fp32; the choice
// changes rounding only. SLUICE_GEMM_LOG=1 prints each shape's timings.
// One engine per stream: the workspace is not shared between streams.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_GEMM_H
#define SLUICE_RUNTIME_CUDA_GEMM_H

#include "Backend.h"
#include "CudaDevice.h"

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>

namespace sluice::rt::cuda {

class GemmEngine {
public:
  static Status create(ErrorSink &errors, std::unique_ptr<GemmEngine> &out);
  ~GemmEngine();

  void run(cudaStream_t stream, bool transA, bool transB, int64_t m, int64_t n,
           int64_t k, float alpha, DevicePtr a, int64_t lda, DevicePtr b,
           int64_t ldb, float beta, DevicePtr c, int64_t ldc);

  /// FP8 tensor cores (Hopper, Ada): row-major C (m x n, ldc) = alpha
  /// (*inverseA) (*inverseB) a b^T + beta C, where `a` holds op(A) as m
  /// rows and `b` op(B)^T as n rows of `k` FP8 bytes each (cuBLASLt's FP8
  /// kernels take only this "TN" form) and the inverse scales are device
  /// floats. The plan is made with these very pointers (the heuristic
  /// judges their alignment) and kept per alignment class; forward
  /// products (E4M3 x E4M3) accumulate fast. False, with nothing
  /// enqueued, where cuBLASLt has no FP8 algorithm for the shape or
  /// refuses the ones it offered (the caller multiplies another way; said
  /// once per shape, an error under SLUICE_FP8_STRICT=1).
  bool runFp8(cudaStream_t stream, int64_t m, int64_t n, int64_t k, float alpha,
              const void *a, Fp8Format aFormat, const float *inverseA,
              const void *b, Fp8Format bFormat, const float *inverseB,
              float beta, DevicePtr c, int64_t ldc);
  /// Whether FP8 kernels may serve this problem: false for two E5M2
  /// operands, a cuBLASLt of another major version than the headers', or
  /// a shape refused before (so the caller quantizes into FP8 only where
  /// they may be used).
  bool hasFp8Kernel(int64_t m, int64_t n, int64_t k, Fp8Format aFormat,
                    Fp8Format bFormat, DType c, int64_t ldc, bool accumulate);
  /// GEMMs multiplied on FP8 tensor cores so far (the tests' proof that
  /// one ran).
  int64_t getFp8Multiplies() const { return fp8Multiplies; }
  /// SLUICE_FP8_STRICT=1: a refused FP8 GEMM is an error, not a fallback.
  static bool isFp8Strict();

  /// An FP8 problem: m, n, k, ldc, the operands' and C's types,
  /// accumulation.
  using Fp8Shape =
      std::tuple<int64_t, int64_t, int64_t, int64_t, int, int, int, bool>;
  /// Its plan's key: the shape and the alignments (bytes, up to 256) of
  /// A, B, C and the two scales.
  using Fp8Key =
      std::tuple<Fp8Shape,
                 std::tuple<uint32_t, uint32_t, uint32_t, uint32_t, uint32_t>>;

private:
  struct Plan;
  /// What a plan is made with beyond its key.
  struct Fp8Call {
    const float *inverseA, *inverseB;
  };
  static Fp8Shape getFp8Shape(int64_t m, int64_t n, int64_t k,
                              Fp8Format aFormat, Fp8Format bFormat, DType c,
                              int64_t ldc, bool accumulate);
  /// The descriptors and algorithm of one FP8 problem; null where there
  /// is none (remembered, so the heuristic is asked once).
  Plan *getFp8Plan(const Fp8Key &key, const Fp8Call &call);
  void setFp8Scales(Plan &plan, const Fp8Call &call);
  /// Remembers that `shape` multiplies another way, and says why.
  void refuseFp8(const Fp8Shape &shape, const std::string &why);
  std::map<Fp8Key, std::unique_ptr<Plan>> fp8Plans;
  std::set<Fp8Shape> refusedFp8;
  int64_t fp8Multiplies = 0;
  bool fp8Usable = true, strictFp8 = false;
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t,
                         int64_t, int64_t, int, int, bool>;
  explicit GemmEngine(ErrorSink &errors);
  /// The descriptors and algorithm of one shape (null on failure).
  Plan *getPlan(const Key &key);
  /// Times `plan`'s candidates on these operands and keeps the fastest.
  void tune(Plan &plan, cudaStream_t stream, int64_t m, int64_t n,
            int64_t k, int64_t ldc,
            float alpha, DevicePtr a, DevicePtr b, float beta, DevicePtr c);

  ErrorSink &errors;
  void *handle = nullptr; // cublasLtHandle_t
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  bool autotune = true, log = false;
  std::map<Key, std::unique_ptr<Plan>> plans;
};

/// The cuBLASLt this process loaded: its version, the headers' it was
/// built against, and the file it came from.
std::string describeBlasLibrary();

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_GEMM_H
