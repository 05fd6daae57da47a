// What sluice-shard-tensors refuses of sequence parallelism
// (test/Transforms/sluice-shard-tensors-errors.mlir runs it).

// Sequence parallelism over a sequence of 8 tokens among three shards.
// expected-error@+1 {{'sluice.model' op 'seq_len' = 8 does not divide among 3 sequence-parallel shards}}
sluice.model @m {seq_len = 8, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 30} : tensor<1x8x24xf32>
  %loss = sluice.output_layer %emb {vocab = 30, norm = layernorm} : tensor<1x8x24xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
sluice.program @plan for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
  }
}

// -----

// Sequence parallelism with microbatches cut into token slices.
sluice.model @m {seq_len = 6, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 30} : tensor<1x6x24xf32>
  %loss = sluice.output_layer %emb {vocab = 30, norm = layernorm} : tensor<1x6x24xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
// expected-error@+1 {{'sluice.program' op sequence parallelism does not combine with 2 token slices per microbatch}}
sluice.program @plan for @m {devices = 1, microbatches = 1, slices = 2, schedule = "1f1b"} {
  sluice.device 0 {
  }
}
