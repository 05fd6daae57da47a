//===- StagedKernels.cpp - bf16 plans on the fp32 CPU kernels -------------===//

#include "StagedKernels.h"

#include <algorithm>
#include <vector>

namespace sluice::rt {

namespace {

/// One kernel call's bf16 arrays as fp32: in() and io() return what the
/// fp32 kernel reads (the array itself unless it is bf16), io()'s are
/// rounded back when the stage ends. The same array named twice is staged
/// once, so an in-place call stays in place. `count` is the array's extent
/// from the pointer: the last element the kernel touches, plus one.
class Stage {
public:
  ~Stage() {
    for (const Array &a : arrays)
      if (a.written) {
        uint16_t *to = a.original.as<uint16_t>();
        for (size_t i = 0; i < a.values.size(); ++i)
          to[i] = floatToBf16(a.values[i]);
      }
  }
  DevicePtr in(DevicePtr p, int64_t count) { return stage(p, count, false); }
  DevicePtr io(DevicePtr p, int64_t count) { return stage(p, count, true); }

private:
  struct Array {
    DevicePtr original;
    std::vector<float> values;
    bool written;
  };
  DevicePtr stage(DevicePtr p, int64_t count, bool written) {
    if (!p || p.getType() != DType::BF16 || count <= 0)
      return p;
    for (Array &a : arrays)
      if (a.original.get() == p.get()) {
        if (int64_t(a.values.size()) < count)
          grow(a, count);
        a.written = a.written || written;
        return DevicePtr(a.values.data());
      }
    arrays.push_back({p, {}, written});
    grow(arrays.back(), count);
    return DevicePtr(arrays.back().values.data());
  }
  static void grow(Array &a, int64_t count) {
    const uint16_t *from = a.original.as<uint16_t>();
    size_t had = a.values.size();
    a.values.resize(size_t(count));
    for (size_t i = had; i < a.values.size(); ++i)
      a.values[i] = bf16ToFloat(from[i]);
  }
  // Moving an Array keeps its values' buffer, so the pointers handed out
  // stay valid as `arrays` grows; a call names an array once (or again
  // with no larger extent), so none is regrown after its pointer is out.
  std::vector<Array> arrays;
};

/// Rows x cols of a matrix with leading dimension ld.
int64_t extent(int64_t rows, int64_t cols, int64_t ld) {
  return rows <= 0 || cols <= 0 ? 0 : (rows - 1) * ld + cols;
}

/// One past the largest token id of a rows x length window (the table
/// rows an embedding touches).
int64_t tableRows(DevicePtr tokens, int64_t stride, int64_t rows,
                  int64_t length) {
  int64_t most = -1;
  const int32_t *t = tokens.as<int32_t>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < length; ++i)
      most = std::max<int64_t>(most, t[r * stride + i]);
  return most + 1;
}

} // namespace

void StagedKernels::gemm(bool transA, bool transB, int64_t m, int64_t n,
                         int64_t k, float alpha, DevicePtr a, int64_t lda,
                         DevicePtr b, int64_t ldb, float beta, DevicePtr c,
                         int64_t ldc) {
  Stage s;
  DevicePtr sa = s.in(a, transA ? extent(k, m, lda) : extent(m, k, lda));
  DevicePtr sb = s.in(b, transB ? extent(n, k, ldb) : extent(k, n, ldb));
  fp32.gemm(transA, transB, m, n, k, alpha, sa, lda, sb, ldb, beta,
            s.io(c, extent(m, n, ldc)), ldc);
}

void StagedKernels::gemmFp8(bool transA, bool transB, int64_t m, int64_t n,
                            int64_t k, float alpha, DevicePtr a, int64_t lda,
                            const Fp8Operand &qa, DevicePtr b, int64_t ldb,
                            const Fp8Operand &qb, float beta, DevicePtr c,
                            int64_t ldc) {
  Stage s;
  DevicePtr sa = s.in(a, transA ? extent(k, m, lda) : extent(m, k, lda));
  DevicePtr sb = s.in(b, transB ? extent(n, k, ldb) : extent(k, n, ldb));
  fp32.gemmFp8(transA, transB, m, n, k, alpha, sa, lda, qa, sb, ldb, qb, beta,
               s.io(c, extent(m, n, ldc)), ldc);
}

// The records are fp32.
void StagedKernels::updateFp8Scales(DevicePtr records, int64_t count,
                                    bool trained) {
  fp32.updateFp8Scales(records, count, trained);
}

void StagedKernels::addRowVector(DevicePtr x, DevicePtr v, int64_t rows,
                                 int64_t cols) {
  Stage s;
  fp32.addRowVector(s.io(x, rows * cols), s.in(v, cols), rows, cols);
}

void StagedKernels::accumulateColumnSums(DevicePtr x, int64_t rows,
                                         int64_t cols, DevicePtr out) {
  Stage s;
  fp32.accumulateColumnSums(s.in(x, rows * cols), rows, cols, s.io(out, cols));
}

void StagedKernels::add(DevicePtr y, DevicePtr x, int64_t n) {
  Stage s;
  fp32.add(s.io(y, n), s.in(x, n), n);
}

// copy and fill convert between any two types themselves.
void StagedKernels::copy(DevicePtr y, DevicePtr x, int64_t n) {
  fp32.copy(y, x, n);
}

void StagedKernels::fill(DevicePtr y, double value, int64_t n) {
  fp32.fill(y, value, n);
}

void StagedKernels::softcap(DevicePtr x, int64_t rows, int64_t cols, int64_t ld,
                            float cap) {
  Stage s;
  fp32.softcap(s.io(x, extent(rows, cols, ld)), rows, cols, ld, cap);
}

void StagedKernels::softcapGrad(DevicePtr capped, DevicePtr grad, int64_t rows,
                                int64_t cols, int64_t ld, float cap) {
  Stage s;
  int64_t e = extent(rows, cols, ld);
  fp32.softcapGrad(s.in(capped, e), s.io(grad, e), rows, cols, ld, cap);
}

void StagedKernels::scale(DevicePtr y, float factor, int64_t n) {
  Stage s;
  fp32.scale(s.io(y, n), factor, n);
}

void StagedKernels::zeroTokenRows(DevicePtr tokens, int64_t stride,
                                  int64_t rows, int64_t length, int32_t token,
                                  int64_t hidden, DevicePtr x) {
  Stage s;
  fp32.zeroTokenRows(tokens, stride, rows, length, token, hidden,
                     s.io(x, rows * length * hidden));
}

void StagedKernels::copyStrided(DevicePtr dst, DevicePtr src,
                                const StridedCopy &c) {
  if (c.batches <= 0 || c.rows <= 0 || c.cols <= 0)
    return;
  auto span = [&](int64_t batch, int64_t row) {
    return (c.batches - 1) * batch + (c.rows - 1) * row + c.cols;
  };
  Stage s;
  DevicePtr from = s.in(src, span(c.srcBatch, c.srcRow));
  fp32.copyStrided(s.io(dst, span(c.dstBatch, c.dstRow)), from, c);
}

void StagedKernels::normForward(DevicePtr x, DevicePtr gamma, DevicePtr beta,
                                int64_t rows, int64_t cols, bool rms, float eps,
                                DevicePtr y, DevicePtr xhat, DevicePtr rstd) {
  Stage s;
  int64_t n = rows * cols;
  DevicePtr sx = s.in(x, n), sg = s.in(gamma, cols), sb = s.in(beta, cols);
  fp32.normForward(sx, sg, sb, rows, cols, rms, eps, s.io(y, n), s.io(xhat, n),
                   s.io(rstd, rows));
}

void StagedKernels::normAffine(DevicePtr xhat, DevicePtr gamma, DevicePtr beta,
                               int64_t rows, int64_t cols, DevicePtr y) {
  Stage s;
  int64_t n = rows * cols;
  DevicePtr sx = s.in(xhat, n), sg = s.in(gamma, cols), sb = s.in(beta, cols);
  fp32.normAffine(sx, sg, sb, rows, cols, s.io(y, n));
}

void StagedKernels::normBackward(DevicePtr dy, DevicePtr xhat, DevicePtr rstd,
                                 DevicePtr gamma, int64_t rows, int64_t cols,
                                 bool rms, DevicePtr dx) {
  Stage s;
  int64_t n = rows * cols;
  DevicePtr sdy = s.in(dy, n), sx = s.in(xhat, n), sr = s.in(rstd, rows),
            sg = s.in(gamma, cols);
  fp32.normBackward(sdy, sx, sr, sg, rows, cols, rms, s.io(dx, n));
}

void StagedKernels::normParamGrads(DevicePtr dy, DevicePtr xhat, int64_t rows,
                                   int64_t cols, DevicePtr dgamma,
                                   DevicePtr dbeta) {
  Stage s;
  int64_t n = rows * cols;
  DevicePtr sdy = s.in(dy, n), sx = s.in(xhat, n);
  fp32.normParamGrads(sdy, sx, rows, cols, s.io(dgamma, cols),
                      s.io(dbeta, cols));
}

void StagedKernels::geluForward(GateActivation act, DevicePtr u, DevicePtr g,
                                int64_t n) {
  Stage s;
  DevicePtr su = s.in(u, n);
  fp32.geluForward(act, su, s.io(g, n), n);
}

void StagedKernels::geluBackward(GateActivation act, DevicePtr u, DevicePtr dg,
                                 DevicePtr du, int64_t n) {
  Stage s;
  DevicePtr su = s.in(u, n), sdg = s.in(dg, n);
  fp32.geluBackward(act, su, sdg, s.io(du, n), n);
}

void StagedKernels::gatedForward(GateActivation act, DevicePtr z, DevicePtr u,
                                 DevicePtr g, int64_t n) {
  Stage s;
  DevicePtr sz = s.in(z, n), su = s.in(u, n);
  fp32.gatedForward(act, sz, su, s.io(g, n), n);
}

void StagedKernels::gatedBackward(GateActivation act, DevicePtr z, DevicePtr u,
                                  DevicePtr dg, DevicePtr dz, DevicePtr du,
                                  int64_t n) {
  Stage s;
  DevicePtr sz = s.in(z, n), su = s.in(u, n), sdg = s.in(dg, n);
  DevicePtr sdz = s.io(dz, n);
  fp32.gatedBackward(act, sz, su, sdg, sdz, s.io(du, n), n);
}

void StagedKernels::rotate(DevicePtr x, int64_t rows, int64_t tokens,
                           int64_t offset, int64_t heads, int64_t headDim,
                           int64_t stride, const Rotary &rotary, bool inverse) {
  Stage s;
  fp32.rotate(s.io(x, extent(rows * tokens, heads * headDim, stride)), rows,
              tokens, offset, heads, headDim, stride, rotary, inverse);
}

void StagedKernels::attentionForward(const AttentionShape &a, DevicePtr q,
                                     DevicePtr keys, DevicePtr values,
                                     DevicePtr lse, DevicePtr context) {
  Stage s;
  int64_t queries = a.rows * a.tokens * a.heads * a.headDim;
  int64_t cache = a.rows * a.seqLen * a.kvHeads * a.headDim;
  DevicePtr sq = s.in(q, queries), sk = s.in(keys, cache),
            sv = s.in(values, cache);
  DevicePtr slse = s.io(lse, a.rows * a.heads * a.tokens);
  fp32.attentionForward(a, sq, sk, sv, slse, s.io(context, queries));
}

void StagedKernels::attentionBackward(const AttentionShape &a, DevicePtr q,
                                      DevicePtr keys, DevicePtr values,
                                      DevicePtr context, DevicePtr lse,
                                      DevicePtr dcontext, DevicePtr dq,
                                      DevicePtr dkeys, DevicePtr dvalues) {
  Stage s;
  int64_t queries = a.rows * a.tokens * a.heads * a.headDim;
  int64_t cache = a.rows * a.seqLen * a.kvHeads * a.headDim;
  DevicePtr sq = s.in(q, queries), sk = s.in(keys, cache),
            sv = s.in(values, cache), sc = s.in(context, queries),
            slse = s.in(lse, a.rows * a.heads * a.tokens),
            sdc = s.in(dcontext, queries);
  DevicePtr sdq = s.io(dq, queries), sdk = s.io(dkeys, cache);
  fp32.attentionBackward(a, sq, sk, sv, sc, slse, sdc, sdq, sdk,
                         s.io(dvalues, cache));
}

void StagedKernels::embeddingForward(DevicePtr tokens, int64_t stride,
                                     DevicePtr table, DevicePtr positions,
                                     int64_t rows, int64_t length,
                                     int64_t offset, int64_t hidden,
                                     DevicePtr out) {
  Stage s;
  DevicePtr st = s.in(table, tableRows(tokens, stride, rows, length) * hidden);
  DevicePtr sp = s.in(positions, (offset + length) * hidden);
  fp32.embeddingForward(tokens, stride, st, sp, rows, length, offset, hidden,
                        s.io(out, rows * length * hidden));
}

void StagedKernels::embeddingBackward(DevicePtr tokens, int64_t stride,
                                      DevicePtr dout, int64_t rows,
                                      int64_t length, int64_t offset,
                                      int64_t hidden, DevicePtr dtable,
                                      DevicePtr dpositions) {
  Stage s;
  DevicePtr sd = s.in(dout, rows * length * hidden);
  DevicePtr st = s.io(dtable, tableRows(tokens, stride, rows, length) * hidden);
  fp32.embeddingBackward(tokens, stride, sd, rows, length, offset, hidden, st,
                         s.io(dpositions, (offset + length) * hidden));
}

void StagedKernels::crossEntropyForward(DevicePtr logits, DevicePtr labels,
                                        int64_t stride, int64_t rows,
                                        int64_t length, int64_t vocab,
                                        DevicePtr lse, DevicePtr loss) {
  Stage s;
  DevicePtr sl = s.in(logits, rows * length * vocab);
  DevicePtr slse = s.io(lse, rows * length);
  fp32.crossEntropyForward(sl, labels, stride, rows, length, vocab, slse,
                           s.io(loss, 1));
}

void StagedKernels::crossEntropyBackward(DevicePtr logits, DevicePtr lse,
                                         DevicePtr labels, int64_t stride,
                                         int64_t rows, int64_t length,
                                         int64_t vocab, float scale,
                                         DevicePtr dlogits) {
  Stage s;
  int64_t n = rows * length * vocab;
  DevicePtr sl = s.in(logits, n), slse = s.in(lse, rows * length);
  fp32.crossEntropyBackward(sl, slse, labels, stride, rows, length, vocab,
                            scale, s.io(dlogits, n));
}

void StagedKernels::shardLookup(DevicePtr tokens, int64_t stride, int64_t rows,
                                int64_t length, DevicePtr table, int64_t first,
                                int64_t count, int64_t hidden, DevicePtr out) {
  Stage s;
  DevicePtr st = s.in(table, count * hidden);
  fp32.shardLookup(tokens, stride, rows, length, st, first, count, hidden,
                   s.io(out, rows * length * hidden));
}

void StagedKernels::shardScatterAdd(DevicePtr tokens, int64_t stride,
                                    int64_t rows, int64_t length,
                                    DevicePtr dout, int64_t first,
                                    int64_t count, int64_t hidden,
                                    DevicePtr dtable) {
  Stage s;
  DevicePtr sd = s.in(dout, rows * length * hidden);
  fp32.shardScatterAdd(tokens, stride, rows, length, sd, first, count, hidden,
                       s.io(dtable, count * hidden));
}

void StagedKernels::shardSoftmaxStatistics(DevicePtr logits, int64_t tokens,
                                           int64_t count, int64_t ld,
                                           DevicePtr reference, DevicePtr max,
                                           DevicePtr sum, DevicePtr probs) {
  Stage s;
  int64_t e = extent(tokens, count, ld);
  DevicePtr sl = s.in(logits, e), sr = s.in(reference, tokens);
  DevicePtr sm = s.io(max, tokens), ss = s.io(sum, tokens);
  fp32.shardSoftmaxStatistics(sl, tokens, count, ld, sr, sm, ss,
                              s.io(probs, e));
}

void StagedKernels::rescaleSum(DevicePtr sum, DevicePtr localMax,
                               DevicePtr globalMax, int64_t tokens,
                               DevicePtr scaled) {
  Stage s;
  DevicePtr ss = s.in(sum, tokens), sl = s.in(localMax, tokens),
            sg = s.in(globalMax, tokens);
  fp32.rescaleSum(ss, sl, sg, tokens, s.io(scaled, tokens));
}

void StagedKernels::scaleRows(DevicePtr x, DevicePtr factor, DevicePtr divisor,
                              int64_t tokens, int64_t count, int64_t ld) {
  Stage s;
  DevicePtr sx = s.io(x, extent(tokens, count, ld));
  fp32.scaleRows(sx, s.in(factor, tokens), s.in(divisor, tokens), tokens, count,
                 ld);
}

void StagedKernels::shardLoss(DevicePtr logits, DevicePtr labels,
                              int64_t stride, int64_t rows, int64_t length,
                              int64_t first, int64_t count, int64_t ld,
                              DevicePtr max, DevicePtr sum, DevicePtr loss) {
  Stage s;
  int64_t tokens = rows * length;
  DevicePtr sl = s.in(logits, extent(tokens, count, ld));
  DevicePtr sm = s.in(max, tokens), ss = s.in(sum, tokens);
  fp32.shardLoss(sl, labels, stride, rows, length, first, count, ld, sm, ss,
                 s.io(loss, 1));
}

void StagedKernels::shardSoftmaxGrad(DevicePtr probs, DevicePtr labels,
                                     int64_t stride, int64_t rows,
                                     int64_t length, int64_t first,
                                     int64_t count, int64_t ld, float scale) {
  Stage s;
  fp32.shardSoftmaxGrad(s.io(probs, extent(rows * length, count, ld)), labels,
                        stride, rows, length, first, count, ld, scale);
}

void StagedKernels::labelRows(DevicePtr labels, int64_t stride, int64_t rows,
                              int64_t length, DevicePtr table, int64_t first,
                              int64_t count, int64_t hidden, DevicePtr out) {
  Stage s;
  DevicePtr st = s.in(table, count * hidden);
  fp32.labelRows(labels, stride, rows, length, st, first, count, hidden,
                 s.io(out, rows * length * hidden));
}

void StagedKernels::combineGrad(DevicePtr a, DevicePtr b, DevicePtr scaled,
                                DevicePtr sum, int64_t tokens, int64_t hidden,
                                float scale, DevicePtr out) {
  Stage s;
  int64_t n = tokens * hidden;
  DevicePtr sa = s.in(a, n), sb = s.in(b, n), sc = s.in(scaled, tokens),
            ss = s.in(sum, tokens);
  fp32.combineGrad(sa, sb, sc, ss, tokens, hidden, scale, s.io(out, n));
}

void StagedKernels::sumSquares(DevicePtr x, int64_t rows, int64_t cols,
                               int64_t stride, double weight, DevicePtr out) {
  Stage s;
  fp32.sumSquares(s.in(x, extent(rows, cols, stride)), rows, cols, stride,
                  weight, out);
}

void StagedKernels::adamUpdate(DevicePtr weights, DevicePtr grads, DevicePtr m,
                               DevicePtr v, int64_t n, const AdamConfig &config,
                               int64_t step, DevicePtr working) {
  // The fp32 kernel writes the working copy through copy(), which rounds.
  fp32.adamUpdate(weights, grads, m, v, n, config, step, working);
}

} // namespace sluice::rt
