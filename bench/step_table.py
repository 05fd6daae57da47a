#!/usr/bin/env python3
"""Joins step benchmark documents into one table.

    python3 bench/step_table.py SAMPLES.json... [--markdown]

Reads the documents sluice-bench-step --samples and bench/torch_step.py
--samples-dir write (bench/Samples.h) and prints, per run, its median,
minimum, maximum and spread, tokens/s, MFU against 989 TFLOP/s, and its
speed relative to the fastest PyTorch baseline among them (above 1: faster
than it). Nothing is measured here; every figure is a sample's.
"""
import argparse
import json
import statistics
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+")
    args = p.parse_args()
    rows = []
    for path in args.files:
        try:
            with open(path) as f:
                doc = json.load(f)
            samples = [float(x) for x in doc["samples"]]
            if not samples:
                raise ValueError("no samples")
        except (OSError, ValueError, KeyError, TypeError) as e:
            sys.exit(f"step_table.py: error: '{path}': {e}")
        median = statistics.median(samples)
        name = doc.get("name", path)
        # The attention backward's setting, where the document says it.
        for key in ("deterministic", "deterministic_attention"):
            if key in doc:
                name += ", deterministic" if doc[key] else ", non-deterministic"
                break
        rows.append({
            "name": name, "n": len(samples), "median": median,
            "min": min(samples), "max": max(samples),
            "spread": (max(samples) - min(samples)) / median,
            "tokens": doc.get("tokens_per_step", 0),
            "flops": doc.get("model_flops_per_token", 0),
            "torch": doc.get("tool", "").endswith("torch_step.py"),
        })
    torch_best = min((r["median"] for r in rows if r["torch"]), default=None)
    print("| run | median ms | min ms | max ms | spread | n | tokens/s | "
          "MFU (989) | vs fastest PyTorch |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: r["median"]):
        seconds = r["median"] / 1e3
        tokens = r["tokens"] / seconds if r["tokens"] else 0
        mfu = r["flops"] * tokens / 989.4e12
        ratio = f"{torch_best / r['median']:.3f}x" if torch_best else "-"
        print(f"| {r['name']} | {r['median']:.1f} | {r['min']:.1f} | "
              f"{r['max']:.1f} | {100 * r['spread']:.1f}% | {r['n']} | "
              f"{tokens:.0f} | {100 * mfu:.1f}% | {ratio} |")


if __name__ == "__main__":
    main()
