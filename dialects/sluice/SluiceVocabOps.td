//===- SluiceVocabOps.td - Vocabulary-parallel layers ------*- tablegen -*-===//
//
// The partitioned level of the vocabulary layers
// (Yeung et al., 2024): the embedding and the output layer
// split along the vocabulary over all p devices. Each is one region that
// every device runs on its own vocabulary shard (SPMD), written as
// fine-grained ops with explicit collectives so that the communication
// barriers are visible, countable and reorderable.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_VOCAB_OPS_TD
#define SLUICE_VOCAB_OPS_TD

include "sluice/SluiceInterfaces.td"

// Ops whose cost scales with a shard's vocabulary slice (a pass over
// [b, s, V/p] values, or a matmul with the shard's weights). Collectives
// separated by at least one of them are separate communication barriers;
// collectives separated only by light ops ([b, s] or [b, s, h] elementwise
// work that runs on the communication stream) form one barrier.
def Sluice_HeavyCompute : NativeOpTrait<"HeavyCompute"> {
  let cppNamespace = "::mlir::sluice";
}

// Also the bodies of the embedding and the output layer when they split
// over tensor-parallel shards (SluiceTensorOps.td).
class Sluice_ShardOp<string mnemonic, list<Trait> traits = []>
    : Sluice_Op<mnemonic, traits # [
        ParentOneOf<["VocabOutputOp", "VocabInputOp", "EmbeddingOp",
                     "OutputLayerOp"]>]>;

//===----------------------------------------------------------------------===//
// The two vocabulary layers
//===----------------------------------------------------------------------===//

def Sluice_FinalNormOp : Sluice_LayerOp<"final_norm", [
    AllTypesMatch<["input", "result"]>]> {
  let summary = "the output layer's norm, kept on the last transformer stage";
  let description = [{
    When `sluice-partition-vocab` shards the output layer, its normalisation
    (per token, no vocabulary dimension) stays with the last transformer
    stage, which broadcasts the normalised activation to every shard.

    ```mlir
    %n = sluice.final_norm %x {norm = layernorm} : tensor<1x16x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, Sluice_NormKindAttr:$norm);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input ` ` `{` `norm` `=` `` $norm `}` attr-dict `:` type($input)
  }];
}

// What both vocabulary shards record: the devices they span, the device of
// the stage they attach to (`root`), the real and padded vocabulary, a
// table shared between them (`tied`), blocking collectives (`synchronous`)
// and the passes sluice-split-passes cut them into.
defvar Sluice_ShardArgs = (ins Sluice_SizeAttr:$devices, Sluice_SizeAttr:$root,
                               Sluice_SizeAttr:$vocab,
                               Sluice_SizeAttr:$padded_vocab,
                               UnitAttr:$tied, UnitAttr:$synchronous,
                               OptionalAttr<TypedArrayAttrBase<
                                   Sluice_PassKindAttr, "pass kinds">>:$passes);

def Sluice_VocabOutputOp : Sluice_Op<"vocab_output", [
    IsolatedFromAbove, SingleBlock, HasParent<"ModelOp">]> {
  let summary = "the output layer, sharded along the vocabulary over all devices";
  let description = [{
    Every device runs this region on its rows [d * V'/p, (d + 1) * V'/p) of
    the LM head, V' being `vocab` padded to `padded_vocab`, a multiple of 2p
    (§6.1: alignment). Padded rows never affect the loss: their logits are
    masked out of the softmax. The block argument is the normalised
    activation of the last transformer stage on device `root`; the region
    yields the loss and the input gradient reduced back to `root`.

    The body is written as fine-grained ops with explicit collectives. In
    the naive form (Figure 4) it crosses 3 barriers: the all-reduce of the
    maximum, of the sum, and the reduce of the input gradient;
    `sluice-reorder-softmax-barriers` rewrites it to 2 (Algorithm 1) or 1
    (Algorithm 2); `barriers` records the count, `algorithm` the form.
    `tied` shares the input layer's shard as the LM head (no gradient
    all-reduce); `synchronous` marks the interlaced baseline, whose
    collectives block every device (tensor-parallel style).

    `sluice-split-passes` cuts the body at the barriers whose results later
    heavy work reads, and records the passes in `passes`: S, S2, T for the
    naive form, S, T for Algorithms 1 and 2 (§5.1).

    ```mlir
    %loss = sluice.vocab_output @vout (%n : tensor<1x16x32xf32>) -> tensor<f32>
        attributes {devices = 2 : i64, padded_vocab = 104 : i64, root = 1 : i64,
                    vocab = 100 : i64, barriers = 3 : i64, algorithm = 0 : i64} {
    ^bb0(%xr: tensor<1x16x32xf32>):
      %x = sluice.broadcast %xr root 1 : tensor<1x16x32xf32>
      %y = sluice.shard_logits %x : tensor<1x16x32xf32> -> tensor<1x16x52xf32>
      ...
    }
    ```
  }];
  let arguments = !con((ins SymbolNameAttr:$sym_name, AnyRankedTensor:$input),
                  Sluice_ShardArgs,
                  (ins Sluice_SizeAttr:$barriers,
                       Sluice_SoftmaxAlgorithm:$algorithm));
  let results = (outs 0DTensorOf<[F32]>:$loss);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `(` $input `:` type($input) `)` `->` type($loss)
    attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Vocabulary rows per device.
    int64_t getShardRows() { return getPaddedVocab() / getDevices(); }
  }];
}

def Sluice_VocabInputOp : Sluice_Op<"vocab_input", [
    IsolatedFromAbove, SingleBlock, HasParent<"ModelOp">]> {
  let summary = "the embedding, sharded along the vocabulary over all devices";
  let description = [{
    The paper's input layer (Appendix C, summarised in DESIGN.md): every
    device looks up the tokens in its rows and writes zeros for the others
    (pass IF); the partial embeddings are summed onto `root`, the device of
    the first transformer stage, which adds the learned positions it holds
    (`positions`). Backward (pass IB): the gradient of the embedding output
    is broadcast from `root` and each device scatter-adds the rows in its
    range. The block argument is that gradient on `root`.

    `tied` shares the shard with the model's tied `sluice.vocab_output`: the
    same rows on the same device, one weight and one gradient, so no
    gradient all-reduce is needed. `synchronous` marks the interlaced
    baseline, where the collectives block (tensor parallelism).
    `sluice-split-passes` records its passes, IF and IB, in `passes`.

    ```mlir
    %x = sluice.vocab_input @vin -> tensor<1x16x32xf32> attributes {devices = 2 : i64,
        padded_vocab = 104 : i64, positions = 16 : i64, root = 0 : i64, vocab = 100 : i64} {
    ^bb0(%gr: tensor<1x16x32xf32>):
      %part = sluice.shard_lookup : tensor<1x16x32xf32>
      %sum = sluice.reduce %part root 0 : tensor<1x16x32xf32>
      %x = sluice.add_positions %sum : tensor<1x16x32xf32>
      %g = sluice.broadcast %gr root 0 : tensor<1x16x32xf32>
      sluice.shard_scatter_grad %g : tensor<1x16x32xf32>
      sluice.vocab_yield %x : tensor<1x16x32xf32>
    }
    ```
  }];
  let arguments = !con((ins SymbolNameAttr:$sym_name), Sluice_ShardArgs,
                       (ins OptionalAttr<Sluice_SizeAttr>:$positions));
  let results = (outs AnyRankedTensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `->` type($result) attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
}

def Sluice_VocabYieldOp : Sluice_Op<"vocab_yield", [
    Pure, Terminator, ReturnLike,
    ParentOneOf<["VocabOutputOp", "VocabInputOp"]>]> {
  let summary = "ends a vocabulary shard";
  let description = [{
    Yields the shard's forward result (the loss, or the embedding), and for
    the output layer also the reduced input gradient.

    ```mlir
    sluice.vocab_yield %loss, %dx : tensor<f32>, tensor<1x16x32xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

class Sluice_CollectiveOp<string mnemonic> : Sluice_ShardOp<mnemonic, [
    AllTypesMatch<["input", "result"]>]>;

def Sluice_BroadcastOp : Sluice_CollectiveOp<"broadcast"> {
  let summary = "every device receives `root`'s value";
  let description = [{
    The output layer's C0 (the last stage's activation to every shard) and
    the input layer's backward broadcast. Not a barrier in the paper's
    count: it is the pipeline's hand-off, like a send.

    ```mlir
    %x = sluice.broadcast %xr root 3 : tensor<1x16x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, Sluice_SizeAttr:$root);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `root` $root attr-dict `:` type($input)";
}

def Sluice_AllReduceOp : Sluice_ShardOp<"all_reduce", [
    AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<Sluice_TensorCollectiveOpInterface>]> {
  let summary = "every device receives the elementwise max or sum over devices";
  let description = [{
    The softmax's global maximum and normaliser: over the vocabulary
    shards of the pipeline's devices in `sluice.vocab_output`, over the
    tensor-parallel shards in a split `sluice.output_layer`. Its B
    communicates nothing: the maximum is a constant of the gradient and
    each shard forms its softmax columns' gradient from the reduced
    statistics.

    ```mlir
    %m = sluice.all_reduce <max> %mlocal : tensor<1x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, Sluice_ReductionAttr:$reduction);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$reduction $input attr-dict `:` type($input)";
  let extraClassDefinition = [{
    ::mlir::sluice::CollectiveKind $cppClass::getForwardCollective() {
      return ::mlir::sluice::CollectiveKind::all_reduce;
    }
    ::mlir::sluice::CollectiveKind $cppClass::getBackwardCollective() {
      return ::mlir::sluice::CollectiveKind::none;
    }
  }];
}

def Sluice_ReduceOp : Sluice_CollectiveOp<"reduce"> {
  let summary = "`root` receives the elementwise sum over devices";
  let description = [{
    The output layer's input gradient to the last stage's device; the input
    layer's partial embeddings to the first stage's device.

    ```mlir
    %dx = sluice.reduce %dxlocal root 3 : tensor<1x16x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, Sluice_SizeAttr:$root);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `root` $root attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Output shard computation (equations 1-6)
//===----------------------------------------------------------------------===//

def Sluice_ShardLogitsOp : Sluice_ShardOp<"shard_logits", [Sluice_HeavyCompute]> {
  let summary = "this shard's logits Y = X W^T (equation 1)";
  let description = [{
    ```mlir
    %y = sluice.shard_logits %x : tensor<1x16x32xf32> -> tensor<1x16x52xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$logits);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($logits)";
}

def Sluice_ShardMaxOp : Sluice_ShardOp<"shard_max"> {
  let summary = "each token's maximum logit over this shard";
  let description = [{
    ```mlir
    %m = sluice.shard_max %y : tensor<1x16x52xf32> -> tensor<1x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$logits);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$logits attr-dict `:` type($logits) `->` type($result)";
}

def Sluice_ShardSumExpOp : Sluice_ShardOp<"shard_sum_exp", [Sluice_HeavyCompute]> {
  let summary = "each token's sum of exp(y - m) over this shard";
  let description = [{
    ```mlir
    %s = sluice.shard_sum_exp %y, %m : tensor<1x16x52xf32>, tensor<1x16xf32> -> tensor<1x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$logits, AnyRankedTensor:$max);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $logits `,` $max attr-dict `:` type($logits) `,` type($max) `->` type($result)
  }];
}

def Sluice_ShardSoftmaxOp : Sluice_ShardOp<"shard_softmax", [AllTypesMatch<["logits", "probs"]>, AllTypesMatch<["max", "sum"]>, Sluice_HeavyCompute]> {
  let summary = "exp(y - m) / s over this shard (equation 2)";
  let description = [{
    With the global maximum and sum this is this shard's slice of the
    softmax; with the local ones it is the paper's softmax'.

    ```mlir
    %p = sluice.shard_softmax %y, %m, %s : tensor<1x16x52xf32>, tensor<1x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$logits, AnyRankedTensor:$max,
                       AnyRankedTensor:$sum);
  let results = (outs AnyRankedTensor:$probs);
  let assemblyFormat = [{
    $logits `,` $max `,` $sum attr-dict `:` type($logits) `,` type($max)
  }];
}

def Sluice_RescaleSumOp : Sluice_ShardOp<"rescale_sum", [AllTypesMatch<["sum", "local_max", "global_max", "result"]>]> {
  let summary = "sum' * exp(m' - m): a local normaliser in global terms";
  let description = [{
    Equation 5's correction of a shard's local sum by the global maximum.

    ```mlir
    %s2 = sluice.rescale_sum %s, %mlocal, %m : tensor<1x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$sum, AnyRankedTensor:$local_max,
                       AnyRankedTensor:$global_max);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $sum `,` $local_max `,` $global_max attr-dict `:` type($sum)
  }];
}

def Sluice_RescaleProbsOp : Sluice_ShardOp<"rescale_probs", [AllTypesMatch<["local_probs", "probs"]>, AllTypesMatch<["local_sum", "global_sum"]>, Sluice_HeavyCompute]> {
  let summary = "softmax = softmax' * sum' / sum (equation 5)";
  let description = [{
    ```mlir
    %p = sluice.rescale_probs %p1, %s2, %s : tensor<1x16x52xf32>, tensor<1x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$local_probs, AnyRankedTensor:$local_sum,
                       AnyRankedTensor:$global_sum);
  let results = (outs AnyRankedTensor:$probs);
  let assemblyFormat = [{
    $local_probs `,` $local_sum `,` $global_sum attr-dict `:`
    type($local_probs) `,` type($local_sum)
  }];
}

def Sluice_SoftmaxGradOp : Sluice_ShardOp<"softmax_grad", [AllTypesMatch<["probs", "grad"]>, Sluice_HeavyCompute]> {
  let summary = "softmax(Y) - G: the loss gradient at this shard's logits";
  let description = [{
    G is one for each token's label when the label falls in this shard.
    Padded rows get no gradient.

    ```mlir
    %g = sluice.softmax_grad %p : tensor<1x16x52xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$probs);
  let results = (outs AnyRankedTensor:$grad);
  let assemblyFormat = "$probs attr-dict `:` type($probs)";
}

def Sluice_ShardInputGradOp : Sluice_ShardOp<"shard_input_grad", [Sluice_HeavyCompute]> {
  let summary = "this shard's part of the input gradient, G W (equation 3)";
  let description = [{
    ```mlir
    %dx = sluice.shard_input_grad %g : tensor<1x16x52xf32> -> tensor<1x16x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$grad);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type($result)";
}

def Sluice_ShardWeightGradOp : Sluice_ShardOp<"shard_weight_grad", [Sluice_HeavyCompute]> {
  let summary = "accumulates this shard's weight gradient G^T X (equation 4)";
  let description = [{
    ```mlir
    sluice.shard_weight_grad %g, %x : tensor<1x16x52xf32>, tensor<1x16x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$grad, AnyRankedTensor:$input);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($grad) `,` type($input)";
}

def Sluice_LabelRowsOp : Sluice_ShardOp<"label_rows"> {
  let summary = "G W: the weight rows of the labels in this shard";
  let description = [{
    Algorithm 2 computes it before the barrier; a gather, not a matmul.

    ```mlir
    %b = sluice.label_rows : tensor<1x16x32xf32>
    ```
  }];
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Sluice_CombineGradOp : Sluice_ShardOp<"combine_grad", [AllTypesMatch<["probs_w", "labels_w", "result"]>, AllTypesMatch<["local_sum", "global_sum"]>]> {
  let summary = "A * sum' / sum - B: the input gradient of equation 6";
  let description = [{
    A = softmax'(Y) W and B = G W were computed before the barrier; what is
    left inside it is elementwise over [b, s, h].

    ```mlir
    %dx = sluice.combine_grad %a, %b, %s2, %s : tensor<1x16x32xf32>, tensor<1x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$probs_w, AnyRankedTensor:$labels_w,
                       AnyRankedTensor:$local_sum, AnyRankedTensor:$global_sum);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $probs_w `,` $labels_w `,` $local_sum `,` $global_sum attr-dict `:`
    type($probs_w) `,` type($local_sum)
  }];
}

def Sluice_ShardLossOp : Sluice_ShardOp<"shard_loss", [AllTypesMatch<["max", "sum"]>]> {
  let summary = "this shard's part of the summed cross-entropy";
  let description = [{
    log(sum) + m - y[label] for the tokens whose label is in this shard (the
    shards' parts add up to the loss; the step's loss is summed across
    devices anyway).

    ```mlir
    %l = sluice.shard_loss %y, %m, %s : tensor<1x16x52xf32>, tensor<1x16xf32> -> tensor<f32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$logits, AnyRankedTensor:$max,
                       AnyRankedTensor:$sum);
  let results = (outs 0DTensorOf<[F32]>:$loss);
  let assemblyFormat = [{
    $logits `,` $max `,` $sum attr-dict `:` type($logits) `,` type($max) `->`
    type($loss)
  }];
}

//===----------------------------------------------------------------------===//
// Input shard computation (Appendix C)
//===----------------------------------------------------------------------===//

def Sluice_ShardLookupOp : Sluice_ShardOp<"shard_lookup", [Sluice_HeavyCompute]> {
  let summary = "this shard's rows for the tokens in its range, zeros elsewhere";
  let description = [{
    ```mlir
    %part = sluice.shard_lookup : tensor<1x16x32xf32>
    ```
  }];
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Sluice_AddPositionsOp : Sluice_ShardOp<"add_positions", [AllTypesMatch<["input", "result"]>]> {
  let summary = "adds the learned position embeddings, which `root` holds";
  let description = [{
    ```mlir
    %x = sluice.add_positions %sum : tensor<1x16x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Sluice_ShardScatterGradOp : Sluice_ShardOp<"shard_scatter_grad", [Sluice_HeavyCompute]> {
  let summary = "scatter-adds the embedding gradient into this shard's rows";
  let description = [{
    ```mlir
    sluice.shard_scatter_grad %g : tensor<1x16x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$grad);
  let assemblyFormat = "$grad attr-dict `:` type($grad)";
}

#endif // SLUICE_VOCAB_OPS_TD
