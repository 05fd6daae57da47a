//===- LayerCost.cpp - Parameters and FLOPs of model layers ---------------===//

#include "sluice/Analysis/LayerCost.h"

#include "sluice/Blocks/Feature.h"
#include "sluice/Blocks/Parameters.h"
#include "sluice/PlanFormat/ModelConfig.h"

#include <vector>

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::sluice;

TransformerShape TransformerShape::get(TransformerLayerOp op) {
  TransformerShape shape;
  static_cast<::sluice::rt::LayerConfig &>(shape) = op.getSpec();
  shape.headDim = op.getHeadDimOrDefault();
  shape.hidden = op.getHidden();
  return shape;
}

namespace {
/// Parameters of one norm over `hidden` features.
int64_t getNormParams(NormKind norm, int64_t hidden) {
  return norm == NormKind::layernorm ? 2 * hidden : hidden;
}

/// The layer's parameters (whole) and how many of them are linear maps'
/// weights, which the matmul FLOPs scale with.
struct Counts {
  int64_t params = 0, matmul = 0;
};
Counts count(const TransformerShape &s) {
  // The parameter list is built by name (every feature's parameters), and
  // the search prices thousands of stages whose layers share a handful of
  // shapes: the last few shapes' counts are kept, per thread (the search
  // compiles on several).
  struct Known {
    TransformerShape shape;
    Counts counts;
  };
  thread_local std::vector<Known> known;
  for (const Known &k : known)
    if (k.shape.hidden == s.hidden &&
        static_cast<const ::sluice::rt::LayerConfig &>(k.shape) == s)
      return k.counts;
  ::sluice::rt::ModelConfig model;
  model.hidden = s.hidden;
  Counts counts;
  for (const ::sluice::rt::ParameterSpec &p :
       ::sluice::rt::getTransformerParameters(model, s, ""))
    (p.matmul ? counts.matmul : counts.params) += p.size();
  counts.params += counts.matmul;
  if (known.size() >= 16)
    known.erase(known.begin());
  known.push_back({s, counts});
  return counts;
}
} // namespace

int64_t mlir::sluice::getParameterCount(const TransformerShape &s) {
  return count(s).params;
}

double mlir::sluice::getForwardFlops(const TransformerShape &s, int64_t tokens,
                                     int64_t prefix) {
  double t = static_cast<double>(tokens);
  double linear = 2.0 * static_cast<double>(count(s).matmul) * t;
  double keysAttended = ::sluice::rt::getKeysAttended(tokens, prefix, s.window);
  // Q K^T over head_dim, P V over the value heads' size.
  double attention = 2.0 *
                     static_cast<double>(s.heads * (s.headDim + s.getValueDim())) *
                     keysAttended;
  ::sluice::rt::ModelConfig model;
  model.hidden = s.hidden;
  ::sluice::blocks::LayerShape shape =
      ::sluice::blocks::getLayerShape(model, s, "", {});
  double features = 0;
  for (const ::sluice::blocks::Feature *f :
       ::sluice::blocks::getEnabledFeatures(s))
    features += f->getForwardFlops(shape, tokens, prefix);
  return linear + attention + features;
}

int64_t mlir::sluice::getParameterCount(Operation *layer) {
  return llvm::TypeSwitch<Operation *, int64_t>(layer)
      .Case([](EmbeddingOp op) {
        int64_t hidden = op.getType().getShape().back();
        return (op.getVocab() + op.getPositions().value_or(0)) * hidden;
      })
      .Case([](TransformerLayerOp op) {
        return getParameterCount(TransformerShape::get(op));
      })
      .Case([](OutputLayerOp op) {
        int64_t hidden =
            cast<RankedTensorType>(op.getInput().getType()).getShape().back();
        return op.getVocab() * hidden + getNormParams(op.getNorm(), hidden);
      })
      .Case([](FinalNormOp op) {
        int64_t hidden = op.getType().getShape().back();
        return getNormParams(op.getNorm(), hidden);
      })
      .Default([](Operation *) { return int64_t(0); });
}

double mlir::sluice::getForwardFlopsPerToken(Operation *layer, int64_t seqLen) {
  return llvm::TypeSwitch<Operation *, double>(layer)
      .Case([&](TransformerLayerOp op) {
        return getForwardFlops(TransformerShape::get(op), seqLen, 0) /
               static_cast<double>(seqLen);
      })
      .Case([](OutputLayerOp op) {
        int64_t hidden =
            cast<RankedTensorType>(op.getInput().getType()).getShape().back();
        return 2.0 * static_cast<double>(hidden * op.getVocab());
      })
      .Default([](Operation *) { return 0.0; });
}

int64_t mlir::sluice::getModelParameterCount(ModelOp model) {
  int64_t total = 0;
  for (Operation &op : model.getBody().front())
    total += getParameterCount(&op);
  OutputLayerOp output = model.getOutputLayer();
  if (output && output.getTied())
    total -= output.getVocab() * model.getHidden();
  return total;
}

int64_t mlir::sluice::getModelActiveParameterCount(ModelOp model) {
  int64_t total = getModelParameterCount(model);
  for (Operation &op : model.getBody().front()) {
    auto layer = dyn_cast<TransformerLayerOp>(op);
    if (!layer)
      continue;
    TransformerShape s = TransformerShape::get(layer);
    ::sluice::rt::ModelConfig config;
    config.hidden = s.hidden;
    ::sluice::blocks::LayerShape shape =
        ::sluice::blocks::getLayerShape(config, s, "", {});
    for (const ::sluice::blocks::Feature *f :
         ::sluice::blocks::getEnabledFeatures(s))
      total -= f->getInactiveParameters(shape);
  }
  return total;
}
