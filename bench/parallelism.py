#!/usr/bin/env python3
"""Predicted 3D-parallel training on H100s: pp x tp x dp, schedule,
recomputation and vocabulary layers, under sluice-compile's analytic
cost model (--costs h100; docs/parallelism.md says what it prices).

Two grids (issue 12):

* `fixed`: a fixed number of GPUs and a fixed global batch, every
  (pp, tp, dp) that multiplies to it, for the ~4B model of
  Yeung et al., 2024 (Table 1: 32 GPUs, 128 sequences of
  2048 tokens) and Llama-3-70B (512 GPUs, 1024 sequences of 8192 tokens);
* `blog`: Llama-3-70B on 16,384 GPUs with tp = 8, the (pp, dp,
  microbatches) rows of Weitkamp, 2024's 3D table.

Every configuration with replicas runs with and without ZeRO-1
(`--zero 1`: the optimizer state sharded over dp), every one with shards
with and without sequence parallelism (`--sequence-parallel`).

Each row: predicted step time, MFU, tokens/s per GPU, bubble, the largest
per-device memory (parameters, gradients, Adam state and activations of
one shard) and whether it fits an 80 GB H100, and the gradient
all-reduce's exposed time.

    python3 bench/parallelism.py [fixed|blog|all] [--csv FILE] [--jobs N]
"""

import argparse
import concurrent.futures
import csv
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMPILE = os.path.join(ROOT, "build", "bin", "sluice-compile")
GPU_BYTES = 80e9  # H100 SXM

MODELS = {
    "vp-4b": os.path.join(ROOT, "examples", "vocab-parallelism",
                          "table1-4b.mlir"),
    "llama-3-70b": os.path.join(ROOT, "examples", "llama-3-70b",
                                "config.json"),
}

FIELDS = ["grid", "model", "gpus", "pp", "tp", "dp", "zero", "microbatches",
          "schedule", "recompute", "vocab", "sequence_parallel",
          "global_batch_tokens",
          "step_time_s", "mfu", "tokens_per_s_per_gpu", "bubble_ratio",
          "peak_memory_gib", "fits_80gb", "gradient_sync_exposed_s",
          "tensor_parallel_s", "error"]


def run(job):
    """Compiles one configuration and reads its report."""
    (grid, model, seq, gpus, pp, tp, dp, zero, m, schedule, recompute, vocab,
     sp) = job
    row = dict(grid=grid, model=model, gpus=gpus, pp=pp, tp=tp, dp=dp,
               zero=zero, microbatches=m, schedule=schedule,
               recompute=recompute, vocab=vocab,
               sequence_parallel="yes" if sp else "no",
               global_batch_tokens=m * dp * seq)
    with tempfile.TemporaryDirectory() as work:
        report = os.path.join(work, "report.json")
        cmd = [COMPILE, MODELS[model], "--pp", str(pp), "--tp", str(tp),
               "--dp", str(dp), "--zero", str(zero), "--microbatches", str(m),
               "--schedule",
               schedule, "--recompute", recompute, "--vocab", vocab,
               "--costs", "h100", "--seq-len", str(seq), "--micro-batch", "1",
               "--report", report] + (["--sequence-parallel"] if sp else [])
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            row["error"] = (done.stderr.strip().splitlines() or ["?"])[-1]
            return row
        r = json.load(open(report))
    peak = max(d["peak_memory_bytes"] for d in r["per_device"])
    row.update(
        step_time_s="%.4f" % r["step_time"],
        mfu="%.4f" % r["mfu"],
        tokens_per_s_per_gpu="%.0f" % (m * dp * seq / r["step_time"] / gpus),
        bubble_ratio="%.4f" % r["bubble_ratio"],
        peak_memory_gib="%.1f" % (peak / 2**30),
        fits_80gb="yes" if peak <= GPU_BYTES else "no",
        gradient_sync_exposed_s="%.4f" % max(
            d["gradient_sync_exposed"] for d in r["per_device"]),
        tensor_parallel_s="%.4f" % max(
            d["tensor_parallel_time"] for d in r["per_device"]),
        error="")
    return row


def fixed_jobs():
    jobs = []
    # (model, sequence, GPUs, global batch in sequences, pp, tp choices)
    settings = [("vp-4b", 2048, 32, 128, [1, 2, 4, 8], [1, 2, 4, 8]),
                ("llama-3-70b", 8192, 512, 1024, [2, 4, 8, 16], [2, 4, 8])]
    for model, seq, gpus, batch, pps, tps in settings:
        for pp in pps:
            for tp in tps:
                if gpus % (pp * tp):
                    continue
                dp = gpus // (pp * tp)
                if batch % dp:
                    continue
                m = batch // dp
                for schedule in ["1f1b", "zb-h1", "v-half"]:
                    for recompute in ["none", "selective", "full"]:
                        for vocab in ["baseline", "vocab-2"]:
                            if pp == 1 and (vocab != "baseline" or
                                            schedule == "v-half"):
                                continue
                            for zero in zeros(dp):
                                for sp in sequence(tp):
                                    jobs.append(("fixed", model, seq, gpus,
                                                 pp, tp, dp, zero, m,
                                                 schedule, recompute, vocab,
                                                 sp))
    return jobs


def zeros(dp):
    """The ZeRO stages a configuration runs with."""
    return [0, 1] if dp > 1 else [0]


def sequence(tp):
    """With and without sequence parallelism, where there are shards."""
    return [False, True] if tp > 1 else [False]


def blog_jobs():
    # Weitkamp, 2024, "Pipeline and Data Parallel":
    # tp 8 inside a node, micro-batch 1, sequence 8192.
    rows = [(4, 512, 8), (4, 512, 12), (4, 512, 16), (8, 256, 12),
            (8, 256, 16), (8, 256, 20), (16, 128, 20), (16, 128, 24),
            (16, 128, 28)]
    jobs = []
    for pp, dp, m in rows:
        for schedule in ["1f1b", "zb-h1", "v-half"]:
            for recompute in ["none", "selective", "full"]:
                for vocab in ["baseline", "vocab-2"]:
                    for zero in zeros(dp):
                        for sp in sequence(8):
                            jobs.append(("blog", "llama-3-70b", 8192, 16384,
                                         pp, 8, dp, zero, m, schedule,
                                         recompute, vocab, sp))
    return jobs


def best(rows, key):
    """The fastest configuration that fits, per key."""
    out = {}
    for r in rows:
        if r["error"] or r["fits_80gb"] != "yes":
            continue
        k = key(r)
        if k not in out or float(r["mfu"]) > float(out[k]["mfu"]):
            out[k] = r
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("grid", nargs="?", default="all",
                        choices=["fixed", "blog", "all"])
    parser.add_argument("--csv", help="write every row here")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    if not os.access(COMPILE, os.X_OK):
        sys.exit("build sluice-compile first (bash setup.sh build)")
    jobs = []
    if args.grid in ("fixed", "all"):
        jobs += fixed_jobs()
    if args.grid in ("blog", "all"):
        jobs += blog_jobs()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(run, jobs))
    if args.csv:
        tmp = args.csv + ".tmp"
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, FIELDS)
            w.writeheader()
            w.writerows(rows)
        os.replace(tmp, args.csv)

    def show(title, picked):
        print(title)
        print("  %-12s %5s %3s %3s %4s %4s %4s %-7s %-9s %-8s %3s %8s %6s %9s "
              "%7s" %
              ("model", "gpus", "pp", "tp", "dp", "zero", "m", "sched",
               "recompute", "vocab", "sp", "step s", "MFU", "tok/s/GPU",
               "mem GiB"))
        for r in picked:
            print("  %-12s %5d %3d %3d %4d %4d %4d %-7s %-9s %-8s %3s %8s "
                  "%5.1f%% %9s %7s" % (r["model"], r["gpus"], r["pp"],
                           r["tp"], r["dp"], r["zero"],
                           r["microbatches"], r["schedule"], r["recompute"],
                           r["vocab"], r["sequence_parallel"],
                           r["step_time_s"],
                           100 * float(r["mfu"]), r["tokens_per_s_per_gpu"],
                           r["peak_memory_gib"]))

    fixed = [r for r in rows if r["grid"] == "fixed"]
    if fixed:
        picked = best(fixed, lambda r: (r["model"], r["pp"], r["tp"]))
        show("Fixed GPUs and global batch: the best schedule, recomputation "
             "and vocabulary layers per (pp, tp) that fit 80 GB",
             sorted(picked.values(),
                    key=lambda r: (r["model"], -float(r["mfu"]))))
    blog = [r for r in rows if r["grid"] == "blog"]
    if blog:
        picked = best(blog, lambda r: (r["pp"], r["microbatches"]))
        show("Llama-3-70B on 16,384 H100s, tp 8, the blog's (pp, dp, "
             "microbatches) rows: the best that fits 80 GB",
             sorted(picked.values(),
                    key=lambda r: (r["pp"], r["microbatches"])))
    failed = [r for r in rows if r["error"]]
    if failed:
        print("%d configurations did not compile, e.g. %s: %s" %
              (len(failed), "pp %d tp %d %s" % (failed[0]["pp"],
                                                 failed[0]["tp"],
                                                 failed[0]["schedule"]),
               failed[0]["error"]))
    print("%d configurations, %d fit 80 GB" %
          (len(rows), sum(r["fits_80gb"] == "yes" for r in rows)))


if __name__ == "__main__":
    main()
