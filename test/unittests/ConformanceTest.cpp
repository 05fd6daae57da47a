//===- ConformanceTest.cpp - Every backend against one reference ----------===//
//
// The backend conformance suite (IREE's CTS is the model): each kernel of
// each backend this build has (getBackends(): the CPU's, and CUDA's where
// it is built and a GPU is present) on random inputs, against a
// reference written here in double precision from the Kernels contract in
// runtime/Backend.h -- not against another backend, so a mistake two
// backends share still fails. Every comparison is recorded; the suite
// writes them all as one JSON document where SLUICE_CONFORMANCE_OUT names
// a file (ctest's entry and the GPU suite do): backend, device, kernel,
// case, the largest error relative to the largest reference value, the
// tolerance and the verdict. A backend that cannot open here is recorded
// as skipped, with why.
//
// Each backend runs twice: with fp32 activations, and with bf16 ones (the
// arrays the contract calls "act" in bf16, statistics and parameter
// gradients in fp32, as a bf16 plan runs; the CPU backend's bf16 is its
// StagedKernels, generated from runtime/Kernels.def). In bf16 the inputs
// are bf16 values, so the reference computes on exactly what the kernel
// reads, and the bound is bf16's (1e-2 of the largest reference value:
// each output is rounded once or twice to 8 significant bits). The kernel
// families whose bf16 roles are not yet written here are recorded as
// skipped in bf16.
//
//===----------------------------------------------------------------------===//

#include "Backends.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <random>

using namespace sluice::rt;

namespace {

/// What every comparison found, for the JSON document.
struct Record {
  std::string backend, device, kernel, variant;
  double error = 0, tolerance = 0;
  bool pass = false;
  std::string skipped;
};
std::vector<Record> &records() {
  static std::vector<Record> all;
  return all;
}

/// Writes the document once every test has run.
class ResultWriter : public ::testing::Environment {
public:
  void TearDown() override {
    nlohmann::json doc;
    doc["format"] = "sluice-conformance";
    doc["version"] = 1;
    doc["precisions"] = {"fp32", "bf16"};
    nlohmann::json &list = doc["results"] = nlohmann::json::array();
    for (const Record &r : records()) {
      nlohmann::json j = {{"backend", r.backend},
                          {"device", r.device},
                          {"kernel", r.kernel},
                          {"case", r.variant}};
      if (!r.skipped.empty()) {
        j["skipped"] = r.skipped;
      } else {
        j["max_relative_error"] = r.error;
        j["tolerance"] = r.tolerance;
        j["pass"] = r.pass;
      }
      list.push_back(j);
    }
    // Only where asked: a run by hand leaves no file behind.
    if (const char *path = std::getenv("SLUICE_CONFORMANCE_OUT"); path && *path)
      std::ofstream(path) << doc.dump(1) << "\n";
  }
};

/// Values on the host and in a device buffer of the backend under test.
struct Tensor {
  std::vector<double> host;
  DeviceBuffer device;
  DevicePtr ptr() const { return device.get(); }
};

/// A backend and the activations' type it runs in.
struct Target {
  std::string backend;
  DType act = DType::F32;
  /// "cpu", "cpu/bf16".
  std::string getName() const {
    return backend + (act == DType::BF16 ? "/bf16" : "");
  }
};

void PrintTo(const Target &target, std::ostream *os) {
  *os << target.getName();
}

class Conformance : public ::testing::TestWithParam<Target> {
protected:
  void SetUp() override {
    for (const BackendEntry &entry : getBackends())
      if (entry.name == GetParam().backend) {
        Status st = entry.open(device);
        if (!st)
          skip = st.message();
      }
    if (!device) {
      records().push_back({target(), "", testName(), "", 0, 0, false,
                           skip.empty() ? "not opened" : skip});
      GTEST_SKIP() << skip;
    }
  }

  std::string target() const { return GetParam().getName(); }
  bool isBf16() const { return GetParam().act == DType::BF16; }
  /// In bf16, a kernel family this suite checks in fp32 only: recorded as
  /// skipped; true when the test should end.
  bool fp32Only() {
    if (!isBf16())
      return false;
    records().push_back({target(), device->describe(), testName(), "", 0, 0,
                         false, "checked in fp32 only"});
    return true;
  }

  /// The kernel family under test ("Gemm"), without the backend.
  std::string testName() const {
    std::string name =
        ::testing::UnitTest::GetInstance()->current_test_info()->name();
    return name.substr(0, name.find('/'));
  }
  Kernels &kernels() { return device->getKernels(StreamKind::Compute); }
  Stream &stream() { return device->getStream(StreamKind::Compute); }

  /// n values from N(0, scale^2), or `value` everywhere.
  Tensor random(int64_t n, double scale = 1.0) {
    std::normal_distribution<double> normal(0.0, scale);
    std::vector<double> v(n);
    for (double &x : v)
      x = double(float(normal(generator)));
    return make(v);
  }
  Tensor filled(int64_t n, double value) {
    return make(std::vector<double>(n, value));
  }
  /// The same as activations: in the target's activation type (the host
  /// values rounded to it).
  Tensor randomAct(int64_t n, double scale = 1.0) {
    return makeAct(random(n, scale).host);
  }
  Tensor filledAct(int64_t n, double value) {
    return makeAct(std::vector<double>(n, value));
  }
  Tensor makeAct(const std::vector<double> &values) {
    return make(values, GetParam().act);
  }
  Tensor make(const std::vector<double> &values, DType type = DType::F32) {
    Tensor t;
    t.host = values;
    EXPECT_TRUE(
        device->allocate(type, int64_t(values.size()), t.device).isOk());
    if (type == DType::BF16) {
      std::vector<uint16_t> halves(values.size());
      for (size_t i = 0; i < values.size(); ++i) {
        halves[i] = floatToBf16(float(values[i]));
        t.host[i] = bf16ToFloat(halves[i]);
      }
      device->upload(t.ptr(), halves.data(), int64_t(halves.size()) * 2,
                     stream());
      EXPECT_TRUE(stream().synchronize().isOk());
    } else if (type == DType::I32) {
      std::vector<int32_t> ints(values.begin(), values.end());
      device->upload(t.ptr(), ints.data(), int64_t(ints.size()) * 4, stream());
      EXPECT_TRUE(stream().synchronize().isOk());
    } else if (type == DType::F64) {
      device->upload(t.ptr(), values.data(), int64_t(values.size()) * 8,
                     stream());
      EXPECT_TRUE(stream().synchronize().isOk());
    } else {
      std::vector<float> floats(values.begin(), values.end());
      device->upload(t.ptr(), floats.data(), int64_t(floats.size()) * 4,
                     stream());
      EXPECT_TRUE(stream().synchronize().isOk());
    }
    return t;
  }
  /// The device's values of `t` now (f32, bf16 or f64 buffers).
  std::vector<double> read(const Tensor &t) {
    EXPECT_TRUE(device->synchronize().isOk());
    std::vector<double> out;
    if (t.device.getType() == DType::BF16) {
      std::vector<uint16_t> v;
      EXPECT_TRUE(downloadAll(*device, t.device, v).isOk());
      for (uint16_t half : v)
        out.push_back(bf16ToFloat(half));
    } else if (t.device.getType() == DType::F64) {
      std::vector<double> v;
      EXPECT_TRUE(downloadAll(*device, t.device, v).isOk());
      out = v;
    } else {
      std::vector<float> v;
      EXPECT_TRUE(downloadAll(*device, t.device, v).isOk());
      out.assign(v.begin(), v.end());
    }
    return out;
  }

  /// Compares the device's `got` with the reference `want`: the largest
  /// |got - want| over the largest |want| (1 when that is below 1), within
  /// `tolerance`; a NaN fails. Records it.
  void expectClose(const Tensor &got, const std::vector<double> &want,
                   const std::string &variant, double tolerance = 1e-5) {
    std::vector<double> values = read(got);
    ASSERT_EQ(values.size(), want.size());
    double scale = 1, diff = 0;
    bool nan = false;
    for (size_t i = 0; i < want.size(); ++i) {
      scale = std::max(scale, std::fabs(want[i]));
      if (!std::isfinite(values[i]))
        nan = true;
      diff = std::max(diff, std::fabs(values[i] - want[i]));
    }
    double error = nan ? INFINITY : diff / scale;
    if (isBf16())
      tolerance = std::max(tolerance, kBf16Tolerance);
    bool pass = error <= tolerance;
    records().push_back({target(), device->describe(), testName(), variant,
                         error, tolerance, pass, ""});
    EXPECT_TRUE(pass) << variant << ": relative error " << error
                      << " over tolerance " << tolerance;
  }

  /// bf16 keeps 8 significant bits: an output rounded once or twice.
  static constexpr double kBf16Tolerance = 1e-2;
  std::unique_ptr<Device> device;
  std::string skip;
  std::mt19937 generator{20261126};
};

double gelu(GateActivation act, double x) {
  if (act == GateActivation::GeluErf)
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  double c = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x)));
}
double activate(GateActivation act, double x) {
  return act == GateActivation::Silu ? x / (1 + std::exp(-x)) : gelu(act, x);
}
/// The derivative, by a central difference of the double function (the
/// reference does not share the backends' closed forms).
double derivative(GateActivation act, double x) {
  double h = 1e-5 * std::max(1.0, std::fabs(x));
  return (activate(act, x + h) - activate(act, x - h)) / (2 * h);
}

TEST_P(Conformance, Gemm) {
  const int64_t m = 7, n = 9, k = 11;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      // Leading dimensions past the matrices' widths.
      int64_t lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 3, ldc = n + 1;
      Tensor a = randomAct((ta ? k : m) * lda),
             b = randomAct((tb ? n : k) * ldb), c = randomAct(m * ldc);
      std::vector<double> want = c.host;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < k; ++p)
            sum += (ta ? a.host[p * lda + i] : a.host[i * lda + p]) *
                   (tb ? b.host[j * ldb + p] : b.host[p * ldb + j]);
          want[i * ldc + j] = 1.5 * sum + 0.5 * c.host[i * ldc + j];
        }
      kernels().gemm(ta, tb, m, n, k, 1.5f, a.ptr(), lda, b.ptr(), ldb, 0.5f,
                     c.ptr(), ldc);
      expectClose(c, want,
                  std::string(ta ? "T" : "N") + (tb ? "T" : "N") +
                      ", alpha 1.5, beta 0.5, padded rows");
    }
}

/// Every finite non-negative value of an FP8 format, from its bit
/// layout (Micikevicius et al., 2022, Table 1): E4M3 has no infinities
/// and its all-ones pattern is NaN; E5M2's top exponent is infinities and
/// NaNs. Ascending, with whether the mantissa is even (for ties).
std::vector<std::pair<double, bool>> fp8Values(Fp8Format format) {
  int mantissaBits = format == Fp8Format::E4M3 ? 3 : 2;
  int exponentBits = 7 - mantissaBits, bias = (1 << (exponentBits - 1)) - 1;
  std::vector<std::pair<double, bool>> values;
  for (int e = 0; e < (1 << exponentBits); ++e)
    for (int m = 0; m < (1 << mantissaBits); ++m) {
      bool top = e == (1 << exponentBits) - 1;
      if (format == Fp8Format::E5M2 ? top : top && m == (1 << mantissaBits) - 1)
        continue;
      double fraction = double(m) / (1 << mantissaBits);
      double value = e == 0 ? std::ldexp(fraction, 1 - bias)
                            : std::ldexp(1 + fraction, e - bias);
      values.push_back({value, m % 2 == 0});
    }
  return values;
}
/// x rounded to the nearest of `values` (ties to the even mantissa),
/// saturating.
double roundFp8(double x, const std::vector<std::pair<double, bool>> &values) {
  double magnitude = std::fabs(x);
  if (magnitude >= values.back().first)
    return std::copysign(values.back().first, x);
  size_t above = 0;
  while (values[above].first < magnitude)
    ++above;
  double result = values[above].first;
  if (above > 0) {
    double low = values[above - 1].first, high = values[above].first;
    if (magnitude - low < high - magnitude ||
        (magnitude - low == high - magnitude && values[above - 1].second))
      result = low;
  }
  return std::copysign(result, x);
}

TEST_P(Conformance, Fp8Gemm) {
  if (fp32Only())
    GTEST_SKIP() << "checked in fp32 only";
  // Shapes FP8 tensor cores take (multiples of 16) and shapes they do not;
  // every transposition; the first operand scaled by its own amax (a new
  // record), the second by a record's scale that saturates some values.
  for (auto [m, n, k] :
       {std::tuple<int64_t, int64_t, int64_t>{32, 48, 40}, {7, 9, 11}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        int64_t lda = ta ? m : k, ldb = tb ? k : n, ldc = n + 1;
        Tensor a = random((ta ? k : m) * lda, 3.0),
               b = random((tb ? n : k) * ldb, 0.01), c = random(m * ldc);
        double amaxA = 0, amaxB = 0;
        for (double x : a.host)
          amaxA = std::max(amaxA, std::fabs(x));
        for (double x : b.host)
          amaxB = std::max(amaxB, std::fabs(x));
        // A: no scale yet; B (E5M2): 2^22, which takes |b| > 57344 / 2^22
        // = 0.0137 past the format's largest value.
        std::vector<double> recordA(kFp8RecordFloats, 0.0),
            recordB(kFp8RecordFloats, 0.0);
        recordA[1] = 0.5; // the step's amax so far
        recordA[2] = 448;
        recordB[0] = std::ldexp(1.0, 22);
        recordB[2] = 57344;
        Tensor ra = make(recordA), rb = make(recordB);
        // The largest power of two with amax * s <= 448.
        double scaleA =
            std::ldexp(1.0, int(std::floor(std::log2(448 / amaxA))));
        double scaleB = recordB[0];
        auto e4m3 = fp8Values(Fp8Format::E4M3),
             e5m2 = fp8Values(Fp8Format::E5M2);
        std::vector<double> want = c.host;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double sum = 0;
            for (int64_t p = 0; p < k; ++p) {
              double x = ta ? a.host[p * lda + i] : a.host[i * lda + p];
              double y = tb ? b.host[j * ldb + p] : b.host[p * ldb + j];
              sum += roundFp8(x * scaleA, e4m3) * roundFp8(y * scaleB, e5m2);
            }
            want[i * ldc + j] =
                1.5 * sum / (scaleA * scaleB) + 0.5 * c.host[i * ldc + j];
          }
        kernels().gemmFp8(ta, tb, m, n, k, 1.5f, a.ptr(), lda,
                          {ra.ptr(), Fp8Format::E4M3}, b.ptr(), ldb,
                          {rb.ptr(), Fp8Format::E5M2}, 0.5f, c.ptr(), ldc);
        std::string shape = std::to_string(m) + "x" + std::to_string(n) + "x" +
                            std::to_string(k) + (ta ? " T" : " N") +
                            (tb ? "T" : "N");
        expectClose(c, want, shape + ", E4M3 x E5M2, alpha 1.5, beta 0.5");
        recordA[1] = std::max(0.5, amaxA);
        recordB[1] = amaxB;
        expectClose(ra, recordA, shape + ": the first record's amax", 0);
        expectClose(rb, recordB, shape + ": the second record's amax", 0);
      }
}

TEST_P(Conformance, Fp8Scales) {
  if (fp32Only())
    GTEST_SKIP() << "checked in fp32 only";
  // Three records: a history to extend, a new one, and one whose step
  // overflowed (its scale stays).
  std::vector<double> records(3 * kFp8RecordFloats, 0.0);
  double *first = records.data(), *second = first + kFp8RecordFloats,
         *third = second + kFp8RecordFloats;
  first[0] = 1, first[1] = 3.0, first[2] = 448;
  for (int64_t h = 0; h < kFp8History; ++h)
    first[3 + h] = h == kFp8History - 1 ? 1000.0 : 0.25 * double(h + 1);
  second[1] = 1.0 / 1024, second[2] = 57344;
  third[0] = 8, third[1] = INFINITY, third[2] = 448, third[3] = 2;
  Tensor t = make(records);
  kernels().updateFp8Scales(t.ptr(), 0, true);
  kernels().updateFp8Scales(t.ptr(), 3, /*trained=*/false);
  std::vector<double> evaluated = records;
  for (double *record : {evaluated.data(), evaluated.data() + kFp8RecordFloats,
                         evaluated.data() + 2 * kFp8RecordFloats})
    record[1] = 0;
  expectClose(t, evaluated, "an evaluation step clears the step's amax", 0);

  t = make(records);
  kernels().updateFp8Scales(t.ptr(), 3, /*trained=*/true);
  std::vector<double> want = records;
  double *w1 = want.data(), *w2 = w1 + kFp8RecordFloats,
         *w3 = w2 + kFp8RecordFloats;
  // The oldest entry (1000) leaves; the largest is then 3.75 (the
  // history's 15th) over the new 3: 448 / 3.75 = 119.5 -> 64.
  for (int64_t h = kFp8History - 1; h > 0; --h)
    w1[3 + h] = first[3 + h - 1];
  w1[3] = 3.0, w1[1] = 0, w1[0] = 64;
  // 57344 * 1024 = 5.9e7 -> 2^25.
  w2[3] = 1.0 / 1024, w2[1] = 0, w2[0] = std::ldexp(1.0, 25);
  w3[1] = 0;
  expectClose(t, want, "a training step's amax becomes the next scale", 0);
}

TEST_P(Conformance, RowsAndColumns) {
  if (fp32Only())
    GTEST_SKIP() << "checked in fp32 only";
  const int64_t rows = 5, cols = 13;
  Tensor x = random(rows * cols), v = random(cols), sums = random(cols);
  std::vector<double> plus = x.host, colSums = sums.host;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      plus[r * cols + c] += v.host[c];
      colSums[c] += x.host[r * cols + c];
    }
  kernels().accumulateColumnSums(x.ptr(), rows, cols, sums.ptr());
  expectClose(sums, colSums, "accumulateColumnSums");
  kernels().addRowVector(x.ptr(), v.ptr(), rows, cols);
  expectClose(x, plus, "addRowVector");
}

TEST_P(Conformance, Elementwise) {
  const int64_t n = 37;
  Tensor y = randomAct(n), x = randomAct(n);
  std::vector<double> want = y.host;
  for (int64_t i = 0; i < n; ++i)
    want[i] += x.host[i];
  kernels().add(y.ptr(), x.ptr(), n);
  expectClose(y, want, "add");
  for (double &w : want)
    w *= -0.75;
  kernels().scale(y.ptr(), -0.75f, n);
  expectClose(y, want, "scale");
  kernels().copy(y.ptr(), x.ptr(), n);
  expectClose(y, x.host, "copy");
  kernels().fill(y.ptr(), 2.5, n);
  expectClose(y, std::vector<double>(n, 2.5), "fill");
}

TEST_P(Conformance, Softcap) {
  const int64_t rows = 3, cols = 10, ld = 12;
  const double cap = 2.0;
  Tensor x = randomAct(rows * ld, 3.0), grad = randomAct(rows * ld);
  std::vector<double> capped = x.host, dcap = grad.host;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double t = std::tanh(x.host[r * ld + c] / cap);
      capped[r * ld + c] = cap * t;
      dcap[r * ld + c] *= 1 - t * t;
    }
  kernels().softcap(x.ptr(), rows, cols, ld, float(cap));
  expectClose(x, capped, "softcap, columns past cols untouched");
  kernels().softcapGrad(x.ptr(), grad.ptr(), rows, cols, ld, float(cap));
  expectClose(grad, dcap, "softcapGrad");
}

TEST_P(Conformance, Norms) {
  const int64_t rows = 4, cols = 24;
  const double eps = 1e-5;
  for (bool rms : {false, true}) {
    std::string kind = rms ? "rmsnorm" : "layernorm";
    // The gains are the weights' working copy: act, as the input.
    Tensor x = randomAct(rows * cols, 2.0), gamma = randomAct(cols),
           beta = randomAct(cols), y = filledAct(rows * cols, 0),
           xhat = filledAct(rows * cols, 0), rstd = filled(rows, 0);
    std::vector<double> wantY(rows * cols), wantXhat(rows * cols),
        wantRstd(rows);
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < cols; ++c)
        mean += x.host[r * cols + c] / cols;
      if (rms)
        mean = 0;
      for (int64_t c = 0; c < cols; ++c)
        var += std::pow(x.host[r * cols + c] - mean, 2) / cols;
      wantRstd[r] = 1 / std::sqrt(var + eps);
      for (int64_t c = 0; c < cols; ++c) {
        double h = (x.host[r * cols + c] - mean) * wantRstd[r];
        wantXhat[r * cols + c] = h;
        wantY[r * cols + c] = gamma.host[c] * h + (rms ? 0 : beta.host[c]);
      }
    }
    kernels().normForward(x.ptr(), gamma.ptr(), rms ? DevicePtr() : beta.ptr(),
                          rows, cols, rms, float(eps), y.ptr(), xhat.ptr(),
                          rstd.ptr());
    expectClose(y, wantY, kind + " forward: y");
    expectClose(xhat, wantXhat, kind + " forward: xhat");
    expectClose(rstd, wantRstd, kind + " forward: rstd");

    // The input gradient: y's derivative through xhat's statistics.
    Tensor dy = randomAct(rows * cols), dx = randomAct(rows * cols);
    std::vector<double> wantDx = dx.host;
    for (int64_t r = 0; r < rows; ++r) {
      double meanG = 0, meanGX = 0;
      for (int64_t c = 0; c < cols; ++c) {
        double g = dy.host[r * cols + c] * gamma.host[c];
        meanG += g / cols;
        meanGX += g * wantXhat[r * cols + c] / cols;
      }
      for (int64_t c = 0; c < cols; ++c) {
        double g = dy.host[r * cols + c] * gamma.host[c];
        double xh = wantXhat[r * cols + c];
        wantDx[r * cols + c] +=
            wantRstd[r] * (g - (rms ? 0 : meanG) - xh * meanGX);
      }
    }
    kernels().normBackward(dy.ptr(), xhat.ptr(), rstd.ptr(), gamma.ptr(), rows,
                           cols, rms, dx.ptr());
    expectClose(dx, wantDx, kind + " backward: dx accumulates", 1e-4);

    Tensor dgamma = random(cols), dbeta = random(cols);
    std::vector<double> wantDg = dgamma.host, wantDb = dbeta.host;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        wantDg[c] += dy.host[r * cols + c] * wantXhat[r * cols + c];
        wantDb[c] += dy.host[r * cols + c];
      }
    kernels().normParamGrads(dy.ptr(), xhat.ptr(), rows, cols, dgamma.ptr(),
                             rms ? DevicePtr() : dbeta.ptr());
    expectClose(dgamma, wantDg, kind + " parameter gradients: dgamma");
    if (!rms)
      expectClose(dbeta, wantDb, kind + " parameter gradients: dbeta");

    Tensor again = filledAct(rows * cols, 0);
    kernels().normAffine(xhat.ptr(), gamma.ptr(),
                         rms ? DevicePtr() : beta.ptr(), rows, cols,
                         again.ptr());
    expectClose(again, wantY, kind + " affine (recomputed y)");

    // The residual seams: x as a sum of two parts, and dx's accumulation
    // from a residual rather than from dx itself.
    Tensor residual = randomAct(rows * cols);
    std::vector<double> part(rows * cols);
    for (int64_t i = 0; i < rows * cols; ++i)
      part[i] = double(float(x.host[i] - residual.host[i]));
    Tensor sum = makeAct(part);
    kernels().addNormForward(sum.ptr(), residual.ptr(), gamma.ptr(),
                             rms ? DevicePtr() : beta.ptr(), rows, cols, rms,
                             float(eps), y.ptr(), xhat.ptr(), rstd.ptr());
    expectClose(sum, x.host, kind + " addNormForward: x + residual");
    expectClose(y, wantY, kind + " addNormForward: y");
    expectClose(xhat, wantXhat, kind + " addNormForward: xhat");
    expectClose(rstd, wantRstd, kind + " addNormForward: rstd");
    Tensor joined = randomAct(rows * cols);
    std::vector<double> wantJoined(rows * cols);
    for (int64_t i = 0; i < rows * cols; ++i)
      wantJoined[i] = residual.host[i] + wantDx[i] - dx.host[i];
    kernels().normBackwardAdd(dy.ptr(), xhat.ptr(), rstd.ptr(), gamma.ptr(),
                              rows, cols, rms, residual.ptr(), joined.ptr());
    expectClose(joined, wantJoined,
                kind + " normBackwardAdd: residual + dx, dx not read", 1e-4);
  }
}

TEST_P(Conformance, Activations) {
  const int64_t n = 41;
  for (GateActivation act : {GateActivation::Gelu, GateActivation::GeluErf}) {
    std::string name =
        act == GateActivation::Gelu ? "gelu (tanh)" : "gelu (erf)";
    Tensor u = randomAct(n, 2.0), g = filledAct(n, 0), dg = randomAct(n),
           du = filledAct(n, 0);
    std::vector<double> wantG(n), wantDu(n);
    for (int64_t i = 0; i < n; ++i) {
      wantG[i] = gelu(act, u.host[i]);
      wantDu[i] = dg.host[i] * derivative(act, u.host[i]);
    }
    kernels().geluForward(act, u.ptr(), g.ptr(), n);
    expectClose(g, wantG, name + " forward");
    kernels().geluBackward(act, u.ptr(), dg.ptr(), du.ptr(), n);
    expectClose(du, wantDu, name + " backward", 1e-4);
  }
  for (GateActivation act :
       {GateActivation::Silu, GateActivation::Gelu, GateActivation::GeluErf}) {
    std::string name = act == GateActivation::Silu   ? "swiglu"
                       : act == GateActivation::Gelu ? "geglu (tanh)"
                                                     : "geglu (erf)";
    Tensor z = randomAct(n, 2.0), u = randomAct(n), g = filledAct(n, 0),
           dg = randomAct(n), dz = filledAct(n, 0), du = filledAct(n, 0);
    std::vector<double> wantG(n), wantDz(n), wantDu(n);
    for (int64_t i = 0; i < n; ++i) {
      wantG[i] = activate(act, z.host[i]) * u.host[i];
      wantDz[i] = dg.host[i] * u.host[i] * derivative(act, z.host[i]);
      wantDu[i] = dg.host[i] * activate(act, z.host[i]);
    }
    kernels().gatedForward(act, z.ptr(), u.ptr(), g.ptr(), n);
    expectClose(g, wantG, name + " forward");
    kernels().gatedBackward(act, z.ptr(), u.ptr(), dg.ptr(), dz.ptr(), du.ptr(),
                            n);
    expectClose(dz, wantDz, name + " backward: dz", 1e-4);
    expectClose(du, wantDu, name + " backward: du");
  }
}

TEST_P(Conformance, Rotary) {
  const int64_t rows = 2, tokens = 5, heads = 3, headDim = 8,
                stride = heads * headDim + 4, offset = 9000;
  // Frequencies from the contract's formula, written out here: the base's
  // powers, Llama 3.1's bands for the scaled case, and YaRN's ramp
  // (transformers' _compute_yarn_parameters: between the pair indices at
  // which a frequency turns beta_fast and beta_slow times over the
  // original context, floored and ceiled).
  auto frequency = [](const Rotary &r, int64_t i) {
    double f = std::pow(r.theta, -2.0 * double(i) / double(headDim));
    if (!r.isScaled())
      return f;
    if (r.yarn) {
      auto at = [&](double turns) {
        return headDim *
               std::log(double(r.originalPositions) / (turns * 2 * M_PI)) /
               (2 * std::log(r.theta));
      };
      double low = std::max(std::floor(at(r.betaFast)), 0.0),
             high = std::min(std::ceil(at(r.betaSlow)), double(headDim - 1));
      double ramp = std::min(1.0, std::max(0.0, (i - low) / (high - low)));
      return f / r.factor * ramp + f * (1 - ramp);
    }
    double wave = 2 * M_PI / f, orig = double(r.originalPositions);
    if (wave < orig / r.highFreqFactor)
      return f;
    if (wave > orig / r.lowFreqFactor)
      return f / r.factor;
    double s =
        (orig / wave - r.lowFreqFactor) / (r.highFreqFactor - r.lowFreqFactor);
    return (1 - s) * f / r.factor + s * f;
  };
  // YaRN over 100 original positions at base 10: the ramp runs from pair
  // 0 (kept) to 5, so pairs 1 to 3 blend 20, 40 and 60% of the divided
  // frequency; the rotation scaled by 1.25.
  Rotary yarn{10.0, 4.0};
  yarn.yarn = true;
  yarn.originalPositions = 100;
  yarn.betaFast = 32;
  yarn.betaSlow = 1;
  yarn.magnitude = 1.25;
  for (Rotary rotary :
       {Rotary{500000.0}, Rotary{10.0, 8.0, 1.0, 4.0, 32}, yarn})
    for (bool inverse : {false, true}) {
      Tensor x = randomAct(rows * tokens * stride);
      std::vector<double> want = x.host;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t t = 0; t < tokens; ++t)
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t i = 0; i < headDim / 2; ++i) {
              double angle = double(offset + t) * frequency(rotary, i);
              double c = std::cos(angle) * rotary.magnitude,
                     s = (inverse ? -std::sin(angle) : std::sin(angle)) *
                         rotary.magnitude;
              int64_t at = (r * tokens + t) * stride + h * headDim;
              double a = x.host[at + i], b = x.host[at + i + headDim / 2];
              want[at + i] = a * c - b * s;
              want[at + i + headDim / 2] = b * c + a * s;
            }
      kernels().rotate(x.ptr(), rows, tokens, offset, heads, headDim, stride,
                       rotary, inverse);
      expectClose(x, want,
                  std::string(!rotary.isScaled() ? "plain"
                              : rotary.yarn      ? "yarn-scaled, magnitude 1.25"
                                                 : "llama3-scaled") +
                      (inverse ? ", inverse" : "") +
                      ", position 9000, padded rows");
    }
}

/// Causal attention over a slice with a key/value cache, grouped-query
/// heads, a scale and a soft cap, a sliding window: forward and backward
/// from the definitions (softmax, its Jacobian, tanh's derivative).
TEST_P(Conformance, Attention) {
  struct Variant {
    float softcap;
    int64_t window;
    int64_t valueDim;
    const char *name;
  };
  for (const Variant &v :
       {Variant{0.0f, 0, 0, "grouped heads, cache offset 2"},
        Variant{3.0f, 0, 0,
                "grouped heads, cache offset 2, scale 0.3, soft cap 3"},
        Variant{0.0f, 3, 0, "grouped heads, cache offset 2, window 3"},
        Variant{0.0f, 0, 6,
                "grouped heads, cache offset 2, value heads of 6 "
                "(DeepSeek's)"}}) {
    const float softcap = v.softcap;
    AttentionShape s{2, 3, 2, 6, 4, 8, 2};
    s.scale = softcap > 0 ? 0.3f : 0.0f;
    s.softcap = softcap;
    s.window = v.window;
    s.valueDim = v.valueDim;
    // dv: a value head's size, cw and vw the context's and the values'
    // widths.
    const int64_t span = s.offset + s.tokens, hd = s.heads * s.headDim,
                  kvw = s.kvHeads * s.headDim, group = s.heads / s.kvHeads,
                  dv = s.getValueDim(), cw = s.heads * dv,
                  vw = s.kvHeads * dv;
    const double scale = getAttentionScale(s);
    // The key/value cache is act, as the queries; the log-sum-exp f32.
    Tensor q = randomAct(s.rows * s.tokens * hd),
           keys = randomAct(s.rows * s.seqLen * kvw),
           values = randomAct(s.rows * s.seqLen * vw),
           lse = filled(s.rows * s.heads * s.tokens, 0),
           context = filledAct(s.rows * s.tokens * cw, 0);
    std::vector<double> wantCtx(context.host.size()), wantLse(lse.host.size());
    // p[r][h][i][j], the capped scores' softmax, kept for the backward.
    std::vector<double> p(s.rows * s.heads * s.tokens * span, 0),
        capped(p.size(), 0);
    auto at = [&](int64_t r, int64_t h, int64_t i, int64_t j) {
      return ((r * s.heads + h) * s.tokens + i) * span + j;
    };
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t h = 0; h < s.heads; ++h)
        for (int64_t i = 0; i < s.tokens; ++i) {
          int64_t visible = s.offset + i + 1, kv = (h / group) * s.headDim,
                  vAt = (h / group) * dv;
          double most = -INFINITY;
          for (int64_t j = s.getFirstKey(s.offset + i); j < visible; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < s.headDim; ++d)
              dot += q.host[(r * s.tokens + i) * hd + h * s.headDim + d] *
                     keys.host[(r * s.seqLen + j) * kvw + kv + d];
            double score = scale * dot;
            if (softcap > 0)
              score = softcap * std::tanh(score / softcap);
            capped[at(r, h, i, j)] = score;
            most = std::max(most, score);
          }
          double sum = 0;
          for (int64_t j = s.getFirstKey(s.offset + i); j < visible; ++j)
            sum += std::exp(capped[at(r, h, i, j)] - most);
          wantLse[(r * s.heads + h) * s.tokens + i] = most + std::log(sum);
          for (int64_t j = s.getFirstKey(s.offset + i); j < visible; ++j) {
            double pj = std::exp(capped[at(r, h, i, j)] - most) / sum;
            p[at(r, h, i, j)] = pj;
            for (int64_t d = 0; d < dv; ++d)
              wantCtx[(r * s.tokens + i) * cw + h * dv + d] +=
                  pj * values.host[(r * s.seqLen + j) * vw + vAt + d];
          }
        }
    std::string variant = v.name;
    kernels().attentionForward(s, q.ptr(), keys.ptr(), values.ptr(), lse.ptr(),
                               context.ptr());
    expectClose(context, wantCtx, variant + ": context");
    expectClose(lse, wantLse, variant + ": log-sum-exp");

    // dkeys and dvalues accumulate in f32.
    Tensor dcontext = randomAct(context.host.size()),
           dq = filledAct(q.host.size(), 0), dkeys = random(keys.host.size()),
           dvalues = random(values.host.size());
    std::vector<double> wantDq(q.host.size(), 0), wantDk = dkeys.host,
                                                  wantDv = dvalues.host;
    // The backward reads the context it is given (sum_j p_j dp_j is
    // dcontext . context): the reference takes the stored one too, which
    // in bf16 is the rounded context.
    std::vector<double> stored = read(context);
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t h = 0; h < s.heads; ++h)
        for (int64_t i = 0; i < s.tokens; ++i) {
          int64_t visible = s.offset + i + 1, kv = (h / group) * s.headDim,
                  vAt = (h / group) * dv;
          const double *dc = &dcontext.host[(r * s.tokens + i) * cw + h * dv];
          std::vector<double> dp(visible);
          double weighted = 0;
          for (int64_t d = 0; d < dv; ++d)
            weighted += dc[d] * stored[(r * s.tokens + i) * cw + h * dv + d];
          for (int64_t j = s.getFirstKey(s.offset + i); j < visible; ++j)
            for (int64_t d = 0; d < dv; ++d) {
              dp[j] += dc[d] * values.host[(r * s.seqLen + j) * vw + vAt + d];
              wantDv[(r * s.seqLen + j) * vw + vAt + d] +=
                  p[at(r, h, i, j)] * dc[d];
            }
          for (int64_t j = s.getFirstKey(s.offset + i); j < visible; ++j) {
            double ds = p[at(r, h, i, j)] * (dp[j] - weighted);
            if (softcap > 0) {
              double t = capped[at(r, h, i, j)] / softcap;
              ds *= 1 - t * t;
            }
            for (int64_t d = 0; d < s.headDim; ++d) {
              wantDq[(r * s.tokens + i) * hd + h * s.headDim + d] +=
                  scale * ds * keys.host[(r * s.seqLen + j) * kvw + kv + d];
              wantDk[(r * s.seqLen + j) * kvw + kv + d] +=
                  scale * ds *
                  q.host[(r * s.tokens + i) * hd + h * s.headDim + d];
            }
          }
        }
    kernels().attentionBackward(s, q.ptr(), keys.ptr(), values.ptr(),
                                context.ptr(), lse.ptr(), dcontext.ptr(),
                                dq.ptr(), dkeys.ptr(), dvalues.ptr());
    expectClose(dq, wantDq, variant + ": dq", 1e-4);
    expectClose(dkeys, wantDk, variant + ": dkeys accumulate", 1e-4);
    expectClose(dvalues, wantDv, variant + ": dvalues accumulate", 1e-4);
  }
}

/// Ring attention's pieces (Liu et al., 2023, section 3): attention over
/// key blocks, each folded into the running context and log-sum-exp by
/// attentionMerge, equals attention over the whole cache; B per block,
/// against the final context and log-sum-exp with dq summed over the
/// blocks, gives the whole B's gradients. The window's first block is
/// seen by no query, the last block only by some.
TEST_P(Conformance, AttentionOverKeyBlocks) {
  struct Variant {
    float softcap;
    int64_t window;
    const char *name;
  };
  for (const Variant &v :
       {Variant{0.0f, 0, "three key blocks"},
        Variant{3.0f, 0, "three key blocks, scale 0.3, soft cap 3"},
        Variant{0.0f, 2, "three key blocks, window 2 (the first unseen, the "
                         "second past some queries' windows)"}}) {
    // Two rows of 4 queries at positions 4-7, grouped heads.
    AttentionShape s{2, 4, 4, 8, 4, 8, 2};
    s.scale = v.softcap > 0 ? 0.3f : 0.0f;
    s.softcap = v.softcap;
    s.window = v.window;
    const int64_t kvw = s.kvHeads * s.headDim, hd = s.heads * s.headDim;
    const int64_t queries = s.rows * s.heads * s.tokens;
    Tensor q = randomAct(s.rows * s.tokens * hd),
           keys = randomAct(s.rows * s.seqLen * kvw),
           values = randomAct(s.rows * s.seqLen * kvw),
           lse = filled(queries, 0),
           context = filledAct(s.rows * s.tokens * hd, 0);
    kernels().attentionForward(s, q.ptr(), keys.ptr(), values.ptr(), lse.ptr(),
                               context.ptr());
    Tensor dcontext = randomAct(context.host.size()),
           dq = filledAct(q.host.size(), 0), dkeys = filled(keys.host.size(), 0),
           dvalues = filled(values.host.size(), 0);
    kernels().attentionBackward(s, q.ptr(), keys.ptr(), values.ptr(),
                                context.ptr(), lse.ptr(), dcontext.ptr(),
                                dq.ptr(), dkeys.ptr(), dvalues.ptr());

    // The blocks, each its rows' keys [begin, end) packed.
    const std::vector<std::pair<int64_t, int64_t>> blocks = {
        {0, 2}, {2, 5}, {5, 8}};
    auto pack = [&](const std::vector<double> &cache, int64_t begin,
                    int64_t end) {
      std::vector<double> out;
      for (int64_t r = 0; r < s.rows; ++r)
        out.insert(out.end(), cache.begin() + (r * s.seqLen + begin) * kvw,
                   cache.begin() + (r * s.seqLen + end) * kvw);
      return out;
    };
    auto blockShape = [&](int64_t begin, int64_t end) {
      AttentionShape k = s;
      k.keyBegin = begin;
      k.keyCount = end - begin;
      k.seqLen = end - begin;
      return k;
    };
    Tensor runLse = filled(queries, -INFINITY),
           runContext = filledAct(context.host.size(), 0);
    std::vector<Tensor> blockKeys, blockValues;
    for (auto [begin, end] : blocks) {
      AttentionShape k = blockShape(begin, end);
      blockKeys.push_back(makeAct(pack(keys.host, begin, end)));
      blockValues.push_back(makeAct(pack(values.host, begin, end)));
      Tensor blockLse = filled(queries, 0),
             blockContext = filledAct(context.host.size(), 0);
      kernels().attentionForward(k, q.ptr(), blockKeys.back().ptr(),
                                 blockValues.back().ptr(), blockLse.ptr(),
                                 blockContext.ptr());
      kernels().attentionMerge(s, runLse.ptr(), runContext.ptr(),
                               blockLse.ptr(), blockContext.ptr());
    }
    std::string variant = v.name;
    expectClose(runContext, read(context), variant + ": merged context");
    expectClose(runLse, read(lse), variant + ": merged log-sum-exp");

    Tensor blockDq = filledAct(q.host.size(), 0);
    std::vector<double> gotDk, gotDv;
    for (size_t b = 0; b < blocks.size(); ++b) {
      auto [begin, end] = blocks[b];
      AttentionShape k = blockShape(begin, end);
      k.accumulateQueries = true;
      Tensor dk = filled(s.rows * (end - begin) * kvw, 0),
             dv = filled(s.rows * (end - begin) * kvw, 0);
      kernels().attentionBackward(k, q.ptr(), blockKeys[b].ptr(),
                                  blockValues[b].ptr(), runContext.ptr(),
                                  runLse.ptr(), dcontext.ptr(), blockDq.ptr(),
                                  dk.ptr(), dv.ptr());
      std::vector<double> k1 = read(dk), v1 = read(dv);
      gotDk.insert(gotDk.end(), k1.begin(), k1.end());
      gotDv.insert(gotDv.end(), v1.begin(), v1.end());
    }
    // The wanted gradients in the blocks' order.
    std::vector<double> wantDk, wantDv, wholeDk = read(dkeys),
                                        wholeDv = read(dvalues);
    for (auto [begin, end] : blocks) {
      std::vector<double> k1 = pack(wholeDk, begin, end),
                          v1 = pack(wholeDv, begin, end);
      wantDk.insert(wantDk.end(), k1.begin(), k1.end());
      wantDv.insert(wantDv.end(), v1.begin(), v1.end());
    }
    expectClose(blockDq, read(dq), variant + ": dq summed over blocks", 1e-4);
    expectClose(make(gotDk), wantDk, variant + ": dkeys by block", 1e-4);
    expectClose(make(gotDv), wantDv, variant + ": dvalues by block", 1e-4);
  }
}

TEST_P(Conformance, EmbeddingAndCrossEntropy) {
  const int64_t rows = 2, length = 4, stride = 5, hidden = 6, vocab = 7,
                offset = 3;
  std::vector<double> ids = {1, 6, 0, 6, 9, 2, 2, 5, 3, 9};
  // Tables, positions, outputs, logits and their gradients are act; the
  // tables' gradients and the statistics f32, the loss f64.
  Tensor tokens = make(ids, DType::I32), table = randomAct(vocab * hidden),
         positions = randomAct(16 * hidden),
         out = filledAct(rows * length * hidden, 0);
  std::vector<double> wantOut(out.host.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < length; ++t)
      for (int64_t c = 0; c < hidden; ++c)
        wantOut[(r * length + t) * hidden + c] =
            table.host[int64_t(ids[r * stride + t]) * hidden + c] +
            positions.host[(offset + t) * hidden + c];
  kernels().embeddingForward(tokens.ptr(), stride, table.ptr(), positions.ptr(),
                             rows, length, offset, hidden, out.ptr());
  expectClose(out, wantOut, "embedding forward, learned positions");
  Tensor dout = randomAct(out.host.size()), dtable = random(vocab * hidden),
         dpositions = random(16 * hidden);
  std::vector<double> wantDt = dtable.host, wantDp = dpositions.host;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < length; ++t)
      for (int64_t c = 0; c < hidden; ++c) {
        double g = dout.host[(r * length + t) * hidden + c];
        wantDt[int64_t(ids[r * stride + t]) * hidden + c] += g;
        wantDp[(offset + t) * hidden + c] += g;
      }
  kernels().embeddingBackward(tokens.ptr(), stride, dout.ptr(), rows, length,
                              offset, hidden, dtable.ptr(), dpositions.ptr());
  expectClose(dtable, wantDt, "embedding backward: table rows accumulate");
  expectClose(dpositions, wantDp, "embedding backward: positions accumulate");

  // The labels are the same ids (each below the vocabulary here).
  std::vector<double> labelIds = {1, 6, 0, 6, 0, 2, 2, 5, 3, 0};
  Tensor labels = make(labelIds, DType::I32),
         logits = randomAct(rows * length * vocab, 2.0),
         lse = filled(rows * length, 0), loss = make({0.25}, DType::F64),
         dlogits = filledAct(logits.host.size(), 0);
  std::vector<double> wantLse(rows * length), wantD(logits.host.size());
  double wantLoss = 0.25;
  const double scale = 0.125;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < length; ++t) {
      const double *row = &logits.host[(r * length + t) * vocab];
      double most = *std::max_element(row, row + vocab), sum = 0;
      for (int64_t v = 0; v < vocab; ++v)
        sum += std::exp(row[v] - most);
      double l = most + std::log(sum);
      int64_t label = int64_t(labelIds[r * stride + t]);
      wantLse[r * length + t] = l;
      wantLoss += l - row[label];
      for (int64_t v = 0; v < vocab; ++v)
        wantD[(r * length + t) * vocab + v] =
            (std::exp(row[v] - l) - (v == label ? 1 : 0)) * scale;
    }
  kernels().crossEntropyForward(logits.ptr(), labels.ptr(), stride, rows,
                                length, vocab, lse.ptr(), loss.ptr());
  expectClose(lse, wantLse, "cross-entropy forward: log-sum-exp");
  expectClose(loss, {wantLoss}, "cross-entropy forward: the loss accumulates");
  kernels().crossEntropyBackward(logits.ptr(), lse.ptr(), labels.ptr(), stride,
                                 rows, length, vocab, float(scale),
                                 dlogits.ptr());
  expectClose(dlogits, wantD, "cross-entropy backward, scaled");
}

TEST_P(Conformance, OptimizerAndNorm) {
  // fp32 arrays in every precision (the contract's gradients, moments and
  // master weights): a bf16 run checks they pass through unchanged.
  const int64_t rows = 3, cols = 5, stride = 7;
  Tensor x = random(rows * stride), acc = make({1.5}, DType::F64);
  double want = 1.5;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      want += 0.5 * x.host[r * stride + c] * x.host[r * stride + c];
  kernels().sumSquares(x.ptr(), rows, cols, stride, 0.5, acc.ptr());
  expectClose(acc, {want}, "sumSquares, weighted, padded rows");

  const int64_t n = 29;
  AdamConfig config;
  config.learningRate = 0.01f;
  config.weightDecay = 0.1f;
  config.gradientScale = 0.5f;
  const int64_t step = 3;
  Tensor w = random(n), g = random(n), m = random(n, 0.1), v = random(n, 0.1);
  for (double &e : v.host)
    e = std::fabs(e);
  v = make(v.host);
  std::vector<double> wantW(n), wantM(n), wantV(n);
  double b1 = config.beta1, b2 = config.beta2;
  for (int64_t i = 0; i < n; ++i) {
    double grad = g.host[i] * config.gradientScale;
    wantM[i] = b1 * m.host[i] + (1 - b1) * grad;
    wantV[i] = b2 * v.host[i] + (1 - b2) * grad * grad;
    double mhat = wantM[i] / (1 - std::pow(b1, step)),
           vhat = wantV[i] / (1 - std::pow(b2, step));
    wantW[i] = w.host[i] - config.learningRate *
                               (mhat / (std::sqrt(vhat) + config.epsilon) +
                                config.weightDecay * w.host[i]);
  }
  kernels().adamUpdate(w.ptr(), g.ptr(), m.ptr(), v.ptr(), n, config, step,
                       DevicePtr());
  expectClose(w, wantW, "AdamW, step 3, clipped gradients: weights");
  expectClose(m, wantM, "AdamW: first moment");
  expectClose(v, wantV, "AdamW: second moment");
}

TEST_P(Conformance, CopiesAndPaddingRows) {
  StridedCopy shape{2, 3, 4, 20, 6, 15, 5};
  Tensor src = randomAct(2 * 20), dst = randomAct(2 * 15);
  std::vector<double> want = dst.host;
  for (int64_t b = 0; b < shape.batches; ++b)
    for (int64_t r = 0; r < shape.rows; ++r)
      for (int64_t c = 0; c < shape.cols; ++c)
        want[b * shape.dstBatch + r * shape.dstRow + c] =
            src.host[b * shape.srcBatch + r * shape.srcRow + c];
  kernels().copyStrided(dst.ptr(), src.ptr(), shape);
  expectClose(dst, want, "copyStrided: batches of row blocks, gaps kept");

  const int64_t rows = 2, length = 3, stride = 4, hidden = 5;
  std::vector<double> ids = {7, 0, 7, 9, 1, 7, 2, 7};
  Tensor tokens = make(ids, DType::I32), x = randomAct(rows * length * hidden);
  std::vector<double> kept = x.host;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < length; ++t)
      if (ids[r * stride + t] == 7)
        for (int64_t c = 0; c < hidden; ++c)
          kept[(r * length + t) * hidden + c] = 0;
  kernels().zeroTokenRows(tokens.ptr(), stride, rows, length, 7, hidden,
                          x.ptr());
  expectClose(x, kept,
              "zeroTokenRows: the padding token's rows, past-length "
              "ids ignored");
}

/// The vocabulary shards' kernels (Yeung et al., 2024, section 4): a
/// device holding rows [first, first + count) of a table, tokens and labels
/// inside and outside it.
TEST_P(Conformance, VocabularyShards) {
  const int64_t rows = 2, length = 3, stride = 4, hidden = 5, first = 4,
                count = 3, ld = 4, tokens = rows * length;
  // Ids in the shard (4..6) and outside; past `length` in each row unused.
  std::vector<double> ids = {4, 1, 6, 99, 5, 7, 4, 99};
  auto inShard = [&](double id) { return id >= first && id < first + count; };
  auto id = [&](int64_t t) { return ids[(t / length) * stride + t % length]; };
  // As Vocab.cpp allocates them: tables, lookups, probabilities, A, B and
  // the input gradient act; logits, per-token statistics and the table's
  // gradient f32; the loss f64.
  Tensor labels = make(ids, DType::I32), table = randomAct(count * hidden),
         out = randomAct(tokens * hidden);
  std::vector<double> wantRows(tokens * hidden, 0);
  for (int64_t t = 0; t < tokens; ++t)
    if (inShard(id(t)))
      for (int64_t c = 0; c < hidden; ++c)
        wantRows[t * hidden + c] =
            table.host[(int64_t(id(t)) - first) * hidden + c];
  kernels().shardLookup(labels.ptr(), stride, rows, length, table.ptr(), first,
                        count, hidden, out.ptr());
  expectClose(out, wantRows, "shardLookup: zero outside the shard");
  Tensor labelOut = randomAct(tokens * hidden);
  kernels().labelRows(labels.ptr(), stride, rows, length, table.ptr(), first,
                      count, hidden, labelOut.ptr());
  expectClose(labelOut, wantRows, "labelRows (equation 6's B)");

  Tensor dout = randomAct(tokens * hidden), dtable = random(count * hidden);
  std::vector<double> wantDt = dtable.host;
  for (int64_t t = 0; t < tokens; ++t)
    if (inShard(id(t)))
      for (int64_t c = 0; c < hidden; ++c)
        wantDt[(int64_t(id(t)) - first) * hidden + c] +=
            dout.host[t * hidden + c];
  kernels().shardScatterAdd(labels.ptr(), stride, rows, length, dout.ptr(),
                            first, count, hidden, dtable.ptr());
  expectClose(dtable, wantDt, "shardScatterAdd: rows accumulate");

  // Softmax statistics over the shard's `count` columns of [tokens, ld].
  Tensor logits = random(tokens * ld, 2.0), max = filled(tokens, 0),
         sum = filled(tokens, 0), probs = filledAct(tokens * ld, 0),
         reference = random(tokens);
  std::vector<double> wantMax(tokens), wantSum(tokens),
      wantProbs(tokens * ld, 0), wantRefSum(tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    const double *row = &logits.host[t * ld];
    wantMax[t] = *std::max_element(row, row + count);
    for (int64_t c = 0; c < count; ++c) {
      wantSum[t] += std::exp(row[c] - wantMax[t]);
      wantRefSum[t] += std::exp(row[c] - reference.host[t]);
    }
    for (int64_t c = 0; c < count; ++c)
      wantProbs[t * ld + c] = std::exp(row[c] - wantMax[t]) / wantSum[t];
  }
  kernels().shardSoftmaxStatistics(logits.ptr(), tokens, count, ld, DevicePtr(),
                                   max.ptr(), sum.ptr(), probs.ptr());
  expectClose(max, wantMax, "shardSoftmaxStatistics: max");
  expectClose(sum, wantSum, "shardSoftmaxStatistics: sum");
  expectClose(probs, wantProbs, "shardSoftmaxStatistics: probabilities");
  Tensor refSum = filled(tokens, 0), refMax = filled(tokens, 0);
  kernels().shardSoftmaxStatistics(logits.ptr(), tokens, count, ld,
                                   reference.ptr(), refMax.ptr(), refSum.ptr(),
                                   DevicePtr());
  expectClose(refSum, wantRefSum,
              "shardSoftmaxStatistics: sum against a given reference");

  // Equation 5, the rescaled sums, and the rows scaled by them.
  Tensor globalMax = random(tokens), scaled = filled(tokens, 0);
  std::vector<double> wantScaled(tokens);
  for (int64_t t = 0; t < tokens; ++t)
    wantScaled[t] = wantSum[t] * std::exp(wantMax[t] - globalMax.host[t]);
  kernels().rescaleSum(sum.ptr(), max.ptr(), globalMax.ptr(), tokens,
                       scaled.ptr());
  expectClose(scaled, wantScaled, "rescaleSum (equation 5)", 1e-4);
  Tensor x = randomAct(tokens * ld), factor = random(tokens),
         divisor = make(std::vector<double>(tokens, 1.5));
  std::vector<double> wantX = x.host;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t c = 0; c < count; ++c)
      wantX[t * ld + c] *= factor.host[t] / 1.5;
  kernels().scaleRows(x.ptr(), factor.ptr(), divisor.ptr(), tokens, count, ld);
  expectClose(x, wantX, "scaleRows: the shard's columns only");

  // The shard's part of the loss, and of the softmax gradient.
  Tensor loss = make({0.5}, DType::F64);
  double wantLoss = 0.5;
  for (int64_t t = 0; t < tokens; ++t)
    if (inShard(id(t)))
      wantLoss += wantMax[t] + std::log(wantSum[t]) -
                  logits.host[t * ld + int64_t(id(t)) - first];
  kernels().shardLoss(logits.ptr(), labels.ptr(), stride, rows, length, first,
                      count, ld, max.ptr(), sum.ptr(), loss.ptr());
  expectClose(loss, {wantLoss}, "shardLoss: labels in the shard only");
  std::vector<double> wantGrad = wantProbs;
  for (int64_t t = 0; t < tokens; ++t) {
    if (inShard(id(t)))
      wantGrad[t * ld + int64_t(id(t)) - first] -= 1;
    for (int64_t c = 0; c < count; ++c)
      wantGrad[t * ld + c] *= 0.25;
  }
  kernels().shardSoftmaxGrad(probs.ptr(), labels.ptr(), stride, rows, length,
                             first, count, ld, 0.25f);
  expectClose(probs, wantGrad, "shardSoftmaxGrad, scaled");

  // Equation 6: out = scale * (A * scaled / sum - B).
  Tensor a = randomAct(tokens * hidden), b = randomAct(tokens * hidden),
         combined = filledAct(tokens * hidden, 0);
  std::vector<double> wantOut(tokens * hidden);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t c = 0; c < hidden; ++c)
      wantOut[t * hidden + c] =
          0.5 * (a.host[t * hidden + c] * wantScaled[t] / wantSum[t] -
                 b.host[t * hidden + c]);
  kernels().combineGrad(a.ptr(), b.ptr(), scaled.ptr(), sum.ptr(), tokens,
                        hidden, 0.5f, combined.ptr());
  expectClose(combined, wantOut, "combineGrad (equation 6)", 1e-4);
}

/// A mixture-of-experts feed-forward's routing and token permutation
/// (runtime/Kernels.def's moe* kernels): softmax then top-k with and
/// without renormalising, DeepSeek's forms (sigmoid scores, a bias on the
/// choice, group-limited top-k, a scale), their gradient (a central
/// difference of the double-precision router with the chosen experts
/// held), the stable grouping by expert, the permutation and the weighted
/// combine with its backward.
TEST_P(Conformance, MixtureOfExperts) {
  const int64_t tokens = 7, experts = 6, k = 2, hidden = 5,
                copies = tokens * k;
  Tensor logits = random(tokens * experts), dweights = random(copies);
  Tensor bias = random(experts);
  // The router in double: scores, the k largest of score + bias among the
  // best groups' experts (descending, the lower expert on a tie) and their
  // weights.
  auto route = [&](const std::vector<double> &z, const RouterRule &rule,
                   std::vector<double> &probs, std::vector<int> &chosen,
                   std::vector<double> &weights) {
    probs.assign(z.size(), 0);
    chosen.assign(copies, -1);
    weights.assign(copies, 0);
    auto descending = [](const std::vector<double> &v) {
      std::vector<int> order(v.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return v[a] > v[b]; });
      return order;
    };
    for (int64_t t = 0; t < tokens; ++t) {
      double *p = probs.data() + t * experts;
      const double *zt = z.data() + t * experts;
      if (rule.sigmoid) {
        for (int64_t e = 0; e < experts; ++e)
          p[e] = 1 / (1 + std::exp(-zt[e]));
      } else {
        double most = *std::max_element(zt, zt + experts), sum = 0;
        for (int64_t e = 0; e < experts; ++e)
          sum += std::exp(zt[e] - most);
        for (int64_t e = 0; e < experts; ++e)
          p[e] = std::exp(zt[e] - most) / sum;
      }
      std::vector<double> choice(p, p + experts);
      for (int64_t e = 0; rule.bias && e < experts; ++e)
        choice[e] = float(p[e]) + float(bias.host[e]);
      if (rule.groups > 1) {
        int64_t size = experts / rule.groups;
        std::vector<double> groupScore(rule.groups);
        for (int64_t g = 0; g < rule.groups; ++g) {
          std::vector<double> in(choice.begin() + g * size,
                                 choice.begin() + (g + 1) * size);
          std::vector<int> best = descending(in);
          groupScore[g] = in[best[0]] + (rule.sigmoid ? in[best[1]] : 0);
        }
        std::vector<int> best = descending(groupScore);
        for (int64_t g = rule.topGroups; g < rule.groups; ++g)
          for (int64_t e = 0; e < size; ++e)
            choice[best[g] * size + e] = -INFINITY;
      }
      std::vector<int> order = descending(choice);
      double kept = 0;
      for (int64_t j = 0; j < k; ++j)
        kept += p[order[j]];
      for (int64_t j = 0; j < k; ++j) {
        chosen[t * k + j] = order[j];
        weights[t * k + j] =
            (rule.normalize ? p[order[j]] / kept : p[order[j]]) * rule.scale;
      }
    }
  };
  auto readInts = [&](const Tensor &t) {
    std::vector<int32_t> v;
    EXPECT_TRUE(downloadAll(*device, t.device, v).isOk());
    return std::vector<int>(v.begin(), v.end());
  };
  // Mixtral's, Qwen's (renormalised), DeepSeek-V2's (softmax in groups
  // scored by their best), DeepSeek-V3's (sigmoid with a bias, groups
  // scored by their two best, renormalised and scaled), and a sigmoid
  // router without renormalising.
  struct Form {
    const char *name;
    RouterRule rule;
  };
  std::vector<Form> forms = {
      {"softmax", {false, false, 1.0f, 0, 0, {}}},
      {"softmax, norm_topk_prob", {false, true, 1.0f, 0, 0, {}}},
      {"softmax, 2 of 3 groups, scaled", {false, false, 16.0f, 3, 2, {}}},
      {"sigmoid, bias, 2 of 3 groups, norm_topk_prob, scaled",
       {true, true, 2.5f, 3, 2, bias.ptr()}},
      {"sigmoid, 1 of 2 groups", {true, false, 1.0f, 2, 1, {}}}};
  for (const Form &f : forms) {
    std::string form = std::string(" (") + f.name + ")";
    std::vector<double> probs, weights;
    std::vector<int> chosen;
    route(logits.host, f.rule, probs, chosen, weights);
    Tensor gotProbs = filled(tokens * experts, 0),
           gotChosen = make(std::vector<double>(copies, 0), DType::I32),
           gotWeights = filled(copies, 0);
    kernels().moeRoute(logits.ptr(), tokens, experts, k, f.rule,
                       gotProbs.ptr(), gotChosen.ptr(), gotWeights.ptr());
    expectClose(gotProbs, probs, "moeRoute: probabilities" + form, 1e-6);
    EXPECT_EQ(readInts(gotChosen), chosen) << "moeRoute: chosen experts" << form;
    expectClose(gotWeights, weights, "moeRoute: weights" + form, 1e-6);

    // d(sum dweights . weights + scale sum_t balance . probs[t])/dlogits,
    // the chosen experts held; without and with a load-balancing term
    // (the softmax router's).
    Tensor balance = random(experts);
    const float scale = 0.375f;
    for (bool balanced : {false, true}) {
      if (balanced && f.rule.sigmoid)
        continue;
      std::vector<double> want(logits.host.size());
      for (size_t i = 0; i < want.size(); ++i) {
        auto loss = [&](double delta) {
          std::vector<double> z = logits.host, p, w;
          std::vector<int> c;
          z[i] += delta;
          route(z, f.rule, p, c, w);
          EXPECT_EQ(c, chosen) << "the step moved a choice";
          double sum = 0;
          for (int64_t j = 0; j < copies; ++j)
            sum += dweights.host[j] * w[j];
          for (int64_t t = 0; balanced && t < tokens; ++t)
            for (int64_t e = 0; e < experts; ++e)
              sum += double(scale) * balance.host[e] * p[t * experts + e];
          return sum;
        };
        const double h = 1e-5;
        want[i] = (loss(h) - loss(-h)) / (2 * h);
      }
      Tensor dlogits = filled(tokens * experts, 7);
      kernels().moeRouteBackward(
          gotProbs.ptr(), gotChosen.ptr(), gotWeights.ptr(), dweights.ptr(),
          tokens, experts, k, f.rule, balanced ? balance.ptr() : DevicePtr(),
          scale, dlogits.ptr());
      expectClose(dlogits, want,
                  "moeRouteBackward" + form +
                      (balanced ? " with the load-balancing loss" : ""),
                  1e-5 * f.rule.scale);
    }
  }

  // Grouped by expert: a stable counting sort of the copies.
  std::vector<double> probs, weights;
  std::vector<int> chosen;
  route(logits.host, forms[1].rule, probs, chosen, weights);
  std::vector<int> order(copies), position(copies), offsets(experts + 1, 0);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return chosen[a] < chosen[b]; });
  for (int64_t p = 0; p < copies; ++p) {
    position[order[p]] = int(p);
    ++offsets[chosen[order[p]] + 1];
  }
  for (int64_t e = 0; e < experts; ++e)
    offsets[e + 1] += offsets[e];
  Tensor chosenT = make(std::vector<double>(chosen.begin(), chosen.end()),
                        DType::I32),
         orderT = make(std::vector<double>(copies, -1), DType::I32),
         positionT = make(std::vector<double>(copies, -1), DType::I32),
         offsetsT = make(std::vector<double>(experts + 1, -1), DType::I32);
  kernels().moeSort(chosenT.ptr(), tokens, k, experts, orderT.ptr(),
                    positionT.ptr(), offsetsT.ptr());
  EXPECT_EQ(readInts(orderT), order) << "moeSort: order";
  EXPECT_EQ(readInts(positionT), position) << "moeSort: position";
  EXPECT_EQ(readInts(offsetsT), offsets) << "moeSort: offsets";
  records().push_back({target(), device->describe(), testName(),
                       "moeSort: order, position, offsets", 0, 0,
                       readInts(orderT) == order &&
                           readInts(positionT) == position &&
                           readInts(offsetsT) == offsets,
                       ""});

  // The load-balancing statistics, added to what is there, and the loss.
  {
    Tensor probsT = make(probs), stats = filled(2 * experts, 0.5);
    std::vector<double> want(2 * experts, 0.5);
    for (int64_t e = 0; e < experts; ++e) {
      want[e] += offsets[e + 1] - offsets[e];
      for (int64_t t = 0; t < tokens; ++t)
        want[experts + e] += probs[t * experts + e];
    }
    kernels().moeBalance(probsT.ptr(), offsetsT.ptr(), tokens, experts,
                         stats.ptr());
    expectClose(stats, want, "moeBalance", 1e-6);
    Tensor loss = make({0.25}, DType::F64);
    double wantLoss = 0;
    for (int64_t e = 0; e < experts; ++e)
      wantLoss += want[e] * want[experts + e];
    kernels().moeBalanceLoss(stats.ptr(), experts, 0.125, loss.ptr());
    expectClose(loss, {0.25 + 0.125 * wantLoss}, "moeBalanceLoss", 1e-6);
  }

  Tensor x = randomAct(tokens * hidden), gathered = filledAct(copies * hidden, 0);
  std::vector<double> wantGathered(copies * hidden);
  for (int64_t p = 0; p < copies; ++p)
    for (int64_t c = 0; c < hidden; ++c)
      wantGathered[p * hidden + c] = x.host[(order[p] / k) * hidden + c];
  kernels().moeGather(x.ptr(), orderT.ptr(), tokens, k, hidden,
                      gathered.ptr());
  expectClose(gathered, wantGathered, "moeGather");

  Tensor rows = randomAct(copies * hidden), weightsT = make(weights);
  for (bool weighted : {true, false}) {
    Tensor y = randomAct(tokens * hidden);
    std::vector<double> wantY = y.host;
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < k; ++j)
        for (int64_t c = 0; c < hidden; ++c)
          wantY[t * hidden + c] +=
              (weighted ? weights[t * k + j] : 1.0) *
              rows.host[position[t * k + j] * hidden + c];
    kernels().moeCombine(rows.ptr(), positionT.ptr(),
                         weighted ? weightsT.ptr() : DevicePtr(), tokens, k,
                         hidden, y.ptr());
    expectClose(y, wantY,
                weighted ? "moeCombine" : "moeCombine: unweighted "
                                          "(moeGather's backward)");
  }

  Tensor dy = randomAct(tokens * hidden), drows = filledAct(copies * hidden, 3),
         dweightsT = filled(copies, 3);
  std::vector<double> wantRows(copies * hidden), wantWeights(copies);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < k; ++j) {
      int64_t p = position[t * k + j];
      for (int64_t c = 0; c < hidden; ++c) {
        wantRows[p * hidden + c] = weights[t * k + j] * dy.host[t * hidden + c];
        wantWeights[t * k + j] +=
            rows.host[p * hidden + c] * dy.host[t * hidden + c];
      }
    }
  kernels().moeCombineBackward(rows.ptr(), positionT.ptr(), weightsT.ptr(),
                               dy.ptr(), tokens, k, hidden, drows.ptr(),
                               dweightsT.ptr());
  expectClose(drows, wantRows, "moeCombineBackward: rows");
  expectClose(dweightsT, wantWeights, "moeCombineBackward: weights", 1e-5);

  // The experts' grouped GEMMs over their rows, one expert chosen by no
  // copy (an empty group): forward (A B_g), its input's gradient
  // (A B_g^T, accumulating) and the weights' gradients (A_g^T B_g).
  const int64_t n = 3, groups = 4, rowsTotal = 9;
  std::vector<int> at = {0, 4, 4, 7, 9};
  Tensor groupRows =
      make(std::vector<double>(at.begin(), at.end()), DType::I32);
  Tensor a = randomAct(rowsTotal * hidden), b = randomAct(groups * hidden * n);
  auto groupOf = [&](int64_t r) {
    int64_t g = 0;
    while (r >= at[g + 1])
      ++g;
    return g;
  };
  for (bool transB : {false, true}) {
    float beta = transB ? 1.0f : 0.0f;
    // transB: B_g is n x hidden; A's rows then have n columns.
    int64_t inner = transB ? n : hidden, outer = transB ? hidden : n;
    Tensor in = randomAct(rowsTotal * inner);
    Tensor c = randomAct(rowsTotal * outer);
    std::vector<double> want(rowsTotal * outer);
    for (int64_t r = 0; r < rowsTotal; ++r)
      for (int64_t j = 0; j < outer; ++j) {
        double sum = beta * c.host[r * outer + j];
        const double *bg = b.host.data() + groupOf(r) * hidden * n;
        for (int64_t i = 0; i < inner; ++i)
          sum += in.host[r * inner + i] *
                 (transB ? bg[j * n + i] : bg[i * n + j]);
        want[r * outer + j] = sum;
      }
    kernels().groupedGemm(transB, groups, groupRows.ptr(), rowsTotal, outer,
                          inner, in.ptr(), inner, b.ptr(), n, hidden * n, beta,
                          c.ptr(), outer);
    expectClose(c, want, transB ? "groupedGemm: transposed, accumulating"
                                : "groupedGemm");
  }
  Tensor d = randomAct(rowsTotal * n), grads = random(groups * hidden * n);
  std::vector<double> wantGrads = grads.host;
  for (int64_t r = 0; r < rowsTotal; ++r)
    for (int64_t i = 0; i < hidden; ++i)
      for (int64_t j = 0; j < n; ++j)
        wantGrads[groupOf(r) * hidden * n + i * n + j] +=
            a.host[r * hidden + i] * d.host[r * n + j];
  kernels().groupedGemmWeights(groups, groupRows.ptr(), rowsTotal, hidden, n,
                               a.ptr(), hidden, d.ptr(), n, 1.0f, grads.ptr(),
                               hidden * n);
  expectClose(grads, wantGrads, "groupedGemmWeights (an empty group kept)");

  // A shared expert's sigmoid gate, forward and backward.
  Tensor z = random(tokens), s = randomAct(tokens * hidden),
         y = randomAct(tokens * hidden), g = filled(tokens, 0);
  std::vector<double> wantG(tokens), wantY = y.host;
  for (int64_t t = 0; t < tokens; ++t) {
    wantG[t] = 1.0 / (1.0 + std::exp(-z.host[t]));
    for (int64_t c = 0; c < hidden; ++c)
      wantY[t * hidden + c] += wantG[t] * s.host[t * hidden + c];
  }
  kernels().gateRowsForward(z.ptr(), s.ptr(), tokens, hidden, g.ptr(),
                            y.ptr());
  expectClose(g, wantG, "gateRowsForward: the gate");
  expectClose(y, wantY, "gateRowsForward");
  Tensor gate = make(wantG), dyGate = randomAct(tokens * hidden),
         ds = filledAct(tokens * hidden, 3), dz = filled(tokens, 3);
  std::vector<double> wantDs(tokens * hidden), wantDz(tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    double dot = 0;
    for (int64_t c = 0; c < hidden; ++c) {
      wantDs[t * hidden + c] = wantG[t] * dyGate.host[t * hidden + c];
      dot += s.host[t * hidden + c] * dyGate.host[t * hidden + c];
    }
    wantDz[t] = dot * wantG[t] * (1 - wantG[t]);
  }
  kernels().gateRowsBackward(gate.ptr(), s.ptr(), dyGate.ptr(), tokens, hidden,
                             ds.ptr(), dz.ptr());
  expectClose(ds, wantDs, "gateRowsBackward: rows");
  expectClose(dz, wantDz, "gateRowsBackward: the gate's logit");
}

std::vector<Target> getTargets() {
  std::vector<Target> targets;
  for (const BackendEntry &entry : getBackends())
    for (DType act : {DType::F32, DType::BF16})
      targets.push_back({entry.name, act});
  return targets;
}

INSTANTIATE_TEST_SUITE_P(Backends, Conformance,
                         ::testing::ValuesIn(getTargets()),
                         [](const auto &info) {
                           std::string name = info.param.getName();
                           std::replace(name.begin(), name.end(), '/', '_');
                           return name;
                         });

[[maybe_unused]] ::testing::Environment *const writer =
    ::testing::AddGlobalTestEnvironment(new ResultWriter);

} // namespace
