//===- Backend.h - What the executor needs from a device --------*- C++ -*-===//
//
// The executor and the layers talk to a device only through these two
// interfaces, so a CUDA/NCCL backend implements them without touching the
// executor:
//
//  * Kernels: the math of every pass, on device memory, fp32, row-major. On
//    CUDA each call is a launch on the compute stream.
//  * Communicator: point-to-point and collective communication. Sends and
//    receives are non-blocking and return a Request -- the event a
//    consumer waits on (an MPI request here; a cudaEvent recorded on the
//    communication stream after an NCCL call on CUDA).
//
// Ownership: callers own every pointer they pass; a backend keeps none
// beyond a call, except a Request's buffer until the request completes.
// Threading: one executor thread drives a backend.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_BACKEND_H
#define SLUICE_RUNTIME_BACKEND_H

#include "Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sluice::rt {

struct AdamConfig {
  float learningRate = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  float weightDecay = 0.0f;
};

/// Attention over one token slice: `tokens` queries at positions
/// [offset, offset + tokens) attend causally to keys [0, offset + tokens)
/// of the same row. Q and context are [rows, tokens, heads, headDim]; the
/// key/value caches [rows, seqLen, kvHeads, headDim]; probabilities
/// [rows, heads, tokens, offset + tokens]. Grouped-query attention: query
/// head h reads key/value head h / (heads / kvHeads), so each key/value
/// head serves a group of consecutive query heads (kvHeads == heads is
/// ordinary multi-head attention).
struct AttentionShape {
  int64_t rows, tokens, offset, seqLen, heads, headDim, kvHeads;
};

/// The nonlinearity of a gated feed-forward block: SiLU (SwiGLU, Llama) or
/// the tanh-approximated GELU (GeGLU, Gemma).
enum class GateActivation { Silu, Gelu };

class Kernels {
public:
  virtual ~Kernels() = default;

  /// C = alpha * op(A) * op(B) + beta * C, op(A) m x k, op(B) k x n.
  virtual void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                    float alpha, const float *a, int64_t lda, const float *b,
                    int64_t ldb, float beta, float *c, int64_t ldc) = 0;
  /// x[r][c] += v[c].
  virtual void addRowVector(float *x, const float *v, int64_t rows,
                            int64_t cols) = 0;
  /// out[c] += sum_r x[r][c].
  virtual void accumulateColumnSums(const float *x, int64_t rows, int64_t cols,
                                    float *out) = 0;
  /// y += x.
  virtual void add(float *y, const float *x, int64_t n) = 0;
  virtual void copy(float *y, const float *x, int64_t n) = 0;
  virtual void fill(float *y, float value, int64_t n) = 0;

  /// xhat = (x - mean) * rstd (RMS norm: x * rstd), y = gamma * xhat + beta
  /// (beta null for RMS norm).
  virtual void normForward(const float *x, const float *gamma,
                           const float *beta, int64_t rows, int64_t cols,
                           bool rms, float *y, float *xhat, float *rstd) = 0;
  /// y = gamma * xhat + beta, recomputing a norm's output.
  virtual void normAffine(const float *xhat, const float *gamma,
                          const float *beta, int64_t rows, int64_t cols,
                          float *y) = 0;
  /// dx += the input gradient of the norm for output gradient dy.
  virtual void normBackward(const float *dy, const float *xhat,
                            const float *rstd, const float *gamma, int64_t rows,
                            int64_t cols, bool rms, float *dx) = 0;
  /// dgamma += sum dy * xhat; dbeta += sum dy (dbeta may be null).
  virtual void normParamGrads(const float *dy, const float *xhat, int64_t rows,
                              int64_t cols, float *dgamma, float *dbeta) = 0;

  /// GELU, tanh approximation (GPT-2).
  virtual void geluForward(const float *u, float *g, int64_t n) = 0;
  /// du = dg * gelu'(u).
  virtual void geluBackward(const float *u, const float *dg, float *du,
                            int64_t n) = 0;

  /// Gated feed-forward: g = act(z) * u, element-wise over n values.
  virtual void gatedForward(GateActivation act, const float *z, const float *u,
                            float *g, int64_t n) = 0;
  /// dz = dg * u * act'(z), du = dg * act(z).
  virtual void gatedBackward(GateActivation act, const float *z, const float *u,
                             const float *dg, float *dz, float *du,
                             int64_t n) = 0;

  /// Rotary position embedding in place (RoFormer; Hugging Face's Llama
  /// layout). x holds rows x tokens vectors `stride` floats apart, each
  /// starting with `heads` heads of `headDim`; in every head, dimensions i
  /// and i + headDim / 2 turn by the angle (offset + t) * theta^(-2i /
  /// headDim) of the vector's position. `inverse` turns them back, which is
  /// also the rotation's gradient (its transpose).
  virtual void rotate(float *x, int64_t rows, int64_t tokens, int64_t offset,
                      int64_t heads, int64_t headDim, int64_t stride,
                      double theta, bool inverse) = 0;

  virtual void attentionForward(const AttentionShape &s, const float *q,
                                const float *keys, const float *values,
                                float *probs, float *context) = 0;
  /// dq = ...; dkeys and dvalues accumulate over [0, offset + tokens).
  virtual void attentionBackward(const AttentionShape &s, const float *q,
                                 const float *keys, const float *values,
                                 const float *probs, const float *dcontext,
                                 float *dq, float *dkeys, float *dvalues) = 0;

  /// out[r][t] = table[tokens[r * stride + t]] (+ positions[offset + t]).
  virtual void embeddingForward(const int32_t *tokens, int64_t stride,
                                const float *table, const float *positions,
                                int64_t rows, int64_t length, int64_t offset,
                                int64_t hidden, float *out) = 0;
  /// dtable[token] += dout, dpositions[offset + t] += dout.
  virtual void embeddingBackward(const int32_t *tokens, int64_t stride,
                                 const float *dout, int64_t rows,
                                 int64_t length, int64_t offset, int64_t hidden,
                                 float *dtable, float *dpositions) = 0;

  /// probs = softmax(logits) in place; returns the summed cross-entropy of
  /// the labels (row r, token t: labels[r * stride + t]), in double.
  virtual double crossEntropyForward(float *logitsToProbs,
                                     const int32_t *labels, int64_t stride,
                                     int64_t rows, int64_t length,
                                     int64_t vocab) = 0;
  /// dlogits = (probs - onehot(labels)) * scale.
  virtual void crossEntropyBackward(const float *probs, const int32_t *labels,
                                    int64_t stride, int64_t rows,
                                    int64_t length, int64_t vocab, float scale,
                                    float *dlogits) = 0;

  // The vocabulary shards (papers/vocabulary-parallelism.txt §4): a device
  // holds rows [first, first + count) of a table; `count` may be less than
  // the shard's padded row count and 0, and no other row ever takes part.
  // Logits are [tokens, ld] with the shard's rows in the first `count`
  // columns.

  /// out[t] = table[token - first] for tokens in the shard, else 0.
  virtual void shardLookup(const int32_t *tokens, int64_t stride, int64_t rows,
                           int64_t length, const float *table, int64_t first,
                           int64_t count, int64_t hidden, float *out) = 0;
  /// dtable[token - first] += dout[t] for tokens in the shard.
  virtual void shardScatterAdd(const int32_t *tokens, int64_t stride,
                               int64_t rows, int64_t length, const float *dout,
                               int64_t first, int64_t count, int64_t hidden,
                               float *dtable) = 0;
  /// Per token: max[t] = max of its `count` logits (-inf if none);
  /// sum[t] = sum exp(logit - reference[t]) with reference = `max` when
  /// null; and, if `probs` is given, probs = exp(logit - ref) / sum[t].
  virtual void shardSoftmaxStatistics(const float *logits, int64_t tokens,
                                      int64_t count, int64_t ld,
                                      const float *reference, float *max,
                                      float *sum, float *probs) = 0;
  /// Equation 5: scaled[t] = sum[t] * exp(localMax[t] - globalMax[t]).
  virtual void rescaleSum(const float *sum, const float *localMax,
                          const float *globalMax, int64_t tokens,
                          float *scaled) = 0;
  /// x[t][c] *= factor[t] / divisor[t] for c < count (ld apart).
  virtual void scaleRows(float *x, const float *factor, const float *divisor,
                         int64_t tokens, int64_t count, int64_t ld) = 0;
  /// The shard's part of the summed cross-entropy: for each token whose
  /// label is in the shard, max + log(sum) - logit[label].
  virtual double shardLoss(const float *logits, const int32_t *labels,
                           int64_t stride, int64_t rows, int64_t length,
                           int64_t first, int64_t count, int64_t ld,
                           const float *max, const float *sum) = 0;
  /// probs -= onehot(label) where the label is in the shard, then *= scale:
  /// the shard's columns of the softmax gradient.
  virtual void shardSoftmaxGrad(float *probs, const int32_t *labels,
                                int64_t stride, int64_t rows, int64_t length,
                                int64_t first, int64_t count, int64_t ld,
                                float scale) = 0;
  /// Equation 6's B = G W: out[t] = table[label - first] where the label is
  /// in the shard, else 0.
  virtual void labelRows(const int32_t *labels, int64_t stride, int64_t rows,
                         int64_t length, const float *table, int64_t first,
                         int64_t count, int64_t hidden, float *out) = 0;
  /// Equation 6: out = scale * (A * scaled[t] / sum[t] - B).
  virtual void combineGrad(const float *a, const float *b, const float *scaled,
                           const float *sum, int64_t tokens, int64_t hidden,
                           float scale, float *out) = 0;

  /// One Adam(W) update of n weights at step `step` (from 1).
  virtual void adamUpdate(float *weights, const float *grads, float *m,
                          float *v, int64_t n, const AdamConfig &config,
                          int64_t step) = 0;
};

/// A pending non-blocking transfer.
class Request {
public:
  virtual ~Request() = default;
  /// Whether the transfer has completed (never blocks).
  virtual bool test() = 0;
};

/// The combining function of a collective reduction.
enum class Reduction { Sum, Max };

class Communicator {
public:
  /// Independent ordering domains for non-blocking collectives: every rank
  /// issues the collectives of one channel in the same order, but two
  /// channels' collectives may interleave differently on different ranks
  /// (an MPI communicator each; on CUDA an NCCL communicator and stream).
  /// The vocabulary shards use one channel each.
  static constexpr int kChannels = 2;

  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Sends n floats. The payload is copied before this returns, so the
  /// caller may reuse `data` at once (the buffer planner relies on it).
  virtual std::unique_ptr<Request> sendAsync(const float *data, int64_t n,
                                             int peer, int tag) = 0;
  virtual std::unique_ptr<Request> recvAsync(float *data, int64_t n, int peer,
                                             int tag) = 0;
  /// The largest tag the transport accepts.
  virtual int maxTag() const = 0;
  /// Non-blocking collectives over every rank on `channel`; `data` must stay
  /// valid until the request completes. Broadcast: root's n floats reach
  /// every rank's `data`. All-reduce: every rank's `data` becomes the
  /// element-wise reduction. Reduce: root's `data` becomes the sum, the
  /// others' is left as it was.
  virtual std::unique_ptr<Request> broadcastAsync(float *data, int64_t n,
                                                  int root, int channel) = 0;
  virtual std::unique_ptr<Request>
  allReduceAsync(float *data, int64_t n, Reduction reduction, int channel) = 0;
  virtual std::unique_ptr<Request> reduceSumAsync(float *data, int64_t n,
                                                  int root, int channel) = 0;
  /// Sums `data` over the ranks of `group` (every member calls it).
  virtual Status allReduceSum(float *data, int64_t n, const int *group,
                              int groupSize) = 0;
  virtual Status allReduceSum(double *data, int64_t n) = 0;
  virtual Status allReduceMax(double *data, int64_t n) = 0;
  /// Collects every rank's string on rank 0 (in rank order); other ranks
  /// get an empty list.
  virtual Status gatherToRoot(const std::string &mine,
                              std::vector<std::string> &all) = 0;
  virtual void barrier() = 0;
  /// Ends every rank of the job now, with `code`: one rank's failure stops
  /// the others instead of leaving them waiting for it.
  [[noreturn]] virtual void abort(int code) = 0;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_BACKEND_H
