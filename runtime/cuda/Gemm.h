//===- Gemm.h - Row-major GEMMs through cuBLASLt ----------------*- C++ -*-===//
//
// Kernels::gemm's contract on a GPU: row-major C = alpha op(A) op(B) +
// beta C with A and B of one type (fp32 or bf16) and C of that type or
// fp32, accumulated in fp32 -- CUBLAS_COMPUTE_32F, so an fp32 run never
// uses TF32. cuBLASLt is column-major: a row-major C is the column-major
// C^T = op(B)^T op(A)^T, so the operands are passed swapped.
//
// Each shape, type and transposition gets its descriptors and the
// heuristic's best algorithm once, then reuses them. One engine per
// stream: the workspace is not shared between streams.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_GEMM_H
#define SLUICE_RUNTIME_CUDA_GEMM_H

#include "Backend.h"
#include "CudaDevice.h"

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <tuple>

namespace sluice::rt::cuda {

class GemmEngine {
public:
  static Status create(ErrorSink &errors, std::unique_ptr<GemmEngine> &out);
  ~GemmEngine();

  void run(cudaStream_t stream, bool transA, bool transB, int64_t m, int64_t n,
           int64_t k, float alpha, DevicePtr a, int64_t lda, DevicePtr b,
           int64_t ldb, float beta, DevicePtr c, int64_t ldc);

private:
  struct Plan;
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t,
                         int64_t, int64_t, int, int>;
  explicit GemmEngine(ErrorSink &errors);
  /// The descriptors and algorithm of one shape (null on failure).
  Plan *getPlan(const Key &key);

  ErrorSink &errors;
  void *handle = nullptr; // cublasLtHandle_t
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  std::map<Key, std::unique_ptr<Plan>> plans;
};

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_GEMM_H
