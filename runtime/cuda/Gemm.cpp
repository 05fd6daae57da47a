//===- Gemm.cpp - Row-major GEMMs through cuBLASLt ------------------------===//

#include "Gemm.h"

#include <cublasLt.h>
#include <dlfcn.h>

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
  // The FP8 interface (scale attributes, their modes) is the headers'
  // major version's: a library of another major one is not asked for FP8
  // kernels, said once per process.
  size_t loaded = cublasLtGetVersion();
  engine->fp8Usable = int(loaded / 10000) == CUBLAS_VER_MAJOR;
  static bool said = false;
  if (!engine->fp8Usable && !said) {
    said = true;
    std::fprintf(stderr,
                 "sluice: warning: %s: another major version than the "
                 "headers', so FP8 GEMMs multiply in bf16\n",
                 describeBlasLibrary().c_str());
  }
  engine->strictFp8 = isFp8Strict();
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

/// The alignment of an address, in bytes up to 256 (what cuBLASLt's
/// heuristic assumes of every pointer unless told).
static uint32_t alignmentOf(const void *pointer) {
  auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment)
    alignment /= 2;
  return alignment;
}

bool GemmEngine::isFp8Strict() { return getEnvFlag("SLUICE_FP8_STRICT", false); }

void GemmEngine::refuseFp8(const Fp8Shape &shape, const std::string &why) {
  refusedFp8.insert(shape);
  auto [m, n, k, ldc, aType, bType, cType, accumulate] = shape;
  (void)ldc, (void)aType, (void)bType, (void)cType, (void)accumulate;
  std::string text = "cuBLASLt refused its FP8 kernels for a " +
                     std::to_string(m) + "x" + std::to_string(n) + "x" +
                     std::to_string(k) + " GEMM (" + why + ")";
  // Strict (SLUICE_FP8_STRICT=1; SluiceCudaTests on FP8 GPUs): a refusal
  // is a failure, so a run or test cannot pass on the bf16 fallback.
  if (strictFp8) {
    errors.check(cudaErrorNotSupported,
                 (text + "; SLUICE_FP8_STRICT=1 makes that an error").c_str(),
                 __FILE__, __LINE__);
    return;
  }
  std::fprintf(stderr,
               "sluice: warning: %s; that shape multiplies the FP8 values in "
               "bf16\n",
               text.c_str());
}

GemmEngine::Plan *GemmEngine::getFp8Plan(const Fp8Key &key,
                                         const Fp8Call &call) {
  auto found = fp8Plans.find(key);
  if (found != fp8Plans.end())
    return found->second.get();
  auto [shape, alignments] = key;
  auto [m, n, k, ldc, aType, bType, cType, accumulate] = shape;
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
    // Fast accumulation (partial sums kept in the tensor core's precision
    // between promotions) for the forward products only, as Transformer
    // Engine does: the forward multiplies two E4M3 operands; the
    // backward's E5M2 gradients keep the full promotion.
    int8_t fastAccum = aType == CUDA_R_8F_E4M3 && bType == CUDA_R_8F_E4M3;
    BLAS_RECORD(cublasLtMatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fastAccum,
        sizeof(fastAccum)));
#if CUBLAS_VER_MAJOR > 12 || (CUBLAS_VER_MAJOR == 12 && CUBLAS_VER_MINOR >= 8)
    // One fp32 scale per operand (the default, stated: cuBLAS 12.8 added
    // block scalings the heuristic would otherwise be free to assume).
    int32_t scalar = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    for (cublasLtMatmulDescAttributes_t mode :
         {CUBLASLT_MATMUL_DESC_A_SCALE_MODE, CUBLASLT_MATMUL_DESC_B_SCALE_MODE})
      BLAS_RECORD(cublasLtMatmulDescSetAttribute(plan->op, mode, &scalar,
                                                 sizeof(scalar)));
#endif
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
    // The real scale pointers, before the heuristic (as Transformer Engine
    // and PyTorch's scaled_mm do): it matches kernels to the problem as
    // set, judging alignment from the pointer values it is given. Two GPU
    // runs that showed it a null or a stand-in had every FP8 kernel
    // refused at call time. The first operand is B.
    setFp8Scales(*plan, call);
    cublasLtMatmulPreference_t preference = nullptr;
    BLAS_RECORD(cublasLtMatmulPreferenceCreate(&preference));
    BLAS_RECORD(cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes,
        sizeof(workspaceBytes)));
    // Every operand's real alignment (the heuristic assumes 256 bytes):
    // cuBLASLt's A is our B's copy.
    auto [alignA, alignB, alignC, alignScaleA, alignScaleB] = alignments;
    (void)alignScaleA, (void)alignScaleB;
    std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> prefs[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignB},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignA},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignC},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignC}};
    for (auto &[attribute, bytes] : prefs)
      BLAS_RECORD(cublasLtMatmulPreferenceSetAttribute(
          preference, attribute, &bytes, sizeof(bytes)));
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

void GemmEngine::setFp8Scales(Plan &plan, const Fp8Call &call) {
  BLAS_RECORD(cublasLtMatmulDescSetAttribute(
      plan.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &call.inverseB,
      sizeof(call.inverseB)));
  BLAS_RECORD(cublasLtMatmulDescSetAttribute(
      plan.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &call.inverseA,
      sizeof(call.inverseA)));
}

GemmEngine::Fp8Shape GemmEngine::getFp8Shape(int64_t m, int64_t n, int64_t k,
                                             Fp8Format aFormat,
                                             Fp8Format bFormat, DType cType,
                                             int64_t ldc, bool accumulate) {
  return {m,
          n,
          k,
          ldc,
          int(fp8Type(aFormat)),
          int(fp8Type(bFormat)),
          int(cudaType(cType)),
          accumulate};
}

bool GemmEngine::hasFp8Kernel(int64_t m, int64_t n, int64_t k,
                              Fp8Format aFormat, Fp8Format bFormat, DType c,
                              int64_t ldc, bool accumulate) {
  // cuBLASLt cannot multiply two E5M2 operands; Sluice never asks it to
  // (a gradient meets a weight or an activation). A library of another
  // major version than the headers offers none we trust.
  if (!fp8Usable || (aFormat == Fp8Format::E5M2 && bFormat == Fp8Format::E5M2))
    return false;
  return !refusedFp8.count(
      getFp8Shape(m, n, k, aFormat, bFormat, c, ldc, accumulate));
}

bool GemmEngine::runFp8(cudaStream_t stream, int64_t m, int64_t n, int64_t k,
                        float alpha, const void *a, Fp8Format aFormat,
                        const float *inverseA, const void *b, Fp8Format bFormat,
                        const float *inverseB, float beta, DevicePtr c,
                        int64_t ldc) {
  bool accumulate = beta != 0.0f;
  if (!hasFp8Kernel(m, n, k, aFormat, bFormat, c.getType(), ldc, accumulate))
    return false;
  Fp8Shape shape =
      getFp8Shape(m, n, k, aFormat, bFormat, c.getType(), ldc, accumulate);
  Fp8Key key{shape,
             {alignmentOf(a), alignmentOf(b), alignmentOf(c.get()),
              alignmentOf(inverseA), alignmentOf(inverseB)}};
  Fp8Call call{inverseA, inverseB};
  Plan *plan = getFp8Plan(key, call);
  if (!plan) {
    refuseFp8(shape, "its heuristic offered no algorithm");
    return false;
  }
  // The scales move with the scratch; the plan's alignment class is theirs.
  setFp8Scales(*plan, call);
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
    fp8Plans[key] = nullptr;
    refuseFp8(shape, ltLastError.empty() ? "no reason logged" : ltLastError);
    return false;
  }
  BLAS_RECORD(status);
  ++fp8Multiplies;
  return true;
}

std::string describeBlasLibrary() {
  Dl_info info{};
  dladdr(reinterpret_cast<void *>(&cublasLtGetVersion), &info);
  size_t loaded = cublasLtGetVersion();
  return "cuBLASLt " + std::to_string(loaded / 10000) + "." +
         std::to_string(loaded / 100 % 100) + "." +
         std::to_string(loaded % 100) + " (built against " +
         std::to_string(CUBLAS_VER_MAJOR) + "." +
         std::to_string(CUBLAS_VER_MINOR) + "." +
         std::to_string(CUBLAS_VER_PATCH) + ") from " +
         (info.dli_fname ? info.dli_fname : "an unknown path");
}

} // namespace sluice::rt::cuda
