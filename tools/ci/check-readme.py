#!/usr/bin/env python3
"""Checks that the demo output README.md quotes is what the demo prints.

Usage: check-readme.py README.md DEMO-LOG

Each line of README's code blocks that is demo output -- a step's loss,
learning rate and gradient norm (up to the third '|'), a validation loss,
the closing line, the run header, a --check-against verdict -- must have a
line in the log with the same words, and the same figures to within 2%
(another CPU's BLAS kernels sum in another order, and 300 steps of
training carry that into the last digits). The verdict's error figures
depend on those kernels by orders of magnitude and are not compared;
timings (tokens/s, ms/step, seconds) are dropped. Exits 1 naming each
quoted line the log lacks, so that README's figures cannot drift from the
demo's (CI runs the demo, then this).
"""
import re
import sys

NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def demo_line(line):
    """The comparable part of a line of demo output, or None."""
    line = line.strip()
    if re.match(r"^step \d+: loss ", line):
        return "|".join(line.split("|")[:3]).strip()
    if re.match(r"^step \d+: validation loss ", line):
        return line
    if line.startswith("trained steps "):
        return re.sub(r" in [0-9.]+ s \([0-9]+ tokens/s\)", "", line)
    if line.startswith(("check against ", "model ", "training steps ")):
        return line
    return None


def split(line):
    """The words with each number a '#', and the numbers."""
    return NUMBER.sub("#", line), [float(n) for n in NUMBER.findall(line)]


def agrees(quoted, printed):
    qs, qn = split(quoted)
    ps, pn = split(printed)
    if qs != ps:
        return False
    if quoted.startswith("check against "):
        return True
    return all(abs(a - b) <= 0.02 * max(abs(a), abs(b)) for a, b in zip(qn, pn))


def main():
    readme, log = sys.argv[1], sys.argv[2]
    quoted, inside = [], False
    for line in open(readme, encoding="utf-8"):
        if line.startswith("```"):
            inside = not inside
            continue
        if inside and demo_line(line):
            quoted.append(demo_line(line))
    printed = [demo_line(l) for l in open(log, encoding="utf-8",
                                          errors="replace")]
    printed = [p for p in printed if p]
    missing = [q for q in quoted if not any(agrees(q, p) for p in printed)]
    for q in missing:
        print("README.md quotes a line the demo did not print: " + q)
    if not quoted:
        print("README.md quotes no demo output: nothing checked")
        return 1
    print("README.md: %d quoted demo line(s), %d not printed by the demo"
          % (len(quoted), len(missing)))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
