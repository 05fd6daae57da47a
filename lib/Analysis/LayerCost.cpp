//===- LayerCost.cpp - Parameters and FLOPs of model layers ---------------===//

#include "sluice/Analysis/LayerCost.h"

#include "sluice/PlanFormat/ModelConfig.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::sluice;

TransformerShape TransformerShape::get(TransformerLayerOp op) {
  TransformerShape shape;
  shape.hidden = op.getHidden();
  shape.heads = op.getHeads();
  shape.kvHeads = op.getKvHeads();
  shape.headDim = op.getHeadDimOrDefault();
  shape.ffn = op.getFfn();
  shape.norm = op.getNorm();
  shape.mlp = op.getMlp();
  shape.bias = op.getBias();
  shape.qkvBias = op.getQkvBias();
  shape.qkNorm = op.getQkNorm();
  shape.postNorms = op.getPostNorms();
  shape.window = op.getWindow().value_or(0);
  return shape;
}

static bool isGated(MlpKind mlp) { return mlp != MlpKind::gelu; }

/// Parameters of one norm over `hidden` features.
static int64_t getNormParams(NormKind norm, int64_t hidden) {
  return norm == NormKind::layernorm ? 2 * hidden : hidden;
}

/// Weight entries of the linear maps only (what the matmul FLOPs scale with).
static int64_t getMatmulParams(const TransformerShape &s) {
  int64_t q = s.hidden * s.heads * s.headDim;
  int64_t kv = 2 * s.hidden * s.kvHeads * s.headDim;
  int64_t o = s.heads * s.headDim * s.hidden;
  int64_t mlp = (isGated(s.mlp) ? 3 : 2) * s.hidden * s.ffn;
  return q + kv + o + mlp;
}

int64_t mlir::sluice::getParameterCount(const TransformerShape &s) {
  int64_t norms = s.postNorms ? 4 : 2;
  int64_t params = getMatmulParams(s) + norms * getNormParams(s.norm, s.hidden);
  if (s.qkNorm) // one RMS gain for the query heads, one for the key heads
    params += 2 * s.headDim;
  if (s.bias || s.qkvBias) // q, k and v projections
    params += s.heads * s.headDim + 2 * s.kvHeads * s.headDim;
  if (s.bias) // o, then the feed-forward maps
    params += s.hidden + (isGated(s.mlp) ? 2 : 1) * s.ffn + s.hidden;
  return params;
}

double mlir::sluice::getForwardFlops(const TransformerShape &s, int64_t tokens,
                                     int64_t prefix) {
  double t = static_cast<double>(tokens);
  double linear = 2.0 * static_cast<double>(getMatmulParams(s)) * t;
  double keysAttended = ::sluice::rt::getKeysAttended(tokens, prefix, s.window);
  double attention =
      4.0 * static_cast<double>(s.heads * s.headDim) * keysAttended;
  return linear + attention;
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
