#!/usr/bin/env python3
"""Summarises bench/slicing.sh's CSV and draws it as an SVG (no plotting
library needed): A. Seq1F1B's throughput and memory relative to 1F1B;
B. TeraPipe's speedup over GPipe next to the paper's.

    python3 bench/slicing-plot.py slicing.csv slicing.svg
"""
import csv
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
svg_path = sys.argv[2]


def value(row, key):
    try:
        return float(row[key])
    except (TypeError, ValueError):
        return None


# A. Seq1F1B: per (model, seq, microbatches), each method against 1F1B.
groups = {}
for r in rows:
    if r["experiment"] == "seq1f1b":
        groups.setdefault((r["model"], int(r["seq_len"]), int(r["microbatches"])), {})[
            r["method"]] = r
seq = []
print("Seq1F1B (k = 4) against 1F1B: throughput, peak memory")
for (model, length, m), g in groups.items():
    base = g.get("1f1b")
    if not base or value(base, "tokens_per_s") is None:
        continue
    entry = {"label": f"{model} {length // 1024}k m{m}"}
    for method in ("uniform", "seq1f1b"):
        r = g.get(method)
        if r and value(r, "tokens_per_s"):
            entry[method] = value(r, "tokens_per_s") / value(base, "tokens_per_s")
            entry[method + "_mem"] = value(r, "peak_memory_gib") / value(base, "peak_memory_gib")
    seq.append(entry)
    print("  %-22s uniform %.3fx, computation-wise %.3fx (memory %.2fx); cwp over uniform %+.1f%%"
          % (entry["label"], entry.get("uniform", 0), entry.get("seq1f1b", 0),
             entry.get("seq1f1b_mem", 0),
             100 * (entry.get("seq1f1b", 0) / entry.get("uniform", 1) - 1)))
if seq:
    cw = [e["seq1f1b"] for e in seq if "seq1f1b" in e]
    mem = [e["seq1f1b_mem"] for e in seq if "seq1f1b_mem" in e]
    gain = [e["seq1f1b"] / e["uniform"] - 1 for e in seq if "seq1f1b" in e and "uniform" in e]
    print("  mean: Seq1F1B %.3fx 1F1B (paper ~1.14x) at %.2fx memory (paper ~0.5x); "
          "computation-wise %+.1f%% to %+.1f%% over uniform (paper 10-30%%)"
          % (sum(cw) / len(cw), sum(mem) / len(mem), 100 * min(gain), 100 * max(gain)))

# B. TeraPipe: GPipe and TeraPipe best per setting.
tera = {}
for r in rows:
    if r["experiment"] == "terapipe":
        tera.setdefault(r["setting"], {})[r["method"]] = r
bars = []
print("TeraPipe against GPipe (best microbatch split each), V100")
for setting, g in tera.items():
    gp, tp = g.get("gpipe"), g.get("terapipe")
    if not gp or not tp or value(gp, "step_time_s") is None or value(tp, "step_time_s") is None:
        continue
    speedup = value(gp, "step_time_s") / value(tp, "step_time_s")
    paper = float(tp["detail"].split("paper ")[-1].split(";")[0])
    bars.append((setting + " " + tp["model"].replace("gpt3-", ""), speedup, paper))
    joint = tp["detail"].split("; ")[-1] if "joint" in tp["detail"] else ""
    print("  %-5s %-10s %.2fx (paper %.2fx)   gpipe: %s; terapipe: %s; %s"
          % (setting, tp["model"], speedup, paper, gp["detail"].split(" paper")[0],
             tp["detail"].split(" paper")[0], joint))

# The SVG: two bar panels.
W, H, top, left = 1000, 760, 40, 60
out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">' % (W, H),
       '<rect width="100%" height="100%" fill="white"/>']


def panel(y0, height, title, labels, series, colors, names, ymax, ref=None, marks=None):
    out.append('<text x="%d" y="%d" font-size="14">%s</text>' % (left, y0 - 32, title))
    x0, pw = left, W - left - 20
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (x0, y0 + height, x0 + pw, y0 + height))
    for t in range(0, int(ymax) + 1):
        y = y0 + height - height * t / ymax
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (x0, y, x0 + pw, y))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%dx</text>' % (x0 - 4, y + 4, t))
    if ref:
        y = y0 + height - height * ref / ymax
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#999" stroke-dasharray="4"/>' % (x0, y, x0 + pw, y))
    n = max(len(labels), 1)
    gw = pw / n
    bw = gw * 0.8 / max(len(series), 1)
    for i, label in enumerate(labels):
        for s, values in enumerate(series):
            v = values[i]
            if v is None:
                continue
            h = height * min(v, ymax) / ymax
            x = x0 + i * gw + gw * 0.1 + s * bw
            out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %.2fx</title></rect>'
                       % (x, y0 + height - h, bw, h, colors[s], label, names[s], v))
        if marks and marks[i] is not None:
            y = y0 + height - height * min(marks[i], ymax) / ymax
            out.append('<circle cx="%.1f" cy="%.1f" r="4" fill="black"/>' % (x0 + i * gw + gw / 2, y))
        out.append('<text transform="translate(%.1f,%d) rotate(40)" font-size="9">%s</text>'
                   % (x0 + i * gw + gw / 2, y0 + height + 10, label))
    lx = x0
    for s, name in enumerate(names):
        out.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>'
                   % (lx, y0 - 20, colors[s], lx + 14, y0 - 11, name))
        lx += 14 + 7 * len(name) + 20
    if marks:
        out.append('<circle cx="%d" cy="%d" r="4" fill="black"/><text x="%d" y="%d">the paper</text>' % (lx + 4, y0 - 15, lx + 12, y0 - 11))


panel(top + 40, 230, "A. Seq1F1B (k = 4) relative to 1F1B, A100 (dashed: the paper's 1.14x)",
      [e["label"] for e in seq],
      [[e.get("uniform") for e in seq], [e.get("seq1f1b") for e in seq], [e.get("seq1f1b_mem") for e in seq]],
      ["#9c9ede", "#393b79", "#e7ba52"], ["uniform slices: throughput", "computation-wise: throughput", "computation-wise: peak memory"],
      2, ref=1.14)
panel(top + 420, 230, "B. TeraPipe relative to GPipe, V100, TeraPipe's Table 1 settings",
      [b[0] for b in bars], [[b[1] for b in bars]], ["#637939"], ["TeraPipe: throughput"],
      max([b[1] for b in bars] + [b[2] for b in bars] + [1]) + 1, marks=[b[2] for b in bars])
out.append("</svg>")
open(svg_path, "w").write("\n".join(out) + "\n")
print("wrote", svg_path)
