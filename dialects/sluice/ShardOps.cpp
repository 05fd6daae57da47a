//===- ShardOps.cpp - Tensor-parallel shard bodies ------------------------===//
//
// What sluice-shard-tensors writes inside a layer: each shard's part of the
// projections and the collectives between them, and the traffic they
// move.
//
//===----------------------------------------------------------------------===//

#include "OpRules.h"

#include "sluice/SluiceOps.h"
#include "sluice/PlanFormat/Format.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::detail;

//===----------------------------------------------------------------------===//
// Tensor-parallel shard bodies
//===----------------------------------------------------------------------===//

/// The shard count of the layer whose body holds `op`.
static int64_t getShardCount(Operation *op) {
  Operation *layer = op->getParentOp();
  if (auto shards = layer->getAttrOfType<IntegerAttr>("shards"))
    return shards.getValue().getSExtValue();
  return 1;
}

/// `slice` is `whole` with its token dimension (1) divided by `shards`.
static bool isTokenSlice(Type slice, Type whole, int64_t shards) {
  auto s = dyn_cast<RankedTensorType>(slice);
  auto w = dyn_cast<RankedTensorType>(whole);
  if (!s || !w || s.getRank() != 3 || w.getRank() != 3 ||
      s.getElementType() != w.getElementType())
    return false;
  return s.getDimSize(0) == w.getDimSize(0) &&
         s.getDimSize(2) == w.getDimSize(2) &&
         s.getDimSize(1) * shards == w.getDimSize(1);
}

/// A body is the forward pass of one of `shards` shards; `whole` is the
/// layer's activation type, `yield` what the body must yield when it is
/// not a token slice of `whole` (the output layer's loss). Returns the
/// body's sequence-parallel form through `sliced`.
LogicalResult mlir::sluice::detail::verifyShardBody(Operation *layer,
                                     std::optional<int64_t> shards,
                                     Region &body, bool hasInput, Type whole,
                                     Type loss) {
  if (body.empty()) {
    if (shards)
      return layer->emitOpError("'shards' = ")
             << *shards << " needs a shard body";
    return success();
  }
  if (!shards)
    return layer->emitOpError("has a shard body but no 'shards'");
  // One shard's body is expert parallelism's alone: it spells the
  // dispatch of tokens to the experts' members.
  bool dispatches = !body.front().getOps<ExpertDispatchOp>().empty();
  if (*shards < 2 && !(*shards == 1 && dispatches))
    return layer->emitOpError("'shards' must be at least 2, got ")
           << *shards
           << (*shards == 1 ? " (a body of one shard must dispatch tokens to "
                              "experts: sluice.expert_dispatch)"
                            : "");
  Block &block = body.front();
  if (block.getNumArguments() != (hasInput ? 1u : 0u))
    return layer->emitOpError("shard body must take ")
           << (hasInput ? "the layer's input" : "no argument");
  auto yield = dyn_cast<LayerYieldOp>(block.getTerminator());
  if (!yield)
    return layer->emitOpError("shard body must end in sluice.layer_yield");
  // The body's input, and the activation it yields: whole, or the shard's
  // token slice with sequence parallelism.
  auto isActivation = [&](Type t) {
    return t == whole || isTokenSlice(t, whole, *shards);
  };
  if (hasInput && !isActivation(block.getArgument(0).getType()))
    return layer->emitOpError("shard body takes ")
           << block.getArgument(0).getType() << ", neither " << whole
           << " nor its token slice for " << *shards << " shards";
  Type yielded = yield.getValue().getType();
  if (loss ? yielded != loss : !isActivation(yielded))
    return layer->emitOpError("shard body yields ")
           << yielded << ", not " << (loss ? loss : whole);
  if (hasInput && !loss && yielded != block.getArgument(0).getType())
    return layer->emitOpError("shard body yields ")
           << yielded << " but takes " << block.getArgument(0).getType()
           << ": the activation must stay whole or stay sliced";
  return success();
}

/// The last dimension of `value`'s tensor type.
int64_t mlir::sluice::detail::getWidth(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape().back();
}

LogicalResult TpGatherOp::verify() {
  if (!isTokenSlice(getInput().getType(), getType(), getShardCount(*this)))
    return emitOpError("result ")
           << getType() << " is not the operand " << getInput().getType()
           << " gathered over " << getShardCount(*this)
           << " shards along the tokens";
  return success();
}

LogicalResult TpScatterOp::verify() {
  if (!isTokenSlice(getType(), getInput().getType(), getShardCount(*this)))
    return emitOpError("result ")
           << getType() << " is not a token slice of the operand "
           << getInput().getType() << " for " << getShardCount(*this)
           << " shards";
  return success();
}

/// The members a layer's experts split over must divide them, and the
/// received rows are the tokens' width and between the balanced share
/// (tokens x top_k) and the most any routing sends (members x tokens x
/// min(top_k, experts / members)): the program's capacity picks within
/// (ExpertCapacity.h). `tokens` is the operand's or the result's.
static LogicalResult verifyExpertCollective(Operation *op, int64_t members,
                                            Type tokensType, Type rowsType) {
  auto layer = dyn_cast<TransformerLayerOp>(op->getParentOp());
  const ::sluice::rt::LayerConfig *spec = layer ? &layer.getSpec() : nullptr;
  if (!spec || spec->experts == 0)
    return op->emitOpError("moves tokens to experts, but its layer has none "
                           "('experts')");
  if (members < 1 || spec->experts % members != 0)
    return op->emitOpError("'members' = ")
           << members << " does not divide the layer's " << spec->experts
           << " experts";
  auto tokens = cast<RankedTensorType>(tokensType);
  auto rows = cast<RankedTensorType>(rowsType);
  int64_t perToken = std::min(spec->topK, spec->experts / members);
  int64_t most = members * tokens.getDimSize(1) * perToken,
          least = std::min(most, tokens.getDimSize(1) * spec->topK);
  if (tokens.getRank() != 3 || rows.getRank() != 3 ||
      tokens.getElementType() != rows.getElementType() ||
      tokens.getDimSize(0) != rows.getDimSize(0) ||
      tokens.getDimSize(2) != rows.getDimSize(2) ||
      rows.getDimSize(1) < least || rows.getDimSize(1) > most)
    return op->emitOpError("the received rows ")
           << rowsType << " are not " << tokensType
           << "'s rows: between its tokens x " << spec->topK
           << " copies (the balanced share, " << least << ") and " << members
           << " x its tokens x " << perToken << " (every routing, " << most
           << ")";
  return success();
}

LogicalResult ExpertDispatchOp::verify() {
  return verifyExpertCollective(*this, getMembers(), getInput().getType(),
                                getType());
}

LogicalResult ExpertCombineOp::verify() {
  return verifyExpertCollective(*this, getMembers(), getType(),
                                getInput().getType());
}

LogicalResult ColumnParallelOp::verify() {
  // The backward of the op that brings the input in sums the shards'
  // partial input gradients; without it each shard would propagate only
  // its columns' part. (Under expert parallelism the experts' copies come
  // in between.)
  Value input = getInput();
  if (auto dispatch = input.getDefiningOp<ExpertDispatchOp>())
    input = dispatch.getInput();
  if (!input.getDefiningOp<TpCopyOp>() && !input.getDefiningOp<TpGatherOp>())
    return emitOpError("input must enter through sluice.tp_copy or "
                       "sluice.tp_gather, whose backward sums the shards' "
                       "partial input gradients");
  Projection p = getProjection();
  if (p != Projection::qkv && p != Projection::up && p != Projection::gate)
    return emitOpError("the ")
           << stringifyProjection(p) << " projection is row-parallel";
  return success();
}

LogicalResult RowParallelOp::verify() {
  Projection p = getProjection();
  if (p != Projection::out && p != Projection::down)
    return emitOpError("the ")
           << stringifyProjection(p) << " projection is column-parallel";
  // (Under expert parallelism the experts' outputs return first.)
  SmallVector<Operation *> users(getResult().getUsers());
  for (size_t i = 0; i < users.size(); ++i) {
    Operation *user = users[i];
    if (isa<ExpertCombineOp>(user)) {
      llvm::append_range(users, user->getResult(0).getUsers());
      continue;
    }
    if (!isa<TpReduceOp, TpScatterOp>(user))
      return emitOpError("partial sums are used by '")
             << user->getName()
             << "' before sluice.tp_reduce or sluice.tp_scatter sums them "
                "over the shards";
  }
  return success();
}

LogicalResult ShardActivationOp::verify() {
  if (getGate() && getGate().getType() != getUp().getType())
    return emitOpError("gate ")
           << getGate().getType() << " differs from up " << getUp().getType();
  return success();
}

bool mlir::sluice::isSequenceParallel(Operation *layer) {
  if (!isa<TransformerLayerOp, EmbeddingOp, OutputLayerOp>(layer) ||
      layer->getRegion(0).empty())
    return false;
  Block &block = layer->getRegion(0).front();
  // What enters the body (the embedding: what leaves it) against the
  // layer's whole activation.
  Type activation = block.getNumArguments()
                        ? block.getArgument(0).getType()
                        : block.getTerminator()->getOperand(0).getType();
  Type whole = block.getNumArguments() ? layer->getOperand(0).getType()
                                       : layer->getResult(0).getType();
  return activation != whole;
}

ShardTraffic mlir::sluice::getShardTraffic(Operation *layer) {
  ShardTraffic traffic;
  if (!isa<TransformerLayerOp, EmbeddingOp, OutputLayerOp>(layer) ||
      layer->getRegion(0).empty())
    return traffic;
  for (Operation &op : layer->getRegion(0).front()) {
    auto collective = dyn_cast<TensorCollectiveOpInterface>(op);
    if (!collective)
      continue;
    auto in = cast<RankedTensorType>(op.getOperand(0).getType());
    auto out = cast<RankedTensorType>(op.getResult(0).getType());
    ShardCollective c{CollectiveKind::none,
                      std::max(in.getNumElements(), out.getNumElements()),
                      int64_t(in.getElementType().getIntOrFloatBitWidth() / 8)};
    if ((c.kind = collective.getForwardCollective()) != CollectiveKind::none)
      traffic.forward.push_back(c);
    if ((c.kind = collective.getBackwardCollective()) != CollectiveKind::none)
      traffic.backward.push_back(c);
    // The column-parallel weight gradient needs the whole input that only
    // the gather made: the shard keeps its slice and gathers it again.
    if (isa<TpGatherOp>(op))
      traffic.weight.push_back(
          {CollectiveKind::all_gather, c.elements, c.elementBytes});
  }
  std::reverse(traffic.backward.begin(), traffic.backward.end());
  return traffic;
}

