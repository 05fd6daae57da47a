//===- SliceTokens.cpp - Choose the token slices of a sequence ------------===//
//
// The pass adapts lib/Schedule/TokenSlicing.cpp to a model: the cost of a
// slice from the model's layers (FLOPs for Seq1F1B's computation-wise
// partition, Sun et al., 2024 §3.4; a cost model's latency through
// equation 9 for TeraPipe's dynamic programme, Li et al., 2021 §3.3).
//
//===----------------------------------------------------------------------===//

#include "sluice/Analysis/CostModel.h"
#include "sluice/Analysis/SliceLatency.h"
#include "sluice/Schedule/TokenSlicing.h"
#include "sluice/Transforms/Passes.h"

#include "ForEachPass.h"

#include "mlir/IR/Builders.h"

#include <algorithm>

namespace mlir::sluice {
#define GEN_PASS_DEF_SLICETOKENS
#include "sluice/Transforms/Passes.h.inc"
} // namespace mlir::sluice

using namespace mlir;
using namespace mlir::sluice;

/// The smallest divisor of `tokens` of at least tokens / 2048: the DP's
/// table stays near 2048 rows whatever the sequence.
static int64_t getAutoGranularity(int64_t tokens) {
  for (int64_t g = std::max<int64_t>(1, (tokens + 2047) / 2048); g <= tokens;
       ++g)
    if (tokens % g == 0)
      return g;
  return tokens;
}

/// Equations 7-8 of Sun et al., 2024: equal FLOPs of forward and
/// backward over every layer for each segment, attention growing with the
/// segment's prefix.
/// With a `granularity` g, in units of g tokens (context parallelism cuts
/// every slice into 2 cp chunks).
static std::vector<int64_t> getSeq1F1BLengths(ModelOp model, int64_t tokens,
                                              int64_t slices,
                                              int64_t granularity) {
  StageProfile profile = StageProfile::getWholeModel(model);
  int64_t g = std::max<int64_t>(1, granularity);
  auto flops = [&](int64_t length, int64_t prefix) {
    return profile.getPassFlops(PassKind::F, length * g, prefix * g) +
           profile.getPassFlops(PassKind::BW, length * g, prefix * g);
  };
  std::vector<int64_t> lengths =
      slicing::solveEqualCost(tokens / g, slices, flops);
  for (int64_t &length : lengths)
    length *= g;
  return lengths;
}

/// TeraPipe's dynamic programme (Li et al., 2021 §3.3, equation 9) over
/// a latency model fitted to the cost model, or per stage to the runtime's
/// measured slice timings (the slowest stage's latency). Records the fit's
/// error and the programme's latency on the model.
static FailureOr<std::vector<int64_t>>
getTeraPipeLengths(ModelOp model, int64_t tokens,
                   const TokenSlicingOptions &opts) {
  SmallVector<StageOp> stages = getStages(model);
  if (stages.empty())
    return model.emitOpError(
        "cannot slice tokens with method terapipe: its dynamic programme "
        "optimises over the pipeline's stages; run sluice-partition-stages "
        "first");
  std::string error;
  std::optional<CostModel> costs = CostModel::parse(opts.costs, error);
  if (!costs)
    return model.emitOpError("cannot slice tokens: ") << error;
  bool measured = costs->getKind() == CostModel::Kind::Measured;
  if (costs->getKind() != CostModel::Kind::Analytic && !measured)
    return model.emitOpError(
               "cannot slice tokens with method terapipe and costs '")
           << opts.costs
           << "': its latencies must depend on the slice's length and "
              "context (use a100, h100, h200, v100, or a sluice-run --profile "
              "file with --profile-slices)";
  int64_t granularity =
      opts.granularity ? opts.granularity : getAutoGranularity(tokens);
  if (granularity < 1 || tokens % granularity != 0)
    return model.emitOpError("cannot slice tokens: 'granularity' = ")
           << granularity << " does not divide 'seq_len' = " << tokens;
  if (opts.slices && tokens / granularity < opts.slices)
    return model.emitOpError("cannot slice tokens: ")
           << opts.slices << " slices of multiples of " << granularity
           << " tokens do not fit in " << tokens;
  std::vector<StageProfile> profiles;
  for (StageOp stage : stages)
    profiles.push_back(StageProfile::get(stage, model));
  std::vector<slicing::LatencyModel> fits;
  if (measured) {
    FailureOr<std::vector<slicing::LatencyModel>> perStage =
        fitMeasuredSliceLatency(profiles, *costs, tokens, error);
    if (failed(perStage))
      return model.emitOpError("cannot slice tokens: ") << error;
    fits = std::move(*perStage);
  } else {
    fits.push_back(fitSliceLatency(profiles, *costs, tokens, granularity));
  }
  double fitError = 0;
  for (const slicing::LatencyModel &m : fits)
    fitError = std::max(fitError, m.getRelativeError());
  auto slowest = [&](int64_t length, int64_t context) {
    double latency = 0;
    for (const slicing::LatencyModel &m : fits)
      latency = std::max(latency, m(length, context));
    return latency;
  };
  slicing::TeraPipeOptions dp;
  dp.stages = int(stages.size());
  dp.epsilon = opts.epsilon;
  dp.granularity = granularity;
  dp.slices = opts.slices;
  slicing::Slicing best = slicing::solveTeraPipe(tokens, slowest, dp);
  Builder builder(model.getContext());
  model.setSlicingFitErrorAttr(builder.getF64FloatAttr(fitError));
  model.setSlicingLatencyAttr(builder.getF64FloatAttr(best.latency));
  return best.lengths;
}

LogicalResult mlir::sluice::sliceTokens(ModelOp model,
                                        const TokenSlicingOptions &opts) {
  int64_t tokens = model.getSeqLen();
  llvm::StringRef method = stringifySlicingMethod(opts.method);
  if (opts.slices == 0 && opts.method != SlicingMethod::TeraPipe)
    return model.emitOpError("cannot slice tokens: 'slices' = auto needs "
                             "method terapipe (its dynamic programme picks "
                             "the count); method ")
           << method << " needs a number";
  if (opts.slices < 0)
    return model.emitOpError("cannot slice tokens: 'slices' must be at "
                             "least 1, got ")
           << opts.slices;
  if (opts.slices > tokens)
    return model.emitOpError("cannot slice tokens: 'slices' = ")
           << opts.slices
           << " is larger than the sequence ('seq_len' = " << tokens << ")";

  // A stated granularity holds for every method: each slice a multiple.
  int64_t g = opts.method == SlicingMethod::TeraPipe ? 1 : opts.granularity;
  if (g > 0 && tokens % g != 0)
    return model.emitOpError("cannot slice tokens: 'granularity' = ")
           << g << " does not divide 'seq_len' = " << tokens;
  if (g > 0 && tokens / g < opts.slices)
    return model.emitOpError("cannot slice tokens: ")
           << opts.slices << " slices of multiples of " << g
           << " tokens ('granularity'; sluice-compile --cp C makes it 2C) "
              "do not fit in 'seq_len' = "
           << tokens;
  std::vector<int64_t> lengths;
  if (opts.method == SlicingMethod::Uniform) {
    lengths = slicing::getUniformLengths(tokens / std::max<int64_t>(1, g),
                                         opts.slices);
    for (int64_t &length : lengths)
      length *= std::max<int64_t>(1, g);
  } else if (opts.method == SlicingMethod::Seq1F1B) {
    lengths = getSeq1F1BLengths(model, tokens, opts.slices, g);
  } else {
    FailureOr<std::vector<int64_t>> dp =
        getTeraPipeLengths(model, tokens, opts);
    if (failed(dp))
      return failure();
    lengths = std::move(*dp);
  }
  std::string problem = slicing::checkSlicing(tokens, lengths);
  if (!problem.empty())
    return model.emitOpError("cannot slice tokens: ") << problem;
  model.setTokenSlices(lengths);
  model.setSlicing(opts.method);
  return success();
}

namespace {
struct SliceTokensPass : ForEachPass<ModelOp, SliceTokensPass,
                                     mlir::sluice::impl::SliceTokensBase> {
  using ForEachPass::ForEachPass;
  LogicalResult apply(ModelOp model) {
    TokenSlicingOptions opts{/*slices=*/0, method, costs, epsilon, granularity};
    if (slices == "auto")
      return sliceTokens(model, opts);
    if (StringRef(slices).getAsInteger(10, opts.slices))
      return getOperation().emitError("sluice-slice-tokens: 'slices' must be "
                                      "a number or auto, got '")
             << slices << "'";
    if (opts.slices < 1)
      return getOperation().emitError(
                 "sluice-slice-tokens: 'slices' must be at least 1, got ")
             << opts.slices;
    return sliceTokens(model, opts);
  }
};
} // namespace
