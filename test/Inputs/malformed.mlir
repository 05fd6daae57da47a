sluice.model @broken {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 100 : tensor<1x16x32xf32>
}
