//===- SliceLatency.h - t(i, j) of a partitioned model ----------*- C++ -*-===//
//
// The latency TeraPipe's dynamic programme minimises over
// (Li et al., 2021 §3.3): for a slice of i tokens after j tokens of
// context, the slowest stage's forward and backward plus the transfers of
// the slice's activation and gradient -- and equation 9's model of it,
// t(i, 0) for every i and a bilinear context term fitted by least squares.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_ANALYSIS_SLICELATENCY_H
#define SLUICE_ANALYSIS_SLICELATENCY_H

#include "sluice/Analysis/CostModel.h"
#include "sluice/Schedule/TokenSlicing.h"

namespace mlir::sluice {

/// t(length, context) on the stages, from the cost model (seconds).
double measureSliceLatency(llvm::ArrayRef<StageProfile> stages,
                           const CostModel &costs, int64_t length,
                           int64_t context);

/// Equation 9 for sequences of `tokens` tokens: t(i, 0) measured for every
/// i, the context term fitted on a grid of lengths (multiples of
/// `granularity`, growing geometrically) and contexts.
slicing::LatencyModel fitSliceLatency(llvm::ArrayRef<StageProfile> stages,
                                      const CostModel &costs, int64_t tokens,
                                      int64_t granularity);

/// Equation 9 for each stage from a measured profile's slice samples
/// (`sluice-run --profile-slices`): t(i, 0) interpolated linearly between
/// the measured lengths, the context term fitted to the samples with
/// context. Fails, naming the stage, if a stage has no samples at context
/// 0.
FailureOr<std::vector<slicing::LatencyModel>>
fitMeasuredSliceLatency(llvm::ArrayRef<StageProfile> stages,
                        const CostModel &costs, int64_t tokens,
                        std::string &error);

} // namespace mlir::sluice

#endif // SLUICE_ANALYSIS_SLICELATENCY_H
