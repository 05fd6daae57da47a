//===- ExpertLoad.h - A step's tokens per expert ----------------*- C++ -*-===//
//
// How evenly a mixture of experts' router spread a step's tokens: each
// sparse layer's copies per expert over the step (its F passes add them,
// StageRunner::bindLoad), gathered from a rank's stages into one
// model-wide vector that the ranks then sum, and summarised as the worst
// layer's most-loaded expert over the mean (1: perfectly even; top_k x
// experts / top_k when every token picks the same experts). Load
// imbalance is what expert parallelism pays for (each expert's rank waits
// for the busiest), and what the load-balancing loss pushes down.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_EXPERTLOAD_H
#define SLUICE_RUNTIME_EXPERTLOAD_H

#include "Backend.h"
#include "Stage.h"

#include <vector>

namespace sluice::rt {

/// The model-wide vector's size: every sparse layer's experts, in model
/// order (0: the model has no mixture of experts).
int64_t getExpertLoadSize(const ModelConfig &model);

/// Adds this rank's stages' copies per expert of the step into `copies`
/// (getExpertLoadSize; zero where other ranks hold the layer). Waits for
/// `stream`.
Status addExpertLoad(const ModelConfig &model,
                     const std::vector<const StageRunner *> &stages,
                     Device &device, Stream &stream,
                     std::vector<double> &copies);

/// Per sparse layer, its most-loaded expert's copies over the mean; and
/// the largest of them.
struct ExpertLoad {
  std::vector<double> layers;
  double worst = 0;
};
ExpertLoad summarizeExpertLoad(const ModelConfig &model,
                               const std::vector<double> &copies);

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_EXPERTLOAD_H
