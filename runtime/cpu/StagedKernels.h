//===- StagedKernels.h - bf16 plans on the fp32 CPU kernels -----*- C++ -*-===//
//
// The CPU backend's kernels compute in fp32. A bf16 plan keeps its
// activations, messages, key/value state and working weights in bf16 (the
// CUDA backend's storage), so that a config compiled for the GPU runs on
// any machine and a GPU run can be checked against the CPU at the same
// rounding points. StagedKernels sits in front of the fp32 kernels: each
// call's bf16 arrays are widened into fp32 scratch (exactly: bf16 is the
// upper half of an fp32), the fp32 kernel runs, and every array the call
// writes is rounded back to bf16 (to nearest even, as
// __float2bfloat16_rn) -- one rounding per kernel output, where the CUDA
// kernels store theirs. fp32 arrays pass straight through, so an fp32 plan
// pays a type check per pointer.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CPU_STAGEDKERNELS_H
#define SLUICE_RUNTIME_CPU_STAGEDKERNELS_H

#include "Backend.h"

namespace sluice::rt {

class StagedKernels final : public Kernels {
public:
  explicit StagedKernels(Kernels &fp32) : fp32(fp32) {}

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
  void copy(DevicePtr y, DevicePtr x, int64_t n) override;
  void softcap(DevicePtr x, int64_t rows, int64_t cols, int64_t ld,
               float cap) override;
  void softcapGrad(DevicePtr capped, DevicePtr grad, int64_t rows, int64_t cols,
                   int64_t ld, float cap) override;
  void scale(DevicePtr y, float factor, int64_t n) override;
  void zeroTokenRows(DevicePtr tokens, int64_t stride, int64_t rows,
                     int64_t length, int32_t token, int64_t hidden,
                     DevicePtr x) override;
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

private:
  Kernels &fp32;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_CPU_STAGEDKERNELS_H
