//===- ReferenceTrainer.h - The single-device oracle ------------*- C++ -*-===//
//
// The whole model, unpartitioned, on one rank: what every pipelined,
// sharded or replicated run must match (sluice-run --reference,
// --check-against).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_REFERENCETRAINER_H
#define SLUICE_RUNTIME_REFERENCETRAINER_H

#include "Data.h"
#include "Stage.h"
#include "Trainer.h"

#include <memory>
#include <vector>

namespace sluice::rt {

/// The unpartitioned model on this rank alone: each microbatch's forward
/// over the whole sequence, then its backward.
class ReferenceTrainer final : public Trainer {
public:
  ReferenceTrainer(const ModelConfig &model, int microbatches,
                   const Precision &precision, Device &device,
                   TokenSource &data, const TrainerOptions &options);
  Status prepare() override;
  Status runStep(int64_t step, double &meanLoss) override;
  Status evaluateStep(int64_t step, double &meanLoss) override;
  Status finalizeGradients() override { return Status::ok(); }
  Status gradientNorm(double &norm) override;
  Status applyOptimizer(int64_t step, float gradientScale) override;
  ParameterStore &getParameters() override { return parameters; }
  Status expertLoad(std::vector<double> &copies) override;

  /// The logits of the position after `ids` (one sequence, at most the
  /// model's sequence length): the forward alone, what sampling draws
  /// from (Sampling.h).
  Status getNextLogits(const std::vector<int32_t> &ids,
                       std::vector<float> &logits);

private:
  /// A step's microbatches: forward, and with `gradients` backward.
  Status run(int64_t step, bool gradients, double &meanLoss);
  ModelConfig model;
  int microbatches;
  Precision precision;
  Device &device;
  TokenSource &data;
  TrainerOptions options;
  ParameterStore parameters;
  std::unique_ptr<StageRunner> stage;
  DeviceBuffer forward, weight, kv, work, tokens, lossSum, normSum, fp8, load;
  std::vector<int32_t> hostTokens;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_REFERENCETRAINER_H
