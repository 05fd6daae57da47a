#!/usr/bin/env python3
"""Runs the documentation's runnable blocks, so that a command a reader
pastes from README.md or docs/ works and prints what the page says.

Usage: run-doc-blocks.py [--list] [--tools DIR] FILE.md...

A fenced block is runnable when the line before its opening fence is

    <!-- runnable -->

(invisible in the rendered page). Its lines that start with `$ ` are
commands; the lines after one, up to the next command, are what the page
says it prints: each must be a line of its output (stdout and stderr
together), in that order, and the command must exit 0 unless one of them
is an error (`error:`). A runnable block without `$ ` lines is one bash
script that must exit 0. Every block runs in a fresh directory that holds
the checkout's top-level entries as links (so `examples/...` and
`build/bin/...` resolve and nothing is written into the checkout), with
build/bin (or --tools DIR) first on PATH, as the pages tell readers to
set it. Blocks that
need a GPU, a cluster, a download or an hour are simply not marked.

Exits 1 naming each block (FILE:LINE) that failed, with the command and
what differed; --list prints the runnable blocks instead.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

MARK = "<!-- runnable -->"
TIMEOUT = 300


def find_blocks(path):
    """(line number, lines) of every runnable block of `path`."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^(\s*)(```+|~~~+)", lines[i])
        if fence and i > 0 and lines[i - 1].strip() == MARK:
            indent, ticks = fence.group(1), fence.group(2)
            body = []
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(ticks):
                body.append(lines[j][len(indent):] if lines[j].startswith(indent)
                            else lines[j])
                j += 1
            blocks.append((i + 1, body))
            i = j + 1
            continue
        if fence:
            # Skip an unmarked block whole: a marker inside it is text.
            ticks = fence.group(2)
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(ticks):
                j += 1
            i = j + 1
            continue
        i += 1
    return blocks


def commands(body):
    """The block as (command, expected lines) pairs; one pair with the
    whole block as its command when it has no `$ ` lines."""
    if not any(l.startswith("$ ") for l in body):
        return [("\n".join(body), [])]
    pairs = []
    for line in body:
        if line.startswith("$ "):
            pairs.append((line[2:], []))
        elif pairs and line.strip():
            pairs[-1][1].append(line.rstrip())
    return pairs


def sandbox(root):
    """A fresh directory with links to `root`'s top-level entries."""
    work = tempfile.mkdtemp(prefix="sluice-doc-")
    for name in os.listdir(root):
        if name.startswith(".git"):
            continue
        os.symlink(os.path.join(root, name), os.path.join(work, name))
    return work


def run_block(root, tools, where, body):
    """The failures of one block (empty when it passes)."""
    work = sandbox(root)
    env = dict(os.environ)
    env["PATH"] = tools + os.pathsep + env["PATH"]
    failures = []
    try:
        for command, expected in commands(body):
            try:
                done = subprocess.run(["bash", "-c", "set -eo pipefail\n" + command],
                                      cwd=work, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True,
                                      timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                failures.append("%s: `%s` ran past %d s" % (where, command, TIMEOUT))
                break
            output = done.stdout.split("\n")
            errs = any("error:" in l for l in expected)
            if done.returncode != 0 and not errs:
                tail = "\n    ".join(done.stdout.strip().split("\n")[-5:])
                failures.append("%s: `%s` exited %d:\n    %s" %
                                (where, command, done.returncode, tail))
                break
            if errs and done.returncode == 0:
                failures.append("%s: `%s` exited 0; the page says it fails" %
                                (where, command))
            at = 0
            for want in expected:
                found = next((k for k in range(at, len(output))
                              if output[k].rstrip() == want), None)
                if found is None:
                    near = [l for l in output if l.strip()][-3:]
                    failures.append("%s: `%s` did not print, in order:\n    %s\n  it printed (last lines):\n    %s"
                                    % (where, command, want, "\n    ".join(near)))
                    break
                at = found + 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return failures


def main(argv):
    listing = "--list" in argv
    argv = [a for a in argv if a != "--list"]
    tools = None
    if "--tools" in argv:
        at = argv.index("--tools")
        tools = os.path.abspath(argv[at + 1])
        del argv[at:at + 2]
    files = argv
    if not files:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    tools = tools or os.path.join(root, "build", "bin")
    failures, count = [], 0
    for path in files:
        for line, body in find_blocks(path):
            where = "%s:%d" % (os.path.relpath(path, root), line)
            count += 1
            if listing:
                print(where)
                continue
            failures += run_block(root, tools, where, body)
    if listing:
        return 0
    for f in failures:
        print("FAIL " + f)
    print("%d runnable block(s), %d failed" % (count, len({f.split(": ")[0] for f in failures})))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
