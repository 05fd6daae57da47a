"""Reads 'step N: validation loss X ...' lines on stdin and checks them
against the same lines in the file argv[1]: the same steps, each loss
within a relative 1e-6 (runs that sum in another order)."""
import sys


def losses(lines):
    out = []
    for line in lines:
        words = line.split()
        if len(words) >= 5 and words[2:4] == ["validation", "loss"]:
            out.append((words[1], float(words[4])))
    return out


mine = losses(sys.stdin)
theirs = losses(open(sys.argv[1]))
if not mine or [s for s, _ in mine] != [s for s, _ in theirs]:
    sys.exit(f"error: steps differ: {mine} vs {theirs}")
for (step, a), (_, b) in zip(mine, theirs):
    if abs(a - b) > 1e-6 * abs(b):
        sys.exit(f"error: step {step} validation loss {a} vs {b}")
print(f"same validation losses over {len(mine)} evaluations")
