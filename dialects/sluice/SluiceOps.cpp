//===- SluiceOps.cpp - Sluice op verifiers and helpers --------------------===//
//
// Verifiers reject what no runtime could execute. Each rule has one message,
// spelled the same everywhere, naming the attribute and its value.
//
//===----------------------------------------------------------------------===//

#include "sluice/SluiceOps.h"
#include "sluice/Blocks/Spec.h"
#include "sluice/PlanFormat/Format.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::sluice;

#include "OpRules.h"

using namespace mlir::sluice::detail;

//===----------------------------------------------------------------------===//
// ModelOp
//===----------------------------------------------------------------------===//

/// The ops of kind OpTy anywhere in `model`, stages included, in order.
template <typename OpTy> static SmallVector<OpTy> collectOps(ModelOp model) {
  SmallVector<OpTy> ops;
  model.getBody().walk([&](OpTy op) { ops.push_back(op); });
  return ops;
}

/// The model's sharded vocabulary layers, if partitioned.
static VocabInputOp getVocabInput(ModelOp model) {
  auto ops = collectOps<VocabInputOp>(model);
  return ops.empty() ? VocabInputOp() : ops.front();
}
static VocabOutputOp getVocabOutput(ModelOp model) {
  auto ops = collectOps<VocabOutputOp>(model);
  return ops.empty() ? VocabOutputOp() : ops.front();
}

EmbeddingOp ModelOp::getEmbedding() {
  auto ops = collectOps<EmbeddingOp>(*this);
  return ops.empty() ? EmbeddingOp() : ops.front();
}

OutputLayerOp ModelOp::getOutputLayer() {
  auto ops = collectOps<OutputLayerOp>(*this);
  return ops.empty() ? OutputLayerOp() : ops.front();
}

int64_t ModelOp::getHidden() {
  if (EmbeddingOp embedding = getEmbedding())
    return cast<RankedTensorType>(embedding.getType()).getShape().back();
  if (VocabInputOp input = getVocabInput(*this))
    return cast<RankedTensorType>(input.getType()).getShape().back();
  return 0;
}

RankedTensorType ModelOp::getActivationType() {
  return RankedTensorType::get({getMicroBatch(), getSeqLen(), getHidden()},
                               getDtype());
}

LogicalResult ModelOp::verify() {
  if (failed(verifySize(*this, "seq_len", getSeqLen())) ||
      failed(verifySize(*this, "micro_batch", getMicroBatch())))
    return failure();
  if (!isa<FloatType>(getDtype()))
    return emitOpError("'dtype' must be a floating-point type, got ")
           << getDtype();
  if (std::optional<ArrayRef<int64_t>> slices = getTokenSlices()) {
    int64_t sum = 0;
    for (int64_t length : *slices) {
      if (length < 1)
        return emitOpError("'token_slices' must be positive lengths, got ")
               << length;
      sum += length;
    }
    if (slices->empty() || sum != getSeqLen())
      return emitOpError("'token_slices' sum to ")
             << sum << ", but 'seq_len' = " << getSeqLen();
  }
  if (std::optional<double> eps = getNormEps(); eps && !(*eps > 0 && *eps < 1))
    return emitOpError("'norm_eps' must be in (0, 1), got ") << *eps;
  if (std::optional<double> scale = getEmbeddingScale();
      scale && !(*scale > 0 && std::isfinite(*scale)))
    return emitOpError("'embedding_scale' must be positive, got ") << *scale;
  for (auto [name, value] :
       {std::pair{"attention_scale", getAttentionScale()},
        std::pair{"attention_softcap", getAttentionSoftcap()},
        std::pair{"final_softcap", getFinalSoftcap()}})
    if (value && !(*value > 0 && std::isfinite(*value)))
      return emitOpError("'") << name << "' must be positive, got " << *value;
  if (std::optional<int64_t> pad = getPaddingToken(); pad && *pad < 0)
    return emitOpError("'padding_token' must not be negative, got ") << *pad;
  if (std::optional<int64_t> positions = getMaxPositions();
      positions && *positions < 1)
    return emitOpError("'max_positions' must be positive, got ")
           << *positions;
  return success();
}

double ModelOp::getNormEpsOrDefault() { return getNormEps().value_or(1e-5); }

SmallVector<int64_t> ModelOp::getSliceLengths(int64_t slices) {
  if (std::optional<ArrayRef<int64_t>> lengths = getTokenSlices())
    if (int64_t(lengths->size()) == slices)
      return SmallVector<int64_t>(lengths->begin(), lengths->end());
  SmallVector<int64_t> lengths(slices, getSeqLen() / slices);
  for (int64_t i = 0; i < getSeqLen() % slices; ++i)
    ++lengths[i];
  return lengths;
}

/// Reports the second op of a kind that must be unique.
template <typename OpTy>
static LogicalResult verifyExactlyOne(ModelOp model, StringRef kind) {
  auto ops = collectOps<OpTy>(model);
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

SmallVector<StageOp> mlir::sluice::getStages(ModelOp model) {
  return llvm::to_vector(model.getBody().getOps<StageOp>());
}

/// Checks that `layer` reads `input` (the activation before it; null
/// before the embedding) and carries an activation of the model's type.
static LogicalResult verifyLayerLink(ModelOp model, RankedTensorType expected,
                                     Operation *layer, Operation *previous,
                                     Value input) {
  if (!isa<EmbeddingOp, TransformerLayerOp, OutputLayerOp, FinalNormOp>(layer))
    return layer->emitOpError("is not a model-level layer and cannot appear "
                              "in a sluice.model");
  if (isa_and_nonnull<OutputLayerOp>(previous))
    return layer->emitOpError("comes after the model's sluice.output_layer")
        .attachNote(previous->getLoc())
        .append("output layer is here");
  if (input && layer->getOperand(0) != input) {
    InFlightDiagnostic diag = layer->emitOpError(
        "input does not chain: it is not the result of the preceding layer");
    if (previous)
      diag.attachNote(previous->getLoc()).append("preceding layer is here");
    return diag;
  }
  if (isa<OutputLayerOp>(layer))
    return success();
  Type actual = layer->getResult(0).getType();
  if (actual != expected)
    return layer->emitOpError("activation type ")
           << actual << " does not chain: expected " << expected
           << " (micro_batch = " << model.getMicroBatch()
           << ", seq_len = " << model.getSeqLen()
           << ", hidden = " << expected.getShape().back()
           << ", dtype = " << model.getDtype() << ")";
  return success();
}

/// Stage names are unique: sluice.exec and friends name stages by symbol.
static LogicalResult verifyStageNames(ModelOp model) {
  llvm::StringMap<StageOp> stageNames;
  for (StageOp stage : getStages(model)) {
    auto [it, inserted] = stageNames.try_emplace(stage.getSymName(), stage);
    if (!inserted)
      return stage.emitOpError("duplicates stage name @")
          .append(stage.getSymName())
          .attachNote(it->second.getLoc())
          .append("first stage @", stage.getSymName(), " is here");
  }
  return success();
}

/// A stage reads the stage before it (the first: the sharded embedding, or
/// nothing), and its layers chain from its block argument.
static LogicalResult verifyStageLink(ModelOp model, RankedTensorType activation,
                                     StageOp stage, StageOp previousStage,
                                     Operation *&previousLayer) {
  if (previousStage && stage.getInput() != previousStage.getResult())
    return stage
        .emitOpError("input does not chain: it is not the result of the "
                     "preceding stage")
        .attachNote(previousStage.getLoc())
        .append("preceding stage is here");
  if (!previousStage) {
    // The first stage reads the sharded embedding, or holds the embedding
    // itself.
    auto input = dyn_cast_or_null<VocabInputOp>(previousLayer);
    bool reads = input && stage.getInput() == input.getResult();
    if (input ? !reads : bool(stage.getInput()))
      return stage.emitOpError(input ? "is the first stage and must take "
                                       "the sharded embedding"
                                     : "is the first stage and must take "
                                       "no input");
  }
  Value carried = stage.getBody().getNumArguments()
                      ? stage.getBody().getArgument(0)
                      : Value();
  bool first = true;
  for (Operation *layer : stage.getLayers()) {
    Value input = first ? carried : previousLayer->getResult(0);
    Operation *before =
        isa_and_nonnull<VocabInputOp>(previousLayer) ? nullptr : previousLayer;
    if (failed(verifyLayerLink(model, activation, layer, before, input)))
      return failure();
    previousLayer = layer;
    first = false;
  }
  return success();
}

/// The layers form one chain: embedding, transformer layers, output layer;
/// each consumes exactly the activation before it. Without block arguments
/// nothing but the embedding can come first, and only the output layer
/// yields the tensor<f32> that sluice.return takes. At the partitioned
/// level the chain runs through stages: a stage's first layer reads the
/// stage's block argument, which carries the previous stage's result.
static LogicalResult verifyChain(ModelOp model) {
  bool staged = !getStages(model).empty();
  // Once: the model's activation type walks the whole body (a verifier
  // that asked per layer was quadratic in the layer count; sluice-fuzz-
  // config timed out on 240000 layers).
  RankedTensorType activation = model.getActivationType();
  Operation *previousLayer = nullptr;
  StageOp previousStage;
  for (Operation &op : model.getBody().front()) {
    if (isa<ReturnOp>(op))
      break;
    if (auto input = dyn_cast<VocabInputOp>(op)) {
      previousLayer = input;
      continue;
    }
    if (auto output = dyn_cast<VocabOutputOp>(op)) {
      if (!previousStage || output.getInput() != previousStage.getResult())
        return output.emitOpError(
            "input does not chain: it is not the result of the last stage");
      continue;
    }
    if (staged && !isa<StageOp>(op))
      return op.emitOpError("cannot appear beside sluice.stage ops in a "
                            "partitioned model");
    auto stage = dyn_cast<StageOp>(op);
    if (!stage) {
      Value input = previousLayer ? previousLayer->getResult(0) : Value();
      if (failed(verifyLayerLink(model, activation, &op, previousLayer, input)))
        return failure();
      previousLayer = &op;
      continue;
    }
    if (failed(verifyStageLink(model, activation, stage, previousStage,
                               previousLayer)))
      return failure();
    previousStage = stage;
  }
  return success();
}

/// The embedding covers the sequence, and a tied output layer has its
/// vocabulary.
static LogicalResult verifyEndLayers(ModelOp model) {
  EmbeddingOp embedding = model.getEmbedding();
  OutputLayerOp output = model.getOutputLayer();
  if (!embedding || !output)
    return success();
  if (std::optional<int64_t> positions = embedding.getPositions();
      positions && model.getSeqLen() > *positions)
    return model.emitOpError("'seq_len' = ")
           << model.getSeqLen()
           << " exceeds the embedding's 'positions' = " << *positions;
  if (output.getTied() && output.getVocab() != embedding.getVocab())
    return output.emitOpError("is tied to the embedding but 'vocab' = ")
        .append(output.getVocab(), " differs from the embedding's 'vocab' = ",
                embedding.getVocab())
        .attachNote(embedding.getLoc())
        .append("embedding is here");
  // The labels are the input tokens one later: every one the embedding
  // takes must have a logit.
  if (output.getVocab() < embedding.getVocab())
    return output.emitOpError("'vocab' = ")
        .append(output.getVocab(), " is smaller than the embedding's 'vocab' = ",
                embedding.getVocab(),
                ": the labels are input tokens, and some would have no logit")
        .attachNote(embedding.getLoc())
        .append("embedding is here");
  return success();
}

LogicalResult ModelOp::verifyRegions() {
  // A partitioned model may hold its vocabulary layers as shards instead.
  if (!getVocabInput(*this) &&
      failed(verifyExactlyOne<EmbeddingOp>(*this, "sluice.embedding")))
    return failure();
  if (!getVocabOutput(*this) &&
      failed(verifyExactlyOne<OutputLayerOp>(*this, "sluice.output_layer")))
    return failure();

  // Checked after the counts so that the rules above stay testable.
  if (unsigned args = getBody().getNumArguments())
    return emitOpError("body must not have block arguments: a model's tokens "
                       "and labels are implicit, got ")
           << args;

  if (failed(verifyStageNames(*this)) || failed(verifyChain(*this)))
    return failure();
  // The sparse layers' load-balancing loss is one (the plan reader's rule).
  ::sluice::rt::ModelConfig sparse;
  getBody().walk([&](TransformerLayerOp layer) {
    sparse.layers.push_back(layer.getSpec());
  });
  if (std::string why = ::sluice::rt::checkBalanceLoss(sparse); !why.empty())
    return emitOpError(why);
  return verifyEndLayers(*this);
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
  if (failed(verifySize(*this, "vocab", getVocab(), ::sluice::rt::kMaxVocab)))
    return failure();
  if (std::optional<int64_t> positions = getPositions())
    if (failed(verifySize(*this, "positions", *positions)))
      return failure();
  if (failed(verifyActivationType(*this, "result", getType())))
    return failure();
  return verifyShardBody(*this, getShards(), getBody(), /*hasInput=*/false,
                         getType(), /*loss=*/{});
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
  return ::sluice::blocks::getHeadDim(getSpec(), getHidden());
}

LogicalResult TransformerLayerOp::verify() {
  if (failed(verifyActivationType(*this, "input", getInput().getType())))
    return failure();
  const ::sluice::rt::LayerConfig &spec = getSpec();
  if (spec.kind != ::sluice::rt::LayerKind::Transformer)
    return emitOpError("holds a ")
           << ::sluice::rt::layerKindName(spec.kind)
           << " layer's spec, not a transformer layer's";
  // The rules the plan reader holds plans to, in the same words.
  if (std::string why = ::sluice::blocks::checkLayer(spec, getHidden());
      !why.empty())
    return emitOpError(why);
  if (failed(verifyShardBody(*this, getShards(), getBody(), /*hasInput=*/true,
                             getType(), /*loss=*/{})))
    return failure();
  if (getBody().empty())
    return success();
  // The shard's slices of the projections follow from the split
  // (sluice-shard-tensors): its query heads, the key/value heads they
  // read (one, replicated, with fewer key/value heads than shards), and
  // its share of the feed-forward width.
  int64_t n = *getShards(), headDim = getHeadDimOrDefault(),
          valueDim = ::sluice::blocks::getValueHeadDim(spec, getHidden());
  int64_t heads = spec.heads, kvHeads = spec.kvHeads, ffn = spec.ffn;
  int64_t kv = kvHeads >= n ? kvHeads / n : 1;
  for (Operation &op : getBody().front()) {
    int64_t expected = -1, width = -1;
    if (auto column = dyn_cast<ColumnParallelOp>(op)) {
      width = getWidth(column.getResult());
      expected = column.getProjection() == Projection::qkv
                     ? (heads / n + kv) * headDim + kv * valueDim
                     : ffn / n;
    } else if (auto attention = dyn_cast<ShardAttentionOp>(op)) {
      width = getWidth(attention.getResult());
      expected = heads / n * valueDim;
    }
    if (width != expected)
      return op.emitOpError("yields ")
             << width << " columns, but one of " << n << " shards of "
             << heads << " heads (" << kvHeads
             << " key/value) and feed-forward width " << ffn << " has "
             << expected;
  }
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
  if (failed(verifySize(*this, "vocab", getVocab(), ::sluice::rt::kMaxVocab)))
    return failure();
  if (failed(verifyActivationType(*this, "input", getInput().getType())) ||
      failed(verifyShardBody(*this, getShards(), getBody(), /*hasInput=*/true,
                             getInput().getType(), getLoss().getType())))
    return failure();
  if (getBody().empty())
    return success();
  // The shard's rows of the LM head: ceil(vocab / shards), the runtime's
  // rule (getShardVocabRows).
  int64_t rows = (getVocab() + *getShards() - 1) / *getShards();
  for (auto logits : getBody().getOps<ShardLogitsOp>())
    if (getWidth(logits.getLogits()) != rows)
      return logits.emitOpError("yields ")
             << getWidth(logits.getLogits()) << " logits per token, but one of "
             << *getShards() << " shards of a " << getVocab()
             << "-row LM head holds " << rows;
  return success();
}

//===----------------------------------------------------------------------===//
// StageOp
//===----------------------------------------------------------------------===//

SmallVector<Operation *> StageOp::getLayers() {
  SmallVector<Operation *> layers;
  for (Operation &op : getBody().front())
    if (!isa<YieldOp>(op))
      layers.push_back(&op);
  return layers;
}

int64_t StageOp::getNumTransformerLayers() {
  return llvm::range_size(getBody().getOps<TransformerLayerOp>());
}

LogicalResult StageOp::verify() {
  if (getDevice() < 0)
    return emitOpError("'device' must be non-negative, got ") << getDevice();
  if (getChunk() < 0)
    return emitOpError("'chunk' must be non-negative, got ") << getChunk();
  std::optional<ArrayAttr> passes = getPasses();
  std::optional<ArrayRef<int64_t>> flops = getFlops();
  if (flops && (!passes || passes->size() != flops->size()))
    return emitOpError("'flops' must give one value per pass, got ")
           << flops->size() << " for " << (passes ? passes->size() : 0)
           << " passes";
  return success();
}

LogicalResult StageOp::verifyRegions() {
  Block &body = getBody().front();
  Value input = getInput();
  if (body.getNumArguments() != (input ? 1u : 0u) ||
      (input && body.getArgument(0).getType() != input.getType()))
    return emitOpError("block arguments must match the stage's inputs");
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("must end in sluice.yield");
  if (yield.getValue().getType() != getResult().getType())
    return yield.emitOpError("yields ")
           << yield.getValue().getType() << ", the stage's result is "
           << getResult().getType();
  SmallVector<Operation *> layers = getLayers();
  if (layers.empty())
    return emitOpError("holds no layer");
  if (yield.getValue() != layers.back()->getResult(0))
    return yield.emitOpError("must yield the result of the stage's last layer");
  return success();
}

//===----------------------------------------------------------------------===//
// Vocabulary shards
//===----------------------------------------------------------------------===//

void FinalNormOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getResult(), "normed");
}

LogicalResult FinalNormOp::verify() {
  return verifyActivationType(*this, "input", getInput().getType());
}

/// The rules both shards share: sizes, and a padded vocabulary that is a
/// multiple of 2p covering the real one.
template <typename OpTy> static LogicalResult verifyShardSizes(OpTy op) {
  if (failed(verifyPositive(op, "devices", op.getDevices())))
    return failure();
  if (op.getRoot() < 0 || op.getRoot() >= op.getDevices())
    return op.emitOpError("'root' = ") << op.getRoot() << " is not one of the "
                                       << op.getDevices() << " devices";
  if (op.getVocab() < 1)
    return op.emitOpError("'vocab' must be at least 1, got ") << op.getVocab();
  int64_t multiple = 2 * op.getDevices();
  if (op.getPaddedVocab() < op.getVocab() ||
      op.getPaddedVocab() % multiple != 0)
    return op.emitOpError("'padded_vocab' = ")
           << op.getPaddedVocab()
           << " must be a multiple of 2 * devices = " << multiple
           << " no smaller than 'vocab' = " << op.getVocab();
  return success();
}

LogicalResult VocabOutputOp::verify() {
  if (failed(verifyShardSizes(*this)))
    return failure();
  int64_t counted = countBarriers(getBody());
  if (counted != getBarriers())
    return emitOpError("says it crosses 'barriers' = ")
           << getBarriers() << " communication barriers, its body crosses "
           << counted;
  return success();
}

LogicalResult VocabInputOp::verify() {
  if (failed(verifyShardSizes(*this)))
    return failure();
  if (!getTied())
    return success();
  // A tied input shard is the output shard's weight: both must exist and
  // cut the vocabulary the same way.
  auto model = (*this)->getParentOfType<ModelOp>();
  VocabOutputOp output;
  for (auto op : model.getBody().front().getOps<VocabOutputOp>())
    output = op;
  if (!output || !output.getTied())
    return emitOpError("is 'tied' but the model has no tied "
                       "sluice.vocab_output to share its shard with");
  if (output.getPaddedVocab() != getPaddedVocab() ||
      output.getDevices() != getDevices())
    return emitOpError("is tied to @")
           << output.getSymName()
           << " but shards 'padded_vocab' = " << getPaddedVocab() << " over "
           << getDevices() << " devices, the output shard "
           << output.getPaddedVocab() << " over " << output.getDevices();
  return success();
}

int64_t mlir::sluice::countBarriers(Region &shard) {
  int64_t barriers = 0;
  bool open = false;
  for (Operation &op : shard.front()) {
    if (isa<AllReduceOp, ReduceOp>(op)) {
      barriers += open ? 0 : 1;
      open = true;
    } else if (op.hasTrait<HeavyCompute>()) {
      open = false;
    }
  }
  return barriers;
}

//===----------------------------------------------------------------------===//
// custom<PassKind>: the bare pass letter in instruction syntax
//===----------------------------------------------------------------------===//

/// Instructions are printed by the hundred thousand; `F` reads better than
/// `#sluice.pass<F>` there.
static ParseResult parsePassKind(OpAsmParser &parser, PassKindAttr &kind) {
  StringRef keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<PassKind> value = symbolizePassKind(keyword);
  if (!value)
    return parser.emitError(loc, "unknown pass kind '")
           << keyword << "' (expected F, B, W, BW, S, S2, T, IF or IB)";
  kind = PassKindAttr::get(parser.getContext(), *value);
  return success();
}

static void printPassKind(OpAsmPrinter &printer, Operation *,
                          PassKindAttr kind) {
  printer << stringifyPassKind(kind.getValue());
}

//===----------------------------------------------------------------------===//
// custom<ScheduleName>: a program's schedule as the string users type
//===----------------------------------------------------------------------===//

/// `schedule = "zb-h1"`: the name as `sluice-compile --schedule` takes it
/// (most names are not MLIR keywords), checked against the schedule enum.
static ParseResult parseScheduleName(OpAsmParser &parser,
                                     ScheduleKindAttr &schedule) {
  std::string name;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseString(&name))
    return failure();
  std::optional<ScheduleKind> kind = symbolizeScheduleKind(name);
  if (!kind) {
    InFlightDiagnostic diag = parser.emitError(loc, "unknown schedule '")
                              << name << "' (expected one of";
    for (uint32_t i = 0; i <= getMaxEnumValForScheduleKind(); ++i)
      diag << (i ? ", " : " ") << stringifyScheduleKind(ScheduleKind(i));
    return diag << ")";
  }
  schedule = ScheduleKindAttr::get(parser.getContext(), *kind);
  return success();
}

static void printScheduleName(OpAsmPrinter &printer, Operation *,
                              ScheduleKindAttr schedule) {
  printer.printString(stringifyScheduleKind(schedule.getValue()));
}

//===----------------------------------------------------------------------===//
// custom<SlotMap>: a repeat block's slot map, `slots [3 -> 4, 4 -> 3]`
//===----------------------------------------------------------------------===//

/// Stored flat (from, to, from, to, ...): a DenseI64ArrayAttr.
static ParseResult parseSlotMap(OpAsmParser &parser, DenseI64ArrayAttr &slots) {
  SmallVector<int64_t> flat;
  auto entry = [&]() -> ParseResult {
    int64_t from, to;
    if (parser.parseInteger(from) || parser.parseArrow() ||
        parser.parseInteger(to))
      return failure();
    flat.append({from, to});
    return success();
  };
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Square, entry))
    return failure();
  slots = DenseI64ArrayAttr::get(parser.getContext(), flat);
  return success();
}

static void printSlotMap(OpAsmPrinter &printer, Operation *,
                         DenseI64ArrayAttr slots) {
  printer << "[";
  ArrayRef<int64_t> flat = slots.asArrayRef();
  for (size_t i = 0; i + 1 < flat.size(); i += 2)
    printer << (i ? ", " : "") << flat[i] << " -> " << flat[i + 1];
  printer << "]";
}

#include "sluice/SluiceInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "sluice/SluiceOps.cpp.inc"
