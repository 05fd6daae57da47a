#!/usr/bin/env python3
"""The CPU training step of bench/cpu-vs-torch.sh in PyTorch eager.

    python3 bench/torch_cpu_step.py make CELL DIR
        writes DIR/hf (a random Hugging Face model of the cell, saved by
        transformers) and DIR/tokens.bin (one step's tokens, uint32, in
        sluice-run's windows: row i is data[i * SEQ : i * SEQ + SEQ + 1])
    python3 bench/torch_cpu_step.py run DIR --steps N --threads T
        trains N steps of the model in DIR on its tokens and prints, per
        step, 'step I: loss L | MS ms/step' (the format sluice-run prints)

Cells (issue 38): gpt2 -- GPT-2-shaped, hidden 768, 6 layers, 12 heads,
vocabulary 50257, tanh GELU; llama -- Llama-shaped, hidden 512, 8 layers,
8 query and 2 key/value heads, feed-forward 1408, vocabulary 32000,
untied head; mixtral -- the llama cell with each feed-forward block 8
SwiGLU experts of width 704, 2 per token (issue 53: a Mixtral-shaped
step). All fp32, 2 sequences of 512 tokens a step.

The baseline is PyTorch as a user would run it at its fastest on a CPU:
transformers' model with its SDPA attention (F.scaled_dot_product_attention),
torch.optim.AdamW with fused=True (its single-kernel CPU path, faster
than the default for-each one), gradients set to None between steps,
torch.set_num_threads(T). Each step is timed by the wall clock from the
end of the last one, as sluice-run times its steps.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
import transformers

SEQ = 512
ROWS = 2
LR = 1e-4
WEIGHT_DECAY = 0.1


def make_config(cell):
    if cell == "gpt2":
        return transformers.GPT2Config(
            vocab_size=50257, n_positions=SEQ, n_embd=768, n_layer=6,
            n_head=12, activation_function="gelu_new", resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0, torch_dtype="float32")
    if cell == "llama":
        return transformers.LlamaConfig(
            vocab_size=32000, hidden_size=512, intermediate_size=1408,
            num_hidden_layers=8, num_attention_heads=8,
            num_key_value_heads=2, max_position_embeddings=SEQ,
            rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
            attention_dropout=0.0, torch_dtype="float32")
    if cell == "mixtral":
        # The llama cell with every feed-forward block a mixture of 8
        # SwiGLU experts, 2 per token, each half the llama cell's width:
        # the same active FLOPs per token, 4x the feed-forward weights.
        return transformers.MixtralConfig(
            vocab_size=32000, hidden_size=512, intermediate_size=704,
            num_hidden_layers=8, num_attention_heads=8,
            num_key_value_heads=2, max_position_embeddings=SEQ,
            rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
            attention_dropout=0.0, num_local_experts=8,
            num_experts_per_tok=2, router_jitter_noise=0.0,
            output_router_logits=False, sliding_window=None,
            torch_dtype="float32")
    sys.exit(f"error: unknown cell '{cell}' (gpt2, llama or mixtral)")


def make(cell, work):
    torch.manual_seed(0)
    config = make_config(cell)
    model = transformers.AutoModelForCausalLM.from_config(config).float()
    model.save_pretrained(os.path.join(work, "hf"), safe_serialization=True)
    rng = np.random.default_rng(1)
    data = rng.integers(0, config.vocab_size, ROWS * SEQ + 1,
                        dtype=np.uint32)
    data.tofile(os.path.join(work, "tokens.bin"))
    print(f"{cell}: {sum(p.numel() for p in model.parameters())} "
          f"parameters, transformers {transformers.__version__}")


def run(work, steps, threads, experts):
    torch.set_num_threads(threads)
    # A mixture of experts' expert loop: transformers 5's implementations
    # (eager: a loop over the experts hit; batched_mm; grouped_mm: one
    # torch grouped matmul), chosen by the caller (cpu-vs-torch.sh times
    # each and keeps the fastest).
    extra = {"experts_implementation": experts} if experts else {}
    model = transformers.AutoModelForCausalLM.from_pretrained(
        os.path.join(work, "hf"), dtype=torch.float32,
        attn_implementation="sdpa", **extra)
    model.train()  # the configs have no dropout
    data = np.fromfile(os.path.join(work, "tokens.bin"), dtype=np.uint32)
    batch = torch.tensor(np.stack(
        [data[i * SEQ:i * SEQ + SEQ + 1] for i in range(ROWS)]
    ).astype(np.int64))
    inputs, labels = batch[:, :-1], batch[:, 1:]
    # AdamW's decay on matrices and tables, not on norms or biases, as
    # sluice-run --weight-decay does.
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": WEIGHT_DECAY},
         {"params": rest, "weight_decay": 0.0}],
        lr=LR, betas=(0.9, 0.999), eps=1e-8, fused=True)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"transformers {transformers.__version__}"
          + (f", experts {experts}" if experts else ""), flush=True)
    last = time.perf_counter()
    for step in range(1, steps + 1):
        logits = model(input_ids=inputs).logits
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        value = loss.item()
        now = time.perf_counter()
        print(f"step {step}: loss {value:.7f} | "
              f"{(now - last) * 1e3:.1f} ms/step", flush=True)
        last = now


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "make":
        if len(sys.argv) != 4:
            sys.exit("usage: torch_cpu_step.py make CELL DIR")
        make(sys.argv[2], sys.argv[3])
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("command", choices=["run"])
    p.add_argument("work")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--experts", default="",
                   help="experts_implementation (a mixture of experts)")
    a = p.parse_args()
    run(a.work, a.steps, a.threads, a.experts)


if __name__ == "__main__":
    main()
