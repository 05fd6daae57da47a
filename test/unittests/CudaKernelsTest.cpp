//===- CudaKernelsTest.cpp - Every CUDA kernel against the CPU's ----------===//
//
// Each Kernels method of the CUDA backend on random inputs, against
// CpuKernels on the same inputs: fp32 within 1e-5 of the largest value
// (relative), bf16 within 1e-2 (inputs rounded to bf16 first, so both
// sides compute on equal numbers); a NaN anywhere fails. Runs on a machine
// with a GPU (test/gpu/run.sh through the device tool); skipped without.
//
//===----------------------------------------------------------------------===//

#include "CpuDevice.h"
#include "CudaDevice.h"
#include "Device.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

using namespace sluice::rt;

namespace sluice::rt {
/// Test names and failures print the element type, not its bytes.
void PrintTo(DType type, std::ostream *os) { *os << getName(type); }
} // namespace sluice::rt

namespace {

cuda::CudaDevice *openGpu() {
  static std::unique_ptr<cuda::CudaDevice> gpu;
  static bool tried = false;
  if (!tried) {
    tried = true;
    // FP8 strict unless told otherwise (SLUICE_FP8_STRICT=0): a GEMM
    // cuBLASLt refuses fails the test instead of passing on the bf16
    // fallback (read when the device opens; GPUs without FP8 tensor cores
    // never ask).
    setenv("SLUICE_FP8_STRICT", "1", /*overwrite=*/0);
    std::vector<cuda::DeviceInfo> devices;
    if (cuda::listDevices(devices) && !devices.empty()) {
      Status st = cuda::CudaDevice::open(0, gpu);
      EXPECT_TRUE(st.isOk()) << st.message();
    }
  }
  return gpu.get();
}

/// The same values on the host (fp32, for the CPU kernels) and on the GPU
/// (in `type`).
struct Tensor {
  std::vector<float> host;
  DeviceBuffer device;
  DType type = DType::F32;
  DevicePtr cpu() { return host.data(); }
  DevicePtr gpu() { return device.get(); }
};

class CudaKernelsTest : public ::testing::TestWithParam<DType> {
protected:
  void SetUp() override {
    gpu = openGpu();
    if (!gpu)
      GTEST_SKIP() << "no CUDA device on this machine";
  }

  DType act() const { return GetParam(); }
  double tolerance() const { return act() == DType::BF16 ? 1e-2 : 1e-5; }

  /// n values drawn from N(0, scale^2) (or `fill`), representable in `type`.
  Tensor make(int64_t n, DType type, float scale = 1.0f) {
    Tensor t;
    t.type = type;
    t.host.resize(n);
    std::normal_distribution<float> normal(0.0f, scale);
    for (float &x : t.host)
      x = normal(random);
    upload(t);
    return t;
  }
  Tensor constant(int64_t n, DType type, float value) {
    Tensor t;
    t.type = type;
    t.host.assign(n, value);
    upload(t);
    return t;
  }
  /// Rounds the host values to the type and copies them to the GPU.
  void upload(Tensor &t) {
    int64_t n = int64_t(t.host.size());
    std::vector<char> staged(size_t(std::max<int64_t>(1, n * getSize(t.type))));
    DevicePtr typed(staged.data(), t.type);
    cpuKernels().copy(typed, t.host.data(), n);
    cpuKernels().copy(t.host.data(), typed, n);
    ASSERT_TRUE(gpu->allocate(t.type, n, t.device));
    gpu->upload(t.device.get(), staged.data(), n * getSize(t.type),
                gpu->getStream(StreamKind::Compute));
    ASSERT_TRUE(gpu->synchronize());
  }
  /// A tensor's fp8 record as a run starts it: no scale, no amax, no
  /// history, and the format's largest value.
  Tensor freshRecord(Fp8Format format) {
    Tensor t = constant(kFp8RecordFloats, DType::F32, 0.0f);
    t.host[2] = format == Fp8Format::E4M3 ? 448.0f : 57344.0f;
    upload(t);
    return t;
  }
  /// The GPU's values as fp32.
  std::vector<float> fetch(Tensor &t) {
    int64_t n = int64_t(t.host.size());
    std::vector<char> staged(size_t(std::max<int64_t>(1, n * getSize(t.type))));
    gpu->download(staged.data(), t.device.get(), n * getSize(t.type),
                  gpu->getStream(StreamKind::Compute));
    Status st = gpu->synchronize();
    EXPECT_TRUE(st.isOk()) << st.message();
    std::vector<float> out(n);
    cpuKernels().copy(out.data(), DevicePtr(staged.data(), t.type), n);
    return out;
  }
  /// GPU against CPU, relative to the CPU's largest magnitude.
  void expectClose(Tensor &t, const char *what, double scale = 1.0) {
    std::vector<float> got = fetch(t);
    double most = 0, diff = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_FALSE(std::isnan(got[i])) << what << " element " << i;
      most = std::max(most, double(std::fabs(t.host[i])));
      diff = std::max(diff, double(std::fabs(got[i] - t.host[i])));
    }
    EXPECT_LE(diff, tolerance() * scale * std::max(most, 1e-6))
        << what << ": max difference " << diff << " against max " << most;
  }
  Kernels &cpuKernels() { return cpu.getKernels(StreamKind::Compute); }
  Kernels &gpuKernels() { return gpu->getKernels(StreamKind::Compute); }

  cuda::CudaDevice *gpu = nullptr;
  CpuDevice cpu;
  std::mt19937 random{17};
};

TEST_P(CudaKernelsTest, Gemm) {
  const int64_t m = 37, n = 45, k = 29;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (DType out : {act(), DType::F32}) {
        Tensor a = make(m * k, act()), b = make(k * n, act()),
               c = make(m * n, out);
        int64_t lda = ta ? m : k, ldb = tb ? k : n;
        cpuKernels().gemm(ta, tb, m, n, k, 0.7f, a.cpu(), lda, b.cpu(), ldb,
                          0.5f, c.cpu(), n);
        gpuKernels().gemm(ta, tb, m, n, k, 0.7f, a.gpu(), lda, b.gpu(), ldb,
                          0.5f, c.gpu(), n);
        expectClose(c, ta ? (tb ? "gemm TT" : "gemm TN")
                          : (tb ? "gemm NT" : "gemm NN"));
      }
}

/// The FP8 GEMM on the GPU (tensor cores where the shape is a multiple of
/// 16 and the GPU has them; the activation-type GEMM on the same quantized
/// values elsewhere) against the CPU's emulation: the same quantized
/// values, so only the sums' order differs; and the records' amaxes agree.
TEST_P(CudaKernelsTest, Fp8Gemm) {
  int64_t multiplied = gpu->getFp8Multiplies();
  for (auto [m, n, k] :
       {std::tuple<int64_t, int64_t, int64_t>{64, 48, 40}, {37, 45, 29}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (DType out : {act(), DType::F32}) {
          Tensor a = make(m * k, act(), 2.0f), b = make(k * n, act(), 0.05f),
                 c = make(m * n, out);
          int64_t lda = ta ? m : k, ldb = tb ? k : n;
          Tensor ra = freshRecord(Fp8Format::E4M3),
                 rb = freshRecord(Fp8Format::E5M2);
          cpuKernels().gemmFp8(ta, tb, m, n, k, 0.7f, a.cpu(), lda,
                               {ra.cpu(), Fp8Format::E4M3}, b.cpu(), ldb,
                               {rb.cpu(), Fp8Format::E5M2}, 0.5f, c.cpu(), n);
          gpuKernels().gemmFp8(ta, tb, m, n, k, 0.7f, a.gpu(), lda,
                               {ra.gpu(), Fp8Format::E4M3}, b.gpu(), ldb,
                               {rb.gpu(), Fp8Format::E5M2}, 0.5f, c.gpu(), n);
          std::string what = "gemmFp8 " + std::to_string(m) + "x" +
                             std::to_string(n) + "x" + std::to_string(k) +
                             (ta ? " T" : " N") + (tb ? "T" : "N");
          expectClose(c, what.c_str());
          expectClose(ra, (what + ": A's record").c_str());
          expectClose(rb, (what + ": B's record").c_str());
        }
  // The 64 x 48 products ran on FP8 tensor cores (37 x 45 cannot: m and n
  // must be multiples of 16), wherever the GPU has them.
  ASSERT_TRUE(gpu->synchronize().isOk());
  if (gpu->hasFp8TensorCores()) {
    EXPECT_EQ(gpu->getFp8Multiplies() - multiplied, 8)
        << "of the 64x48x40 products, only these ran on FP8 tensor cores";
  }
}

/// A steady operand (a weight within a step, Fp8Operand::steady) is
/// quantized by the step's first FP8 GEMM and its copy reused until the
/// step ends (updateFp8Scales): a second call with other values under the
/// same record gives the first call's product bit for bit; once the step
/// has ended the new values count, as in the CPU's emulation, which
/// quantizes at every call.
TEST_P(CudaKernelsTest, Fp8GemmQuantizesASteadyWeightOncePerStep) {
  if (!gpu->hasFp8TensorCores())
    GTEST_SKIP() << "steady copies are the FP8 tensor cores' path (sm_89+)";
  const int64_t m = 64, n = 48, k = 40;
  Tensor a = make(m * k, act(), 2.0f), b = make(k * n, act(), 0.05f),
         other = make(k * n, act(), 0.08f);
  Tensor ra = freshRecord(Fp8Format::E4M3), rb = freshRecord(Fp8Format::E4M3);
  auto multiply = [&](Tensor &weight, Tensor &c, bool cpuToo) {
    if (cpuToo)
      cpuKernels().gemmFp8(false, false, m, n, k, 1.0f, a.cpu(), k,
                           {ra.cpu(), Fp8Format::E4M3}, weight.cpu(), n,
                           {rb.cpu(), Fp8Format::E4M3, true}, 0.0f, c.cpu(),
                           n);
    gpuKernels().gemmFp8(false, false, m, n, k, 1.0f, a.gpu(), k,
                         {ra.gpu(), Fp8Format::E4M3}, weight.gpu(), n,
                         {rb.gpu(), Fp8Format::E4M3, true}, 0.0f, c.gpu(), n);
  };
  Tensor first = constant(m * n, DType::F32, 0.0f),
         again = constant(m * n, DType::F32, 0.0f),
         next = constant(m * n, DType::F32, 0.0f);
  multiply(b, first, true);
  expectClose(first, "the step's first call");
  multiply(other, again, false);
  EXPECT_EQ(fetch(again), fetch(first))
      << "a second call of the step quantized its weight again";
  for (Tensor *record : {&ra, &rb}) {
    cpuKernels().updateFp8Scales(record->cpu(), 1, true);
    gpuKernels().updateFp8Scales(record->gpu(), 1, true);
  }
  multiply(other, next, true);
  expectClose(next, "the next step's first call");
  expectClose(rb, "the weight's record");
}

TEST_P(CudaKernelsTest, Elementwise) {
  const int64_t rows = 13, cols = 70, n = rows * cols;
  Tensor x = make(n, act()), v = make(cols, act()), y = make(n, act());
  cpuKernels().addRowVector(x.cpu(), v.cpu(), rows, cols);
  gpuKernels().addRowVector(x.gpu(), v.gpu(), rows, cols);
  expectClose(x, "addRowVector");
  Tensor sums = make(cols, DType::F32);
  cpuKernels().accumulateColumnSums(x.cpu(), rows, cols, sums.cpu());
  gpuKernels().accumulateColumnSums(x.gpu(), rows, cols, sums.gpu());
  expectClose(sums, "accumulateColumnSums");
  cpuKernels().add(y.cpu(), x.cpu(), n);
  gpuKernels().add(y.gpu(), x.gpu(), n);
  expectClose(y, "add");
  Tensor acc = make(n, DType::F32);
  cpuKernels().add(acc.cpu(), x.cpu(), n);
  gpuKernels().add(acc.gpu(), x.gpu(), n);
  expectClose(acc, "add (f32 += act)");
  Tensor f = make(n, DType::F32);
  cpuKernels().copy(f.cpu(), y.cpu(), n);
  gpuKernels().copy(f.gpu(), y.gpu(), n);
  expectClose(f, "copy (converting)");
  cpuKernels().fill(y.cpu(), 0.25, n);
  gpuKernels().fill(y.gpu(), 0.25, n);
  expectClose(y, "fill");
  Tensor dst = make(2 * 9 * 6, act()), src = make(2 * 4 * 10, act());
  StridedCopy shape{2, 4, 5, 40, 10, 54, 6};
  cpuKernels().copyStrided(dst.cpu() + 6, src.cpu() + 2, shape);
  gpuKernels().copyStrided(dst.gpu() + 6, src.gpu() + 2, shape);
  expectClose(dst, "copyStrided");
  // Four elements a thread: columns, strides and offsets in fours, into the
  // same type and converting (the key/value cache and its gradients).
  StridedCopy quads{2, 4, 8, 40, 12, 60, 8};
  // The source's last element: 4 + 40 + 3 * 12 + 8 = 88.
  Tensor qdst = make(2 * 60, act()), qsrc = make(96, act()),
         qf32 = make(96, DType::F32);
  cpuKernels().copyStrided(qdst.cpu() + 8, qsrc.cpu() + 4, quads);
  gpuKernels().copyStrided(qdst.gpu() + 8, qsrc.gpu() + 4, quads);
  expectClose(qdst, "copyStrided (fours)");
  cpuKernels().copyStrided(qdst.cpu() + 4, qf32.cpu(), quads);
  gpuKernels().copyStrided(qdst.gpu() + 4, qf32.gpu(), quads);
  expectClose(qdst, "copyStrided (fours, from f32)");
  Tensor u = make(n, act()), z = make(n, act()), g = make(n, act()),
         dg = make(n, act()), du = make(n, act()), dz = make(n, act());
  for (GateActivation a : {GateActivation::Gelu, GateActivation::GeluErf}) {
    cpuKernels().geluForward(a, u.cpu(), g.cpu(), n);
    gpuKernels().geluForward(a, u.gpu(), g.gpu(), n);
    expectClose(g, "geluForward");
    cpuKernels().geluBackward(a, u.cpu(), dg.cpu(), du.cpu(), n);
    gpuKernels().geluBackward(a, u.gpu(), dg.gpu(), du.gpu(), n);
    expectClose(du, "geluBackward");
  }
  for (GateActivation a :
       {GateActivation::Silu, GateActivation::Gelu, GateActivation::GeluErf}) {
    cpuKernels().gatedForward(a, z.cpu(), u.cpu(), g.cpu(), n);
    gpuKernels().gatedForward(a, z.gpu(), u.gpu(), g.gpu(), n);
    expectClose(g, "gatedForward");
    cpuKernels().gatedBackward(a, z.cpu(), u.cpu(), dg.cpu(), dz.cpu(),
                               du.cpu(), n);
    gpuKernels().gatedBackward(a, z.gpu(), u.gpu(), dg.gpu(), dz.gpu(),
                               du.gpu(), n);
    expectClose(dz, "gatedBackward dz");
    expectClose(du, "gatedBackward du");
  }
  // 16-byte packs: a count that is a multiple of eight, aligned buffers.
  const int64_t packed = 8 * 131;
  Tensor pz = make(packed, act()), pu = make(packed, act()),
         pg = make(packed, act()), pdg = make(packed, act()),
         pdz = make(packed, act()), pdu = make(packed, act());
  cpuKernels().gatedForward(GateActivation::Silu, pz.cpu(), pu.cpu(), pg.cpu(),
                            packed);
  gpuKernels().gatedForward(GateActivation::Silu, pz.gpu(), pu.gpu(), pg.gpu(),
                            packed);
  expectClose(pg, "gatedForward (packed)");
  cpuKernels().gatedBackward(GateActivation::Silu, pz.cpu(), pu.cpu(),
                             pdg.cpu(), pdz.cpu(), pdu.cpu(), packed);
  gpuKernels().gatedBackward(GateActivation::Silu, pz.gpu(), pu.gpu(),
                             pdg.gpu(), pdz.gpu(), pdu.gpu(), packed);
  expectClose(pdz, "gatedBackward dz (packed)");
  expectClose(pdu, "gatedBackward du (packed)");
  cpuKernels().add(pg.cpu(), pu.cpu(), packed);
  gpuKernels().add(pg.gpu(), pu.gpu(), packed);
  expectClose(pg, "add (packed)");
}

TEST_P(CudaKernelsTest, RotaryPositions) {
  const int64_t rows = 2, tokens = 5, heads = 3, headDim = 8,
                stride = heads * headDim + 4;
  Tensor x = make(rows * tokens * stride, act());
  for (bool inverse : {false, true}) {
    cpuKernels().rotate(x.cpu(), rows, tokens, 4093, heads, headDim, stride,
                        Rotary{500000.0}, inverse);
    gpuKernels().rotate(x.gpu(), rows, tokens, 4093, heads, headDim, stride,
                        Rotary{500000.0}, inverse);
    expectClose(x, inverse ? "rotate back" : "rotate");
  }
  // Positions the first table (grown past 4096 above) already holds.
  cpuKernels().rotate(x.cpu(), rows, tokens, 17, heads, headDim, stride,
                      Rotary{500000.0}, false);
  gpuKernels().rotate(x.gpu(), rows, tokens, 17, heads, headDim, stride,
                      Rotary{500000.0}, false);
  expectClose(x, "rotate (a table built before)");
  // Pairs that do not come in fours: one pair a thread.
  const int64_t oddDim = 6, oddStride = heads * oddDim + 2;
  Tensor y = make(rows * tokens * oddStride, act());
  cpuKernels().rotate(y.cpu(), rows, tokens, 3, heads, oddDim, oddStride,
                      Rotary{10000.0}, false);
  gpuKernels().rotate(y.gpu(), rows, tokens, 3, heads, oddDim, oddStride,
                      Rotary{10000.0}, false);
  expectClose(y, "rotate (pairs one by one)");
  // Llama 3.1's scaled frequencies: a table of their own, past the
  // original context.
  Rotary llama{500000.0, 32.0, 1.0, 4.0, 8192};
  cpuKernels().rotate(x.cpu(), rows, tokens, 9000, heads, headDim, stride,
                      llama, false);
  gpuKernels().rotate(x.gpu(), rows, tokens, 9000, heads, headDim, stride,
                      llama, false);
  expectClose(x, "rotate (llama3 scaling)");
}

TEST_P(CudaKernelsTest, Norms) {
  // 300: the scalar kernels (not whole packs); 1000 and 2048: the
  // row-cached ones with one pack per thread (bf16) or up to 2 (fp32);
  // 4104: 4 packs (bf16), and past the row-cached reach in fp32.
  const int64_t rows = 9;
  for (int64_t cols : {300, 1000, 2048, 4104})
  for (bool rms : {false, true}) {
    SCOPED_TRACE("cols " + std::to_string(cols) + (rms ? ", rms" : ""));
    Tensor x = make(rows * cols, act(), 3.0f), gamma = make(cols, act()),
           beta = make(cols, act()), y = make(rows * cols, act()),
           xhat = make(rows * cols, act()), rstd = make(rows, DType::F32);
    DevicePtr betaCpu = rms ? DevicePtr() : beta.cpu();
    DevicePtr betaGpu = rms ? DevicePtr() : beta.gpu();
    // Gemma's epsilon, not the default, so that a kernel ignoring it fails.
    const float eps = 1e-6f;
    cpuKernels().normForward(x.cpu(), gamma.cpu(), betaCpu, rows, cols, rms,
                             eps, y.cpu(), xhat.cpu(), rstd.cpu());
    gpuKernels().normForward(x.gpu(), gamma.gpu(), betaGpu, rows, cols, rms,
                             eps, y.gpu(), xhat.gpu(), rstd.gpu());
    expectClose(y, "normForward y");
    expectClose(xhat, "normForward xhat");
    expectClose(rstd, "normForward rstd");
    // The backward passes read the same saved values on both sides.
    upload(xhat);
    upload(rstd);
    cpuKernels().normAffine(xhat.cpu(), gamma.cpu(), betaCpu, rows, cols,
                            y.cpu());
    gpuKernels().normAffine(xhat.gpu(), gamma.gpu(), betaGpu, rows, cols,
                            y.gpu());
    expectClose(y, "normAffine");
    Tensor dy = make(rows * cols, act()), dx = make(rows * cols, act());
    cpuKernels().normBackward(dy.cpu(), xhat.cpu(), rstd.cpu(), gamma.cpu(),
                              rows, cols, rms, dx.cpu());
    gpuKernels().normBackward(dy.gpu(), xhat.gpu(), rstd.gpu(), gamma.gpu(),
                              rows, cols, rms, dx.gpu());
    expectClose(dx, "normBackward");
    Tensor dgamma = make(cols, DType::F32), dbeta = make(cols, DType::F32);
    cpuKernels().normParamGrads(dy.cpu(), xhat.cpu(), rows, cols, dgamma.cpu(),
                                rms ? DevicePtr() : dbeta.cpu());
    gpuKernels().normParamGrads(dy.gpu(), xhat.gpu(), rows, cols, dgamma.gpu(),
                                rms ? DevicePtr() : dbeta.gpu());
    expectClose(dgamma, "normParamGrads dgamma");
    expectClose(dbeta, "normParamGrads dbeta");

    // The residual seams: the CPU's composed defaults against the fused
    // kernels.
    Tensor sum = make(rows * cols, act(), 2.0f), residual = make(rows * cols, act());
    cpuKernels().addNormForward(sum.cpu(), residual.cpu(), gamma.cpu(),
                                betaCpu, rows, cols, rms, eps, y.cpu(),
                                xhat.cpu(), rstd.cpu());
    gpuKernels().addNormForward(sum.gpu(), residual.gpu(), gamma.gpu(),
                                betaGpu, rows, cols, rms, eps, y.gpu(),
                                xhat.gpu(), rstd.gpu());
    expectClose(sum, "addNormForward x + residual");
    expectClose(y, "addNormForward y");
    expectClose(xhat, "addNormForward xhat");
    expectClose(rstd, "addNormForward rstd");
    upload(xhat);
    upload(rstd);
    cpuKernels().normBackwardAdd(dy.cpu(), xhat.cpu(), rstd.cpu(), gamma.cpu(),
                                 rows, cols, rms, residual.cpu(), dx.cpu());
    gpuKernels().normBackwardAdd(dy.gpu(), xhat.gpu(), rstd.gpu(), gamma.gpu(),
                                 rows, cols, rms, residual.gpu(), dx.gpu());
    expectClose(dx, "normBackwardAdd");
  }
}

TEST_P(CudaKernelsTest, AttentionOverASliceWithContext) {
  // Queries at [offset, offset + tokens) of a 40-token sequence, grouped
  // heads (4 query heads, 2 key/value heads), head size 16; then with a
  // 9-key sliding window (the hand-written kernel, cuDNN has none).
  for (int64_t window : {int64_t(0), int64_t(9)})
  for (int64_t offset : {int64_t(0), int64_t(23)}) {
    AttentionShape s{2, 17, offset, 40, 4, 16, 2};
    s.window = window;
    int64_t hd = s.heads * s.headDim, kvw = s.kvHeads * s.headDim;
    Tensor q = make(s.rows * s.tokens * hd, act()),
           keys = make(s.rows * s.seqLen * kvw, act()),
           values = make(s.rows * s.seqLen * kvw, act()),
           lse = make(s.rows * s.heads * s.tokens, DType::F32),
           ctx = make(s.rows * s.tokens * hd, act());
    cpuKernels().attentionForward(s, q.cpu(), keys.cpu(), values.cpu(),
                                  lse.cpu(), ctx.cpu());
    gpuKernels().attentionForward(s, q.gpu(), keys.gpu(), values.gpu(),
                                  lse.gpu(), ctx.gpu());
    expectClose(lse, "attention log-sum-exp");
    expectClose(ctx, "attention context");
    upload(lse);
    upload(ctx);
    Tensor dctx = make(s.rows * s.tokens * hd, act()),
           dq = make(s.rows * s.tokens * hd, act()),
           dkeys = make(s.rows * s.seqLen * kvw, DType::F32),
           dvalues = make(s.rows * s.seqLen * kvw, DType::F32);
    cpuKernels().attentionBackward(s, q.cpu(), keys.cpu(), values.cpu(),
                                   ctx.cpu(), lse.cpu(), dctx.cpu(), dq.cpu(),
                                   dkeys.cpu(), dvalues.cpu());
    gpuKernels().attentionBackward(s, q.gpu(), keys.gpu(), values.gpu(),
                                   ctx.gpu(), lse.gpu(), dctx.gpu(), dq.gpu(),
                                   dkeys.gpu(), dvalues.gpu());
    expectClose(dq, "attention dq");
    expectClose(dkeys, "attention dkeys");
    expectClose(dvalues, "attention dvalues");
  }
}

TEST_P(CudaKernelsTest, EmbeddingsAndShards) {
  const int64_t rows = 2, length = 7, stride = 9, hidden = 24, vocab = 50;
  Tensor tokens;
  tokens.type = DType::I32;
  std::vector<int32_t> ids(rows * stride);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = int32_t((i * 17 + 3) % vocab);
  ASSERT_TRUE(gpu->allocate(DType::I32, int64_t(ids.size()), tokens.device));
  gpu->upload(tokens.device.get(), ids.data(),
              int64_t(ids.size() * sizeof(int32_t)),
              gpu->getStream(StreamKind::Compute));
  DevicePtr idsCpu(ids.data()), idsGpu = tokens.device.get();
  Tensor table = make(vocab * hidden, act()),
         positions = make(16 * hidden, act()),
         out = make(rows * length * hidden, act());
  // Gemma's embedding scale and padding token.
  Tensor scaled = make(rows * length * hidden, act());
  cpuKernels().scale(scaled.cpu(), 5.5f, rows * length * hidden);
  gpuKernels().scale(scaled.gpu(), 5.5f, rows * length * hidden);
  expectClose(scaled, "scale");
  cpuKernels().zeroTokenRows(idsCpu, stride, rows, length, ids[4], hidden,
                             scaled.cpu());
  gpuKernels().zeroTokenRows(idsGpu, stride, rows, length, ids[4], hidden,
                             scaled.gpu());
  expectClose(scaled, "zeroTokenRows");
  // Gemma-2's final soft-capping over an [rows, ld] block, and its slope.
  const int64_t cols = 5, ld = 7;
  Tensor capped = make(rows * ld, act(), 3.0f), grad = make(rows * ld, act());
  cpuKernels().softcap(capped.cpu(), rows, cols, ld, 2.0f);
  gpuKernels().softcap(capped.gpu(), rows, cols, ld, 2.0f);
  expectClose(capped, "softcap");
  cpuKernels().softcapGrad(capped.cpu(), grad.cpu(), rows, cols, ld, 2.0f);
  gpuKernels().softcapGrad(capped.gpu(), grad.gpu(), rows, cols, ld, 2.0f);
  expectClose(grad, "softcapGrad");
  cpuKernels().embeddingForward(idsCpu, stride, table.cpu(), positions.cpu(),
                                rows, length, 3, hidden, out.cpu());
  gpuKernels().embeddingForward(idsGpu, stride, table.gpu(), positions.gpu(),
                                rows, length, 3, hidden, out.gpu());
  expectClose(out, "embeddingForward");
  Tensor dout = make(rows * length * hidden, act()),
         dtable = make(vocab * hidden, DType::F32),
         dpositions = make(16 * hidden, DType::F32);
  cpuKernels().embeddingBackward(idsCpu, stride, dout.cpu(), rows, length, 3,
                                 hidden, dtable.cpu(), dpositions.cpu());
  gpuKernels().embeddingBackward(idsGpu, stride, dout.gpu(), rows, length, 3,
                                 hidden, dtable.gpu(), dpositions.gpu());
  expectClose(dtable, "embeddingBackward table");
  expectClose(dpositions, "embeddingBackward positions");
  // A shard of rows [20, 33) of a table padded to 14 rows per device.
  const int64_t first = 20, count = 13, shardRows = 14;
  Tensor shard = make(shardRows * hidden, act()),
         dshard = make(shardRows * hidden, DType::F32);
  cpuKernels().shardLookup(idsCpu, stride, rows, length, shard.cpu(), first,
                           count, hidden, out.cpu());
  gpuKernels().shardLookup(idsGpu, stride, rows, length, shard.gpu(), first,
                           count, hidden, out.gpu());
  expectClose(out, "shardLookup");
  cpuKernels().labelRows(idsCpu, stride, rows, length, shard.cpu(), first,
                         count, hidden, out.cpu());
  gpuKernels().labelRows(idsGpu, stride, rows, length, shard.gpu(), first,
                         count, hidden, out.gpu());
  expectClose(out, "labelRows");
  cpuKernels().shardScatterAdd(idsCpu, stride, rows, length, dout.cpu(), first,
                               count, hidden, dshard.cpu());
  gpuKernels().shardScatterAdd(idsGpu, stride, rows, length, dout.gpu(), first,
                               count, hidden, dshard.gpu());
  expectClose(dshard, "shardScatterAdd");
}

TEST_P(CudaKernelsTest, CrossEntropyWithPackedRows) {
  // A vocabulary that is a multiple of eight: the rows go 16 bytes at a
  // time.
  const int64_t rows = 3, length = 5, stride = 5, vocab = 1000,
                tokens = rows * length;
  std::vector<int32_t> ids(rows * stride);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = int32_t((i * 389 + 7) % vocab);
  DeviceBuffer labels, lossGpu;
  ASSERT_TRUE(gpu->allocate(DType::I32, int64_t(ids.size()), labels));
  ASSERT_TRUE(gpu->allocate(DType::F64, 1, lossGpu));
  gpu->upload(labels.get(), ids.data(), int64_t(ids.size() * sizeof(int32_t)),
              gpu->getStream(StreamKind::Compute));
  // Logits in the activation type (bf16: eight to a 16-byte pack).
  Tensor logits = make(tokens * vocab, act(), 4.0f),
         lse = make(tokens, DType::F32), dlogits = make(tokens * vocab, act());
  double lossCpu = 0, lossBack = 0;
  cpuKernels().crossEntropyForward(logits.cpu(), DevicePtr(ids.data()), stride,
                                   rows, length, vocab, lse.cpu(), &lossCpu);
  gpuKernels().crossEntropyForward(logits.gpu(), labels.get(), stride, rows,
                                   length, vocab, lse.gpu(), lossGpu.get());
  expectClose(lse, "crossEntropyForward log-sum-exp (packed)");
  expectClose(logits, "crossEntropyForward leaves the logits");
  gpu->download(&lossBack, lossGpu.get(), sizeof(double),
                gpu->getStream(StreamKind::Compute));
  ASSERT_TRUE(gpu->synchronize());
  EXPECT_NEAR(lossBack, lossCpu, 1e-5 * std::fabs(lossCpu));
  cpuKernels().crossEntropyBackward(logits.cpu(), lse.cpu(),
                                    DevicePtr(ids.data()), stride, rows, length,
                                    vocab, 0.5f, dlogits.cpu());
  gpuKernels().crossEntropyBackward(logits.gpu(), lse.gpu(), labels.get(),
                                    stride, rows, length, vocab, 0.5f,
                                    dlogits.gpu());
  expectClose(dlogits, "crossEntropyBackward (packed)");
}

TEST_P(CudaKernelsTest, CrossEntropyAndTheShardedSoftmax) {
  const int64_t rows = 2, length = 6, stride = 8, vocab = 77,
                tokens = rows * length;
  std::vector<int32_t> ids(rows * stride);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = int32_t((i * 31 + 5) % vocab);
  DeviceBuffer labels;
  ASSERT_TRUE(gpu->allocate(DType::I32, int64_t(ids.size()), labels));
  gpu->upload(labels.get(), ids.data(), int64_t(ids.size() * sizeof(int32_t)),
              gpu->getStream(StreamKind::Compute));
  DevicePtr labelsCpu(ids.data()), labelsGpu = labels.get();
  Tensor logits = make(tokens * vocab, act(), 3.0f),
         lse = make(tokens, DType::F32), loss = constant(1, DType::F32, 0.0f);
  // The loss accumulates in f64 on both sides.
  double lossCpu = 0;
  DeviceBuffer lossGpu;
  ASSERT_TRUE(gpu->allocate(DType::F64, 1, lossGpu));
  cpuKernels().crossEntropyForward(logits.cpu(), labelsCpu, stride, rows,
                                   length, vocab, lse.cpu(), &lossCpu);
  gpuKernels().crossEntropyForward(logits.gpu(), labelsGpu, stride, rows,
                                   length, vocab, lse.gpu(), lossGpu.get());
  expectClose(lse, "crossEntropyForward log-sum-exp");
  double lossBack = 0;
  gpu->download(&lossBack, lossGpu.get(), sizeof(double),
                gpu->getStream(StreamKind::Compute));
  ASSERT_TRUE(gpu->synchronize());
  EXPECT_NEAR(lossBack, lossCpu, 1e-5 * std::fabs(lossCpu));
  Tensor dlogits = make(tokens * vocab, act());
  cpuKernels().crossEntropyBackward(logits.cpu(), lse.cpu(), labelsCpu, stride,
                                    rows, length, vocab, 0.1f, dlogits.cpu());
  gpuKernels().crossEntropyBackward(logits.gpu(), lse.gpu(), labelsGpu, stride,
                                    rows, length, vocab, 0.1f, dlogits.gpu());
  expectClose(dlogits, "crossEntropyBackward");

  // A shard: rows [30, 48) of the vocabulary, 20 columns apart.
  const int64_t first = 30, count = 18, ld = 20;
  Tensor shardLogits = make(tokens * ld, DType::F32, 3.0f),
         max = make(tokens, DType::F32), sum = make(tokens, DType::F32),
         probs = make(tokens * ld, act()), ref = make(tokens, DType::F32);
  cpuKernels().shardSoftmaxStatistics(shardLogits.cpu(), tokens, count, ld,
                                      nullptr, max.cpu(), sum.cpu(),
                                      probs.cpu());
  gpuKernels().shardSoftmaxStatistics(shardLogits.gpu(), tokens, count, ld,
                                      nullptr, max.gpu(), sum.gpu(),
                                      probs.gpu());
  expectClose(max, "shardSoftmaxStatistics max");
  expectClose(sum, "shardSoftmaxStatistics sum");
  expectClose(probs, "shardSoftmaxStatistics probs");
  cpuKernels().shardSoftmaxStatistics(shardLogits.cpu(), tokens, count, ld,
                                      ref.cpu(), nullptr, sum.cpu(), nullptr);
  gpuKernels().shardSoftmaxStatistics(shardLogits.gpu(), tokens, count, ld,
                                      ref.gpu(), nullptr, sum.gpu(), nullptr);
  expectClose(sum, "shardSoftmaxStatistics sum under a reference");
  upload(max);
  upload(sum);
  Tensor globalMax = make(tokens, DType::F32),
         scaled = make(tokens, DType::F32);
  for (size_t t = 0; t < globalMax.host.size(); ++t)
    globalMax.host[t] = max.host[t] + std::fabs(globalMax.host[t]);
  upload(globalMax);
  cpuKernels().rescaleSum(sum.cpu(), max.cpu(), globalMax.cpu(), tokens,
                          scaled.cpu());
  gpuKernels().rescaleSum(sum.gpu(), max.gpu(), globalMax.gpu(), tokens,
                          scaled.gpu());
  expectClose(scaled, "rescaleSum");
  upload(scaled);
  cpuKernels().scaleRows(probs.cpu(), scaled.cpu(), sum.cpu(), tokens, count,
                         ld);
  gpuKernels().scaleRows(probs.gpu(), scaled.gpu(), sum.gpu(), tokens, count,
                         ld);
  expectClose(probs, "scaleRows");
  double shardCpu = 0;
  DeviceBuffer shardGpu;
  ASSERT_TRUE(gpu->allocate(DType::F64, 1, shardGpu));
  cpuKernels().shardLoss(shardLogits.cpu(), labelsCpu, stride, rows, length,
                         first, count, ld, max.cpu(), sum.cpu(), &shardCpu);
  gpuKernels().shardLoss(shardLogits.gpu(), labelsGpu, stride, rows, length,
                         first, count, ld, max.gpu(), sum.gpu(),
                         shardGpu.get());
  double shardBack = 0;
  gpu->download(&shardBack, shardGpu.get(), sizeof(double),
                gpu->getStream(StreamKind::Compute));
  ASSERT_TRUE(gpu->synchronize());
  EXPECT_NEAR(shardBack, shardCpu, 1e-5 * std::max(1.0, std::fabs(shardCpu)));
  upload(probs);
  cpuKernels().shardSoftmaxGrad(probs.cpu(), labelsCpu, stride, rows, length,
                                first, count, ld, 0.5f);
  gpuKernels().shardSoftmaxGrad(probs.gpu(), labelsGpu, stride, rows, length,
                                first, count, ld, 0.5f);
  expectClose(probs, "shardSoftmaxGrad");
  const int64_t hidden = 24;
  Tensor a = make(tokens * hidden, act()), b = make(tokens * hidden, act()),
         out = make(tokens * hidden, act());
  cpuKernels().combineGrad(a.cpu(), b.cpu(), scaled.cpu(), sum.cpu(), tokens,
                           hidden, 0.25f, out.cpu());
  gpuKernels().combineGrad(a.gpu(), b.gpu(), scaled.gpu(), sum.gpu(), tokens,
                           hidden, 0.25f, out.gpu());
  expectClose(out, "combineGrad");
}

TEST_P(CudaKernelsTest, FusedAdamWritesTheWorkingCopy) {
  const int64_t n = 1000;
  Tensor w = make(n, DType::F32), g = make(n, DType::F32),
         m = make(n, DType::F32, 0.1f), v = constant(n, DType::F32, 0.01f),
         working = make(n, act());
  AdamConfig config;
  config.learningRate = 1e-2f;
  config.weightDecay = 0.1f;
  cpuKernels().adamUpdate(w.cpu(), g.cpu(), m.cpu(), v.cpu(), n, config, 3,
                          working.cpu());
  gpuKernels().adamUpdate(w.gpu(), g.gpu(), m.gpu(), v.gpu(), n, config, 3,
                          working.gpu());
  expectClose(w, "adam weights");
  expectClose(m, "adam first moment");
  expectClose(v, "adam second moment");
  expectClose(working, "adam working copy");
}

TEST_P(CudaKernelsTest, ClippedAdamAndSumSquares) {
  const int64_t n = 3000, rows = 20, cols = 70, stride = 150;
  Tensor w = make(n, DType::F32), g = make(n, DType::F32),
         m = make(n, DType::F32, 0.1f), v = constant(n, DType::F32, 0.01f);
  AdamConfig config;
  config.gradientScale = 0.3f;
  cpuKernels().adamUpdate(w.cpu(), g.cpu(), m.cpu(), v.cpu(), n, config, 2,
                          DevicePtr());
  gpuKernels().adamUpdate(w.gpu(), g.gpu(), m.gpu(), v.gpu(), n, config, 2,
                          DevicePtr());
  expectClose(w, "clipped adam weights");
  // g on the GPU holds the values the host rounded to g's type.
  double expected = 0.5, got = 0.5;
  cpuKernels().sumSquares(g.cpu(), rows, cols, stride, -2.0,
                          DevicePtr(&expected, DType::F64));
  DeviceBuffer sum;
  ASSERT_TRUE(gpu->allocate(DType::F64, 1, sum));
  Stream &stream = gpu->getStream(StreamKind::Compute);
  gpu->upload(sum.get(), &got, sizeof(double), stream);
  gpuKernels().sumSquares(g.gpu(), rows, cols, stride, -2.0, sum.get());
  gpu->download(&got, sum.get(), sizeof(double), stream);
  ASSERT_TRUE(gpu->synchronize());
  EXPECT_NEAR(got, expected, 1e-9 * std::fabs(expected));
}

INSTANTIATE_TEST_SUITE_P(Types, CudaKernelsTest,
                         ::testing::Values(DType::F32, DType::BF16),
                         [](const ::testing::TestParamInfo<DType> &info) {
                           return std::string(getName(info.param));
                         });

} // namespace
