#!/usr/bin/env python3
"""The Llama-shaped training step of sluice-bench-step in PyTorch.

    python3 bench/torch_step.py [--config examples/llama-3.2-1b/config.json]
        [--seq 2048] [--micro-batch 4] [--microbatches 8] [--steps 10]
        [--only eager|torch.compile] [--profile]

The same model (RMSNorm, grouped-query attention with rotary positions,
SwiGLU, tied embeddings), the same tokens per step (microbatches of
micro-batch x seq, gradients accumulated), fp32 master weights with bf16
autocast and fused AdamW: the way torchtitan-style training runs in plain
PyTorch. Prints tokens/s and MFU (model FLOPs as sluice-bench-step
counts them, against 989 TFLOP/s) for eager mode and for torch.compile.
--profile adds, after the timed steps, one step under torch.profiler and
its GPU kernels by time (what the step spends where, to set beside
`ncu --print-summary per-kernel` of sluice-bench-step).
"""
import argparse
import json
import math
import time

import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        h, heads, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = c.get("head_dim", h // heads)
        self.heads, self.kv = heads, kv
        self.norm1 = torch.nn.RMSNorm(h, eps=c.get("rms_norm_eps", 1e-5))
        self.norm2 = torch.nn.RMSNorm(h, eps=c.get("rms_norm_eps", 1e-5))
        self.qkv = torch.nn.Linear(h, (heads + 2 * kv) * self.hd, bias=False)
        self.out = torch.nn.Linear(heads * self.hd, h, bias=False)
        self.gate = torch.nn.Linear(h, c["intermediate_size"], bias=False)
        self.up = torch.nn.Linear(h, c["intermediate_size"], bias=False)
        self.down = torch.nn.Linear(c["intermediate_size"], h, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(
            [self.heads * self.hd, self.kv * self.hd, self.kv * self.hd], -1)
        q = q.view(b, s, self.heads, self.hd).transpose(1, 2)
        k = k.view(b, s, self.kv, self.hd).transpose(1, 2)
        v = v.view(b, s, self.kv, self.hd).transpose(1, 2)

        def rotate(t):
            a, c2 = t.chunk(2, -1)
            return t * cos + torch.cat([-c2, a], -1) * sin
        q, k = rotate(q), rotate(k)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           enable_gqa=True)
        x = x + self.out(o.transpose(1, 2).reshape(b, s, -1))
        y = self.norm2(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


class Llama(torch.nn.Module):
    def __init__(self, c, seq):
        super().__init__()
        self.embed = torch.nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.blocks = torch.nn.ModuleList(
            Block(c) for _ in range(c["num_hidden_layers"]))
        self.norm = torch.nn.RMSNorm(c["hidden_size"], eps=c.get("rms_norm_eps", 1e-5))
        hd = c.get("head_dim", c["hidden_size"] // c["num_attention_heads"])
        inv = c.get("rope_theta", 10000.0) ** (-torch.arange(0, hd, 2).double() / hd)
        angles = torch.arange(seq).double()[:, None] * inv[None, :]
        angles = torch.cat([angles, angles], -1)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, tokens, labels):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        logits = F.linear(self.norm(x), self.embed.weight)  # tied
        return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())


def flops_per_token(c, seq):
    h, heads, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim", h // heads)
    linear = h * (heads + 2 * kv) * hd + heads * hd * h + 3 * h * c["intermediate_size"]
    attention = 2 * heads * hd * (seq + 1) / 2
    per_layer = 6 * (linear + attention)
    return c["num_hidden_layers"] * per_layer + 6 * h * c["vocab_size"]


def run(model, opt, args, vocab, label):
    def step(i):
        for mb in range(args.microbatches):
            g = torch.Generator(device="cuda").manual_seed(i * 1000 + mb)
            t = torch.randint(0, vocab, (args.micro_batch, args.seq + 1),
                              device="cuda", generator=g)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(t[:, :-1], t[:, 1:]) / args.microbatches
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    for i in range(args.warmup):
        step(i)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(args.steps):
        loss = step(args.warmup + i)
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / args.steps
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step(args.warmup + args.steps)
            torch.cuda.synchronize()
        print(f"== {label}: one step's GPU kernels")
        print(prof.key_averages().table(sort_by="self_device_time_total",
                                        row_limit=60,
                                        max_name_column_width=100))
    return seconds, float(loss) * args.microbatches


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="examples/llama-3.2-1b/config.json")
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--only", choices=("eager", "torch.compile"))
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    c = json.load(open(args.config))
    tokens = args.microbatches * args.micro_batch * args.seq
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"{tokens} tokens per step")
    for label in ("eager", "torch.compile"):
        if args.only and label != args.only:
            continue
        torch.manual_seed(0)
        model = Llama(c, args.seq).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        if label == "torch.compile":
            model = torch.compile(model)
        seconds, loss = run(model, opt, args, c["vocab_size"], label)
        flops = flops_per_token(c, args.seq) * tokens / seconds
        print(f"{label}: step {seconds * 1e3:.1f} ms, {tokens / seconds:.0f} "
              f"tokens/s, {flops / 1e12:.1f} TFLOP/s, MFU "
              f"{100 * flops / 989.4e12:.1f}% of 989 TFLOP/s, loss {loss:.4f}")
        del model, opt
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
