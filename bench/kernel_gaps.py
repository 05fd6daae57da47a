#!/usr/bin/env python3
"""A step's GPU time from a CUPTI activity trace (bench/KernelTrace.cpp).

    python3 bench/kernel_gaps.py TRACE.csv [--marker REGEX] [--top N]

The step is the stretch between the last two activities whose name matches
--marker (default: the fused Adam update, which ends every step). Prints
the step's span, the time some activity ran on the GPU (busy) and the rest
(idle: the GPU waited for the host), the idle gaps by size with the largest
named by the activities on either side, and busy time per kernel name.
"""
import argparse
import collections
import csv
import re
import sys


def read_step(path, marker):
    """The trace's activities as (start, end, kind, stream, name), sorted,
    and the step's bounds: between the last two ends of activities whose
    name matches `marker` (the whole trace without two)."""
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            rows.append((int(r["start_ns"]), int(r["end_ns"]), r["kind"],
                         r["stream"], r["name"]))
    if not rows:
        sys.exit("no activities in " + path)
    rows.sort()
    pattern = re.compile(marker, re.I)
    ends = [e for s, e, k, st, n in rows if pattern.search(n)]
    lo, hi = (ends[-2], ends[-1]) if len(ends) >= 2 else (rows[0][0], rows[-1][1])
    return rows, lo, hi


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("--marker", default="adam")
    p.add_argument("--top", type=int, default=40)
    args = p.parse_args()
    rows, lo, hi = read_step(args.trace, args.marker)
    step = [r for r in rows if r[0] >= lo and r[1] <= hi]
    if not step:
        sys.exit("kernel_gaps: no activities between the last two markers")
    span = hi - lo
    # Busy: the union of the activities' intervals (streams may overlap).
    merged = []
    for s, e, k, st, n in step:
        if merged and s <= merged[-1][1]:
            if e > merged[-1][1]:
                merged[-1][1], merged[-1][3] = e, n
        else:
            merged.append([s, e, n, n])  # start, end, first name, last name
    busy = sum(e - s for s, e, _, _ in merged)
    gaps = [(merged[0][0] - lo, "(step start)", merged[0][2])]
    gaps += [(b[0] - a[1], a[3], b[2]) for a, b in zip(merged, merged[1:])]
    gaps.append((hi - merged[-1][1], merged[-1][3], "(step end)"))
    print(f"step {span / 1e6:.2f} ms: busy {busy / 1e6:.2f} ms, idle "
          f"{(span - busy) / 1e6:.2f} ms ({100 * (span - busy) / span:.1f}%), "
          f"{len(step)} activities on {len({r[3] for r in step})} streams")
    print("idle gaps by size:")
    low = 0
    for limit, label in [(5e3, "< 5 us"), (20e3, "5-20 us"),
                         (100e3, "20-100 us"), (1e6, "0.1-1 ms"),
                         (float("inf"), ">= 1 ms")]:
        sel = [g for g in gaps if low <= g[0] < limit]
        print(f"  {label:>10}: {len(sel):6d} gaps, {sum(g[0] for g in sel) / 1e6:8.2f} ms")
        low = limit
    print("largest gaps (after -> before):")
    for g, a, b in sorted(gaps, reverse=True)[:15]:
        print(f"  {g / 1e3:9.1f} us  {a[:60]} -> {b[:60]}")
    per = collections.defaultdict(lambda: [0, 0])
    for s, e, k, st, n in step:
        name = re.sub(r"\(.*", "", n) if k == "k" else re.sub(r" \d+$", "", n)
        per[name][0] += e - s
        per[name][1] += 1
    print(f"busy time by kernel (top {args.top}):")
    for name, (t, c) in sorted(per.items(), key=lambda x: -x[1][0])[:args.top]:
        print(f"  {t / 1e6:9.2f} ms {c:6d}  {name[:110]}")


if __name__ == "__main__":
    main()
