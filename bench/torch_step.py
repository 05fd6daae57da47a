#!/usr/bin/env python3
"""The Llama-shaped training step of sluice-bench-step in PyTorch.

    python3 bench/torch_step.py [--config examples/llama-3.2-1b/config.json]
        [--seq 2048] [--micro-batch 4] [--microbatches 8] [--steps 10]
        [--warmup 3] [--only RECIPE/MODE,...] [--deterministic 0|1]
        [--samples-dir DIR] [--profile]

The same model (RMSNorm, grouped-query attention with rotary positions,
SwiGLU, tied embeddings) and the same tokens per step (microbatches of
micro-batch x seq, gradients accumulated) as sluice-bench-step, in two
recipes, each in three modes (docs/benchmarks.md):

  autocast     fp32 parameters and gradients, bf16 autocast, fused AdamW:
               torchtitan's single-GPU recipe.
  bf16-master  bf16 parameters and compute; each microbatch's gradients
               added into fp32 main gradients (Megatron-LM's main_grad),
               fused AdamW on fp32 master weights copied back to bf16 --
               the precision Sluice's bf16 keeps (DType.h: master weights,
               gradients and moments fp32).

  fp8-master   bf16-master with torchao's float8 training (pinned in the
               GPU bundle): every linear map of the blocks -- the maps
               Sluice's fp8 multiplies in FP8 -- in FP8 with tensorwise
               dynamic scaling, torchao's fastest recipe; the LM head and
               attention stay bf16, as in Sluice.
  fp8-rowwise-master  the same with rowwise scaling (its more accurate
               recipe).

  modes: eager, compile (torch.compile's default), max-autotune
  (torch.compile(mode="max-autotune")). The fp8 recipes are meant
  compiled (eager float8 casts are unfused and slow).

The loss: autocast computes cross-entropy in fp32 (its logits are cast);
bf16-master computes it on bf16 logits, as Sluice's bf16 does (its
softmax statistics in fp32). Each step is timed by CUDA events between the ends of consecutive
steps, the device drained at each (as bench/Samples.h does for Sluice);
the median, minimum, maximum and spread are printed and --samples-dir
writes torch-RECIPE-MODE.json with the raw samples (bench/step_table.py).
--deterministic 1 asks PyTorch for deterministic algorithms (as Sluice's
attention is by default); 0, PyTorch's own default, is its faster setting. --profile adds one step under torch.profiler.
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import traceback

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
        self.fp32_logits = True
        hd = c.get("head_dim", c["hidden_size"] // c["num_attention_heads"])
        inv = c.get("rope_theta", 10000.0) ** (-torch.arange(0, hd, 2).double() / hd)
        angles = torch.arange(seq).double()[:, None] * inv[None, :]
        angles = torch.cat([angles, angles], -1)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)
        # Sluice's initialisation (runtime/model/Parameters.cpp: every weight
        # matrix N(0, 0.02), norms one), so the losses agree in scale too.
        for m in self.modules():
            if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
                torch.nn.init.normal_(m.weight, std=0.02)

    def forward(self, tokens, labels):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        logits = F.linear(self.norm(x), self.embed.weight)  # tied
        if self.fp32_logits:
            logits = logits.float()
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten())


def flops_per_token(c, seq):
    h, heads, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim", h // heads)
    linear = h * (heads + 2 * kv) * hd + heads * hd * h + 3 * h * c["intermediate_size"]
    attention = 2 * heads * hd * (seq + 1) / 2
    per_layer = 6 * (linear + attention)
    return c["num_hidden_layers"] * per_layer + 6 * h * c["vocab_size"]


RECIPES = ("autocast", "bf16-master", "fp8-master", "fp8-rowwise-master")
# torchao's float8 recipe of each fp8 recipe.
FP8_SCALING = {"fp8-master": "tensorwise", "fp8-rowwise-master": "rowwise"}


def to_float8(model, recipe):
    """The blocks' linear maps as torchao's Float8Linear: the weight stays
    the same bf16 parameter (the optimizer's hooks see it), each product
    casts its operands to FP8 with dynamic scaling."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    config = Float8LinearConfig.from_recipe_name(FP8_SCALING[recipe])
    convert_to_float8_training(
        model, config=config,
        module_filter_fn=lambda module, name: name.startswith("blocks."))

MODES = ("eager", "compile", "max-autotune")


class Bf16Master:
    """bf16 parameters; fp32 main gradients and master weights (the
    Megatron-LM mixed-precision recipe)."""

    def __init__(self, model):
        self.params = [p for p in model.parameters()]
        self.masters = [torch.nn.Parameter(p.detach().float().clone())
                        for p in self.params]
        for p, m in zip(self.params, self.masters):
            m.grad = torch.zeros_like(m)

            # Each microbatch's bf16 gradient goes into the fp32 sum at
            # once, so bf16 never holds an accumulated sum.
            def add(param, main=m):
                main.grad.add_(param.grad)
                param.grad = None
            p.register_post_accumulate_grad_hook(add)
        self.opt = torch.optim.AdamW(self.masters, lr=1e-4, fused=True)

    def step(self):
        self.opt.step()
        with torch.no_grad():
            for p, m in zip(self.params, self.masters):
                p.copy_(m)
                m.grad.zero_()


class Autocast:
    def __init__(self, model):
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    def step(self):
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


def run(model, optimizer, args, vocab, recipe):
    autocast = recipe == "autocast"

    def step(i):
        for mb in range(args.microbatches):
            g = torch.Generator(device="cuda").manual_seed(i * 1000 + mb)
            t = torch.randint(0, vocab, (args.micro_batch, args.seq + 1),
                              device="cuda", generator=g)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                loss = model(t[:, :-1], t[:, 1:]) / args.microbatches
            loss.backward()
        optimizer.step()
        return loss

    # One mark at each step's end, the device drained first: a step's time
    # is the device time between two marks.
    marks = []
    loss = None
    for i in range(args.warmup + args.steps):
        loss = step(i)
        torch.cuda.synchronize()
        marks.append(torch.cuda.Event(enable_timing=True))
        marks[-1].record()
    torch.cuda.synchronize()
    samples = [marks[i - 1].elapsed_time(marks[i])
               for i in range(args.warmup, len(marks))]
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step(len(marks))
            torch.cuda.synchronize()
        print(f"== {recipe}: one step's GPU kernels")
        print(prof.key_averages().table(sort_by="self_device_time_total",
                                        row_limit=60,
                                        max_name_column_width=100))
    return samples, float(loss) * args.microbatches


def versions():
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "python": sys.version.split()[0],
        "torchao": _torchao_version(),
    }


def _torchao_version():
    try:
        import torchao
        return getattr(torchao, "__version__", "unknown")
    except ImportError:
        return None


def summary(samples):
    ordered = sorted(samples)
    median = statistics.median(ordered)
    return median, ordered[0], ordered[-1], (ordered[-1] - ordered[0]) / median


def baseline(args, c, recipe, mode, tokens):
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = Llama(c, args.seq).cuda()
    if recipe != "autocast":
        model = model.to(torch.bfloat16)
        model.fp32_logits = False
        if recipe in FP8_SCALING:
            to_float8(model, recipe)
        optimizer = Bf16Master(model)
    else:
        optimizer = Autocast(model)
    if mode == "compile":
        model = torch.compile(model)
    elif mode == "max-autotune":
        model = torch.compile(model, mode="max-autotune")
    samples, loss = run(model, optimizer, args, c["vocab_size"], recipe)
    median, low, high, spread = summary(samples)
    flops = flops_per_token(c, args.seq) * tokens / (median / 1e3)
    name = f"torch {recipe} {mode}"
    print(f"{name}: step median {median:.2f} ms (min {low:.2f}, max "
          f"{high:.2f}, spread {100 * spread:.1f}% over {len(samples)}), "
          f"{tokens / (median / 1e3):.0f} tokens/s, {flops / 1e12:.1f} "
          f"TFLOP/s, MFU {100 * flops / 989.4e12:.1f}% of 989 TFLOP/s, "
          f"loss {loss:.4f}", flush=True)
    if args.samples_dir:
        doc = {
            "name": name, "tool": "bench/torch_step.py", "unit": "ms",
            "samples": samples, "median": median, "min": low, "max": high,
            "spread": spread, "device": torch.cuda.get_device_name(),
            "recipe": recipe, "mode": mode,
            "fp8_scaling": FP8_SCALING.get(recipe),
            "deterministic": bool(args.deterministic),
            "loss_logits": "fp32" if recipe == "autocast" else "bf16",
            "tokens_per_step": tokens,
            "warmup": args.warmup,
            "model_flops_per_token": flops_per_token(c, args.seq),
            "mfu_989": flops / 989.4e12, "last_loss": loss,
            "versions": versions(),
            "date": datetime.datetime.now(datetime.timezone.utc)
                    .strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        path = os.path.join(args.samples_dir, f"torch-{recipe}-{mode}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(doc, f, indent=2)
        os.replace(path + ".tmp", path)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="examples/llama-3.2-1b/config.json")
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--only", default="",
                   help="comma-separated RECIPE/MODE (default: every "
                        "recipe in every mode)")
    p.add_argument("--deterministic", type=int, choices=(0, 1), default=0)
    p.add_argument("--samples-dir", default="")
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    if args.steps < 1 or args.warmup < 1:
        p.error("--steps and --warmup must each be at least 1")
    wanted = [w for w in args.only.split(",") if w] or \
        [f"{r}/{m}" for r in RECIPES for m in MODES]
    for w in wanted:
        r, _, m = w.partition("/")
        if r not in RECIPES or m not in MODES:
            p.error(f"--only: '{w}' is not RECIPE/MODE with RECIPE one of "
                    f"{', '.join(RECIPES)} and MODE one of {', '.join(MODES)}")
    if args.deterministic:
        # cuBLAS needs a fixed workspace to be deterministic.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
    c = json.load(open(args.config))
    tokens = args.microbatches * args.micro_batch * args.seq
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"{tokens} tokens per step, deterministic {args.deterministic}, "
          f"versions {versions()}", flush=True)
    failed = 0
    for w in wanted:
        recipe, _, mode = w.partition("/")
        try:
            baseline(args, c, recipe, mode, tokens)
        except Exception:  # one baseline's failure leaves the others' figures
            failed = 1
            print(f"torch {recipe} {mode}: FAILED", flush=True)
            traceback.print_exc()
        torch.cuda.empty_cache()
    sys.exit(failed)


if __name__ == "__main__":
    main()
