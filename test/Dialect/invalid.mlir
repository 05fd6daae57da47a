// One case per verifier rule of the model level, named after the rule.
// RUN: sluice-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

// hidden-not-divisible-by-heads
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x30xf32>
  // expected-error@+1 {{'sluice.transformer_layer' op hidden size 30 is not divisible by 'heads' = 4}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = layernorm, mlp = gelu} : tensor<1x4x30xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = layernorm} : tensor<1x4x30xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// heads-not-divisible-by-kv-heads
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'heads' = 4 is not divisible by 'kv_heads' = 3}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 3, ffn = 8, norm = layernorm, mlp = gelu} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// non-positive-rope-theta
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'rope_theta' must be positive, got 0.000000e+00}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, rope_theta = 0.0} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// rope-needs-even-head-size
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x30xf32>
  // expected-error@+1 {{rotary positions ('rope_theta') need an even head size, got 15}}
  %x = sluice.transformer_layer %emb {heads = 2, kv_heads = 2, ffn = 8, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<1x4x30xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x30xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// rope-scaling-without-theta
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'rope_scaling' scales rotary frequencies, but the layer has no 'rope_theta'}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, rope_scaling = llama3<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_positions = 8192>} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// rope-scaling-slower-high-than-low
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{rope_scaling: 'high_freq_factor' must exceed 'low_freq_factor' > 0, got 1.000000 and 4.000000}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, rope_scaling = llama3<factor = 8.0, low_freq_factor = 4.0, high_freq_factor = 1.0, original_max_positions = 8192>} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// bias-and-qkv-bias
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'qkv_bias' with 'bias', which has every bias already}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, bias, qkv_bias} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// top-k-beyond-the-experts
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'top_k' = 5 must be between 1 and 'experts' = 4}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, experts = 4, top_k = 5} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// top-k-without-experts
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'top_k' belongs to a mixture of experts, but the layer has no 'experts'}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, top_k = 2} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// experts-are-gated
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{a mixture of experts' experts are gated blocks ('mlp' = swiglu or geglu); this layer's 'mlp' is gelu}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = gelu, experts = 4, top_k = 2} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// bias-and-qkv-bias-generic: the spec's attribute form is the plan's JSON
// object of the layer, held to the same rules.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'qkv_bias' with 'bias', which has every bias already}}
  %x = "sluice.transformer_layer"(%emb) <{spec = "{\"kind\": \"transformer\", \"heads\": 4, \"kv_heads\": 4, \"ffn\": 8, \"norm\": \"rmsnorm\", \"mlp\": \"swiglu\", \"bias\": true, \"qkv_bias\": true}"}> ({}) : (tensor<1x4x32xf32>) -> tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// spec-attribute-not-a-layer
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{invalid block spec: has no 'ffn'}}
  %x = "sluice.transformer_layer"(%emb) <{spec = "{\"kind\": \"transformer\", \"heads\": 4, \"kv_heads\": 4, \"norm\": \"rmsnorm\", \"mlp\": \"swiglu\"}"}> ({}) : (tensor<1x4x32xf32>) -> tensor<1x4x32xf32>
}

// -----

// key-given-twice
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'bias' is given twice}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, bias, bias} : tensor<1x4x32xf32>
}

// -----

// top-groups-without-groups
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'top_groups' = 1 limits routing to groups, but the layer has no 'expert_groups'}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, experts = 4, top_k = 2, top_groups = 1} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// groups-divide-the-experts
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'expert_groups' = 3 must divide 'experts' = 4 and be at most 64}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, experts = 4, top_k = 2, expert_groups = 3, top_groups = 1} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// top-groups-hold-top-k
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'top_groups' = 1 groups of 2 experts hold fewer than 'top_k' = 4}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, experts = 8, top_k = 4, expert_groups = 4, top_groups = 1} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// bias-update-needs-sigmoid
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'bias_update' moves the bias of a sigmoid router; this layer's 'router' is softmax}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, experts = 4, top_k = 2, bias_update = 0.001} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// aux-loss-is-the-softmax-routers
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'aux_loss' is the softmax router's load-balancing loss (transformers' load_balancing_loss_func); a sigmoid router balances by 'bias_update'}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, experts = 4, top_k = 2, router = sigmoid, aux_loss = 0.01} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// ungated-without-shared-expert
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'shared_gate' = false, but the layer has no shared expert ('shared_ffn')}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, experts = 4, top_k = 2, shared_gate = false} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// router-without-experts
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'router' belongs to a mixture of experts, but the layer has no 'experts'}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, router = sigmoid} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// latent-attention-keys-per-head
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{multi-head latent attention ('kv_lora_rank') gives every head its own key and value: 'kv_heads' = 2 must equal 'heads' = 4}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 2, ffn = 8, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, head_dim = 12, kv_lora_rank = 8, rope_head_dim = 4} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// latent-attention-rope-part
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'rope_head_dim' = 12 must be even, at least 2 and below the head size 12 (the rest of each query and key head has no positions)}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, head_dim = 12, kv_lora_rank = 8, rope_head_dim = 12} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// latent-attention-rotates
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{multi-head latent attention rotates each head's last 'rope_head_dim' = 4 dimensions: the layer needs 'rope_theta'}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, head_dim = 12, kv_lora_rank = 8, rope_head_dim = 4} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// latent-attention-replaces-projection
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'qk_norm' acts on the core's QKV projection, which multi-head latent attention ('kv_lora_rank') replaces}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, head_dim = 12, kv_lora_rank = 8, rope_head_dim = 4, qk_norm = heads} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// query-latent-without-latent-attention
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'q_lora_rank' belongs to multi-head latent attention, but the layer has no 'kv_lora_rank'}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, q_lora_rank = 8} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// aux-loss-without-experts
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'aux_loss' belongs to a mixture of experts, but the layer has no 'experts'}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, aux_loss = 0.01} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// aux-loss-not-positive
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'aux_loss' must be a positive number, got -1}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, experts = 4, top_k = 2, aux_loss = -1.0} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// aux-loss-differs-between-layers
// expected-error@+1 {{layer 1: 'aux_loss' = 0.020000 differs from the first sparse layer's 0.010000: the load-balancing loss ('aux_loss') takes every sparse layer's routing as one}}
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, experts = 4, top_k = 2, aux_loss = 0.01} : tensor<1x4x32xf32>
  %y = sluice.transformer_layer %x {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, experts = 4, top_k = 2, aux_loss = 0.02} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %y {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// aux-loss-experts-differ
// expected-error@+1 {{layer 1: 'experts' = 8 differs from the first sparse layer's 4}}
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, experts = 4, top_k = 2, aux_loss = 0.01} : tensor<1x4x32xf32>
  %y = sluice.transformer_layer %x {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, experts = 8, top_k = 2, aux_loss = 0.01} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %y {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// unknown-key
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{unknown key 'qk_nrom' in a transformer layer's spec (expected one of heads, kv_heads, head_dim, v_head_dim, ffn, norm, mlp, bias, qkv_bias, qk_norm, rope_theta, rope_scaling, pre_norms, post_norms, window, kv_lora_rank, q_lora_rank, rope_head_dim, rope_interleave, experts, top_k, norm_top_k, shared_ffn, aux_loss, router, expert_groups, top_groups, routed_scale, shared_gate, bias_update, features)}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, qk_nrom = heads} : tensor<1x4x32xf32>
}

// -----

// unknown-qk-norm
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{unknown qk_norm 'head' (expected none, heads, projection)}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, qk_norm = head} : tensor<1x4x32xf32>
}

// -----

// missing-required-key
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{the spec has no 'ffn'}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, norm = rmsnorm, mlp = swiglu} : tensor<1x4x32xf32>
}

// -----

// unknown-feature
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{unknown block feature 'mixture'}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, features = ["mixture"]} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// non-positive-window
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'window' must be positive, got 0}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = rmsnorm, mlp = swiglu, window = 0} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = rmsnorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// non-positive-heads
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'heads' must be positive, got 0}}
  %x = sluice.transformer_layer %emb {heads = 0, kv_heads = 4, ffn = 8, norm = layernorm, mlp = gelu} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// non-positive-kv-heads
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'kv_heads' must be positive, got -2}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = -2, ffn = 8, norm = layernorm, mlp = gelu} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// non-positive-head-dim
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'head_dim' must be positive, got 0}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, head_dim = 0, ffn = 8, norm = layernorm, mlp = gelu} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// non-positive-ffn
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'ffn' must be positive, got -128}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = -128, norm = layernorm, mlp = gelu} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// non-positive-seq-len
// expected-error@+1 {{'seq_len' must be positive, got 0}}
sluice.model @m {seq_len = 0, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x1x32xf32>
  %loss = sluice.output_layer %emb {vocab = 8, norm = layernorm} : tensor<1x1x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// non-positive-micro-batch
// expected-error@+1 {{'micro_batch' must be positive, got -1}}
sluice.model @m {seq_len = 4, micro_batch = -1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %emb {vocab = 8, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// non-positive-positions
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  // expected-error@+1 {{'positions' must be positive, got 0}}
  %emb = sluice.embedding {vocab = 8, positions = 0} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %emb {vocab = 8, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// non-positive-activation-size
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  // expected-error@+1 {{result must be a static tensor<micro_batch x seq_len x hidden> with positive sizes, got 'tensor<1x4x0xf32>'}}
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x0xf32>
  // Layers verify independently (they are isolated from above), so the
  // output layer reports the same bad activation.
  // expected-error@+1 {{input must be a static tensor<micro_batch x seq_len x hidden> with positive sizes, got 'tensor<1x4x0xf32>'}}
  %loss = sluice.output_layer %emb {vocab = 8, norm = layernorm} : tensor<1x4x0xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// embedding-vocab-below-one
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  // expected-error@+1 {{'sluice.embedding' op 'vocab' must be at least 1, got 0}}
  %emb = sluice.embedding {vocab = 0} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %emb {vocab = 8, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// output-vocab-below-one
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'sluice.output_layer' op 'vocab' must be at least 1, got -5}}
  %loss = sluice.output_layer %emb {vocab = -5, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// missing-output-layer (the loss arrives as a block argument to get this far)
// expected-error@+1 {{'sluice.model' op has no sluice.output_layer}}
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
^bb0(%loss: tensor<f32>):
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  sluice.return %loss : tensor<f32>
}

// -----

// duplicated-output-layer
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-note@+1 {{first sluice.output_layer is here}}
  %loss0 = sluice.output_layer %emb {vocab = 8, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  // expected-error@+1 {{'sluice.output_layer' op duplicates the model's sluice.output_layer}}
  %loss1 = sluice.output_layer %emb {vocab = 8, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss1 : tensor<f32>
}

// -----

// missing-embedding (the activation arrives as a block argument)
// expected-error@+1 {{'sluice.model' op has no sluice.embedding}}
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
^bb0(%x: tensor<1x4x32xf32>):
  %loss = sluice.output_layer %x {vocab = 8, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// duplicated-embedding
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  // expected-note@+1 {{first sluice.embedding is here}}
  %emb0 = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'sluice.embedding' op duplicates the model's sluice.embedding}}
  %emb1 = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %emb1 {vocab = 8, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// activation-shape-does-not-chain-with-model
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  // expected-error@+1 {{'sluice.embedding' op activation type 'tensor<1x8x32xf32>' does not chain: expected 'tensor<1x16x32xf32>' (micro_batch = 1, seq_len = 16, hidden = 32, dtype = 'f32')}}
  %emb = sluice.embedding {vocab = 8} : tensor<1x8x32xf32>
  %loss = sluice.output_layer %emb {vocab = 8, norm = layernorm} : tensor<1x8x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// activation-dtype-does-not-chain-with-model
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = bf16} {
  // expected-error@+1 {{activation type 'tensor<1x4x32xf32>' does not chain: expected 'tensor<1x4x32xbf16>'}}
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %emb {vocab = 8, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// layer-result-does-not-chain-with-input
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'sluice.transformer_layer' op failed to verify that all of {input, result} have same type}}
  %x = "sluice.transformer_layer"(%emb) <{spec = "{\"kind\": \"transformer\", \"heads\": 4, \"kv_heads\": 4, \"ffn\": 8, \"norm\": \"layernorm\", \"mlp\": \"gelu\"}"}> ({}) : (tensor<1x4x32xf32>) -> tensor<1x4x64xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = layernorm} : tensor<1x4x64xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// input-is-not-the-preceding-layer
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-note@+1 {{preceding layer is here}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = layernorm, mlp = gelu} : tensor<1x4x32xf32>
  // expected-error@+1 {{'sluice.output_layer' op input does not chain: it is not the result of the preceding layer}}
  %loss = sluice.output_layer %emb {vocab = 8, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// seq-len-exceeds-learned-positions
// expected-error@+1 {{'seq_len' = 16 exceeds the embedding's 'positions' = 8}}
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8, positions = 8} : tensor<1x16x32xf32>
  %loss = sluice.output_layer %emb {vocab = 8, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// tied-vocab-mismatch
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  // expected-note@+1 {{embedding is here}}
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'sluice.output_layer' op is tied to the embedding but 'vocab' = 9 differs from the embedding's 'vocab' = 8}}
  %loss = sluice.output_layer %emb {vocab = 9, norm = layernorm, tied} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// output-vocab-smaller: the labels are input tokens, each needs a logit
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  // expected-note@+1 {{embedding is here}}
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'sluice.output_layer' op 'vocab' = 7 is smaller than the embedding's 'vocab' = 8: the labels are input tokens, and some would have no logit}}
  %loss = sluice.output_layer %emb {vocab = 7, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// ffn-beyond-any-model: 2^62, whose products overflowed the cost model
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'sluice.transformer_layer' op 'ffn' = 4611686018427387904 is larger than any size Sluice takes (1048576)}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 4611686018427387904, norm = layernorm, mlp = gelu} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %x {vocab = 8, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// hidden-beyond-any-model
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  // expected-error@+1 {{'sluice.embedding' op result 'tensor<1x4x2097152xf32>' has a size larger than any Sluice takes (1048576)}}
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x2097152xf32>
  // expected-error@+1 {{'sluice.output_layer' op input 'tensor<1x4x2097152xf32>' has a size larger than any Sluice takes (1048576)}}
  %loss = sluice.output_layer %emb {vocab = 8, norm = layernorm} : tensor<1x4x2097152xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// dtype-not-float
// expected-error@+1 {{'dtype' must be a floating-point type, got 'i32'}}
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = i32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xi32>
  %loss = sluice.output_layer %emb {vocab = 8, norm = layernorm} : tensor<1x4x32xi32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// non-layer-op-in-model
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{'test.op' op is not a model-level layer and cannot appear in a sluice.model}}
  "test.op"() : () -> ()
  %loss = sluice.output_layer %emb {vocab = 8, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// unknown-norm-kind
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  // expected-error@+1 {{unknown norm 'batchnorm' (expected layernorm, rmsnorm)}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 8, norm = batchnorm, mlp = gelu} : tensor<1x4x32xf32>
}

// -----

// model-with-block-arguments
// expected-error@+1 {{'sluice.model' op body must not have block arguments: a model's tokens and labels are implicit, got 1}}
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
^bb0(%unused: tensor<f32>):
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %emb {vocab = 8, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// token-slices-do-not-cover-the-sequence
// expected-error@+1 {{'sluice.model' op 'token_slices' sum to 3, but 'seq_len' = 4}}
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} attributes {token_slices = array<i64: 2, 1>} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %emb {vocab = 8, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// token-slices-not-positive
// expected-error@+1 {{'sluice.model' op 'token_slices' must be positive lengths, got 0}}
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} attributes {token_slices = array<i64: 4, 0>} {
  %emb = sluice.embedding {vocab = 8} : tensor<1x4x32xf32>
  %loss = sluice.output_layer %emb {vocab = 8, norm = layernorm} : tensor<1x4x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// layer-after-the-output-layer
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
  // expected-note@+1 {{output layer is here}}
  %l = sluice.output_layer %e {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
  // expected-error@+1 {{'sluice.transformer_layer' op comes after the model's sluice.output_layer}}
  %x = sluice.transformer_layer %e {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
  sluice.return %l : tensor<f32>
}
