// fp8probe.cpp -- a standalone cuBLASLt FP8 probe (no Sluice code) for the
// next GPU run: which of Sluice's call patterns does cuBLASLt accept on
// this machine's libcublasLt, and why does it refuse the others? The GPU
// queue runs it first (tools/gpu/run.sh, item 0); bundle.sh builds it.
// Variant 14 is the call runtime/cuda/Gemm.cpp makes since 2026-11-30
// (issue 58): the real scales before the heuristic, every operand's
// alignment told, the scalar scale mode stated, fast accumulation for
// the forward's E4M3 x E4M3 products.
//
// Host code only (no kernels), so g++ builds it; link cuBLASLt dynamically
// so that it resolves exactly as sluice's binaries do (bundle_env's
// LD_LIBRARY_PATH: PyTorch's wheels), and the CUDA runtime statically, as
// the bundle does:
//
//   g++ -O2 -std=c++17 fp8probe.cpp -I/usr/local/cuda/include
//     -L/usr/local/cuda/lib64 -lcublasLt -lcudart_static -ldl -lpthread -lrt
//     -o build-gpu/bundle/bin/fp8probe          (one command line)
//
// On the GPU machine, after `source bundle-env.sh; bundle_env BUNDLE`:
//   fp8probe            (about 5 s; exit 0 when the canonical variant works)
//
// Every variant states the problem in cuBLASLt's column-major terms:
// D (m x n) = alpha * sa * sb * A^T B + beta * C, A stored k x m (lda = k,
// TRANSA = T), B stored k x n (ldb = k, TRANSB = N) -- the "TN" form that
// Sluice's runFp8 passes (its first operand is the row-major B's copy).
// Inputs are small exact FP8 values, so the host reference is exact.

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::string logged;
void keepLog(int level, const char *function, const char *message) {
  if (logged.size() < 4000)
    logged += "    [cublasLt " + std::to_string(level) + "] " +
              std::string(function) + ": " + message + "\n";
}

#define CUDA_OK(expr)                                                          \
  do {                                                                         \
    cudaError_t e_ = (expr);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      std::printf("CUDA error %s: %s (%s:%d)\n", #expr, cudaGetErrorString(e_), \
                  __FILE__, __LINE__);                                         \
      std::exit(2);                                                            \
    }                                                                          \
  } while (0)

// Setup calls: a failure here is printed, and the variant is abandoned.
#define LT_OK(expr)                                                            \
  do {                                                                         \
    cublasStatus_t s_ = (expr);                                                \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                         \
      std::printf("  setup %s -> %d (%s)\n", #expr, int(s_),                    \
                  cublasLtGetStatusString(s_));                                \
      ok = false;                                                              \
    }                                                                          \
  } while (0)

/// How the A/B scale pointers stand when the heuristic is asked.
enum class AtHeuristic {
  Null,        // Sluice's run 1: set only before cublasLtMatmul
  Placeholder, // Sluice's run 2 and today: a 256-aligned stand-in
  Real         // Transformer Engine and PyTorch: the real pointers
};

struct Variant {
  const char *name;
  cudaDataType_t aType, bType, cType;
  int m, n, k;
  float beta;
  AtHeuristic scales;
  size_t scaleA, scaleB; // byte offsets of the real scales in a 256-aligned buffer
  size_t cOffset;        // C/D at this byte offset inside a larger buffer
  bool alignmentPrefs;   // tell the heuristic A/B/C/D's real alignment (TE)
  int fastAccum;         // CUBLASLT_MATMUL_DESC_FAST_ACCUM; -1: unset
  bool scalarMode = false; // CUBLASLT_MATMUL_DESC_{A,B}_SCALE_MODE stated
};

float valueAt(size_t i) {
  static const float values[5] = {1.0f, 2.0f, 0.5f, -1.0f, 0.0f};
  return values[(i * 7 + 3) % 5];
}

/// The FP8 byte of one of valueAt's values.
uint8_t encode(float v, cudaDataType_t type) {
  bool e4m3 = type == CUDA_R_8F_E4M3;
  if (v == 0.0f) return 0x00;
  if (v == 1.0f) return e4m3 ? 0x38 : 0x3C;
  if (v == 2.0f) return 0x40;
  if (v == 0.5f) return e4m3 ? 0x30 : 0x38;
  return e4m3 ? 0xB8 : 0xBC; // -1
}

uint16_t toBf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return uint16_t(bits >> 16); // exact for the values used (1.0)
}
float fromBf16(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

uint32_t alignmentOf(const void *p) {
  uint32_t alignment = 256;
  while (alignment > 1 && reinterpret_cast<uintptr_t>(p) % alignment)
    alignment /= 2;
  return alignment;
}

const char *typeName(cudaDataType_t t) {
  switch (t) {
  case CUDA_R_8F_E4M3: return "e4m3";
  case CUDA_R_8F_E5M2: return "e5m2";
  case CUDA_R_16BF: return "bf16";
  case CUDA_R_32F: return "f32";
  default: return "?";
  }
}

/// Runs one variant; true when some candidate ran and matched the reference.
bool run(cublasLtHandle_t handle, void *workspace, size_t workspaceBytes,
         const Variant &v) {
  bool ok = true;
  size_t aBytes = size_t(v.k) * v.m, bBytes = size_t(v.k) * v.n;
  size_t cSize = v.cType == CUDA_R_32F ? 4 : 2;
  size_t cBytes = size_t(v.m) * v.n * cSize;
  bool verify = double(v.m) * v.n * v.k <= 5e8;
  void *a = nullptr, *b = nullptr, *cBase = nullptr, *scales = nullptr;
  CUDA_OK(cudaMalloc(&a, aBytes));
  CUDA_OK(cudaMalloc(&b, bBytes));
  CUDA_OK(cudaMalloc(&cBase, cBytes + v.cOffset));
  CUDA_OK(cudaMalloc(&scales, 1024));
  void *c = static_cast<char *>(cBase) + v.cOffset;

  std::vector<uint8_t> hostA(aBytes), hostB(bBytes), hostC(cBytes);
  for (size_t i = 0; i < aBytes; ++i) hostA[i] = encode(valueAt(i), v.aType);
  for (size_t i = 0; i < bBytes; ++i) hostB[i] = encode(valueAt(i + 1), v.bType);
  for (size_t i = 0; i < size_t(v.m) * v.n; ++i) {
    if (cSize == 4) {
      float one = 1.0f;
      std::memcpy(&hostC[i * 4], &one, 4);
    } else {
      uint16_t one = toBf16(1.0f);
      std::memcpy(&hostC[i * 2], &one, 2);
    }
  }
  CUDA_OK(cudaMemcpy(a, hostA.data(), aBytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(b, hostB.data(), bBytes, cudaMemcpyHostToDevice));
  const float sa = 2.0f, sb = 0.25f, alpha = 1.0f;
  std::vector<float> hostScales(256, 1.0f);
  hostScales[v.scaleA / 4] = sa;
  hostScales[v.scaleB / 4] = sb;
  CUDA_OK(cudaMemcpy(scales, hostScales.data(), 1024, cudaMemcpyHostToDevice));
  const void *realA = static_cast<char *>(scales) + v.scaleA;
  const void *realB = static_cast<char *>(scales) + v.scaleB;
  const void *placeholder = workspace;

  std::printf("%s: %s x %s -> %s, m %d n %d k %d, beta %g, scales at +%zu/+%zu "
              "(%s at the heuristic), C at +%zu%s%s\n",
              v.name, typeName(v.aType), typeName(v.bType), typeName(v.cType),
              v.m, v.n, v.k, double(v.beta), v.scaleA, v.scaleB,
              v.scales == AtHeuristic::Null          ? "null"
              : v.scales == AtHeuristic::Placeholder ? "256-aligned stand-in"
                                                     : "real",
              v.cOffset, v.alignmentPrefs ? ", alignment prefs" : "",
              v.fastAccum >= 0 ? (v.fastAccum ? ", fast accum" : ", split accum")
                               : "");

  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t layoutA = nullptr, layoutB = nullptr, layoutC = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  LT_OK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t transA = CUBLAS_OP_T, transB = CUBLAS_OP_N;
  LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &transA,
                                       sizeof(transA)));
  LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &transB,
                                       sizeof(transB)));
  if (v.fastAccum >= 0) {
    int8_t fast = int8_t(v.fastAccum);
    LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM,
                                         &fast, sizeof(fast)));
  }
#if CUBLAS_VER_MAJOR > 12 || (CUBLAS_VER_MAJOR == 12 && CUBLAS_VER_MINOR >= 8)
  if (v.scalarMode) {
    int32_t scalar = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                                         &scalar, sizeof(scalar)));
    LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                                         &scalar, sizeof(scalar)));
  }
#endif
  LT_OK(cublasLtMatrixLayoutCreate(&layoutA, v.aType, v.k, v.m, v.k));
  LT_OK(cublasLtMatrixLayoutCreate(&layoutB, v.bType, v.k, v.n, v.k));
  LT_OK(cublasLtMatrixLayoutCreate(&layoutC, v.cType, v.m, v.n, v.m));
  if (v.scales != AtHeuristic::Null) {
    const void *pa = v.scales == AtHeuristic::Real ? realA : placeholder;
    const void *pb = v.scales == AtHeuristic::Real ? realB : placeholder;
    LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                         &pa, sizeof(pa)));
    LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                         &pb, sizeof(pb)));
  }
  LT_OK(cublasLtMatmulPreferenceCreate(&preference));
  LT_OK(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes,
      sizeof(workspaceBytes)));
  if (v.alignmentPrefs) {
    uint32_t alignments[4] = {alignmentOf(a), alignmentOf(b), alignmentOf(c),
                              alignmentOf(c)};
    cublasLtMatmulPreferenceAttributes_t which[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      LT_OK(cublasLtMatmulPreferenceSetAttribute(preference, which[i],
                                                 &alignments[i],
                                                 sizeof(alignments[i])));
  }
  bool passed = false;
  if (ok) {
    constexpr int kCandidates = 8;
    cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
    int count = 0;
    logged.clear();
    cublasStatus_t heuristic = cublasLtMatmulAlgoGetHeuristic(
        handle, op, layoutA, layoutB, layoutC, layoutC, preference, kCandidates,
        results, &count);
    std::printf("  heuristic: status %d, %d candidate(s)\n", int(heuristic),
                count);
    if (heuristic != CUBLAS_STATUS_SUCCESS && !logged.empty())
      std::printf("%s", logged.c_str());
    // The call: always with the real scale pointers, as Sluice's runFp8.
    LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                         &realA, sizeof(realA)));
    LT_OK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                         &realB, sizeof(realB)));
    std::string statuses, reason;
    int firstGood = -1;
    double worst = -1, largest = 0;
    for (int i = 0; i < count && heuristic == CUBLAS_STATUS_SUCCESS; ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS) {
        statuses += " state" + std::to_string(int(results[i].state));
        continue;
      }
      if (firstGood < 0)
        CUDA_OK(cudaMemcpy(c, hostC.data(), cBytes, cudaMemcpyHostToDevice));
      logged.clear();
      cublasStatus_t st = cublasLtMatmul(
          handle, op, &alpha, a, layoutA, b, layoutB, &v.beta, c, layoutC, c,
          layoutC, &results[i].algo, workspace, workspaceBytes, 0);
      statuses += " " + std::to_string(int(st));
      if (st != CUBLAS_STATUS_SUCCESS) {
        if (reason.empty()) reason = logged.empty() ? "    (nothing logged)\n" : logged;
        continue;
      }
      CUDA_OK(cudaDeviceSynchronize());
      if (firstGood >= 0)
        continue;
      firstGood = i;
      if (!verify) {
        worst = 0;
        continue;
      }
      std::vector<uint8_t> got(cBytes);
      CUDA_OK(cudaMemcpy(got.data(), c, cBytes, cudaMemcpyDeviceToHost));
      worst = 0;
      for (int j = 0; j < v.n; ++j)
        for (int r = 0; r < v.m; ++r) {
          double sum = 0;
          for (int l = 0; l < v.k; ++l)
            sum += double(valueAt(size_t(r) * v.k + l)) *
                   double(valueAt(size_t(j) * v.k + l + 1));
          double want = double(alpha) * sa * sb * sum + double(v.beta) * 1.0;
          size_t at = size_t(j) * v.m + r;
          double have;
          if (cSize == 4) {
            float f;
            std::memcpy(&f, &got[at * 4], 4);
            have = f;
          } else {
            uint16_t h;
            std::memcpy(&h, &got[at * 2], 2);
            have = fromBf16(h);
          }
          worst = std::fmax(worst, std::fabs(have - want));
          largest = std::fmax(largest, std::fabs(want));
        }
    }
    double tolerance = (cSize == 4 ? 1e-6 : 8e-3) * std::fmax(largest, 1.0);
    passed = firstGood >= 0 && worst >= 0 && worst <= tolerance;
    std::printf("  cublasLtMatmul per candidate:%s\n", statuses.c_str());
    if (!reason.empty())
      std::printf("  first refusal, cuBLASLt's words:\n%s", reason.c_str());
    if (firstGood >= 0)
      std::printf("  candidate %d ran; %s\n", firstGood,
                  verify ? (std::string("max |error| ") + std::to_string(worst) +
                            " (tolerance " + std::to_string(tolerance) + ")")
                               .c_str()
                         : "too large to check on the host");
  }
  std::printf("  => %s\n\n", passed ? "WORKS" : "REFUSED OR WRONG");
  if (preference) cublasLtMatmulPreferenceDestroy(preference);
  for (cublasLtMatrixLayout_t l : {layoutA, layoutB, layoutC})
    if (l) cublasLtMatrixLayoutDestroy(l);
  if (op) cublasLtMatmulDescDestroy(op);
  cudaFree(a);
  cudaFree(b);
  cudaFree(cBase);
  cudaFree(scales);
  return passed;
}

} // namespace

int main() {
  int driver = 0, runtime = 0, device = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, device));
  Dl_info info{};
  dladdr(reinterpret_cast<void *>(&cublasLtMatmul), &info);
  std::printf("device %s (sm_%d%d); driver %d, CUDA runtime %d (static)\n",
              prop.name, prop.major, prop.minor, driver, runtime);
  std::printf("cuBLASLt: compiled against %d.%d.%d, loaded %zu (its CUDA "
              "runtime %zu) from %s\n\n",
              CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH,
              cublasLtGetVersion(), cublasLtGetCudartVersion(),
              info.dli_fname ? info.dli_fname : "?");
  if (prop.major * 10 + prop.minor < 89) {
    std::printf("no FP8 tensor cores on this GPU\n");
    return 1;
  }
  cublasLtHandle_t handle = nullptr;
  if (cublasLtCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
    std::printf("cublasLtCreate failed\n");
    return 2;
  }
  // Errors and hints only (CUBLASLT_LOG_MASK's 1 | 4): the refusals' reasons.
  if (!std::getenv("CUBLASLT_LOG_MASK") && !std::getenv("CUBLASLT_LOG_LEVEL")) {
    cublasLtLoggerSetCallback(keepLog);
    cublasLtLoggerSetMask(1 | 4);
  }
  size_t workspaceBytes = size_t(32) << 20;
  void *workspace = nullptr;
  CUDA_OK(cudaMalloc(&workspace, workspaceBytes));

  const auto E4 = CUDA_R_8F_E4M3, E5 = CUDA_R_8F_E5M2, BF = CUDA_R_16BF,
             F32 = CUDA_R_32F;
  const auto Null = AtHeuristic::Null, Stand = AtHeuristic::Placeholder,
             Real = AtHeuristic::Real;
  // name, A, B, C, m, n, k, beta, scales@heuristic, +A, +B, C offset, prefs, fast
  std::vector<Variant> variants = {
      // 1. NVIDIA's LtFp8Matmul sample's shape of call: must work.
      {"canonical", E4, E4, BF, 64, 64, 64, 0.0f, Real, 0, 256, 0, true, -1},
      // 2. Sluice run 1 (commit 64f209d): no scale pointers at the
      //    heuristic, the real ones packed 4 bytes apart after the amaxes.
      {"sluice-run-1", E4, E4, BF, 64, 64, 64, 0.0f, Null, 8, 12, 0, false, -1},
      // 3. run 1's order with well-aligned scales: isolates "null at the
      //    heuristic" from the scales' alignment.
      {"null-then-aligned", E4, E4, BF, 64, 64, 64, 0.0f, Null, 0, 256, 0, false, -1},
      // 4. Sluice run 2: a 256-aligned stand-in at the heuristic, the real
      //    scales at +8 and +12.
      {"sluice-run-2", E4, E4, BF, 64, 64, 64, 0.0f, Stand, 8, 12, 0, false, -1},
      // 5. Transformer Engine 1.x: scale_inv[index] -- 4-byte-aligned real
      //    pointers, set before the heuristic.
      {"te-1x-offsets", E4, E4, BF, 64, 64, 64, 0.0f, Real, 4, 8, 0, false, -1},
      // 6. Today's tree: the stand-in and the real scales both 256-aligned.
      {"current-tree", E4, E4, BF, 64, 64, 64, 0.0f, Stand, 256, 512, 0, false, -1},
      // 7-8. SluiceCudaTests.Fp8Gemm's call (64x48x40 row-major, k padded
      //    to 48): cuBLASLt's A = the row-major B (E5M2), m = 48, n = 64,
      //    beta 0.5, into f32 and bf16, in run 2's scale pattern and today's.
      {"unit-test-run-2-f32", E5, E4, F32, 48, 64, 48, 0.5f, Stand, 8, 12, 0, false, -1},
      {"unit-test-run-2-bf16", E5, E4, BF, 48, 64, 48, 0.5f, Stand, 8, 12, 0, false, -1},
      {"unit-test-today-f32", E5, E4, F32, 48, 64, 48, 0.5f, Stand, 256, 512, 0, false, -1},
      {"unit-test-today-bf16", E5, E4, BF, 48, 64, 48, 0.5f, Stand, 256, 512, 0, false, -1},
      // 9. The 1B step's QKV shape (row-major 8192x3072x2048), as today.
      {"1b-qkv-today", E4, E4, BF, 3072, 8192, 2048, 0.0f, Stand, 256, 512, 0, false, -1},
      // 10-11. The same with the output 64 bytes into its buffer: without
      //    and with the output's real alignment told to the heuristic.
      {"1b-qkv-c+64", E4, E4, BF, 3072, 8192, 2048, 0.0f, Stand, 256, 512, 64, false, -1},
      {"1b-qkv-c+64-prefs", E4, E4, BF, 3072, 8192, 2048, 0.0f, Stand, 256, 512, 64, true, -1},
      // 12. A weight gradient accumulated into f32 (beta 1), E4M3 x E5M2.
      {"1b-wgrad-f32+=", E4, E5, F32, 2048, 2048, 8192, 1.0f, Real, 256, 512, 0, true, -1},
      // 13. Fast accumulation on (Transformer Engine's forward setting).
      {"canonical-fast-accum", E4, E4, BF, 64, 64, 64, 0.0f, Real, 0, 256, 0, true, 1},
      // 14-16. Sluice's call since 2026-11-30: the forward's product (fast
      //    accumulation), the unit test's backward-shaped one (E5M2, beta
      //    0.5, none), and the 1B weight gradient into f32 -- real scales
      //    in 256-byte slots, alignment preferences, scalar scale mode.
      {"sluice-today-forward", E4, E4, BF, 3072, 8192, 2048, 0.0f, Real, 256, 512, 0, true, 1, true},
      {"sluice-today-unit-test", E5, E4, F32, 48, 64, 48, 0.5f, Real, 256, 512, 0, true, 0, true},
      {"sluice-today-wgrad", E4, E5, F32, 2048, 2048, 8192, 1.0f, Real, 256, 512, 0, true, 0, true},
  };
  int works = 0;
  bool canonical = false;
  for (const Variant &v : variants) {
    bool passed = run(handle, workspace, workspaceBytes, v);
    works += passed;
    if (std::strcmp(v.name, "canonical") == 0)
      canonical = passed;
  }
  std::printf("fp8probe: %d of %zu variants work; the canonical call %s\n",
              works, variants.size(), canonical ? "works" : "is REFUSED");
  cudaFree(workspace);
  cublasLtDestroy(handle);
  return canonical ? 0 : 1;
}
