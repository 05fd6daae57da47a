//===- Progress.h - What rank 0 reports while training ----------*- C++ -*-===//
//
// The progress line every --log-every steps (loss, learning rate, gradient
// norm, throughput, model FLOP utilisation, step time, time left) and the
// same figures as one JSON object per line in a --metrics file.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_SESSION_PROGRESS_H
#define SLUICE_RUNTIME_SESSION_PROGRESS_H

#include "Status.h"
#include "sluice/PlanFormat/ModelConfig.h"

#include <cstdint>
#include <cstdio>
#include <string>

namespace sluice::rt {

struct ExpertLoad;

/// Model FLOPs of one sequence's forward and backward: three times the
/// forward's matrix multiplications (the linear maps at 2 FLOPs per
/// multiply-add, causal attention's two products, the output layer) --
/// the FLOPs of model FLOP utilisation (Chowdhery et al., "PaLM", 2022,
/// appendix B), which counts no recomputation and no elementwise work.
double getTrainingFlopsPerSequence(const ModelConfig &model);

/// Dense peak FLOP/s of one device running `precision` ("bf16", "fp32")
/// known from its description (NVIDIA's datasheet figures for the H100,
/// H200 and A100 SXM), or 0 when unknown (a CPU).
double getKnownPeakFlops(const std::string &device,
                         const std::string &precision);

class ProgressLog {
public:
  struct Setup {
    /// The optimizer steps this run takes: (firstStep, lastStep].
    int64_t firstStep = 0, lastStep = 0;
    int64_t logEvery = 1;
    double tokensPerStep = 0;
    /// Model FLOPs of a step, and the peak FLOP/s of all the run's devices
    /// together (0: unknown, no MFU).
    double flopsPerStep = 0, peakFlops = 0;
    /// The JSONL file, appended to ("": none).
    std::string metricsPath;
  };

  ~ProgressLog();
  Status open(const Setup &setup);
  /// Optimizer step `step` is done: it took `seconds`, its loss was
  /// `loss`, at learning rate `lr`, with gradient norm `gradNorm` (before
  /// clipping by `clipScale`). Prints and writes when the step is due;
  /// with `load` (a mixture of experts), its tokens per expert too.
  Status record(int64_t step, double loss, double lr, double gradNorm,
                double clipScale, double seconds,
                const ExpertLoad *load = nullptr);
  /// A validation loss at step `step`.
  Status evaluation(int64_t step, double loss, int64_t tokens);
  /// The run in one line: steps, time, throughput, first and last losses.
  void finish() const;

private:
  Status write(const std::string &line);

  Setup setup;
  std::FILE *metrics = nullptr;
  /// Since the last line: steps and seconds; since the start: seconds.
  int64_t pendingSteps = 0, steps = 0;
  double pendingSeconds = 0, totalSeconds = 0;
  double firstLoss = 0, lastLoss = 0;
  /// The first and last validation losses, if any.
  double firstValidation = -1, lastValidation = -1;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_SESSION_PROGRESS_H
