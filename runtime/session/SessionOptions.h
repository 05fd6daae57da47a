//===- SessionOptions.h - What a training session is asked to do -*- C++ -*-===//
//
// Every choice of a training session, as plain values: sluice-run fills it
// from its flags (docs/sluice-run.md names each), a benchmark or a tuner
// fills it in code. A field's default is the flag's.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_SESSION_SESSIONOPTIONS_H
#define SLUICE_RUNTIME_SESSION_SESSIONOPTIONS_H

#include "Sampling.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sluice::rt {

/// A setting a resumed run takes from its checkpoint unless it was given
/// again (`given`): the value is the default otherwise.
template <class T> struct Given {
  T value;
  bool given = false;
  Given(T value) : value(std::move(value)) {}
  Given &operator=(T v) {
    value = std::move(v);
    given = true;
    return *this;
  }
};

struct SessionOptions {
  /// What notes and progress lines are signed with.
  std::string programName = "sluice-run";
  std::string planPath;
  /// "cpu" or "cuda"; "auto", "mpi" or "nccl"; "global" or "plan".
  std::string backend = "cpu";
  std::string transport = "auto";
  std::string commOrder = "auto";
  /// "bf16", "fp32", or "" for the plan's.
  std::string precision;
  /// Run the model unpartitioned in this one process.
  bool reference = false;
  int64_t steps = 1;

  // The optimizer and the seed (a resumed run's recorded ones unless given).
  Given<float> learningRate = 1e-3f;
  Given<float> minLearningRate = 0.0f;
  Given<float> weightDecay = 0.0f;
  Given<int64_t> warmupSteps = 0;
  Given<std::string> lrDecay = std::string("none");
  /// 0: the last step of this run (or the recorded one).
  int64_t lrDecaySteps = 0;
  Given<double> clipGrad = 0.0;
  Given<uint64_t> seed = 1;

  // Data and validation.
  std::string dataPath, dataDtype;
  int64_t evalEvery = 0;
  Given<double> valFraction = 0.05;
  /// 0: the whole steps the held-out part fills, at most 32.
  int64_t evalSteps = 0;

  // Checks against a dumped run. `measureOnly` (--measure-against): the
  // same comparison printed, never judged (a band being measured, e.g.
  // bf16 against fp32 on a GPU).
  std::string dumpGrads, checkAgainst;
  double lossTolerance = 1e-5, gradTolerance = 1e-4;
  bool measureOnly = false;

  // Progress.
  int64_t logEvery = 1;
  std::string metricsPath;
  double peakTflops = 0;

  // Text generation after the steps (Sampling.h): the prompt as text
  // (encoded with --data's tokenizer) or as ids.
  SamplingOptions sampling;
  std::string prompt;
  std::vector<int32_t> promptIds;

  // Weights in and out.
  std::string saveDir, loadDir, loadHF, saveHF;
  int64_t saveEvery = 0;
  int keepCheckpoints = 1;
  int64_t loadStep = -1;

  // Measurements of the pipelined run.
  std::string profilePath, tracePath;
  bool profileSlices = false;
  bool timing = false;

  // Resources and faults.
  /// GiB the ranks on one host (or GPU) may use; negative: what it has.
  double memoryLimit = -1;
  double commTimeout = 600;
  /// Overlapped groups (dualpipev) run interleaved on host devices
  /// (--overlap-groups; off: one pass after the other).
  bool overlapGroups = true;
  /// Benchmarks only (--slow-all-to-all MS): the least milliseconds every
  /// expert all-to-all takes.
  double slowAllToAllMs = 0;
  /// --threads: the CPU backend's threads a rank, its kernels' and
  /// OpenBLAS's (0: OPENBLAS_NUM_THREADS if set, else this host's cores
  /// over the ranks Open MPI started on it).
  int threads = 0;
  int64_t failAtInstruction = -1;
  int failRank = 0;
  bool failHang = false;
  /// SIGINT and SIGTERM stop the run after the step in flight, saved
  /// (Interrupt.h); sluice-run asks for it, a benchmark need not.
  bool stopOnSignal = false;
  /// Fault injection: --fail-rank is sent SIGINT after this step (> 0).
  int64_t interruptAtStep = 0;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_SESSION_SESSIONOPTIONS_H
