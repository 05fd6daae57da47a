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

#include <memory>
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

  void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
            float alpha, DevicePtr a, int64_t lda, DevicePtr b, int64_t ldb,
            float beta, DevicePtr c, int64_t ldc) override;
  void gemmFp8(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
               float alpha, DevicePtr a, int64_t lda, const Fp8Operand &qa,
               DevicePtr b, int64_t ldb, const Fp8Operand &qb, float beta,
               DevicePtr c, int64_t ldc) override;
  void updateFp8Scales(DevicePtr records, int64_t count, bool trained) override;
  void addRowVector(DevicePtr x, DevicePtr v, int64_t rows,
                    int64_t cols) override;
  void accumulateColumnSums(DevicePtr x, int64_t rows, int64_t cols,
                            DevicePtr out) override;
  void add(DevicePtr y, DevicePtr x, int64_t n) override;
  void softcap(DevicePtr x, int64_t rows, int64_t cols, int64_t ld,
               float cap) override;
  void softcapGrad(DevicePtr capped, DevicePtr grad, int64_t rows,
                   int64_t cols, int64_t ld, float cap) override;
  void scale(DevicePtr y, float factor, int64_t n) override;
  void zeroTokenRows(DevicePtr tokens, int64_t stride, int64_t rows,
                     int64_t length, int32_t token, int64_t hidden,
                     DevicePtr x) override;
  void copy(DevicePtr y, DevicePtr x, int64_t n) override;
  void fill(DevicePtr y, double value, int64_t n) override;
  void copyStrided(DevicePtr dst, DevicePtr src,
                   const StridedCopy &shape) override;
  void normForward(DevicePtr x, DevicePtr gamma, DevicePtr beta, int64_t rows,
                   int64_t cols, bool rms, float eps, DevicePtr y,
                   DevicePtr xhat, DevicePtr rstd) override;
  void normAffine(DevicePtr xhat, DevicePtr gamma, DevicePtr beta, int64_t rows,
                  int64_t cols, DevicePtr y) override;
  void normBackward(DevicePtr dy, DevicePtr xhat, DevicePtr rstd,
                    DevicePtr gamma, int64_t rows, int64_t cols, bool rms,
                    DevicePtr dx) override;
  void normParamGrads(DevicePtr dy, DevicePtr xhat, int64_t rows, int64_t cols,
                      DevicePtr dgamma, DevicePtr dbeta) override;
  void addNormForward(DevicePtr x, DevicePtr residual, DevicePtr gamma,
                      DevicePtr beta, int64_t rows, int64_t cols, bool rms,
                      float eps, DevicePtr y, DevicePtr xhat,
                      DevicePtr rstd) override;
  void normBackwardAdd(DevicePtr dy, DevicePtr xhat, DevicePtr rstd,
                       DevicePtr gamma, int64_t rows, int64_t cols, bool rms,
                       DevicePtr residual, DevicePtr dx) override;
  void geluForward(GateActivation act, DevicePtr u, DevicePtr g,
                   int64_t n) override;
  void geluBackward(GateActivation act, DevicePtr u, DevicePtr dg, DevicePtr du,
                    int64_t n) override;
  void gatedForward(GateActivation act, DevicePtr z, DevicePtr u, DevicePtr g,
                    int64_t n) override;
  void gatedBackward(GateActivation act, DevicePtr z, DevicePtr u, DevicePtr dg,
                     DevicePtr dz, DevicePtr du, int64_t n) override;
  void rotate(DevicePtr x, int64_t rows, int64_t tokens, int64_t offset,
              int64_t heads, int64_t headDim, int64_t stride,
              const Rotary &rotary, bool inverse) override;
  void attentionForward(const AttentionShape &s, DevicePtr q, DevicePtr keys,
                        DevicePtr values, DevicePtr lse,
                        DevicePtr context) override;
  void attentionBackward(const AttentionShape &s, DevicePtr q, DevicePtr keys,
                         DevicePtr values, DevicePtr context, DevicePtr lse,
                         DevicePtr dcontext, DevicePtr dq, DevicePtr dkeys,
                         DevicePtr dvalues) override;
  void embeddingForward(DevicePtr tokens, int64_t stride, DevicePtr table,
                        DevicePtr positions, int64_t rows, int64_t length,
                        int64_t offset, int64_t hidden, DevicePtr out) override;
  void embeddingBackward(DevicePtr tokens, int64_t stride, DevicePtr dout,
                         int64_t rows, int64_t length, int64_t offset,
                         int64_t hidden, DevicePtr dtable,
                         DevicePtr dpositions) override;
  void crossEntropyForward(DevicePtr logits, DevicePtr labels, int64_t stride,
                           int64_t rows, int64_t length, int64_t vocab,
                           DevicePtr lse, DevicePtr loss) override;
  void crossEntropyBackward(DevicePtr logits, DevicePtr lse, DevicePtr labels,
                            int64_t stride, int64_t rows, int64_t length,
                            int64_t vocab, float scale,
                            DevicePtr dlogits) override;
  void shardLookup(DevicePtr tokens, int64_t stride, int64_t rows,
                   int64_t length, DevicePtr table, int64_t first,
                   int64_t count, int64_t hidden, DevicePtr out) override;
  void shardScatterAdd(DevicePtr tokens, int64_t stride, int64_t rows,
                       int64_t length, DevicePtr dout, int64_t first,
                       int64_t count, int64_t hidden,
                       DevicePtr dtable) override;
  void shardSoftmaxStatistics(DevicePtr logits, int64_t tokens, int64_t count,
                              int64_t ld, DevicePtr reference, DevicePtr max,
                              DevicePtr sum, DevicePtr probs) override;
  void rescaleSum(DevicePtr sum, DevicePtr localMax, DevicePtr globalMax,
                  int64_t tokens, DevicePtr scaled) override;
  void scaleRows(DevicePtr x, DevicePtr factor, DevicePtr divisor,
                 int64_t tokens, int64_t count, int64_t ld) override;
  void shardLoss(DevicePtr logits, DevicePtr labels, int64_t stride,
                 int64_t rows, int64_t length, int64_t first, int64_t count,
                 int64_t ld, DevicePtr max, DevicePtr sum,
                 DevicePtr loss) override;
  void shardSoftmaxGrad(DevicePtr probs, DevicePtr labels, int64_t stride,
                        int64_t rows, int64_t length, int64_t first,
                        int64_t count, int64_t ld, float scale) override;
  void labelRows(DevicePtr labels, int64_t stride, int64_t rows, int64_t length,
                 DevicePtr table, int64_t first, int64_t count, int64_t hidden,
                 DevicePtr out) override;
  void combineGrad(DevicePtr a, DevicePtr b, DevicePtr scaled, DevicePtr sum,
                   int64_t tokens, int64_t hidden, float scale,
                   DevicePtr out) override;
  void sumSquares(DevicePtr x, int64_t rows, int64_t cols, int64_t stride,
                  double weight, DevicePtr out) override;
  void adamUpdate(DevicePtr weights, DevicePtr grads, DevicePtr m, DevicePtr v,
                  int64_t n, const AdamConfig &config, int64_t step,
                  DevicePtr working) override;

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
};

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_CUDAKERNELS_H
