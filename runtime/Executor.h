//===- Executor.h - Run a plan, or the single-device reference --*- C++ -*-===//
//
// A Trainer runs training steps of one model on one rank: the pipelined
// Executor follows its device's instruction list from a plan; the
// ReferenceTrainer runs the whole model unpartitioned -- the oracle a
// pipelined run must match.
//
// Threading: one thread per rank drives a trainer and its backend.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_EXECUTOR_H
#define SLUICE_RUNTIME_EXECUTOR_H

#include "Backend.h"
#include "Data.h"
#include "Parameters.h"
#include "Plan.h"
#include "Stage.h"
#include "Vocab.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sluice::rt {

struct TrainerOptions {
  uint64_t seed = 1;
  AdamConfig adam;
  /// Fault injection: this rank fails before running this instruction of
  /// its list (-1: never).
  int64_t failAtInstruction = -1;
};

/// Where a rank's step time went.
struct StepTimes {
  double total = 0;
  double compute = 0;  // inside passes
  double commWait = 0; // waiting for transfers and the loss all-reduce
  double data = 0;     // fetching the step's tokens
  /// The executor's own time: dispatch, bookkeeping, posting transfers.
  double overhead() const { return total - compute - commWait - data; }
};

/// Measured time per pass kind per stage, for --profile.
struct PassProfile {
  double seconds = 0;
  int64_t runs = 0;
  int64_t tokens = 0;
};

class Trainer {
public:
  virtual ~Trainer() = default;
  /// Runs one step's forward and backward passes; gradients accumulate.
  /// `meanLoss` is the loss of the whole step (every rank gets it).
  virtual Status runStep(int64_t step, double &meanLoss) = 0;
  /// Makes gradients final: sums those of parameters two ranks share.
  virtual Status finalizeGradients() = 0;
  /// One Adam step, then clears the gradients.
  virtual void applyOptimizer(int64_t step) = 0;
  virtual ParameterStore &getParameters() = 0;
};

/// Every parameter `device` holds: its stages' layers, then its vocabulary
/// table shards (a tied table once).
std::vector<ParameterSpec> getDeviceParameters(const Plan &plan, int device);
/// The scratch `device` needs: the largest of its stages' over every slice.
int64_t getDeviceWorkspaceFloats(const Plan &plan, int device);

class Executor final : public Trainer {
public:
  Executor(const Plan &plan, int device, Kernels &kernels, Communicator &comm,
           TokenSource &data, const TrainerOptions &options);

  Status runStep(int64_t step, double &meanLoss) override;
  Status finalizeGradients() override;
  void applyOptimizer(int64_t step) override;
  ParameterStore &getParameters() override { return parameters; }

  const StepTimes &getTimes() const { return times; }

  /// One timing of a stage's forward and backward (F, B and W, or F and
  /// BW) on a slice of `tokens` tokens after `context`, in seconds.
  struct SliceSample {
    int64_t tokens = 0, context = 0;
    double seconds = 0;
  };
  /// Times every stage of this device over a grid of slice lengths and
  /// contexts (the best of `repeats` runs each), on synthetic data: the
  /// samples equation 9 of papers/terapipe.txt is fitted to
  /// (`sluice-run --profile-slices`). Stage name -> samples.
  std::map<std::string, std::vector<SliceSample>> calibrateSlices(int repeats);
  /// (stage name, pass) -> measured time, over all steps run.
  const std::map<std::pair<std::string, std::string>, PassProfile> &
  getProfile() const {
    return profile;
  }

private:
  Status waitFor(Request &request);
  /// Waits (progressing the vocabulary streams) for the collectives an
  /// exec reads.
  void waitForCollectives(const Instruction &instr);
  float *slot(int32_t index) {
    return index < 0 ? nullptr : buffers[index].data();
  }

  const Plan &plan;
  int device;
  Kernels &kernels;
  Communicator &comm;
  TokenSource &data;
  TrainerOptions options;
  ParameterStore parameters;
  std::vector<std::unique_ptr<StageRunner>> stages; // by stage index
  /// The vocabulary shards, with Vocabulary Parallelism.
  std::unique_ptr<VocabularyShards> shards;
  std::vector<std::vector<float>> buffers;
  std::vector<float> workspace;
  /// The receive that will fill each slot, until its consumer waits on it.
  std::vector<std::unique_ptr<Request>> incoming;
  std::vector<std::unique_ptr<Request>> outgoing;
  /// Ranks sharing a tied embedding table, if the two ends are apart.
  std::vector<int> tiedGroup;
  StepTimes times;
  std::map<std::pair<std::string, std::string>, PassProfile> profile;
};

/// The unpartitioned model on this rank alone: each microbatch's forward
/// over the whole sequence, then its backward.
class ReferenceTrainer final : public Trainer {
public:
  ReferenceTrainer(const ModelConfig &model, int microbatches, Kernels &kernels,
                   TokenSource &data, const TrainerOptions &options);
  Status runStep(int64_t step, double &meanLoss) override;
  Status finalizeGradients() override { return Status::ok(); }
  void applyOptimizer(int64_t step) override;
  ParameterStore &getParameters() override { return parameters; }

private:
  ModelConfig model;
  int microbatches;
  Kernels &kernels;
  TokenSource &data;
  TrainerOptions options;
  ParameterStore parameters;
  std::unique_ptr<StageRunner> stage;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_EXECUTOR_H
