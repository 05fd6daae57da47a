//===- Step.cpp - Whole training steps through the session users run ------===//
//
// sluice-bench-step PLAN.json [--backend cpu|cuda] [--precision P]
//                   [--steps N] [--warmup W]
//                   [--samples FILE.json] [--name NAME]
//
// Trains a one-device plan (for example Llama-3.2-1B, tools/gpu/run.sh)
// through the runtime's training session -- the Executor and everything
// around it that `sluice-run` runs, not a bare trainer -- and prints the
// step time, tokens/s and MFU: model FLOPs (each linear map 6 * in * out
// per token over F, B and W; causal attention; the output layer) per
// second against the peak of the backend's GEMM measured in the same run,
// and, on a GPU, against the H100 SXM's nominal 989 TFLOP/s.
// Each step is timed by device events on the compute stream between the
// ends of consecutive optimizer steps, every stream drained at each end
// (bench/Samples.h): the median, minimum, maximum and spread of --steps
// steps after --warmup are printed, and --samples writes the raw times.
// bench/torch_step.py runs the same model in PyTorch's recipes and writes
// the same document; bench/step_table.py joins them (docs/benchmarks.md).
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "MpiCommunicator.h"
#include "Samples.h"
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
  std::string samplesPath, name;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if ((flag == "--steps" || flag == "--warmup") && i + 1 < argc) {
      char *end = nullptr;
      long value = std::strtol(argv[++i], &end, 10);
      if (*argv[i] == '\0' || *end != '\0' || value < 0 || value > 100000)
        die(flag + " takes a count, not '" + argv[i] + "'");
      (flag == "--steps" ? steps : warmup) = int(value);
    } else if (flag == "--backend" && i + 1 < argc)
      options.backend = argv[++i];
    else if (flag == "--precision" && i + 1 < argc)
      options.precision = argv[++i];
    else if (flag == "--samples" && i + 1 < argc)
      samplesPath = argv[++i];
    else if (flag == "--name" && i + 1 < argc)
      name = argv[++i];
    else if (flag == "--help" || flag == "-h") {
      std::printf("usage: sluice-bench-step PLAN.json [--backend cpu|cuda "
                  "(default cuda)] [--precision bf16|fp8|fp32 (the plan's)] "
                  "[--steps N (10)] [--warmup W (3, at least 1)] "
                  "[--samples FILE.json] [--name NAME]\n");
      MPI_Finalize();
      return 0;
    } else if (options.planPath.empty() && flag[0] != '-')
      options.planPath = flag;
    else
      die("unknown argument '" + flag + "' (--help lists them)");
  }
  if (options.planPath.empty())
    die("no plan given (--help)");
  // The first step's end is the first timed step's start.
  if (steps < 1 || warmup < 1)
    die("--steps and --warmup must each be at least 1");
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
  // Session::open refused a plan for more ranks than this one process.
  const Plan &plan = session->getPlan();
  Device &device = session->getDevice();
  bool gpu = options.backend == "cuda";
  double peak = measureGemmPeak(device, plan.precision.activations, gpu);

  // At the end of each step: drain every stream, then mark the compute
  // stream. A step's time is the device time between two marks, so work a
  // step leaves queued cannot slip into the next one's figure.
  Stream &compute = device.getStream(StreamKind::Compute);
  std::vector<std::unique_ptr<Event>> marks;
  std::vector<double> hostSeconds;
  double loss = 0;
  session->setStepHook([&](const StepRecord &r) {
    for (int k = 0; k < kStreamKinds; ++k)
      check(device.getStream(StreamKind(k)).synchronize());
    marks.push_back(device.createEvent());
    marks.back()->record(compute);
    check(compute.synchronize());
    hostSeconds.push_back(r.seconds);
    loss = r.loss;
  });
  if (Outcome trained = session->train(); !trained)
    die(trained.getReport());

  sluice::bench::Samples samples;
  samples.name = name.empty() ? "sluice " + std::string(plan.precision.getName())
                              : name;
  for (size_t i = size_t(warmup); i < marks.size(); ++i)
    samples.ms.push_back(1e3 * marks[i]->secondsSince(*marks[i - 1]));
  double median = samples.median() / 1e3;
  double tokens = double(plan.microbatches) * double(plan.model.microBatch) *
                  double(plan.model.seqLen);
  double flops = trainingFlopsPerToken(plan.model) * tokens / median;
  std::printf("%s, %s, %s: %d microbatches of %lld x %lld tokens, through "
              "the training session (the Executor)\n",
              device.describe().c_str(), plan.model.name.c_str(),
              plan.precision.getName(), plan.microbatches,
              (long long)plan.model.microBatch, (long long)plan.model.seqLen);
  std::printf("step %s, %.0f tokens/s, %.1f TFLOP/s model, MFU %.1f%% of the "
              "measured GEMM peak (%.1f TFLOP/s)",
              samples.summary().c_str(), tokens / median, flops / 1e12,
              100.0 * flops / peak, peak / 1e12);
  if (gpu)
    std::printf(", %.1f%% of 989 TFLOP/s", 100.0 * flops / 989.4e12);
  std::printf("; last loss %.4f\n", loss);

  if (!samplesPath.empty()) {
    nlohmann::json &a = samples.attributes;
    a["tool"] = "sluice-bench-step";
    a["device"] = device.describe();
    a["plan"] = options.planPath;
    a["model"] = plan.model.name;
    a["precision"] = plan.precision.getName();
    a["tokens_per_step"] = tokens;
    a["warmup"] = warmup;
    a["model_flops_per_token"] = trainingFlopsPerToken(plan.model);
    a["mfu_989"] = flops / 989.4e12;
    a["gemm_peak_tflops"] = peak / 1e12;
    a["last_loss"] = loss;
    if (gpu) {
      // The CUDA backend's attention backward (AttentionCudnn.cpp reads the
      // same variable; deterministic unless it is 0).
      const char *flag = std::getenv("SLUICE_ATTENTION_DETERMINISTIC");
      a["deterministic_attention"] = !(flag && std::string(flag) == "0");
    }
    a["host_seconds"] = std::vector<double>(hostSeconds.begin() + warmup,
                                         hostSeconds.end());
    check(writeFileAtomically(samplesPath, samples.toJson()));
  }
  MPI_Finalize();
  return 0;
}
