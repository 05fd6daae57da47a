//===- Step.cpp - Whole training steps through the session users run ------===//
//
// sluice-bench-step PLAN.json [--backend cpu|cuda] [--steps N] [--warmup W]
//
// Trains a one-device plan (for example Llama-3.2-1B, tools/gpu/run.sh)
// through the runtime's training session -- the Executor and everything
// around it that `sluice-run` runs, not a bare trainer -- and prints the
// step time, tokens/s and MFU: model FLOPs (each linear map 6 * in * out
// per token over F, B and W; causal attention; the output layer) per
// second against the peak of the backend's GEMM measured in the same run,
// and, on a GPU, against the H100 SXM's nominal 989 TFLOP/s.
// bench/torch_step.py runs the same model in PyTorch eager and
// torch.compile for comparison.
//
//===----------------------------------------------------------------------===//

#include "MpiCommunicator.h"
#include "Session.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace sluice::rt;

namespace {
[[noreturn]] void die(const std::string &message) {
  std::fprintf(stderr, "sluice-bench-step: error: %s\n", message.c_str());
  MPI_Finalize();
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

/// FLOP/s of the device's own GEMM in the plan's activation type: n x n x
/// n products on the compute stream, timed by its events.
double measureGemmPeak(Device &device, DType type, bool gpu) {
  const int64_t n = gpu ? 8192 : 1024;
  const int repeats = gpu ? 10 : 3;
  DeviceBuffer a, b, c;
  check(device.allocate(type, n * n, a));
  check(device.allocate(type, n * n, b));
  check(device.allocate(type, n * n, c));
  Kernels &k = device.getKernels(StreamKind::Compute);
  std::unique_ptr<Event> start = device.createEvent(),
                         end = device.createEvent();
  Stream &stream = device.getStream(StreamKind::Compute);
  k.gemm(false, false, n, n, n, 1.0f, a.get(), n, b.get(), n, 0.0f, c.get(), n);
  start->record(stream);
  for (int r = 0; r < repeats; ++r)
    k.gemm(false, false, n, n, n, 1.0f, a.get(), n, b.get(), n, 0.0f, c.get(),
           n);
  end->record(stream);
  check(stream.synchronize());
  return repeats * 2.0 * double(n) * double(n) * double(n) /
         end->secondsSince(*start);
}
} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  SessionOptions options;
  options.programName = "sluice-bench-step";
  options.backend = "cuda";
  int steps = 10, warmup = 3;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if ((flag == "--steps" || flag == "--warmup") && i + 1 < argc)
      (flag == "--steps" ? steps : warmup) = std::atoi(argv[++i]);
    else if (flag == "--backend" && i + 1 < argc)
      options.backend = argv[++i];
    else if (flag == "--help" || flag == "-h") {
      std::printf("usage: sluice-bench-step PLAN.json [--backend cpu|cuda "
                  "(default cuda)] [--steps N] [--warmup W]\n");
      MPI_Finalize();
      return 0;
    } else if (options.planPath.empty() && flag[0] != '-')
      options.planPath = flag;
    else
      die("unknown argument '" + flag + "' (--help lists them)");
  }
  if (options.planPath.empty())
    die("no plan given (--help)");
  if (steps < 1 || warmup < 0)
    die("--steps must be positive, --warmup not negative");
  options.steps = warmup + steps;
  // The progress line after the last step only.
  options.logEvery = options.steps;

  MpiCommunicator world;
  if (world.size() != 1)
    die("runs one process (a one-device plan), without mpirun");
  std::unique_ptr<Session> session;
  Outcome opened = Session::open(options, world, session);
  if (!opened)
    die(opened.getReport());
  const Plan &plan = session->getPlan();
  if (plan.getRanks() != 1)
    die("'" + options.planPath + "' is for " +
        std::to_string(plan.getRanks()) +
        " ranks; the step benchmark runs a one-device plan");
  Device &device = session->getDevice();
  bool gpu = options.backend == "cuda";
  double peak = measureGemmPeak(device, plan.precision.activations, gpu);

  std::vector<double> seconds;
  double loss = 0;
  session->setStepHook([&](const StepRecord &r) {
    seconds.push_back(r.seconds);
    loss = r.loss;
  });
  if (Outcome trained = session->train(); !trained)
    die(trained.getReport());
  // The steps after the warmup: their median, and the spread.
  std::vector<double> timed(seconds.begin() + warmup, seconds.end());
  std::sort(timed.begin(), timed.end());
  double median = timed[timed.size() / 2];
  double tokens = double(plan.microbatches) * double(plan.model.microBatch) *
                  double(plan.model.seqLen);
  double flops = trainingFlopsPerToken(plan.model) * tokens / median;
  std::printf("%s, %s, %s: %d microbatches of %lld x %lld tokens, through "
              "the training session (the Executor)\n",
              device.describe().c_str(), plan.model.name.c_str(),
              plan.precision.getName(), plan.microbatches,
              (long long)plan.model.microBatch, (long long)plan.model.seqLen);
  std::printf("step %.1f ms (median of %zu, %.1f-%.1f), %.0f tokens/s, %.1f "
              "TFLOP/s model, MFU %.1f%% of the measured GEMM peak (%.1f "
              "TFLOP/s)",
              median * 1e3, timed.size(), timed.front() * 1e3,
              timed.back() * 1e3, tokens / median, flops / 1e12,
              100.0 * flops / peak, peak / 1e12);
  if (gpu)
    std::printf(", %.1f%% of 989 TFLOP/s", 100.0 * flops / 989.4e12);
  std::printf("; last loss %.4f\n", loss);
  MPI_Finalize();
  return 0;
}
