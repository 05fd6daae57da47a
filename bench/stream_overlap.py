#!/usr/bin/env python3
"""How much of a rank's NCCL time ran beside compute on another stream,
from a CUPTI activity trace (bench/KernelTrace.cpp), and the trace as a
Chrome trace (Perfetto) with a track per CUDA stream.

    python3 bench/stream_overlap.py TRACE.csv [--marker REGEX]
        [--perfetto OUT.json] [--pid N]

DualPipe's overlapped pair (DeepSeek-AI, 2024, section 3.2.1) on a GPU:
a group's forward and backward on two compute streams, each pass's expert
all-to-alls (NCCL kernels) on its own stream, so one pass's all-to-all
runs while the other's kernels compute. The step is the stretch between
the last two activities matching --marker (default: the fused Adam
update that ends every step). Prints the streams that ran kernels in the
step, the NCCL kernels' busy time, and how much of it another stream's
non-NCCL kernels overlapped ("beside"): with the lanes' streams on, a
positive share; with --overlap-groups=false, close to none.
"""
import argparse
import json

from kernel_gaps import read_step


def merged(intervals):
    """The union of [start, end) intervals, as disjoint sorted ones."""
    out = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


def covered(spans, union):
    """Nanoseconds of `spans` inside the disjoint sorted `union`."""
    total = 0
    for start, end in spans:
        for a, b in union:
            if b <= start:
                continue
            if a >= end:
                break
            total += min(b, end) - max(a, start)
    return total


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("--marker", default="adam")
    p.add_argument("--perfetto")
    p.add_argument("--pid", type=int, default=0)
    args = p.parse_args()
    rows, begin, end = read_step(args.trace, args.marker)
    step = [r for r in rows if r[0] >= begin and r[1] <= end and r[2] == "k"]
    is_nccl = [("nccl" in r[4].lower()) for r in step]
    streams = sorted({r[3] for r in step})
    print(f"step: {(end - begin) / 1e6:.3f} ms, kernels on streams "
          f"{', '.join(streams)}")
    nccl_spans = [(r[0], r[1], r[3]) for r, n in zip(step, is_nccl) if n]
    busy = sum(e - s for s, e, _ in nccl_spans)
    beside = 0
    for stream in {s for _, _, s in nccl_spans}:
        others = merged((r[0], r[1]) for r, n in zip(step, is_nccl)
                        if not n and r[3] != stream)
        beside += covered([(s, e) for s, e, st in nccl_spans if st == stream],
                          others)
    share = beside / busy if busy else 0.0
    print(f"NCCL kernels: {busy / 1e6:.3f} ms busy, {beside / 1e6:.3f} ms "
          f"beside another stream's compute ({100 * share:.1f}%)")
    if args.perfetto:
        events = [{"name": "process_name", "ph": "M", "pid": args.pid,
                   "args": {"name": f"rank {args.pid} (CUPTI)"}}]
        for tid, stream in enumerate(streams):
            events.append({"name": "thread_name", "ph": "M",
                           "pid": args.pid, "tid": tid,
                           "args": {"name": f"stream {stream}"}})
        for r in step:
            events.append({"name": r[4][:120], "ph": "X", "pid": args.pid,
                           "tid": streams.index(r[3]),
                           "ts": (r[0] - begin) / 1e3,
                           "dur": (r[1] - r[0]) / 1e3})
        with open(args.perfetto, "w") as f:
            json.dump({"displayTimeUnit": "ms", "traceEvents": events}, f)


if __name__ == "__main__":
    main()
