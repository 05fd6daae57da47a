//===- Gemm.cpp - Row-major GEMMs through cuBLASLt ------------------------===//

#include "Gemm.h"

#include <cublasLt.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace sluice::rt::cuda {

namespace {
/// cuBLASLt's scratch per stream: its heuristics pick faster kernels (split
/// K, stream-K) when they may use some.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;
/// How many of the heuristic's algorithms are timed, how often each, and
/// the largest scratch output an accumulating GEMM is timed into (beyond
/// it the heuristic's first choice stays: the output layer's logits
/// gradient is gigabytes).
constexpr int kCandidates = 8, kTimedRuns = 3;
constexpr size_t kMaxScratchBytes = size_t(1) << 30;
/// A candidate replaces the heuristic's choice only when this much faster:
/// timings within noise keep the first choice, so runs mostly agree.
constexpr double kMargin = 0.03;

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

/// cuBLASLt's own words for its last refusal: its logger says why a call
/// is not supported where the status cannot (CUBLASLT_LOG_MASK's errors).
std::string ltLastError;
void keepLtError(int, const char *function, const char *message) {
  ltLastError = std::string(function) + ": " + message;
}
} // namespace

struct GemmEngine::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  /// The heuristic's ranking, best first; emptied once timed.
  std::vector<cublasLtMatmulAlgo_t> candidates;
  ~Plan() {
    if (op)
      cublasLtMatmulDescDestroy(op);
    for (cublasLtMatrixLayout_t layout : {a, b, c})
      if (layout)
        cublasLtMatrixLayoutDestroy(layout);
  }
};

GemmEngine::GemmEngine(ErrorSink &errors)
    : errors(errors), autotune(getEnvFlag("SLUICE_GEMM_AUTOTUNE", true)),
      log(getEnvFlag("SLUICE_GEMM_LOG", false)) {}

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
  auto [transA, transB, m, n, k, lda, ldb, ldc, abType, cType, accumulate] =
      key;
  (void)accumulate; // the same algorithms serve both; timing differs
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
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found_ = 0;
  BLAS_RECORD(cublasLtMatmulAlgoGetHeuristic(
      static_cast<cublasLtHandle_t>(handle), plan->op, plan->a, plan->b,
      plan->c, plan->c, preference, autotune ? kCandidates : 1, results,
      &found_));
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
  plan->algo = results[0].algo;
  if (found_ > 1)
    for (int i = 0; i < found_; ++i)
      plan->candidates.push_back(results[i].algo);
  return (plans[key] = std::move(plan)).get();
}

void GemmEngine::tune(Plan &plan, cudaStream_t stream, int64_t m, int64_t n,
                      int64_t k, int64_t ldc,
                      float alpha, DevicePtr a, DevicePtr b, float beta,
                      DevicePtr c) {
  std::vector<cublasLtMatmulAlgo_t> candidates;
  candidates.swap(plan.candidates);
  // An overwritten output is timed in place (the real run overwrites it
  // again); an accumulated one in zeroed scratch of its size.
  size_t bytes = size_t(m) * size_t(ldc) * getSize(c.getType());
  void *out = c.get(), *scratch = nullptr;
  if (beta != 0.0f) {
    if (bytes > kMaxScratchBytes ||
        cudaMallocAsync(&scratch, bytes, stream) != cudaSuccess) {
      cudaGetLastError(); // no room to time: the heuristic's choice stays
      return;
    }
    cudaMemsetAsync(scratch, 0, bytes, stream);
    out = scratch;
  }
  cudaEvent_t start = nullptr, end = nullptr;
  cudaEventCreate(&start);
  cudaEventCreate(&end);
  auto handle_ = static_cast<cublasLtHandle_t>(handle);
  std::vector<float> ms(candidates.size(), -1.0f);
  for (size_t i = 0; i < candidates.size(); ++i) {
    auto launch = [&] {
      return cublasLtMatmul(handle_, plan.op, &alpha, b.get(), plan.a, a.get(),
                            plan.b, &beta, out, plan.c, out, plan.c,
                            &candidates[i], workspace, workspaceBytes, stream);
    };
    // A candidate that fails to launch is skipped, not an error.
    if (launch() != CUBLAS_STATUS_SUCCESS)
      continue;
    cudaEventRecord(start, stream);
    for (int r = 0; r < kTimedRuns; ++r)
      launch();
    cudaEventRecord(end, stream);
    if (cudaEventSynchronize(end) == cudaSuccess)
      cudaEventElapsedTime(&ms[i], start, end);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  if (scratch)
    cudaFreeAsync(scratch, stream);
  size_t best = 0;
  for (size_t i = 1; i < ms.size(); ++i)
    if (ms[i] > 0 && (ms[best] <= 0 || ms[i] < ms[best] * (1.0 - kMargin)))
      best = i;
  if (ms[best] > 0)
    plan.algo = candidates[best];
  if (log) {
    std::fprintf(stderr, "gemm tune %lldx%lldx%lld %s%s:", (long long)m,
                 (long long)n, (long long)k,
                 c.getType() == DType::F32 ? "f32" : "bf16",
                 beta != 0.0f ? " +=" : "");
    for (size_t i = 0; i < ms.size(); ++i)
      std::fprintf(stderr, " %s%.3f", i == best ? "*" : "",
                   double(ms[i]) / kTimedRuns);
    std::fprintf(stderr, " ms\n");
  }
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
          int(cudaType(c.getType())),
          beta != 0.0f};
  Plan *plan = getPlan(key);
  if (!plan)
    return;
  if (!plan->candidates.empty())
    tune(*plan, stream, m, n, k, ldc, alpha, a, b, beta, c);
  BLAS_RECORD(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle), plan->op,
                             &alpha, b.get(), plan->a, a.get(), plan->b, &beta,
                             c.get(), plan->c, c.get(), plan->c, &plan->algo,
                             workspace, workspaceBytes, stream));
}

//===----------------------------------------------------------------------===//
// FP8
//===----------------------------------------------------------------------===//

static cudaDataType_t fp8Type(Fp8Format format) {
  return format == Fp8Format::E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2;
}

GemmEngine::Plan *GemmEngine::getFp8Plan(const Fp8Key &key) {
  auto found = fp8Plans.find(key);
  if (found != fp8Plans.end())
    return found->second.get();
  auto [m, n, k, ldc, aType, bType, cType, accumulate, cAlignment] = key;
  (void)accumulate;
  std::unique_ptr<Plan> plan = std::make_unique<Plan>();
  // Column-major C^T (n x m) = B' (k x n)^T A' (k x m): the first operand
  // is op(B)^T's rows, transposed (T), the second op(A)'s, as they are (N).
  BLAS_RECORD(
      cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t opFirst = CUBLAS_OP_T, opSecond = CUBLAS_OP_N;
  if (plan->op) {
    BLAS_RECORD(cublasLtMatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &opFirst, sizeof(opFirst)));
    BLAS_RECORD(cublasLtMatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &opSecond, sizeof(opSecond)));
  }
  BLAS_RECORD(
      cublasLtMatrixLayoutCreate(&plan->a, cudaDataType_t(bType), k, n, k));
  BLAS_RECORD(
      cublasLtMatrixLayoutCreate(&plan->b, cudaDataType_t(aType), k, m, k));
  BLAS_RECORD(
      cublasLtMatrixLayoutCreate(&plan->c, cudaDataType_t(cType), n, m, ldc));
  int count = 0;
  constexpr int kFp8Candidates = 8;
  cublasLtMatmulHeuristicResult_t results[kFp8Candidates] = {};
  if (plan->op && plan->a && plan->b && plan->c) {
    // The scale pointers are part of the problem the heuristic matches
    // kernels to: an algorithm chosen without them is a kernel that does
    // not scale, and cublasLtMatmul refuses it once they are set (status
    // 15, measured on an H200 with cuBLAS 13.1). Any device address does
    // here; runFp8 sets the real ones before each call.
    const void *placeholder = workspace;
    BLAS_RECORD(cublasLtMatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &placeholder,
        sizeof(placeholder)));
    BLAS_RECORD(cublasLtMatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &placeholder,
        sizeof(placeholder)));
    cublasLtMatmulPreference_t preference = nullptr;
    BLAS_RECORD(cublasLtMatmulPreferenceCreate(&preference));
    BLAS_RECORD(cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes,
        sizeof(workspaceBytes)));
    // The heuristic assumes 256-byte-aligned pointers unless told; an
    // output inside a larger buffer may be less aligned (the operands'
    // copies and the scales are 256-aligned).
    for (cublasLtMatmulPreferenceAttributes_t attribute :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      BLAS_RECORD(cublasLtMatmulPreferenceSetAttribute(
          preference, attribute, &cAlignment, sizeof(cAlignment)));
    // Not an error where the library has none: the caller falls back.
    if (cublasLtMatmulAlgoGetHeuristic(
            static_cast<cublasLtHandle_t>(handle), plan->op, plan->a, plan->b,
            plan->c, plan->c, preference, kFp8Candidates, results,
            &count) != CUBLAS_STATUS_SUCCESS)
      count = 0;
    if (preference)
      cublasLtMatmulPreferenceDestroy(preference);
  }
  if (count == 0) {
    if (log)
      std::fprintf(stderr, "gemm fp8 %lldx%lldx%lld: no cuBLASLt algorithm\n",
                   (long long)m, (long long)n, (long long)k);
    fp8Plans[key] = nullptr;
    return nullptr;
  }
  plan->algo = results[0].algo;
  // The rest, last first: runFp8 moves on to the next where the library
  // refuses one at call time.
  for (int i = count - 1; i > 0; --i)
    plan->candidates.push_back(results[i].algo);
  return (fp8Plans[key] = std::move(plan)).get();
}

static GemmEngine::Fp8Key makeFp8Key(int64_t m, int64_t n, int64_t k,
                                     int64_t ldc, Fp8Format aFormat,
                                     Fp8Format bFormat, DevicePtr c,
                                     bool accumulate) {
  auto address = reinterpret_cast<uintptr_t>(c.get());
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment)
    alignment /= 2;
  return {m,
          n,
          k,
          ldc,
          int(fp8Type(aFormat)),
          int(fp8Type(bFormat)),
          int(cudaType(c.getType())),
          accumulate,
          alignment};
}

bool GemmEngine::hasFp8Kernel(int64_t m, int64_t n, int64_t k,
                              Fp8Format aFormat, Fp8Format bFormat, DevicePtr c,
                              int64_t ldc, bool accumulate) {
  // cuBLASLt cannot multiply two E5M2 operands; Sluice never asks it to
  // (a gradient meets a weight or an activation).
  if (aFormat == Fp8Format::E5M2 && bFormat == Fp8Format::E5M2)
    return false;
  return getFp8Plan(makeFp8Key(m, n, k, ldc, aFormat, bFormat, c,
                               accumulate)) != nullptr;
}

bool GemmEngine::runFp8(cudaStream_t stream, int64_t m, int64_t n, int64_t k,
                        float alpha, const void *a, Fp8Format aFormat,
                        const float *inverseA, const void *b, Fp8Format bFormat,
                        const float *inverseB, float beta, DevicePtr c,
                        int64_t ldc) {
  if (aFormat == Fp8Format::E5M2 && bFormat == Fp8Format::E5M2)
    return false;
  Fp8Key key = makeFp8Key(m, n, k, ldc, aFormat, bFormat, c, beta != 0.0f);
  Plan *plan = getFp8Plan(key);
  if (!plan)
    return false;
  // The operands' scales are read by the kernel from device memory: the
  // first operand is B.
  BLAS_RECORD(cublasLtMatmulDescSetAttribute(
      plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &inverseB,
      sizeof(inverseB)));
  BLAS_RECORD(cublasLtMatmulDescSetAttribute(
      plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &inverseA,
      sizeof(inverseA)));
  auto multiply = [&] {
    return cublasLtMatmul(static_cast<cublasLtHandle_t>(handle), plan->op,
                          &alpha, b, plan->a, a, plan->b, &beta, c.get(),
                          plan->c, c.get(), plan->c, &plan->algo, workspace,
                          workspaceBytes, stream);
  };
  cublasStatus_t status;
  while ((status = multiply()) == CUBLAS_STATUS_NOT_SUPPORTED &&
         !plan->candidates.empty()) {
    plan->algo = plan->candidates.back();
    plan->candidates.pop_back();
  }
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) {
    // The library refuses every algorithm its own heuristic offered: not
    // the user's error, so the shape is multiplied in the activation type
    // from now on (the same quantized values), and said once, with the
    // library's reason (asked again with its error log on).
    // (Not where the user turned the log on: it is theirs, and says it.)
    ltLastError.clear();
    if (!std::getenv("CUBLASLT_LOG_MASK") &&
        !std::getenv("CUBLASLT_LOG_LEVEL")) {
      cublasLtLoggerSetCallback(keepLtError);
      cublasLtLoggerSetMask(1);
      multiply();
      cublasLtLoggerSetMask(0);
      cublasLtLoggerSetCallback(nullptr);
    }
    std::fprintf(stderr,
                 "sluice: warning: cuBLASLt refused its FP8 kernels for a "
                 "%lldx%lldx%lld GEMM (%s); that shape multiplies the FP8 "
                 "values in bf16\n",
                 (long long)m, (long long)n, (long long)k,
                 ltLastError.empty() ? "no reason logged"
                                     : ltLastError.c_str());
    fp8Plans[key] = nullptr;
    return false;
  }
  BLAS_RECORD(status);
  return true;
}

} // namespace sluice::rt::cuda
