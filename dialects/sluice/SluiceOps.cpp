//===- SluiceOps.cpp - Sluice op verifiers and helpers --------------------===//
//
// Verifiers reject what no runtime could execute. Each rule has one message,
// spelled the same everywhere, naming the attribute and its value.
//
//===----------------------------------------------------------------------===//

#include "sluice/SluiceOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace mlir::sluice;

//===----------------------------------------------------------------------===//
// Shared rules
//===----------------------------------------------------------------------===//

/// Sizes are kept as plain I64Attr (not ConfinedAttr) so that the diagnostic
/// can carry the offending value, which the ODS-generated message cannot.
static LogicalResult verifyPositive(Operation *op, StringRef name,
                                    int64_t value) {
  if (value >= 1)
    return success();
  return op->emitOpError("'") << name << "' must be positive, got " << value;
}

/// Activations are `tensor<micro_batch x seq_len x hidden x dtype>` with
/// static, positive sizes.
static LogicalResult verifyActivationType(Operation *op, StringRef what,
                                          Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || tensor.getRank() != 3 || !tensor.hasStaticShape() ||
      llvm::any_of(tensor.getShape(), [](int64_t d) { return d < 1; }))
    return op->emitOpError() << what
                             << " must be a static tensor<micro_batch x "
                                "seq_len x hidden> with positive sizes, got "
                             << type;
  return success();
}

//===----------------------------------------------------------------------===//
// ModelOp
//===----------------------------------------------------------------------===//

EmbeddingOp ModelOp::getEmbedding() {
  auto range = getBody().getOps<EmbeddingOp>();
  return range.empty() ? EmbeddingOp() : *range.begin();
}

OutputLayerOp ModelOp::getOutputLayer() {
  auto range = getBody().getOps<OutputLayerOp>();
  return range.empty() ? OutputLayerOp() : *range.begin();
}

int64_t ModelOp::getHidden() {
  EmbeddingOp embedding = getEmbedding();
  if (!embedding)
    return 0;
  return cast<RankedTensorType>(embedding.getType()).getShape().back();
}

RankedTensorType ModelOp::getActivationType() {
  return RankedTensorType::get({getMicroBatch(), getSeqLen(), getHidden()},
                               getDtype());
}

LogicalResult ModelOp::verify() {
  if (failed(verifyPositive(*this, "seq_len", getSeqLen())) ||
      failed(verifyPositive(*this, "micro_batch", getMicroBatch())))
    return failure();
  if (!isa<FloatType>(getDtype()))
    return emitOpError("'dtype' must be a floating-point type, got ")
           << getDtype();
  return success();
}

/// Reports the second op of a kind that must be unique.
template <typename OpTy>
static LogicalResult verifyExactlyOne(ModelOp model, StringRef kind) {
  auto ops = llvm::to_vector(model.getBody().getOps<OpTy>());
  if (ops.empty())
    return model.emitOpError("has no ") << kind;
  if (ops.size() > 1)
    return ops[1]
        .emitOpError("duplicates the model's ")
        .append(kind)
        .attachNote(ops[0].getLoc())
        .append("first ", kind, " is here");
  return success();
}

LogicalResult ModelOp::verifyRegions() {
  if (failed(verifyExactlyOne<EmbeddingOp>(*this, "sluice.embedding")) ||
      failed(verifyExactlyOne<OutputLayerOp>(*this, "sluice.output_layer")))
    return failure();

  // Checked after the counts so that the rules above stay testable.
  if (unsigned args = getBody().getNumArguments())
    return emitOpError("body must not have block arguments: a model's tokens "
                       "and labels are implicit, got ")
           << args;

  EmbeddingOp embedding = getEmbedding();
  OutputLayerOp output = getOutputLayer();
  RankedTensorType expected = getActivationType();

  // The layers form one chain in block order: embedding, transformer
  // layers, output layer; each consumes exactly the activation before it.
  // Without block arguments nothing but the embedding can come first, and
  // only the output layer yields the tensor<f32> that sluice.return takes.
  Operation *previous = nullptr;
  for (Operation &op : getBody().front()) {
    if (isa<ReturnOp>(op))
      break;
    if (!isa<EmbeddingOp, TransformerLayerOp, OutputLayerOp>(op))
      return op.emitOpError("is not a model-level layer and cannot appear "
                            "in a sluice.model");
    if (previous && isa<OutputLayerOp>(previous))
      return op.emitOpError("comes after the model's sluice.output_layer")
          .attachNote(previous->getLoc())
          .append("output layer is here");
    if (previous && op.getOperand(0) != previous->getResult(0))
      return op
          .emitOpError("input does not chain: it is not the result of "
                       "the preceding layer")
          .attachNote(previous->getLoc())
          .append("preceding layer is here");
    if (!isa<OutputLayerOp>(op) && op.getResult(0).getType() != expected)
      return op.emitOpError("activation type ")
             << op.getResult(0).getType() << " does not chain: expected "
             << expected << " (micro_batch = " << getMicroBatch()
             << ", seq_len = " << getSeqLen() << ", hidden = " << getHidden()
             << ", dtype = " << getDtype() << ")";
    previous = &op;
  }

  if (std::optional<int64_t> positions = embedding.getPositions();
      positions && getSeqLen() > *positions)
    return emitOpError("'seq_len' = ")
           << getSeqLen()
           << " exceeds the embedding's 'positions' = " << *positions;

  if (output.getTied() && output.getVocab() != embedding.getVocab())
    return output.emitOpError("is tied to the embedding but 'vocab' = ")
        .append(output.getVocab(), " differs from the embedding's 'vocab' = ",
                embedding.getVocab())
        .attachNote(embedding.getLoc())
        .append("embedding is here");
  return success();
}

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

void EmbeddingOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getResult(), "emb");
}

LogicalResult EmbeddingOp::verify() {
  if (getVocab() < 1)
    return emitOpError("'vocab' must be at least 1, got ") << getVocab();
  if (std::optional<int64_t> positions = getPositions())
    if (failed(verifyPositive(*this, "positions", *positions)))
      return failure();
  return verifyActivationType(*this, "result", getType());
}

//===----------------------------------------------------------------------===//
// TransformerLayerOp
//===----------------------------------------------------------------------===//

void TransformerLayerOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getResult(), "x");
}

int64_t TransformerLayerOp::getHidden() {
  return cast<RankedTensorType>(getInput().getType()).getShape().back();
}

int64_t TransformerLayerOp::getHeadDimOrDefault() {
  if (std::optional<int64_t> headDim = getHeadDim())
    return *headDim;
  return getHidden() / getHeads();
}

LogicalResult TransformerLayerOp::verify() {
  if (failed(verifyActivationType(*this, "input", getInput().getType())) ||
      failed(verifyPositive(*this, "heads", getHeads())) ||
      failed(verifyPositive(*this, "kv_heads", getKvHeads())) ||
      failed(verifyPositive(*this, "ffn", getFfn())))
    return failure();
  if (std::optional<int64_t> headDim = getHeadDim()) {
    if (failed(verifyPositive(*this, "head_dim", *headDim)))
      return failure();
  } else if (getHidden() % getHeads() != 0) {
    return emitOpError("hidden size ")
           << getHidden() << " is not divisible by 'heads' = " << getHeads();
  }
  if (getHeads() % getKvHeads() != 0)
    return emitOpError("'heads' = ")
           << getHeads()
           << " is not divisible by 'kv_heads' = " << getKvHeads();
  return success();
}

//===----------------------------------------------------------------------===//
// OutputLayerOp
//===----------------------------------------------------------------------===//

void OutputLayerOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getLoss(), "loss");
}

LogicalResult OutputLayerOp::verify() {
  if (getVocab() < 1)
    return emitOpError("'vocab' must be at least 1, got ") << getVocab();
  return verifyActivationType(*this, "input", getInput().getType());
}

#define GET_OP_CLASSES
#include "sluice/SluiceOps.cpp.inc"
