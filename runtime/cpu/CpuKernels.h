//===- CpuKernels.h - fp32 kernels on the host with OpenBLAS ----*- C++ -*-===//

#ifndef SLUICE_RUNTIME_CPU_CPUKERNELS_H
#define SLUICE_RUNTIME_CPU_CPUKERNELS_H

#include "Backend.h"

namespace sluice::rt {

class CpuKernels final : public Kernels {
public:
  void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
            float alpha, const float *a, int64_t lda, const float *b,
            int64_t ldb, float beta, float *c, int64_t ldc) override;
  void addRowVector(float *x, const float *v, int64_t rows,
                    int64_t cols) override;
  void accumulateColumnSums(const float *x, int64_t rows, int64_t cols,
                            float *out) override;
  void add(float *y, const float *x, int64_t n) override;
  void copy(float *y, const float *x, int64_t n) override;
  void fill(float *y, float value, int64_t n) override;
  void normForward(const float *x, const float *gamma, const float *beta,
                   int64_t rows, int64_t cols, bool rms, float *y, float *xhat,
                   float *rstd) override;
  void normAffine(const float *xhat, const float *gamma, const float *beta,
                  int64_t rows, int64_t cols, float *y) override;
  void normBackward(const float *dy, const float *xhat, const float *rstd,
                    const float *gamma, int64_t rows, int64_t cols, bool rms,
                    float *dx) override;
  void normParamGrads(const float *dy, const float *xhat, int64_t rows,
                      int64_t cols, float *dgamma, float *dbeta) override;
  void geluForward(const float *u, float *g, int64_t n) override;
  void geluBackward(const float *u, const float *dg, float *du,
                    int64_t n) override;
  void gatedForward(GateActivation act, const float *z, const float *u,
                    float *g, int64_t n) override;
  void gatedBackward(GateActivation act, const float *z, const float *u,
                     const float *dg, float *dz, float *du, int64_t n) override;
  void rotate(float *x, int64_t rows, int64_t tokens, int64_t offset,
              int64_t heads, int64_t headDim, int64_t stride, double theta,
              bool inverse) override;
  void attentionForward(const AttentionShape &s, const float *q,
                        const float *keys, const float *values, float *probs,
                        float *context) override;
  void attentionBackward(const AttentionShape &s, const float *q,
                         const float *keys, const float *values,
                         const float *probs, const float *dcontext, float *dq,
                         float *dkeys, float *dvalues) override;
  void embeddingForward(const int32_t *tokens, int64_t stride,
                        const float *table, const float *positions,
                        int64_t rows, int64_t length, int64_t offset,
                        int64_t hidden, float *out) override;
  void embeddingBackward(const int32_t *tokens, int64_t stride,
                         const float *dout, int64_t rows, int64_t length,
                         int64_t offset, int64_t hidden, float *dtable,
                         float *dpositions) override;
  double crossEntropyForward(float *logitsToProbs, const int32_t *labels,
                             int64_t stride, int64_t rows, int64_t length,
                             int64_t vocab) override;
  void crossEntropyBackward(const float *probs, const int32_t *labels,
                            int64_t stride, int64_t rows, int64_t length,
                            int64_t vocab, float scale,
                            float *dlogits) override;
  void shardLookup(const int32_t *tokens, int64_t stride, int64_t rows,
                   int64_t length, const float *table, int64_t first,
                   int64_t count, int64_t hidden, float *out) override;
  void shardScatterAdd(const int32_t *tokens, int64_t stride, int64_t rows,
                       int64_t length, const float *dout, int64_t first,
                       int64_t count, int64_t hidden, float *dtable) override;
  void shardSoftmaxStatistics(const float *logits, int64_t tokens,
                              int64_t count, int64_t ld, const float *reference,
                              float *max, float *sum, float *probs) override;
  void rescaleSum(const float *sum, const float *localMax,
                  const float *globalMax, int64_t tokens,
                  float *scaled) override;
  void scaleRows(float *x, const float *factor, const float *divisor,
                 int64_t tokens, int64_t count, int64_t ld) override;
  double shardLoss(const float *logits, const int32_t *labels, int64_t stride,
                   int64_t rows, int64_t length, int64_t first, int64_t count,
                   int64_t ld, const float *max, const float *sum) override;
  void shardSoftmaxGrad(float *probs, const int32_t *labels, int64_t stride,
                        int64_t rows, int64_t length, int64_t first,
                        int64_t count, int64_t ld, float scale) override;
  void labelRows(const int32_t *labels, int64_t stride, int64_t rows,
                 int64_t length, const float *table, int64_t first,
                 int64_t count, int64_t hidden, float *out) override;
  void combineGrad(const float *a, const float *b, const float *scaled,
                   const float *sum, int64_t tokens, int64_t hidden,
                   float scale, float *out) override;
  void adamUpdate(float *weights, const float *grads, float *m, float *v,
                  int64_t n, const AdamConfig &config, int64_t step) override;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_CPU_CPUKERNELS_H
