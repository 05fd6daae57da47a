//===- LayerCost.h - Parameters and FLOPs of model layers -------*- C++ -*-===//
//
// Closed-form parameter counts and forward FLOPs of the model-level layers.
// The formulas work on plain shape structs so that the schedule cost model
// and the token-slicing DP can evaluate them without building IR.
//
// FLOP accounting (one multiply-add = 2 FLOPs):
//  * every linear map of an (m x n) weight costs 2*m*n per token: the
//    parameters the block declares as linear maps (ParameterSpec::matmul),
//    plus what a feature adds (Feature::getForwardFlops);
//  * causal attention: a token at position t (0-based) attends to t + 1 keys,
//    costing 2 * heads * head_dim FLOPs per key for Q.K^T and the same for
//    P.V. Summing over a slice of `tokens` tokens after `prefix` tokens of
//    context gives 4 * heads * head_dim * (tokens*prefix + tokens*(tokens+1)/2)
//    -- the (i, j) dependence TeraPipe's latency model (§3.3) and Seq1F1B's
//    computation-wise partition (§3.4) rely on;
//  * norms, activations, residual adds and the softmax are O(hidden) or
//    O(vocab) per token and are left out, as in Narayanan et al. (2021);
//  * the embedding lookup is a gather: 0 FLOPs.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_ANALYSIS_LAYERCOST_H
#define SLUICE_ANALYSIS_LAYERCOST_H

#include "sluice/SluiceOps.h"

#include "sluice/PlanFormat/ModelConfig.h"

#include <cstdint>

namespace mlir::sluice {

/// One transformer layer: its spec (head_dim resolved) and the model's
/// hidden size. What it holds and computes comes from the block's
/// parameter list (sluice/Blocks/Parameters.h: the core's projections and
/// each feature's), so a new feature is counted without an edit here.
struct TransformerShape : ::sluice::rt::LayerConfig {
  int64_t hidden = 0;

  static TransformerShape get(TransformerLayerOp op);
};

/// Parameters of one transformer layer: every one its spec declares.
int64_t getParameterCount(const TransformerShape &shape);

/// Forward FLOPs of `tokens` consecutive tokens of one sequence that follow
/// `prefix` tokens of context (causal attention over prefix + own tokens).
double getForwardFlops(const TransformerShape &shape, int64_t tokens,
                       int64_t prefix);

/// Parameters held by a layer op (embedding, transformer or output layer).
/// A tied output layer still reports its projection: it is the same table
/// as the embedding, and a device that runs the output layer must hold it.
int64_t getParameterCount(Operation *layer);

/// Forward FLOPs per token of a layer op, averaged over a sequence of
/// `seqLen` tokens (attention grows with the position).
double getForwardFlopsPerToken(Operation *layer, int64_t seqLen);

/// Parameters of the whole model, counting a tied table once.
int64_t getModelParameterCount(ModelOp model);
/// The parameters one token uses: the model's, less every mixture of
/// experts' unchosen experts (Feature::getInactiveParameters).
int64_t getModelActiveParameterCount(ModelOp model);

} // namespace mlir::sluice

#endif // SLUICE_ANALYSIS_LAYERCOST_H
