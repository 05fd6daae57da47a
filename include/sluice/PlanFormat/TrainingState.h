//===- TrainingState.h - What a parameter costs to train --------*- C++ -*-===//
//
// The bytes of training state one parameter takes, as the runtime
// allocates them (docs/precision.md): fp32 weights, fp32 gradients and
// Adam's two fp32 moments, plus the working copy a mixed-precision plan
// computes with (bf16 weights; FP8 plans store the same). The ZeRO stages
// (Rajbhandari et al., 2020, section 5) shard more of it over the D
// data-parallel replicas:
//
//   stage  whole on every replica          the replica's part (of 1/D)
//   0      weights, working, grads, moms   --
//   1      weights, working, grads         moments, summed gradients
//   2      weights, working                moments, gradient accumulator
//   3      -- (gathered when used)         weights, moments, gradients
//
// ZeRO-1 is Megatron-LM's distributed optimizer as Sluice runs it
// (GradientSync.h). Under a pipeline, ZeRO-2 reduce-scatters each layer's
// gradients as its W computes them, so the full-size gradient exists for
// one layer at a time; ZeRO-3 gathers each layer's working weights before
// its pass and, re-sharding every pass, frees them after (two layers'
// copies live: the current and the prefetched next), or, re-sharding per
// step, keeps the device's whole gathered copy for the step
// (docs/design/zero-and-context-parallelism.md). One definition for
// everything that sizes memory: the compiler's summary and cost model,
// the plan search, and the runtime's check before it allocates
// (test/sluice-compile/memory-agrees.test).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_PLANFORMAT_TRAININGSTATE_H
#define SLUICE_PLANFORMAT_TRAININGSTATE_H

#include "sluice/PlanFormat/DType.h"

#include <cstdint>
#include <string>

namespace sluice::rt {

/// When ZeRO-3 frees a layer's gathered weights (torchtitan's
/// reshard_after_forward): after every pass that used them, or at the
/// step's end (gathered once, at the stage's first pass).
enum class Reshard : uint8_t { EveryPass, Step };

/// Bytes per parameter: `replicated` on every data-parallel replica,
/// `sharded` per parameter of the replica's part (0 without ZeRO), and of
/// all of it the optimizer's -- the moments and the summed gradients'
/// part -- per parameter of the replica's part; `transient`, per
/// parameter of the device's largest layer, what exists only while a
/// layer is worked on, and `transientPart`, per parameter of the
/// replica's part of it (ZeRO-2 and 3's scratch for a layer's
/// reduce-scattered part before it is added to the accumulator).
struct ParameterStateBytes {
  int64_t replicated = 0, sharded = 0, optimizer = 0, transient = 0,
          transientPart = 0;

  /// A device's bytes at rest for `parameters` parameters over `dp`
  /// replicas (a replica's part: ceil(parameters / dp)).
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
  /// The transient bytes of a device whose largest layer (parameters one
  /// shard of it holds) is `largestLayer`, over `dp` replicas.
  int64_t forLargestLayer(int64_t largestLayer, int64_t dp) const {
    int64_t part = dp > 1 ? (largestLayer + dp - 1) / dp : largestLayer;
    return largestLayer * transient + part * transientPart;
  }
};

/// The state of one parameter trained in `precision` with ZeRO stage
/// `zero` (0 to 3; `reshard` matters for 3 only).
inline ParameterStateBytes
getParameterStateBytes(const Precision &precision, int zero,
                       Reshard reshard = Reshard::EveryPass) {
  const int64_t master = getSize(kMasterType);
  int64_t working = precision.isMixed() ? getSize(precision.activations) : 0;
  // What a pass computes with: the working copy, or an fp32 plan's
  // weights themselves.
  int64_t used = working ? working : master;
  ParameterStateBytes bytes;
  switch (zero) {
  case 0:
    bytes.replicated = master + master + 2 * master + working;
    bytes.optimizer = 2 * master;
    break;
  case 1:
    // Weights, working copy and gradients whole; the moments and the
    // summed gradients of the replica's part.
    bytes.replicated = master + master + working;
    bytes.sharded = 2 * master + master;
    bytes.optimizer = bytes.sharded;
    break;
  case 2:
    // Weights and working copy whole; the moments and the gradient
    // accumulator of the replica's part; one layer's full-size gradient
    // until its reduce-scatter.
    bytes.replicated = master + working;
    bytes.sharded = 2 * master + master;
    bytes.optimizer = bytes.sharded;
    bytes.transient = master;
    bytes.transientPart = master;
    break;
  default:
    // The replica's part of the weights, the moments and the gradients;
    // the gathers send the part cast to the working type as they go.
    bytes.sharded = master + 2 * master + master;
    bytes.optimizer = 2 * master + master;
    bytes.transientPart = master;
    if (reshard == Reshard::Step) {
      // The device's gathered copy, kept for the step.
      bytes.replicated = used;
      bytes.transient = master;
    } else {
      // Two layers gathered (the current and the prefetched next) and
      // one layer's full-size gradient.
      bytes.transient = 2 * used + master;
    }
    break;
  }
  return bytes;
}

/// Why ZeRO stage `zero` cannot run on a mesh of `dp` replicas ("" if it
/// can). One rule for the compiler and the plan reader.
inline std::string checkZeroStage(int64_t zero, int64_t dp) {
  if (zero < 0 || zero > 3)
    return "ZeRO stage " + std::to_string(zero) +
           " is not one Sluice runs (0, 1, 2 or 3)";
  if (zero >= 1 && dp < 2)
    return "ZeRO stage " + std::to_string(zero) +
           " shards the optimizer state over the data-parallel replicas, "
           "but dp = " + std::to_string(dp) + " (it needs at least 2)";
  return "";
}

/// The plan format's and the flag's names of a re-shard choice.
inline const char *getReshardName(Reshard reshard) {
  return reshard == Reshard::Step ? "step" : "every-pass";
}
inline bool parseReshard(const std::string &name, Reshard &out) {
  if (name == "every-pass")
    out = Reshard::EveryPass;
  else if (name == "step")
    out = Reshard::Step;
  else
    return false;
  return true;
}

} // namespace sluice::rt

#endif // SLUICE_PLANFORMAT_TRAININGSTATE_H
