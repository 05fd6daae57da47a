//===- SluiceTensorOps.td - Tensor-parallel shard bodies ---*- tablegen -*-===//
//
// What one of a layer's tensor-parallel shards computes, with the
// collectives among the shards explicit (Weitkamp, 2024;
// Megatron-LM). `sluice-shard-tensors` gives each transformer layer, and the
// embedding and output layer when they split over the shards, a body made
// of these ops. A body spells the forward pass only: each collective names
// its backward conjugate (TensorCollectiveOpInterface), so that the layer's
// communication in F and B is read off its body.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_TENSOR_OPS_TD
#define SLUICE_TENSOR_OPS_TD

include "sluice/SluiceInterfaces.td"

class Sluice_TensorShardOp<string mnemonic, list<Trait> traits = []>
    : Sluice_Op<mnemonic, traits # [
        ParentOneOf<["TransformerLayerOp", "EmbeddingOp", "OutputLayerOp"]>]>;

//===----------------------------------------------------------------------===//
// Collectives among the shards
//===----------------------------------------------------------------------===//

class Sluice_TensorCollectiveOp<string mnemonic, string forward,
                                string backward, list<Trait> traits = []>
    : Sluice_TensorShardOp<mnemonic, traits # [
        DeclareOpInterfaceMethods<Sluice_TensorCollectiveOpInterface>]> {
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let extraClassDefinition = [{
    ::mlir::sluice::CollectiveKind $cppClass::getForwardCollective() {
      return ::mlir::sluice::CollectiveKind::}] # forward # [{;
    }
    ::mlir::sluice::CollectiveKind $cppClass::getBackwardCollective() {
      return ::mlir::sluice::CollectiveKind::}] # backward # [{;
    }
  }];
}

def Sluice_TpCopyOp : Sluice_TensorCollectiveOp<"tp_copy", "none", "all_reduce",
    [AllTypesMatch<["input", "result"]>]> {
  let summary = "enters a column-parallel region: identity in F, all-reduce in B";
  let description = [{
    Megatron-LM's `f`. Every shard holds the whole (replicated) input; the
    column-parallel projections that read it leave each shard a partial
    sum of its input gradient, which the backward pass all-reduces. One
    per attention block and one per feed-forward block in B (the blog's
    "Communication Overhead" table).

    ```mlir
    %c = sluice.tp_copy %n : tensor<1x16x32xf32>
    ```
  }];
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Sluice_TpReduceOp : Sluice_TensorCollectiveOp<"tp_reduce", "all_reduce",
    "none", [AllTypesMatch<["input", "result"]>]> {
  let summary = "leaves a row-parallel region: all-reduce in F, identity in B";
  let description = [{
    Megatron-LM's `g`. Sums the shards' partial results of a row-parallel
    projection (or the vocabulary-parallel embedding's masked lookups);
    the gradient of a sum reaches every shard whole, so B communicates
    nothing.

    ```mlir
    %o = sluice.tp_reduce %partial : tensor<1x16x32xf32>
    ```
  }];
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Sluice_TpGatherOp : Sluice_TensorCollectiveOp<"tp_gather", "all_gather",
    "reduce_scatter"> {
  let summary = "sequence parallelism's `f`: all-gather in F, reduce-scatter in B";
  let description = [{
    With sequence parallelism the shards hold a token slice of the
    activation between the collectives (Korthikanti et al., "Reducing
    Activation Recomputation in Large Transformer Models"): the norm runs
    on the slice and this op gathers the whole sequence for the
    column-parallel projections. Its backward reduce-scatters their
    partial input gradients back to the slices. The result is the
    operand with its token dimension multiplied by the shard count.

    ```mlir
    %c = sluice.tp_gather %n : tensor<1x4x32xf32> -> tensor<1x16x32xf32>
    ```
  }];
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Sluice_TpScatterOp : Sluice_TensorCollectiveOp<"tp_scatter",
    "reduce_scatter", "all_gather"> {
  let summary = "sequence parallelism's `g`: reduce-scatter in F, all-gather in B";
  let description = [{
    Sums the shards' partial results of a row-parallel projection and
    leaves each shard its token slice of the sum; the backward all-gathers
    the slices' gradients. A reduce-scatter and an all-gather move what
    one all-reduce moves, so sequence parallelism costs no extra
    communication and keeps the norms' and residuals' activations split.

    ```mlir
    %o = sluice.tp_scatter %partial : tensor<1x16x32xf32> -> tensor<1x4x32xf32>
    ```
  }];
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Expert parallelism
//===----------------------------------------------------------------------===//

class Sluice_ExpertCollectiveOp<string mnemonic>
    : Sluice_TensorCollectiveOp<mnemonic, "all_to_all", "all_to_all"> {
  let arguments = (ins AnyRankedTensor:$input, Sluice_SizeAttr:$members);
  let assemblyFormat =
      "$input `over` $members attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Sluice_ExpertDispatchOp : Sluice_ExpertCollectiveOp<"expert_dispatch"> {
  let summary = "sends each token's copies to its experts' members: all-to-all in F and B";
  let description = [{
    Expert parallelism (`ep`; docs/moe.md): a mixture-of-experts layer's
    experts split over `members` replicas, each holding experts / members
    of them. Each member routes its own tokens, sends every token's top_k
    copies to the members holding their experts (an all-to-all of rows,
    after one of their counts) and receives the copies its own experts
    compute on; the backward pass returns those copies' input gradients
    the same way. The result holds what a member's experts may receive at
    most: members x tokens x min(top_k, experts / members) rows (dropless
    whatever the routing), each row the input's width.

    The layer's experts then compute on the received rows (the up, gate
    and down maps of `sluice.column_parallel` and `sluice.row_parallel`,
    split over the tensor-parallel shards as without expert parallelism)
    and `sluice.expert_combine` returns their outputs.

    ```mlir
    // 16 tokens, 4 experts (2 a token) over 2 members: 2 x 16 x 2 rows.
    %d = sluice.expert_dispatch %c over 2 : tensor<1x16x32xf32> -> tensor<1x64x32xf32>
    ```
  }];
}

def Sluice_ExpertCombineOp : Sluice_ExpertCollectiveOp<"expert_combine"> {
  let summary = "returns the experts' outputs to their tokens' members: all-to-all in F and B";
  let description = [{
    The reverse of `sluice.expert_dispatch`: each member sends the outputs
    its experts computed back to the members whose tokens they are, which
    combine each token's copies with the router's weights; the backward
    pass sends the copies' output gradients to the experts' members. The
    operand is the received rows' (members x tokens x min(top_k, experts /
    members)), the result the layer's tokens'.

    ```mlir
    %y = sluice.expert_combine %r over 2 : tensor<1x64x32xf32> -> tensor<1x16x32xf32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// A shard's computation
//===----------------------------------------------------------------------===//

def Sluice_ShardNormOp : Sluice_TensorShardOp<"shard_norm", [
    AllTypesMatch<["input", "result"]>]> {
  let summary = "the layer's norm on the tokens this shard holds";
  let description = [{
    Per token, with the layer's `norm` kind and whole (replicated) weights:
    on every token without sequence parallelism, on the shard's token slice
    with it.

    ```mlir
    %n = sluice.shard_norm %x : tensor<1x16x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Sluice_ColumnParallelOp : Sluice_TensorShardOp<"column_parallel"> {
  let summary = "this shard's output columns of a projection";
  let description = [{
    Multiplies by the shard's columns of the `projection` matrix (and adds
    their bias): for `qkv` its query heads and the key/value heads they
    read, for `up` and `gate` its share of the feed-forward width. The
    input must enter the region through `sluice.tp_copy` or
    `sluice.tp_gather`, whose backward sums the shards' partial input
    gradients; the verifier checks it.

    ```mlir
    %qkv = sluice.column_parallel <qkv> %c : tensor<1x16x32xf32> -> tensor<1x16x16xf32>
    ```
  }];
  let arguments = (ins Sluice_ProjectionAttr:$projection, AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $projection $input attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Sluice_RowParallelOp : Sluice_TensorShardOp<"row_parallel"> {
  let summary = "this shard's partial sum of a projection over its input rows";
  let description = [{
    Multiplies the shard's slice of the input features by its rows of the
    `projection` matrix (`out` or `down`). The result is a partial sum:
    its only uses must be `sluice.tp_reduce` or `sluice.tp_scatter`, which
    sum it over the shards (the verifier checks it); the whole bias is
    added once, after the sum.

    ```mlir
    %o = sluice.row_parallel <out> %ctx : tensor<1x16x8xf32> -> tensor<1x16x32xf32>
    ```
  }];
  let arguments = (ins Sluice_ProjectionAttr:$projection, AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $projection $input attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Sluice_ShardAttentionOp : Sluice_TensorShardOp<"shard_attention"> {
  let summary = "causal attention over this shard's heads";
  let description = [{
    Takes the shard's queries, keys and values (rotated when the layer has
    `rope_theta`) and yields its heads' context vectors: no communication,
    since every head is whole on one shard.

    ```mlir
    %ctx = sluice.shard_attention %qkv : tensor<1x16x16xf32> -> tensor<1x16x8xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$qkv);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$qkv attr-dict `:` type($qkv) `->` type($result)";
}

def Sluice_ShardActivationOp : Sluice_TensorShardOp<"shard_activation", [
    AllTypesMatch<["up", "result"]>]> {
  let summary = "the feed-forward activation on this shard's columns";
  let description = [{
    `gelu(up)` for plain blocks; `act(gate) * up` for gated ones, which
    pass the gate as a second operand. Elementwise: the shard's columns
    need nothing from the others.

    ```mlir
    %a = sluice.shard_activation %up, %gate : tensor<1x16x24xf32>, tensor<1x16x24xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$up, Optional<AnyRankedTensor>:$gate);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $up (`,` $gate^)? attr-dict `:` type($up) (`,` type($gate)^)?
  }];
  let hasVerifier = 1;
}

def Sluice_ResidualAddOp : Sluice_TensorShardOp<"residual_add", [
    AllTypesMatch<["input", "update", "result"]>]> {
  let summary = "adds a block's (reduced) output to the residual stream";
  let description = [{
    With sequence parallelism both are the shard's token slice.

    ```mlir
    %r = sluice.residual_add %x, %o : tensor<1x16x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$update);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `,` $update attr-dict `:` type($input)";
}

def Sluice_LayerYieldOp : Sluice_Op<"layer_yield", [
    Pure, Terminator, ReturnLike,
    ParentOneOf<["TransformerLayerOp", "EmbeddingOp", "OutputLayerOp"]>]> {
  let summary = "ends a layer's shard body";
  let description = [{
    Yields what the shard passes on: its part of the activation (the whole
    activation, or its token slice with sequence parallelism), or for the
    output layer its part of the summed cross-entropy (the labels it
    holds; the step sums the parts over the shards).

    ```mlir
    sluice.layer_yield %r : tensor<1x16x32xf32>
    ```
  }];
  let arguments = (ins AnyType:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

#endif // SLUICE_TENSOR_OPS_TD
