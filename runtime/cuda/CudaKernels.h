//===- CudaKernels.h - The Kernels of one CUDA stream -----------*- C++ -*-===//
//
// Every Kernels method (runtime/Backend.h) as work enqueued on one CUDA
// stream, in fp32 or bf16 activations with fp32 statistics and
// accumulation. One op family per .cu/.cuh pair: the .cuh holds the device
// math and the kernels, the .cu the launchers that are these methods --
// Elementwise, Norm, Attention, Embedding, Softmax (cross-entropy and the
// vocabulary shards' pieces), Adam, Fp8 (quantization for the FP8
// GEMMs); GEMMs go to cuBLASLt (Gemm.h).
//
// Nothing here blocks the host or returns a status: a failed launch is
// recorded in the device's ErrorSink and reported at the next
// synchronize().
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_CUDAKERNELS_H
#define SLUICE_RUNTIME_CUDA_CUDAKERNELS_H

#include "AttentionCudnn.h"
#include "Backend.h"
#include "CudaDevice.h"
#include "Gemm.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

namespace sluice::rt::cuda {

class CudaKernels final : public Kernels {
public:
  /// `cudnn` (may be null) is the fused attention's fast path.
  CudaKernels(cudaStream_t stream, ErrorSink &errors,
              std::unique_ptr<GemmEngine> gemm,
              std::unique_ptr<CudnnAttention> cudnn)
      : stream(stream), errors(errors), gemmEngine(std::move(gemm)),
        cudnn(std::move(cudnn)), fusion(isFusionEnabled()),
        fp8TensorCores(isFp8TensorCoreEnabled()) {}

  /// Whether the fused and row-cached kernels run (the default), or
  /// SLUICE_CUDA_FUSION=0 asked for the composed forms: a benchmark's A/B.
  static bool isFusionEnabled();
  /// Whether gemmFp8 may use FP8 tensor cores (the default) or
  /// SLUICE_FP8_TENSOR_CORES=0 asked for the activation-type GEMM on the
  /// same quantized values.
  static bool isFp8TensorCoreEnabled();
  /// Only on GPUs with FP8 tensor cores (compute capability 8.9 and later).
  void setFp8TensorCores(bool available) { fp8TensorCores &= available; }
  bool usesFp8TensorCores() const { return fp8TensorCores; }
  int64_t getFp8Multiplies() const {
    return gemmEngine ? gemmEngine->getFp8Multiplies() : 0;
  }
  /// The steady operands' FP8 copies (Fp8Operand::steady) are stale once
  /// any kernels sharing `generation` ran updateFp8Scales or adamUpdate:
  /// a device's kernels share one (its streams' and lane 1's), so that a
  /// step's end on one stream retires every copy.
  void shareFp8Generation(std::shared_ptr<std::atomic<int64_t>> generation) {
    fp8Generation = std::move(generation);
  }
  /// SLUICE_FP8_STEADY_COPIES=0 quantizes every operand at every call (an
  /// A/B).
  static bool isSteadyCopyEnabled();

  // Every kernel of the list (runtime/Kernels.def).
#define SLUICE_KERNEL(NAME, PARAMS, ARGS, STAGING) void NAME PARAMS override;
#include "Kernels.def"
  void addNormForward(DevicePtr x, DevicePtr residual, DevicePtr gamma,
                      DevicePtr beta, int64_t rows, int64_t cols, bool rms,
                      float eps, DevicePtr y, DevicePtr xhat,
                      DevicePtr rstd) override;
  void normBackwardAdd(DevicePtr dy, DevicePtr xhat, DevicePtr rstd,
                       DevicePtr gamma, int64_t rows, int64_t cols, bool rms,
                       DevicePtr residual, DevicePtr dx) override;

  ~CudaKernels() override;

private:
  /// The rotations of positions [0, positions) for (rotary, headDim),
  /// built on this stream the first time they are needed; null after an
  /// error (recorded).
  const float2 *getRotaryTable(const Rotary &rotary, int64_t headDim,
                               int64_t positions);

  struct RotaryTable {
    Rotary rotary;
    int64_t headDim;
    int64_t positions;
    float2 *table;
  };
  std::vector<RotaryTable> rotaryTables;
  /// Every table ever built, freed with the kernels.
  std::vector<float2 *> retiredTables;

  cudaStream_t stream;
  ErrorSink &errors;
  std::unique_ptr<GemmEngine> gemmEngine;
  std::unique_ptr<CudnnAttention> cudnn;
  bool fusion;
  bool fp8TensorCores;
  /// gemmFp8's quantized copies, grown as needed (reserveScratch).
  void *fp8Scratch = nullptr;
  size_t fp8ScratchBytes = 0;
  /// A steady operand's FP8 copy as the FP8 GEMM takes it (rows of `width`
  /// bytes), then its inverse scale in a 256-byte slot; `generation`: the
  /// one it was made in (-1: none yet).
  struct SteadyKey {
    const void *record;
    bool transposed;
    int64_t rows, width;
    bool operator<(const SteadyKey &o) const {
      return std::tie(record, transposed, rows, width) <
             std::tie(o.record, o.transposed, o.rows, o.width);
    }
  };
  struct SteadyCopy {
    void *data = nullptr;
    size_t bytes = 0;
    int64_t generation = -1;
  };
  std::map<SteadyKey, SteadyCopy> steadyCopies;
  std::shared_ptr<std::atomic<int64_t>> fp8Generation =
      std::make_shared<std::atomic<int64_t>>(0);
  bool steadyCopiesOn = isSteadyCopyEnabled();
};

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_CUDAKERNELS_H
