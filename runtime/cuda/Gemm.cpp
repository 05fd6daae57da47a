//===- Gemm.cpp - Row-major GEMMs through cuBLASLt ------------------------===//

#include "Gemm.h"

#include <cublasLt.h>

#include <string>

namespace sluice::rt::cuda {

namespace {
/// cuBLASLt's scratch per stream: its heuristics pick faster kernels (split
/// K, stream-K) when they may use some.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

cudaDataType_t cudaType(DType type) {
  return type == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/// A failing cuBLASLt call, as a CUDA error the sink can keep.
void recordBlas(ErrorSink &errors, cublasStatus_t status,
                const char *expression, const char *file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return;
  // cudaErrorUnknown carries no text; the expression names the call.
  errors.check(cudaErrorUnknown,
               (std::string(expression) + " returned cuBLAS status " +
                std::to_string(int(status)) + " (" +
                cublasLtGetStatusString(status) + ")")
                   .c_str(),
               file, line);
}
#define BLAS_RECORD(expr) recordBlas(errors, (expr), #expr, __FILE__, __LINE__)
} // namespace

struct GemmEngine::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (op)
      cublasLtMatmulDescDestroy(op);
    for (cublasLtMatrixLayout_t layout : {a, b, c})
      if (layout)
        cublasLtMatrixLayoutDestroy(layout);
  }
};

GemmEngine::GemmEngine(ErrorSink &errors) : errors(errors) {}

Status GemmEngine::create(ErrorSink &errors, std::unique_ptr<GemmEngine> &out) {
  std::unique_ptr<GemmEngine> engine(new GemmEngine(errors));
  cublasLtHandle_t handle = nullptr;
  cublasStatus_t status = cublasLtCreate(&handle);
  if (status != CUBLAS_STATUS_SUCCESS)
    return Status::error(std::string("cublasLtCreate failed: ") +
                         cublasLtGetStatusString(status));
  engine->handle = handle;
  cudaError_t error = cudaMalloc(&engine->workspace, kWorkspaceBytes);
  if (error != cudaSuccess)
    return Status::error(std::string("cannot allocate the cuBLASLt "
                                     "workspace: ") +
                         cudaGetErrorString(error));
  engine->workspaceBytes = kWorkspaceBytes;
  out = std::move(engine);
  return Status::ok();
}

GemmEngine::~GemmEngine() {
  plans.clear();
  if (workspace)
    cudaFree(workspace);
  if (handle)
    cublasLtDestroy(static_cast<cublasLtHandle_t>(handle));
}

GemmEngine::Plan *GemmEngine::getPlan(const Key &key) {
  auto found = plans.find(key);
  if (found != plans.end())
    return found->second.get();
  auto [transA, transB, m, n, k, lda, ldb, ldc, abType, cType] = key;
  auto plan = std::make_unique<Plan>();
  cudaDataType_t ab = cudaDataType_t(abType), cd = cudaDataType_t(cType);
  // fp32 accumulation for every input type; never TF32.
  BLAS_RECORD(
      cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  if (!plan->op)
    return nullptr;
  // Column-major C^T (n x m) = op(B)^T (n x k) op(A)^T (k x m): cuBLASLt's
  // first operand is B, its second A.
  cublasOperation_t opFirst = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opSecond = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  BLAS_RECORD(cublasLtMatmulDescSetAttribute(
      plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &opFirst, sizeof(opFirst)));
  BLAS_RECORD(cublasLtMatmulDescSetAttribute(
      plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &opSecond, sizeof(opSecond)));
  BLAS_RECORD(cublasLtMatrixLayoutCreate(&plan->a, ab, transB ? k : n,
                                         transB ? n : k, ldb));
  BLAS_RECORD(cublasLtMatrixLayoutCreate(&plan->b, ab, transA ? m : k,
                                         transA ? k : m, lda));
  BLAS_RECORD(cublasLtMatrixLayoutCreate(&plan->c, cd, n, m, ldc));
  if (!plan->a || !plan->b || !plan->c)
    return nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  BLAS_RECORD(cublasLtMatmulPreferenceCreate(&preference));
  BLAS_RECORD(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes,
      sizeof(workspaceBytes)));
  cublasLtMatmulHeuristicResult_t result{};
  int found_ = 0;
  BLAS_RECORD(cublasLtMatmulAlgoGetHeuristic(
      static_cast<cublasLtHandle_t>(handle), plan->op, plan->a, plan->b,
      plan->c, plan->c, preference, 1, &result, &found_));
  if (preference)
    cublasLtMatmulPreferenceDestroy(preference);
  if (found_ == 0) {
    errors.check(cudaErrorNotSupported,
                 ("no cuBLASLt algorithm for a " + std::to_string(m) + "x" +
                  std::to_string(n) + "x" + std::to_string(k) + " GEMM")
                     .c_str(),
                 __FILE__, __LINE__);
    return nullptr;
  }
  plan->algo = result.algo;
  return (plans[key] = std::move(plan)).get();
}

void GemmEngine::run(cudaStream_t stream, bool transA, bool transB, int64_t m,
                     int64_t n, int64_t k, float alpha, DevicePtr a,
                     int64_t lda, DevicePtr b, int64_t ldb, float beta,
                     DevicePtr c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (a.getType() != b.getType()) {
    errors.check(cudaErrorInvalidValue,
                 "gemm: A and B must share an element type", __FILE__,
                 __LINE__);
    return;
  }
  Key key{transA,
          transB,
          m,
          n,
          k,
          lda,
          ldb,
          ldc,
          int(cudaType(a.getType())),
          int(cudaType(c.getType()))};
  Plan *plan = getPlan(key);
  if (!plan)
    return;
  BLAS_RECORD(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle), plan->op,
                             &alpha, b.get(), plan->a, a.get(), plan->b, &beta,
                             c.get(), plan->c, c.get(), plan->c, &plan->algo,
                             workspace, workspaceBytes, stream));
}

} // namespace sluice::rt::cuda
