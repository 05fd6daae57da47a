//===- Session.h - A training session on one rank ---------------*- C++ -*-===//
//
// Everything between a plan file and trained weights, as a library: the
// options checked, the plan read and proven, this rank's place on the
// pp x dp x tp mesh with its device and communicators, the optimizer
// settings (a resumed run's recorded ones unless given again), the
// tokens, the trainer -- the pipelined Executor or the unpartitioned
// reference -- with weights loaded from a checkpoint or a Hugging Face
// directory; then the steps with evaluation, gradient checks, checkpoints
// and the reports after them. sluice-run is flag parsing over it; the
// step benchmarks and anything else that trains use it the same way:
//
//   SessionOptions options;
//   options.planPath = "plan.json";
//   options.steps = 100;      // the whole run's, a resumed run's included
//   std::unique_ptr<Session> session;
//   Outcome outcome = Session::open(options, world, session);
//   if (outcome)
//     outcome = session->train();
//
// Every rank of the job calls both, in the same order. A failure comes
// back as an Outcome saying which ranks know of it (Outcome.h).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_SESSION_SESSION_H
#define SLUICE_RUNTIME_SESSION_SESSION_H

#include "Checkpoint.h"
#include "Data.h"
#include "Executor.h"
#include "HfTokenizer.h"
#include "ProcessGroup.h"
#include "Outcome.h"
#include "Plan.h"
#include "SessionOptions.h"
#include "Tokens.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace sluice::rt {

class ProgressLog;
namespace session {
struct RankBackend;
}

/// What a session's steps leave for the reports after them.
struct RunResult {
  std::vector<double> losses, gradNorms;
  /// The gradient furthest from --check-against's, relatively.
  double worstGrad = 0;
  std::string worstName;
};

/// One optimizer step done, for whoever watches the run (every rank).
struct StepRecord {
  int64_t step = 0; // the optimizer step, from 1
  double loss = 0, gradNorm = 0, learningRate = 0, clipScale = 1;
  double seconds = 0;
};

class Session {
public:
  ~Session();

  /// Everything before the first step. Collective over `world`, which
  /// must outlive the session. On failure `out` holds what was opened, so
  /// that abortJob can stop the peers through it.
  static Outcome open(const SessionOptions &options, HostGroup &world,
                      std::unique_ptr<Session> &out);

  /// Stops every rank of the job now (after an Outcome only this rank
  /// knows of: its peers may be waiting for it): the communicators the
  /// session opened first (NCCL's are aborted so no kernel waits on),
  /// then MPI's.
  [[noreturn]] void abortJob(int code);

  /// Runs the steps, then what the options ask for after them: the
  /// gradient check, checkpoints, the Hugging Face directory, the
  /// profile, trace and timing. A failed --check-against is a failure
  /// everywhere, reported after the saves.
  Outcome train();

  /// Called on every rank after each step's update.
  void setStepHook(std::function<void(const StepRecord &)> hook) {
    stepHook = std::move(hook);
  }

  const Plan &getPlan() const { return plan; }
  const SessionOptions &getOptions() const { return options; }
  const TrainingSettings &getSettings() const { return settings; }
  Trainer &getTrainer() { return *trainer; }
  /// The pipelined run's executor; null for the reference.
  Executor *getExecutor() { return executor; }
  Device &getDevice();
  const RunResult &getResult() const { return result; }
  /// Optimizer steps the weights have taken (a resumed run's included).
  int64_t getStepsDone() const { return done; }
  /// The signal (SIGINT, SIGTERM) train() stopped on, or 0: the run is
  /// saved, and a tool exits 128 + it, as a shell reports a signal.
  int getStopSignal() const { return stopSignal; }

private:
  Session(const SessionOptions &options, HostGroup &world);

  void openAll();
  void loadJobPlan();
  void makeTrainer();
  void loadWeights();

  void runSteps();
  /// After a step: whether any rank was asked to stop (a signal), agreed
  /// by all so that every rank stops after the same step.
  bool isStopAgreed();
  /// A stopped run's checkpoint and the line that says how to resume.
  void saveStopped();
  /// Step `s` of this run's steps; `last` is its final one.
  void runStep(int64_t s, ProgressLog &progress, bool last);
  double evaluate();
  /// Before the first step: what the run trains (RunHeader.h), and where
  /// a resumed run starts.
  void printHeader();
  /// A resumed run on another batch than its checkpoint's says so; the
  /// settings then record this run's.
  void noteBatchChange();
  void writeDumps();
  void saveCheckpointNow(int64_t stepsDone);
  /// Whether this rank writes its parameters into a checkpoint (or the
  /// gathering of one): the first replica's ranks, under expert
  /// parallelism the first expert group's.
  bool writesWeights() const;
  /// What it writes: all, or an expert group's later member its experts.
  WrittenParameters getWrittenParameters() const;
  void saveHuggingFaceNow(int64_t stepsDone);
  void noteUntrainedOutputs() const;
  /// The pipeline's communicator (rank = device).
  Communicator &comm();

  int stopSignal = 0;
  SessionOptions options;
  HostGroup &world;
  /// Rank 0 of the world prints and writes what one file or line says.
  bool root = false;
  Plan plan;
  std::unique_ptr<session::RankBackend> backend;
  TrainingSettings settings;
  session::RunTokens tokens;
  std::unique_ptr<Trainer> trainer;
  Executor *executor = nullptr;
  int64_t done = 0;
  RunResult result;
  std::function<void(const StepRecord &)> stepHook;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_SESSION_SESSION_H
