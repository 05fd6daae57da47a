// GPT3-44B of Li et al., 2021, Table 1 settings (6)-(8): N = 96 layers,
// H = 6144, sequence L = 2048, as in Brown et al. (2020): LayerNorm,
// GELU MLP of 4H, biases, learned positions, GPT-2 vocabulary (50257),
// input and output embeddings tied.
// Heads are not in the table: 48 heads of 128 (GPT-3's head size 128).
// Batch sizes, data and pipeline shapes of each setting are training options,
// not part of the model.

sluice.model @terapipe_gpt3_44b {seq_len = 2048, micro_batch = 1, dtype = bf16} {
  %emb = sluice.embedding {vocab = 50257, positions = 2048} : tensor<1x2048x6144xbf16>
  %x = sluice.transformer_layer %emb {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_0 = sluice.transformer_layer %x {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_1 = sluice.transformer_layer %x_0 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_2 = sluice.transformer_layer %x_1 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_3 = sluice.transformer_layer %x_2 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_4 = sluice.transformer_layer %x_3 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_5 = sluice.transformer_layer %x_4 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_6 = sluice.transformer_layer %x_5 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_7 = sluice.transformer_layer %x_6 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_8 = sluice.transformer_layer %x_7 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_9 = sluice.transformer_layer %x_8 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_10 = sluice.transformer_layer %x_9 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_11 = sluice.transformer_layer %x_10 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_12 = sluice.transformer_layer %x_11 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_13 = sluice.transformer_layer %x_12 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_14 = sluice.transformer_layer %x_13 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_15 = sluice.transformer_layer %x_14 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_16 = sluice.transformer_layer %x_15 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_17 = sluice.transformer_layer %x_16 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_18 = sluice.transformer_layer %x_17 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_19 = sluice.transformer_layer %x_18 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_20 = sluice.transformer_layer %x_19 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_21 = sluice.transformer_layer %x_20 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_22 = sluice.transformer_layer %x_21 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_23 = sluice.transformer_layer %x_22 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_24 = sluice.transformer_layer %x_23 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_25 = sluice.transformer_layer %x_24 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_26 = sluice.transformer_layer %x_25 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_27 = sluice.transformer_layer %x_26 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_28 = sluice.transformer_layer %x_27 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_29 = sluice.transformer_layer %x_28 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_30 = sluice.transformer_layer %x_29 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_31 = sluice.transformer_layer %x_30 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_32 = sluice.transformer_layer %x_31 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_33 = sluice.transformer_layer %x_32 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_34 = sluice.transformer_layer %x_33 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_35 = sluice.transformer_layer %x_34 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_36 = sluice.transformer_layer %x_35 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_37 = sluice.transformer_layer %x_36 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_38 = sluice.transformer_layer %x_37 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_39 = sluice.transformer_layer %x_38 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_40 = sluice.transformer_layer %x_39 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_41 = sluice.transformer_layer %x_40 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_42 = sluice.transformer_layer %x_41 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_43 = sluice.transformer_layer %x_42 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_44 = sluice.transformer_layer %x_43 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_45 = sluice.transformer_layer %x_44 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_46 = sluice.transformer_layer %x_45 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_47 = sluice.transformer_layer %x_46 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_48 = sluice.transformer_layer %x_47 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_49 = sluice.transformer_layer %x_48 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_50 = sluice.transformer_layer %x_49 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_51 = sluice.transformer_layer %x_50 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_52 = sluice.transformer_layer %x_51 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_53 = sluice.transformer_layer %x_52 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_54 = sluice.transformer_layer %x_53 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_55 = sluice.transformer_layer %x_54 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_56 = sluice.transformer_layer %x_55 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_57 = sluice.transformer_layer %x_56 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_58 = sluice.transformer_layer %x_57 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_59 = sluice.transformer_layer %x_58 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_60 = sluice.transformer_layer %x_59 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_61 = sluice.transformer_layer %x_60 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_62 = sluice.transformer_layer %x_61 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_63 = sluice.transformer_layer %x_62 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_64 = sluice.transformer_layer %x_63 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_65 = sluice.transformer_layer %x_64 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_66 = sluice.transformer_layer %x_65 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_67 = sluice.transformer_layer %x_66 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_68 = sluice.transformer_layer %x_67 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_69 = sluice.transformer_layer %x_68 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_70 = sluice.transformer_layer %x_69 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_71 = sluice.transformer_layer %x_70 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_72 = sluice.transformer_layer %x_71 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_73 = sluice.transformer_layer %x_72 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_74 = sluice.transformer_layer %x_73 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_75 = sluice.transformer_layer %x_74 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_76 = sluice.transformer_layer %x_75 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_77 = sluice.transformer_layer %x_76 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_78 = sluice.transformer_layer %x_77 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_79 = sluice.transformer_layer %x_78 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_80 = sluice.transformer_layer %x_79 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_81 = sluice.transformer_layer %x_80 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_82 = sluice.transformer_layer %x_81 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_83 = sluice.transformer_layer %x_82 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_84 = sluice.transformer_layer %x_83 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_85 = sluice.transformer_layer %x_84 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_86 = sluice.transformer_layer %x_85 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_87 = sluice.transformer_layer %x_86 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_88 = sluice.transformer_layer %x_87 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_89 = sluice.transformer_layer %x_88 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_90 = sluice.transformer_layer %x_89 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_91 = sluice.transformer_layer %x_90 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_92 = sluice.transformer_layer %x_91 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_93 = sluice.transformer_layer %x_92 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %x_94 = sluice.transformer_layer %x_93 {heads = 48, kv_heads = 48, ffn = 24576, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x6144xbf16>
  %loss = sluice.output_layer %x_94 {vocab = 50257, norm = layernorm, tied} : tensor<1x2048x6144xbf16> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
