//===- TrainingState.h - What a parameter costs to train --------*- C++ -*-===//
//
// The bytes of training state one parameter takes, as the runtime
// allocates them (docs/precision.md): fp32 weights, fp32 gradients and
// Adam's two fp32 moments, plus the working copy a mixed-precision plan
// computes with (bf16 weights; FP8 plans store the same). ZeRO-1 (Megatron-
// LM's distributed optimizer) keeps the weights, their working copy and
// the gradients whole on every replica, and gives each replica the
// moments of its part only, with its part of the summed gradients
// (GradientSync.h). One definition for everything that sizes memory: the
// compiler's summary and cost model, the plan search, and the runtime's
// check before it allocates (test/sluice-compile/memory-agrees.test).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_PLANFORMAT_TRAININGSTATE_H
#define SLUICE_PLANFORMAT_TRAININGSTATE_H

#include "sluice/PlanFormat/DType.h"

#include <cstdint>

namespace sluice::rt {

/// Bytes per parameter: `replicated` on every data-parallel replica,
/// `sharded` per parameter of the replica's part (ZeRO-1; 0 without), and
/// of all of it the optimizer's -- the moments, and under ZeRO-1 the
/// summed gradients' part -- per parameter of the replica's part.
struct ParameterStateBytes {
  int64_t replicated = 0, sharded = 0, optimizer = 0;

  /// A device's bytes for `parameters` parameters over `dp` replicas (a
  /// replica's part: ceil(parameters / dp)).
  int64_t forParameters(int64_t parameters, int64_t dp) const {
    int64_t part = dp > 1 ? (parameters + dp - 1) / dp : parameters;
    return parameters * replicated + part * sharded;
  }
  /// Of forParameters, the optimizer's.
  int64_t optimizerFor(int64_t parameters, int64_t dp) const {
    int64_t part =
        sharded > 0 && dp > 1 ? (parameters + dp - 1) / dp : parameters;
    return part * optimizer;
  }
};

/// The state of one parameter trained in `precision` with ZeRO stage
/// `zero` (0 or 1).
inline ParameterStateBytes getParameterStateBytes(const Precision &precision,
                                                  int zero) {
  const int64_t master = getSize(kMasterType);
  int64_t working = precision.isMixed() ? getSize(precision.activations) : 0;
  ParameterStateBytes bytes;
  if (zero >= 1) {
    // Weights, working copy and gradients whole; the moments and the
    // summed gradients of the replica's part.
    bytes.replicated = master + master + working;
    bytes.sharded = 2 * master + master;
    bytes.optimizer = bytes.sharded;
  } else {
    bytes.replicated = master + master + 2 * master + working;
    bytes.optimizer = 2 * master;
  }
  return bytes;
}

} // namespace sluice::rt

#endif // SLUICE_PLANFORMAT_TRAININGSTATE_H
