//===- GpuStep.cpp - A whole training step on one GPU ---------------------===//
//
// sluice-bench-gpu-step PLAN.json [--steps N] [--warmup W] [--microbatches M]
//
// Trains a one-device plan (for example Llama-3.2-1B, bench/gpu.sh) on the
// CUDA backend and prints tokens/s and MFU: model FLOPs (each linear map
// 6 * in * out per token over F, B and W; causal attention; the output
// layer) per second against the peak of a bf16 GEMM measured in the same
// run, and against the H100 SXM's nominal 989 TFLOP/s. bench/torch_step.py
// runs the same model in PyTorch eager and torch.compile for comparison.
//
//===----------------------------------------------------------------------===//

#include "CudaDevice.h"
#include "Data.h"
#include "Executor.h"
#include "Plan.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace sluice::rt;

namespace {
[[noreturn]] void die(const std::string &message) {
  std::fprintf(stderr, "sluice-bench-gpu-step: error: %s\n", message.c_str());
  std::exit(1);
}

void check(const Status &st) {
  if (!st)
    die(st.message());
}

/// Training FLOPs per token of `model` (F + B + W = 3 x forward).
double trainingFlopsPerToken(const ModelConfig &model) {
  double h = double(model.hidden), s = double(model.seqLen), flops = 0;
  for (const LayerConfig &l : model.layers) {
    if (l.kind == LayerKind::Transformer) {
      double hd = double(l.heads * l.headDim),
             kv = double(l.kvHeads * l.headDim);
      double linear = h * (hd + 2 * kv) + hd * h +
                      (l.isGated() ? 3.0 : 2.0) * h * double(l.ffn);
      // Causal attention: a token attends to (s + 1) / 2 keys on average,
      // two products (scores, context) of hd each.
      double attention = 2.0 * hd * (s + 1) / 2.0;
      flops += 3.0 * 2.0 * (linear + attention);
    } else if (l.kind == LayerKind::Output) {
      flops += 3.0 * 2.0 * h * double(l.vocab);
    }
  }
  return flops;
}
} // namespace

int main(int argc, char **argv) {
  std::string planPath;
  int steps = 10, warmup = 3, microbatches = 0;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if ((flag == "--steps" || flag == "--warmup") && i + 1 < argc)
      (flag == "--steps" ? steps : warmup) = std::atoi(argv[++i]);
    else if (flag == "--microbatches" && i + 1 < argc)
      // Fewer microbatches than the plan's: a short step to profile.
      microbatches = std::atoi(argv[++i]);
    else if (flag == "--help" || flag == "-h") {
      std::printf("usage: sluice-bench-gpu-step PLAN.json [--steps N] "
                  "[--warmup W] [--microbatches M]\n");
      return 0;
    } else if (planPath.empty() && flag[0] != '-')
      planPath = flag;
    else
      die("unknown argument '" + flag + "' (--help lists them)");
  }
  if (planPath.empty())
    die("no plan given (--help)");
  Plan plan;
  check(loadPlan(planPath, plan));
  if (microbatches < 0 || steps < 1 || warmup < 0)
    die("--steps must be positive, --warmup and --microbatches not negative");
  if (microbatches > 0)
    plan.microbatches = microbatches;
  std::unique_ptr<cuda::CudaDevice> gpu;
  check(cuda::CudaDevice::open(0, gpu));
  Device &device = *gpu;

  // The peak, measured through the same cuBLASLt path.
  const int64_t n = 8192;
  DType act = plan.precision.activations;
  double peak = 0;
  {
    DeviceBuffer a, b, c;
    check(device.allocate(act, n * n, a));
    check(device.allocate(act, n * n, b));
    check(device.allocate(act, n * n, c));
    Kernels &k = device.getKernels(StreamKind::Compute);
    std::unique_ptr<Event> start = device.createEvent(),
                           end = device.createEvent();
    Stream &stream = device.getStream(StreamKind::Compute);
    k.gemm(false, false, n, n, n, 1.0f, a.get(), n, b.get(), n, 0.0f, c.get(),
           n);
    start->record(stream);
    for (int r = 0; r < 10; ++r)
      k.gemm(false, false, n, n, n, 1.0f, a.get(), n, b.get(), n, 0.0f, c.get(),
             n);
    end->record(stream);
    check(stream.synchronize());
    peak = 10 * 2.0 * n * n * n / end->secondsSince(*start);
  }

  std::unique_ptr<TokenSource> data = makeSyntheticTokens(
      1, plan.model.layers.front().vocab, plan.microbatches);
  TrainerOptions options;
  ReferenceTrainer trainer(plan.model, plan.microbatches, plan.precision,
                           device, *data, options);
  check(trainer.prepare());
  using Clock = std::chrono::steady_clock;
  Clock::time_point start;
  double loss = 0;
  for (int s = 0; s < warmup + steps; ++s) {
    if (s == warmup)
      start = Clock::now();
    check(trainer.runStep(s, loss));
    check(trainer.applyOptimizer(s + 1, 1.0f));
  }
  check(device.synchronize());
  double seconds =
      std::chrono::duration<double>(Clock::now() - start).count() / steps;
  double tokens = double(plan.microbatches) * double(plan.model.microBatch) *
                  double(plan.model.seqLen);
  double flops = trainingFlopsPerToken(plan.model) * tokens / seconds;
  std::printf("%s, %s, %s: %d microbatches of %lld x %lld tokens\n",
              device.describe().c_str(), plan.model.name.c_str(),
              plan.precision.getName(), plan.microbatches,
              (long long)plan.model.microBatch, (long long)plan.model.seqLen);
  std::printf("step %.1f ms, %.0f tokens/s, %.1f TFLOP/s model, MFU %.1f%% of "
              "the measured GEMM peak (%.0f TFLOP/s), %.1f%% of 989 TFLOP/s; "
              "last loss %.4f\n",
              seconds * 1e3, tokens / seconds, flops / 1e12,
              100.0 * flops / peak, peak / 1e12, 100.0 * flops / 989.4e12,
              loss);
  return 0;
}
