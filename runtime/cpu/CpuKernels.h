//===- CpuKernels.h - fp32 kernels on the host with OpenBLAS ----*- C++ -*-===//
//
// The CPU backend's Kernels: fp32 only (a bf16 plan's arrays reach them
// widened, through StagedKernels), each call run at once, on the calling
// thread and the kernel threads (Threads.h) where it splits by rows. The
// reference the CUDA kernels are tested against. One op family per file, as
// the CUDA backend's: CpuKernels.cpp (GEMM, copies, adds), Fp8 (FP8 GEMMs),
// Norm, Activation, Attention, Embedding, Softmax, Vocabulary, Adam.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CPU_CPUKERNELS_H
#define SLUICE_RUNTIME_CPU_CPUKERNELS_H

#include "Backend.h"

namespace sluice::rt {

class CpuKernels final : public Kernels {
public:
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
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_CPU_CPUKERNELS_H
