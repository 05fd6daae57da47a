//===- GpuLayer.cpp - One transformer layer's F, B and W on a GPU ---------===//
//
// sluice-bench-gpu-layer [--hidden H] [--ffn F] [--heads N] [--seq S]
//                        [--precision bf16|fp32] [--repeats R]
//
// Times the CUDA backend's F, B and W of one GPT layer (default h 4096,
// ffn 16384, 32 heads, 4096 tokens, bf16; the CUDA backend issue's target:
// F + B + W <= 10 ms on an H100) and, in the same run, a large bf16 GEMM
// through the same cuBLASLt path: the peak the layer is measured against.
// Times are medians of R runs, from CUDA events. Prints figures; never
// fails on a slow result.
//
//===----------------------------------------------------------------------===//

#include "CudaDevice.h"
#include "Parameters.h"
#include "Stage.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace sluice::rt;

namespace {
[[noreturn]] void die(const std::string &message) {
  std::fprintf(stderr, "sluice-bench-gpu-layer: error: %s\n", message.c_str());
  std::exit(1);
}

void check(const Status &st) {
  if (!st)
    die(st.message());
}

/// Median seconds of `repeats` runs of `work` on the compute stream.
double timeIt(Device &device, int repeats, const std::function<void()> &work) {
  Stream &stream = device.getStream(StreamKind::Compute);
  std::unique_ptr<Event> start = device.createEvent(),
                         end = device.createEvent();
  std::vector<double> times;
  work(); // warm-up: cuBLASLt plans, caches
  check(stream.synchronize());
  for (int r = 0; r < repeats; ++r) {
    start->record(stream);
    work();
    end->record(stream);
    check(stream.synchronize());
    times.push_back(end->secondsSince(*start));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}
} // namespace

int main(int argc, char **argv) {
  int64_t hidden = 4096, ffn = 16384, heads = 32, seq = 4096;
  int repeats = 10;
  Precision precision = Precision::bf16();
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        die(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--hidden")
      hidden = std::stoll(value());
    else if (flag == "--ffn")
      ffn = std::stoll(value());
    else if (flag == "--heads")
      heads = std::stoll(value());
    else if (flag == "--seq")
      seq = std::stoll(value());
    else if (flag == "--repeats")
      repeats = std::stoi(value());
    else if (flag == "--precision") {
      if (!Precision::parse(value(), precision))
        die("--precision is bf16 or fp32");
    } else if (flag == "--help" || flag == "-h") {
      std::printf("usage: sluice-bench-gpu-layer [--hidden H] [--ffn F] "
                  "[--heads N] [--seq S] [--precision bf16|fp32] "
                  "[--repeats R]\n");
      return 0;
    } else {
      die("unknown flag '" + flag + "' (--help lists them)");
    }
  }
  if (hidden % heads != 0)
    die("--hidden must be a multiple of --heads");

  std::unique_ptr<cuda::CudaDevice> gpu;
  check(cuda::CudaDevice::open(0, gpu));
  Device &device = *gpu;
  Kernels &kernels = device.getKernels(StreamKind::Compute);
  DType act = precision.activations;

  // The peak: an 8192-cube GEMM in the layer's input type.
  const int64_t n = 8192;
  DeviceBuffer a, b, c;
  check(device.allocate(act, n * n, a));
  check(device.allocate(act, n * n, b));
  check(device.allocate(act, n * n, c));
  double gemm = timeIt(device, repeats, [&] {
    kernels.gemm(false, false, n, n, n, 1.0f, a.get(), n, b.get(), n, 0.0f,
                 c.get(), n);
  });
  double peak = 2.0 * n * n * n / gemm;
  a.reset(), b.reset(), c.reset();

  ModelConfig model;
  model.name = "layer";
  model.seqLen = seq;
  model.microBatch = 1;
  model.hidden = hidden;
  LayerConfig layer;
  layer.kind = LayerKind::Transformer;
  layer.heads = heads;
  layer.kvHeads = heads;
  layer.headDim = hidden / heads;
  layer.ffn = ffn;
  layer.bias = true;
  model.layers = {layer};
  ParameterStore store;
  for (const ParameterSpec &spec : getLayerParameters(model, 0))
    store.add(spec);
  check(store.allocate(device, precision, 1));
  StageRunner stage(model, {0}, store, kernels, precision);
  SliceShape s{1, seq, 0};
  auto buffer = [&](int64_t bytes) {
    DeviceBuffer out;
    check(device.allocateBytes(act, bytes, out));
    return out;
  };
  DeviceBuffer state = buffer(stage.getForwardStateBytes(s)),
               wstate = buffer(stage.getWeightStateBytes(s)),
               kv = buffer(stage.getKeyValueBytes(1)),
               work = buffer(stage.getWorkspaceBytes(s)),
               in = buffer(seq * hidden * getSize(act)),
               out = buffer(seq * hidden * getSize(act)),
               grad = buffer(seq * hidden * getSize(act)),
               inGrad = buffer(seq * hidden * getSize(act));
  kernels.fill(in.get(), 0.01, seq * hidden);
  kernels.fill(grad.get(), 0.01, seq * hidden);
  TokenRows none{DevicePtr(), seq + 1};
  double f = timeIt(device, repeats, [&] {
    stage.forward(s, none, in.get(), out.get(), state.get(), kv.get(),
                  work.get(), DevicePtr());
  });
  double bw = timeIt(device, repeats, [&] {
    stage.backwardInput(s, none, grad.get(), inGrad.get(), state.get(),
                        wstate.get(), kv.get(), work.get(), 1.0f);
  });
  double w = timeIt(device, repeats, [&] {
    stage.backwardWeight(s, none, state.get(), wstate.get(), work.get());
  });

  // Model FLOPs: each linear map 2 * tokens * in * out per pass (F, the
  // input gradients in B, the weight gradients in W); causal attention
  // 2 * 2 * hd * s(s+1)/2 forward and twice that in B.
  double t = double(seq), h = double(hidden);
  double linear = 2.0 * t * (h * 3 * h + h * h + 2 * h * double(ffn));
  double attention = 2.0 * h * t * (t + 1);
  double flopsF = linear + attention, flopsB = linear + 2 * attention,
         flopsW = linear;
  std::printf("%s, one GPT layer: hidden %lld, ffn %lld, %lld heads, %lld "
              "tokens, %s\n",
              device.describe().c_str(), (long long)hidden, (long long)ffn,
              (long long)heads, (long long)seq, precision.getName());
  std::printf("GEMM %lld^3 %s: %.3f ms, %.1f TFLOP/s (the peak below)\n",
              (long long)n, precision.getName(), gemm * 1e3, peak / 1e12);
  auto line = [&](const char *pass, double seconds, double flops) {
    std::printf("%-5s %8.3f ms  %7.1f TFLOP/s  %5.1f%% of peak\n", pass,
                seconds * 1e3, flops / seconds / 1e12,
                100.0 * flops / seconds / peak);
  };
  line("F", f, flopsF);
  line("B", bw, flopsB);
  line("W", w, flopsW);
  line("F+B+W", f + bw + w, flopsF + flopsB + flopsW);
  std::printf("target: F+B+W <= 10 ms on an H100 (%s)\n",
              f + bw + w <= 0.010 ? "met" : "not met");
  return 0;
}
