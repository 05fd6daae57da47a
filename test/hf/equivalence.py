#!/usr/bin/env python3
"""Sluice against transformers' own forward and backward on the same weights.

Builds a tiny random Hugging Face model of one family, saves it, and writes
what transformers computes for one step on fixed tokens -- the mean loss and
every parameter's gradient -- in the layout `sluice-run --check-against`
reads (one fp32 file per Sluice parameter, the whole tensor row-major, and
losses.txt). The lit test then runs sluice-run --load-hf on the directory
and checks it against these, within sluice-run's tolerances (relative 1e-5
on the loss, 1e-4 on gradients).

usage: equivalence.py FAMILY WORKDIR [aux]
  FAMILY: gpt2 | llama | llama-tied | llama3 | qwen2 | qwen3 | mistral |
          gemma | gemma2 | olmo2 | gemma3 | mixtral | qwen3_moe | olmoe |
          qwen2_moe | deepseek_v3 | deepseek_v3_yarn
          (qwen3, olmo2, gemma3 and the mixtures of experts: transformers
          4.51)
  aux: the mixtures of experts with the load-balancing loss
       (output_router_logits, router_aux_loss_coef 0.05), transformers'
       forward once per microbatch (a row), as it adds the loss per call
  writes WORKDIR/hf (the model), WORKDIR/tokens.bin (uint32),
  WORKDIR/expected (gradients and losses.txt)

usage: equivalence.py check-bias WORKDIR GAMMA
  DeepSeek-V3: the router biases WORKDIR/saved holds after one step with
  bias_update GAMMA against the balancing rule applied to transformers'
  routing of the step

usage: equivalence.py check-saved WORKDIR SLUICE_OUTPUT
  loads WORKDIR/saved (what sluice-run --save-hf wrote after one step) with
  transformers and checks its loss on the step's tokens against the second
  step's loss in SLUICE_OUTPUT (a two-step run's printout): the saved
  weights are the ones Sluice trained, under the names and layout
  transformers reads.
"""

import os
import sys

import numpy as np
import torch

import torch_compat  # noqa: F401 (before transformers: Qwen3's over torch 1.13)
import transformers

SEQ = 16          # tokens per sequence
WINDOW = 6        # Mistral's and Gemma-2's sliding window, shorter than SEQ
MICROBATCHES = 4  # rows of the step, one per microbatch
# The load-balancing loss's coefficient (router_aux_loss_coef, with
# output_router_logits) of the mixture-of-experts families: 0, off, unless
# the command line ends in "aux".
AUX = 0.0
VOCAB = 96


def make_model(family):
    if family == "gpt2":
        config = transformers.GPT2Config(
            vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=4,
            n_inner=64,
            # transformers' exact GELU, not GPT-2's default tanh form, and
            # an epsilon other than 1e-5: both must reach the kernels.
            activation_function="gelu", layer_norm_epsilon=1e-6,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        return transformers.GPT2LMHeadModel(config)
    if family == "gemma":
        # Its embeddings scaled by sqrt(hidden_size), its norms' gain
        # 1 + w, GeGLU with the tanh GELU, a padding token (0) whose
        # lookups give its row no gradient, the head tied.
        config = transformers.GemmaConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            head_dim=8, max_position_embeddings=SEQ, rms_norm_eps=1e-6,
            rope_theta=10000.0, hidden_activation="gelu_pytorch_tanh",
            pad_token_id=0, attention_dropout=0.0)
        return transformers.GemmaForCausalLM(config)
    if family == "gemma2":
        # Gemma's, and sandwich norms, the attention scale
        # query_pre_attn_scalar^-0.5 (not head_dim's), scores and logits
        # soft-capped (caps low enough to bend them), layer 0's attention
        # a sliding window (the even layers'), its eager attention
        # (transformers' SDPA path leaves the cap out).
        config = transformers.Gemma2Config(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            head_dim=8, max_position_embeddings=SEQ, rms_norm_eps=1e-6,
            rope_theta=10000.0, hidden_activation="gelu_pytorch_tanh",
            pad_token_id=0, attention_dropout=0.0, query_pre_attn_scalar=12,
            attn_logit_softcapping=2.0, final_logit_softcapping=3.0,
            sliding_window=WINDOW)
        config._attn_implementation = "eager"
        return transformers.Gemma2ForCausalLM(config)
    if family == "mistral":
        # Llama's block, every layer's attention a sliding window shorter
        # than the sequence (keys i - window < j <= i), eager attention.
        config = transformers.MistralConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=SEQ, rms_norm_eps=1e-6,
            rope_theta=10000.0, sliding_window=WINDOW,
            tie_word_embeddings=False, attention_dropout=0.0)
        config._attn_implementation = "eager"
        return transformers.MistralForCausalLM(config)
    if family == "qwen2":
        # Llama's block with biases on the query, key and value projections
        # (and no others), made nonzero in main().
        config = transformers.Qwen2Config(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=SEQ, rms_norm_eps=1e-6,
            rope_theta=10000.0, tie_word_embeddings=False,
            attention_dropout=0.0)
        return transformers.Qwen2ForCausalLM(config)
    if family == "qwen3":
        # Llama's block with every query and key head RMS-normalised before
        # the rotation (gains made unequal in main()), head_dim 16 so that
        # heads x head_dim (64) differs from hidden_size (32), eager
        # attention.
        config = transformers.Qwen3Config(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, max_position_embeddings=SEQ, rms_norm_eps=1e-6,
            rope_theta=10000.0, tie_word_embeddings=False,
            attention_dropout=0.0, sliding_window=None)
        config._attn_implementation = "eager"
        return transformers.Qwen3ForCausalLM(config)
    if family == "olmo2":
        # Llama's projections in a block normalised after each half only,
        # the whole query and key projections RMS-normalised before the
        # rotation (gains made unequal in main()), grouped-query attention
        # (2 key/value heads, so 2 tensor-parallel shards split the key
        # projection's norm), its padding token (1), eager attention.
        config = transformers.Olmo2Config(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=SEQ, rms_norm_eps=1e-6,
            rope_theta=10000.0, tie_word_embeddings=False,
            attention_dropout=0.0, pad_token_id=1)
        config._attn_implementation = "eager"
        return transformers.Olmo2ForCausalLM(config)
    if family == "mixtral":
        # Llama's attention (no window) with every feed-forward block a
        # mixture of 4 SwiGLU experts of width 32, 2 per token, their
        # router weights renormalised (Mixtral always does), eager
        # attention; the load-balancing loss with "aux" (output_router_logits
        # False otherwise,
        # MixtralConfig's default) and no router noise.
        config = transformers.MixtralConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=32,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=SEQ, rms_norm_eps=1e-6,
            rope_theta=10000.0, tie_word_embeddings=False,
            attention_dropout=0.0, sliding_window=None, num_local_experts=4,
            num_experts_per_tok=2, router_jitter_noise=0.0,
            output_router_logits=AUX > 0,
            router_aux_loss_coef=AUX)
        config._attn_implementation = "eager"
        return transformers.MixtralForCausalLM(config)
    if family == "qwen3_moe":
        # Qwen3's attention (head_dim 16, wider than hidden / heads) with
        # layers 0 and 2 mixtures of 4 SwiGLU experts of width 24, 2 per
        # token, weights renormalised (norm_topk_prob), and layer 1 dense
        # (mlp_only_layers) of width 64, eager attention.
        config = transformers.Qwen3MoeConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
            moe_intermediate_size=24, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            max_position_embeddings=SEQ, rms_norm_eps=1e-6,
            rope_theta=10000.0, tie_word_embeddings=False,
            attention_dropout=0.0, num_experts=4, num_experts_per_tok=2,
            norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[1],
            output_router_logits=AUX > 0,
            router_aux_loss_coef=AUX)
        config._attn_implementation = "eager"
        return transformers.Qwen3MoeForCausalLM(config)
    if family == "qwen2_moe":
        # Qwen2's attention (query, key and value biases) with layers 0 and
        # 2 mixtures of 4 SwiGLU experts of width 24, 2 per token, the
        # softmax's weights as they are, and a shared expert of width 16
        # scaled by its sigmoid gate; layer 1 dense (mlp_only_layers) of
        # width 64, eager attention.
        config = transformers.Qwen2MoeConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
            moe_intermediate_size=24, shared_expert_intermediate_size=16,
            num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=SEQ, rms_norm_eps=1e-6,
            rope_theta=10000.0, tie_word_embeddings=False,
            attention_dropout=0.0, num_experts=4, num_experts_per_tok=2,
            norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[1],
            output_router_logits=AUX > 0,
            router_aux_loss_coef=AUX, use_sliding_window=False)
        config._attn_implementation = "eager"
        return transformers.Qwen2MoeForCausalLM(config)
    if family in ("deepseek_v3", "deepseek_v3_yarn"):
        # DeepSeek-V3's block at its smallest: multi-head latent attention
        # (query latent 10, key/value latent 12, heads of 8 without
        # positions + 4 rotated in adjacent pairs, values of 6), layer 0
        # dense (first_k_dense_replace), layers 1 and 2 mixtures of 8
        # SwiGLU experts of width 16 in 4 groups, 2 per token from the 2
        # best groups by sigmoid scores plus the router's bias,
        # renormalised and scaled by 2.5, beside a shared expert; eager
        # attention.
        config = transformers.DeepseekV3Config(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
            moe_intermediate_size=16, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=4, n_shared_experts=1,
            n_routed_experts=8, routed_scaling_factor=2.5, kv_lora_rank=12,
            q_lora_rank=10, qk_rope_head_dim=4, v_head_dim=6,
            qk_nope_head_dim=8, n_group=4, topk_group=2,
            num_experts_per_tok=2, first_k_dense_replace=1,
            norm_topk_prob=True, max_position_embeddings=SEQ,
            rms_norm_eps=1e-6, rope_theta=10000.0, rope_interleave=True,
            attention_bias=False, attention_dropout=0.0,
            tie_word_embeddings=False,
            # deepseek_v3_yarn: YaRN over 4 original positions (the
            # 16-token context its factor 4 reaches), the rotation scaled
            # by mscale(4, 1) / mscale(4, 0.8) and the softmax by
            # mscale(4, 0.8)^2, as DeepSeek-V3's own config does at 40x.
            rope_scaling=None if family == "deepseek_v3" else {
                "type": "yarn", "factor": 4.0,
                "original_max_position_embeddings": 4, "beta_fast": 32.0,
                "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 0.8})
        config._attn_implementation = "eager"
        return transformers.DeepseekV3ForCausalLM(config)
    if family == "olmoe":
        # OLMo's whole-projection query and key norms in a pre-norm block,
        # every feed-forward block 4 SwiGLU experts of width 32, 2 per
        # token, the softmax's weights as they are (norm_topk_prob False,
        # OLMoE's default), its padding token (1), eager attention.
        config = transformers.OlmoeConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=32,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=SEQ, rms_norm_eps=1e-6,
            rope_theta=10000.0, tie_word_embeddings=False,
            attention_dropout=0.0, num_experts=4, num_experts_per_tok=2,
            norm_topk_prob=False, pad_token_id=1, output_router_logits=AUX > 0,
            router_aux_loss_coef=AUX)
        config._attn_implementation = "eager"
        return transformers.OlmoeForCausalLM(config)
    if family == "gemma3":
        # Gemma-2's block with every query and key head normalised (gains
        # 1 + w), local and global layers: of every 3 the last global
        # (rope_theta with a linear scaling), the others a sliding window
        # with rotary base rope_local_base_freq; its attention scale, no
        # soft-capping, eager attention.
        config = transformers.Gemma3TextConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
            num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
            head_dim=8, max_position_embeddings=SEQ, rms_norm_eps=1e-6,
            rope_theta=10000.0, rope_local_base_freq=100.0,
            rope_scaling={"rope_type": "linear", "factor": 4.0},
            hidden_activation="gelu_pytorch_tanh", pad_token_id=0,
            attention_dropout=0.0, query_pre_attn_scalar=12,
            sliding_window=WINDOW, sliding_window_pattern=3)
        config._attn_implementation = "eager"
        return transformers.Gemma3ForCausalLM(config)
    # llama3: Llama 3.1's scaled rotary frequencies (rope_type "llama3"),
    # its original context small enough that a 16-token sequence sees every
    # branch: head_dim 8's wavelengths 6.3 (kept: under 64 / 4), 63
    # (blended: under 64 / 1) and 628, 6283 (slowed by the factor).
    scaling = None
    if family == "llama3":
        scaling = {"rope_type": "llama3", "factor": 4.0,
                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 64}
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=256 if scaling else SEQ, rms_norm_eps=1e-6,
        rope_theta=10000.0, rope_scaling=scaling,
        tie_word_embeddings=family == "llama-tied", attention_dropout=0.0)
    return transformers.LlamaForCausalLM(config)


def sluice_gradients(family, model):
    """Every gradient under Sluice's name and layout (runtime/model/Parameters.cpp:
    linear maps [in, out], the query, key and value maps side by side)."""
    # (An expert no token reached has no gradient: zero.)
    g = {name: (p.grad if p.grad is not None else torch.zeros_like(p))
         .detach().double().numpy()
         for name, p in model.named_parameters()}
    out = {}
    config = model.config
    if family == "gpt2":
        t = "transformer."
        out["embed.tokens"] = g[t + "wte.weight"]
        out["embed.positions"] = g[t + "wpe.weight"]
        out["final_norm.weight"] = g[t + "ln_f.weight"]
        out["final_norm.bias"] = g[t + "ln_f.bias"]
        for i in range(config.n_layer):
            h, s = f"{t}h.{i}.", f"layers.{i}."
            # GPT-2's Conv1D stores [in, out] already.
            pairs = {"norm1": "ln_1", "norm2": "ln_2", "attn.qkv": "attn.c_attn",
                     "attn.out": "attn.c_proj", "mlp.up": "mlp.c_fc",
                     "mlp.down": "mlp.c_proj"}
            for mine, theirs in pairs.items():
                out[s + mine + ".weight"] = g[h + theirs + ".weight"]
                out[s + mine + ".bias"] = g[h + theirs + ".bias"]
        return out
    m = "model."
    out["embed.tokens"] = g[m + "embed_tokens.weight"]
    if not config.tie_word_embeddings:
        out["lm_head.weight"] = g["lm_head.weight"]
    out["final_norm.weight"] = g[m + "norm.weight"]
    for i in range(config.num_hidden_layers):
        h, s = f"{m}layers.{i}.", f"layers.{i}."
        if config.model_type == "olmo2":
            out[s + "post_attn_norm.weight"] = g[h + "post_attention_layernorm.weight"]
            out[s + "post_mlp_norm.weight"] = g[h + "post_feedforward_layernorm.weight"]
        elif config.model_type in ("gemma2", "gemma3_text"):
            out[s + "norm1.weight"] = g[h + "input_layernorm.weight"]
            out[s + "post_attn_norm.weight"] = g[h + "post_attention_layernorm.weight"]
            out[s + "norm2.weight"] = g[h + "pre_feedforward_layernorm.weight"]
            out[s + "post_mlp_norm.weight"] = g[h + "post_feedforward_layernorm.weight"]
        else:
            out[s + "norm1.weight"] = g[h + "input_layernorm.weight"]
            out[s + "norm2.weight"] = g[h + "post_attention_layernorm.weight"]
        if config.model_type == "deepseek_v3":
            deepseek_gradients(config, g, h, s, out)
            continue
        out[s + "attn.qkv.weight"] = np.concatenate(
            [g[h + f"self_attn.{p}_proj.weight"].T for p in "qkv"], axis=1)
        if config.model_type in ("qwen2", "qwen2_moe"):
            out[s + "attn.qkv.bias"] = np.concatenate(
                [g[h + f"self_attn.{p}_proj.bias"] for p in "qkv"])
        if config.model_type in ("qwen3", "olmo2", "gemma3_text",
                                 "qwen3_moe", "olmoe"):
            out[s + "attn.q_norm.weight"] = g[h + "self_attn.q_norm.weight"]
            out[s + "attn.k_norm.weight"] = g[h + "self_attn.k_norm.weight"]
        out[s + "attn.out.weight"] = g[h + "self_attn.o_proj.weight"].T
        if config.model_type == "mixtral":
            # The router [hidden, experts]; each map's experts stacked by
            # rows (w1 the gate, w3 the up, w2 the down map).
            moe = h + "block_sparse_moe."
            out[s + "mlp.router.weight"] = g[moe + "gate.weight"].T
            for mine, theirs in (("gate", "w1"), ("up", "w3"), ("down", "w2")):
                out[s + f"mlp.experts.{mine}.weight"] = np.concatenate(
                    [g[moe + f"experts.{e}.{theirs}.weight"].T
                     for e in range(config.num_local_experts)], axis=0)
            continue
        if h + "mlp.gate.weight" in g:
            # Qwen-MoE's and OLMoE's: the router mlp.gate, the experts'
            # maps Llama's names under mlp.experts.e.
            out[s + "mlp.router.weight"] = g[h + "mlp.gate.weight"].T
            for p in ("gate", "up", "down"):
                out[s + f"mlp.experts.{p}.weight"] = np.concatenate(
                    [g[h + f"mlp.experts.{e}.{p}_proj.weight"].T
                     for e in range(config.num_experts)], axis=0)
            if h + "mlp.shared_expert_gate.weight" in g:
                # Qwen2-MoE's shared expert and its gate [hidden, 1].
                for p in ("gate", "up", "down"):
                    out[s + f"mlp.shared.{p}.weight"] = \
                        g[h + f"mlp.shared_expert.{p}_proj.weight"].T
                out[s + "mlp.shared_gate.weight"] = \
                    g[h + "mlp.shared_expert_gate.weight"].T
            continue
        for p in ("gate", "up", "down"):
            out[s + f"mlp.{p}.weight"] = g[h + f"mlp.{p}_proj.weight"].T
    return out


def deepseek_gradients(config, g, h, s, out):
    """DeepSeek-V3's layer: multi-head latent attention's maps (the mla
    feature's names), then its mixture of experts (the router, its bias,
    which no gradient reaches, the experts stacked, the shared experts) or
    a dense block."""
    a = h + "self_attn."
    if config.q_lora_rank:
        out[s + "attn.q_a.weight"] = g[a + "q_a_proj.weight"].T
        out[s + "attn.q_a_norm.weight"] = g[a + "q_a_layernorm.weight"]
        out[s + "attn.q_b.weight"] = g[a + "q_b_proj.weight"].T
    else:
        out[s + "attn.q.weight"] = g[a + "q_proj.weight"].T
    out[s + "attn.kv_a.weight"] = g[a + "kv_a_proj_with_mqa.weight"].T
    out[s + "attn.kv_a_norm.weight"] = g[a + "kv_a_layernorm.weight"]
    out[s + "attn.kv_b.weight"] = g[a + "kv_b_proj.weight"].T
    out[s + "attn.out.weight"] = g[a + "o_proj.weight"].T
    if h + "mlp.gate.weight" not in g:
        for p in ("gate", "up", "down"):
            out[s + f"mlp.{p}.weight"] = g[h + f"mlp.{p}_proj.weight"].T
        return
    out[s + "mlp.router.weight"] = g[h + "mlp.gate.weight"].T
    out[s + "mlp.router.bias"] = np.zeros(config.n_routed_experts)
    for p in ("gate", "up", "down"):
        out[s + f"mlp.experts.{p}.weight"] = np.concatenate(
            [g[h + f"mlp.experts.{e}.{p}_proj.weight"].T
             for e in range(config.n_routed_experts)], axis=0)
        out[s + f"mlp.shared.{p}.weight"] = \
            g[h + f"mlp.shared_experts.{p}_proj.weight"].T


def deepseek_loads(model, inputs):
    """Each sparse layer's token copies per expert over the step's tokens,
    from transformers' own choice (DeepseekV3TopkRouter.get_topk_indices)."""
    loads = {}
    hooks = []
    for i, layer in enumerate(model.model.layers):
        gate = getattr(layer.mlp, "gate", None)
        if gate is None or not hasattr(gate, "get_topk_indices"):
            continue
        counts = np.zeros(model.config.n_routed_experts)
        loads[i] = counts

        def wrap(original, counts=counts):
            def chosen(scores):
                indices = original(scores)
                np.add.at(counts, indices.reshape(-1).numpy(), 1)
                return indices
            return chosen
        gate.get_topk_indices = wrap(gate.get_topk_indices)
        hooks.append(gate)
    with torch.no_grad():
        model(input_ids=inputs, use_cache=False)
    for gate in hooks:
        del gate.get_topk_indices
    return loads


def check_bias(work, gamma):
    """DeepSeek-V3's auxiliary-loss-free balancing (Liu et al., 2024,
    section 2.1.2) written again here: after the step, each expert's bias
    falls by gamma if the step gave it more copies than its layer's mean,
    rises by gamma if fewer. The loads are transformers' routing of the
    step's tokens with the initial weights and bias; the bias Sluice
    trained is the one --save-hf wrote after one step."""
    from safetensors.numpy import load_file
    if torch_compat.PATCHED:
        model = torch_compat.load_pretrained(transformers,
                                             os.path.join(work, "hf"))
    else:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            os.path.join(work, "hf"), torch_dtype=torch.float32,
            attn_implementation="eager")
    model.eval()
    inputs, _ = step_batch(work)
    loads = deepseek_loads(model, inputs)
    saved = {}
    for name in sorted(os.listdir(os.path.join(work, "saved"))):
        if name.endswith(".safetensors"):
            saved.update(load_file(os.path.join(work, "saved", name)))
    worst, moved = 0.0, 0
    for i, counts in loads.items():
        key = f"model.layers.{i}.mlp.gate.e_score_correction_bias"
        before = model.model.layers[i].mlp.gate.e_score_correction_bias
        want = before.double().numpy() + gamma * np.sign(counts.mean() - counts)
        got = saved[key].astype(np.float64)
        worst = max(worst, float(np.abs(got - want).max()))
        moved += int(np.count_nonzero(np.sign(counts.mean() - counts)))
    print(f"bias update: {len(loads)} layers, {moved} experts moved, "
          f"max abs error {worst:.2e}")
    if worst > 1e-6:
        sys.exit("error: the saved bias is not the rule's")


def step_batch(work):
    """sluice-run's windows: row i of the step is data[i * SEQ : i * SEQ +
    SEQ + 1], inputs and (shifted by one) labels. The file holds one step's
    windows, so every step reads the same ones."""
    data = np.fromfile(os.path.join(work, "tokens.bin"), dtype=np.uint32)
    batch = torch.tensor(np.stack(
        [data[i * SEQ:i * SEQ + SEQ + 1] for i in range(MICROBATCHES)]
    ).astype(np.int64))
    return batch[:, :-1], batch[:, 1:]


def mean_loss(model, inputs, labels):
    # No cache: a training step (and Gemma-3's hybrid cache needs torch 2).
    if getattr(model.config, "output_router_logits", False):
        # transformers adds the load-balancing loss per forward call, over
        # that call's tokens: one call per microbatch (a row), as
        # sluice-run adds it per microbatch, and their mean.
        total = 0
        for row in range(inputs.shape[0]):
            out = model(input_ids=inputs[row:row + 1], use_cache=False)
            total = total + torch.nn.functional.cross_entropy(
                out.logits[0].float(), labels[row]) + \
                model.config.router_aux_loss_coef * out.aux_loss
        return total / inputs.shape[0]
    logits = model(input_ids=inputs, use_cache=False).logits
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1))


def check_saved(work, printout):
    second = None
    with open(printout) as f:
        for line in f:
            if line.startswith("step 2: loss "):
                second = float(line.split()[3])
    if second is None:
        sys.exit(f"error: no 'step 2: loss' line in {printout}")
    saved = os.path.join(work, "saved")
    if torch_compat.PATCHED:
        model = torch_compat.load_pretrained(transformers, saved)
    else:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            saved, torch_dtype=torch.float32, attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        loss = mean_loss(model, *step_batch(work)).item()
    error = abs(loss - second) / abs(second)
    print(f"saved model: transformers loss {loss:.7f}, sluice step 2 "
          f"{second:.7f}, relative error {error:.2e}")
    if error > 1e-5:
        sys.exit("error: the saved model is not the one Sluice trained")


def main():
    if sys.argv[1] == "check-saved":
        check_saved(sys.argv[2], sys.argv[3])
        return
    if sys.argv[1] == "check-bias":
        check_bias(sys.argv[2], float(sys.argv[3]))
        return
    family, work = sys.argv[1], sys.argv[2]
    if sys.argv[3:] == ["aux"]:
        global AUX
        AUX = 0.05
    torch.manual_seed(0)
    model = make_model(family).float()
    model.eval()  # no dropout; gradients still flow
    # Larger weights than the initialiser's, so every gradient is well
    # above fp32 rounding.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(4.0)
            elif family in ("gemma", "gemma2", "gemma3"):
                p.normal_(0.0, 0.3)  # w of the gain 1 + w, 0 at init
            elif family in ("qwen3", "olmo2", "qwen3_moe", "olmoe",
                            "deepseek_v3", "deepseek_v3_yarn"):
                p.normal_(1.0, 0.3)  # the norms' gains, 1 at init
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.normal_(0.0, 0.05)  # DeepSeek-V3's router bias, 0 at init
        for name, p in model.named_parameters():
            if name.endswith("proj.bias"):
                p.normal_(0.0, 0.5)  # Qwen2's biases, 0 at init
    model.save_pretrained(os.path.join(work, "hf"), safe_serialization=True)

    rng = np.random.default_rng(1)
    data = rng.integers(0, VOCAB, MICROBATCHES * SEQ + 1, dtype=np.uint32)
    if family in ("gemma", "gemma2", "gemma3"):
        data[[3, 20, 41]] = 0  # the padding token, as an input
    if family in ("olmo2", "olmoe"):
        data[[5, 33]] = 1  # OLMo-2's and OLMoE's padding token
    data.tofile(os.path.join(work, "tokens.bin"))
    loss = mean_loss(model, *step_batch(work))
    loss.backward()

    expected = os.path.join(work, "expected")
    os.makedirs(expected, exist_ok=True)
    for name, grad in sluice_gradients(family, model).items():
        grad.astype(np.float32).tofile(os.path.join(expected, name + ".bin"))
    with open(os.path.join(expected, "losses.txt"), "w") as f:
        f.write(f"{loss.item():.10g}\n")
    print(f"{family}: transformers {transformers.__version__}, "
          f"loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
