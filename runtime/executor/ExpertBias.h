//===- ExpertBias.h - Auxiliary-loss-free load balancing --------*- C++ -*-===//
//
// DeepSeek-V3's balancing without a loss (Liu et al., 2024, "DeepSeek-V3
// Technical Report", section 2.1.2): a sigmoid router chooses each token's
// experts by score plus a per-expert bias (`mlp.router.bias`), which no
// gradient reaches; instead, at the end of each step, every expert whose
// load over the step's whole batch is above its layer's mean has its bias
// lowered by gamma (`bias_update`), every one below raised by gamma (an
// expert exactly at the mean keeps its bias, as sign(0) = 0 in the
// paper's reference and Megatron-LM's).
//
// The load is the step's copies per expert summed over every pipeline
// device and data-parallel replica (Executor::expertLoad), so every rank
// holding a layer's router -- its tensor-parallel shards, its expert
// group's members, its replicas -- moves the bias alike, and a
// checkpoint, which holds it as a parameter, resumes it.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_EXPERTBIAS_H
#define SLUICE_RUNTIME_EXPERTBIAS_H

#include "Parameters.h"

#include <vector>

namespace sluice::rt {

/// One layer's rule: `bias` moved by `gamma` against each expert's load
/// `copies[e]` relative to their mean.
void updateExpertBias(const double *copies, int64_t experts, double gamma,
                      std::vector<float> &bias);

/// Applies the rule to every sparse layer of `model` with `bias_update`
/// whose router this rank holds in `store`, from the step's `copies`
/// (ExpertLoad.h: model-wide, summed over the run). A no-op for a model
/// without such a layer.
Status applyExpertBias(const ModelConfig &model,
                       const std::vector<double> &copies,
                       ParameterStore &store);

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_EXPERTBIAS_H
