"""A malformed-input campaign over Sluice's entry points (issue 54).

Each entry point's valid input, made here with the tools, is mutated many
ways -- a value replaced by another JSON type, NaN, an infinity, a huge or
negative number, a fraction, a deep nesting, a key dropped, the file cut
short, bytes flipped -- and the tool users run is run on it under a time
bound. Every run must end with a clean verdict: exit 0 (the input was
still valid) or a one-line refusal and exit 1 or 2. A signal, a
sanitizer's or the C++ runtime's abort, a Python traceback or a run past
the bound is a finding; the script prints every finding and the counts
per entry point, and exits 1 when there is one.

    python3 test/robustness/campaign.py BUILD_BIN WORKDIR [--per-entry N] [--seed S]

The libFuzzer targets (test/fuzz) mutate the same readers' bytes inside
one process; this campaign mutates structure and runs the real command
lines, as a user's damaged file would meet them.
"""
import argparse
import copy
import json
import os
import random
import shutil
import struct
import subprocess
import sys

BAD_VALUES = [None, True, "text", [], {}, [1, 2], {"a": 1}, 0, -1, 1.5,
              -1e300, 1e300, 2**63 - 1, -(2**63), 2**64, "NaN", float("nan"),
              float("inf"), float("-inf"), 1e-320, "", "\u0000", "é" * 3]


def dumps(value):
    # NaN and infinities as Python writes them (not valid JSON: a reader
    # must refuse them, not take them).
    return json.dumps(value, allow_nan=True)


def paths(node, prefix=()):
    """Every path into a JSON tree (keys and indices), leaves and inner
    nodes alike."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node[:6]):
            yield from paths(v, prefix + (i,))


def replace(tree, path, value):
    tree = copy.deepcopy(tree)
    if not path:
        return value
    node = tree
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return tree


def drop(tree, path):
    tree = copy.deepcopy(tree)
    node = tree
    for k in path[:-1]:
        node = node[k]
    if isinstance(node, dict):
        del node[path[-1]]
    elif isinstance(node, list) and node:
        del node[path[-1]]
    return tree


def json_mutants(tree, rng, count):
    """`count` mutated texts of a JSON document."""
    every = [p for p in paths(tree) if p]
    out = []
    for _ in range(count):
        kind = rng.random()
        path = rng.choice(every)
        if kind < 0.6:
            text = dumps(replace(tree, path, rng.choice(BAD_VALUES)))
        elif kind < 0.75:
            text = dumps(drop(tree, path))
        elif kind < 0.85:
            # A value nested deeper than recursive readers go.
            text = dumps(replace(tree, path, "@DEEP@")).replace(
                '"@DEEP@"', "[" * 100000 + "]" * 100000)
        elif kind < 0.93:
            text = dumps(tree)
            text = text[: rng.randrange(1, max(2, len(text)))]
        else:
            data = bytearray(dumps(tree).encode())
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            text = data.decode("utf-8", "replace")
        out.append(text)
    return out


def classify(proc, timed_out):
    if timed_out:
        return "hang"
    text = (proc.stdout or b"").decode("utf-8", "replace") + \
        (proc.stderr or b"").decode("utf-8", "replace")
    for marker in ("Traceback (most recent call last)", "terminate called",
                   "Segmentation fault", "AddressSanitizer", "Assertion",
                   "core dumped", "stack smashing"):
        if marker in text:
            return "crash: " + marker
    if proc.returncode < 0 or proc.returncode >= 128:
        return "crash: exit %d" % proc.returncode
    if proc.returncode in (0, 1, 2):
        return "ok" if proc.returncode == 0 else "refused"
    return "crash: exit %d" % proc.returncode


def run(command, timeout, env=None):
    try:
        proc = subprocess.run(command, capture_output=True, timeout=timeout,
                              env=env)
        return proc, False
    except subprocess.TimeoutExpired as e:
        class P:
            returncode = -9
            stdout = e.stdout
            stderr = e.stderr
        return P, True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("work")
    ap.add_argument("--per-entry", type=int, default=150)
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--timeout", type=float, default=30)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    b = lambda tool: os.path.join(a.bin, tool)
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    work = a.work
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # A private TMPDIR: a single-process sluice-run is an Open MPI
    # singleton with a session directory there, which parallel tests
    # sharing one would race on (test/bin/sluice-run says more).
    os.makedirs(os.path.join(work, "tmp"))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", PATH=a.bin + ":" +
               os.environ.get("PATH", ""), TMPDIR=os.path.join(work, "tmp"))

    # The valid inputs, made with the tools.
    model = os.path.join(root, "test/Inputs/tiny-train.mlir")
    plan = os.path.join(work, "plan.json")
    subprocess.run([b("sluice-compile"), model, "--pp", "1", "--microbatches",
                    "2", "-o", plan], check=True, capture_output=True)
    text = os.path.join(work, "text.txt")
    open(text, "w").write("We the People of the United States, in Order "
                          "to form a more perfect Union. " * 20)
    tokens = os.path.join(work, "text.tokens")
    subprocess.run([b("sluice-tokenize"), text, "-o", tokens], check=True,
                   capture_output=True)
    # Byte tokens need a vocabulary of 256: the demo's byte-level GPT.
    byte_plan = os.path.join(work, "byte-plan.json")
    subprocess.run([b("sluice-compile"),
                    os.path.join(root, "examples/demo/byte-gpt.mlir"), "--pp",
                    "1", "--microbatches", "1", "-o", byte_plan], check=True,
                   capture_output=True)
    ckpt = os.path.join(work, "ckpt")
    subprocess.run([b("sluice-run"), plan, "--reference", "--steps", "1",
                    "--save", ckpt], check=True, capture_output=True, env=env)
    metrics = os.path.join(work, "metrics.jsonl")
    subprocess.run([b("sluice-run"), plan, "--reference", "--steps", "2",
                    "--metrics", metrics], check=True, capture_output=True,
                   env=env)
    config = json.load(open(os.path.join(root, "test/Inputs/gpt2-config.json")))
    tokenizer_dir = os.path.join(root, "test/tokenizer")

    findings, counts = [], {}

    def record(entry, verdict, what):
        c = counts.setdefault(entry, {"inputs": 0, "ok": 0, "refused": 0,
                                      "findings": 0})
        c["inputs"] += 1
        if verdict in ("ok", "refused"):
            c[verdict] += 1
        else:
            c["findings"] += 1
            findings.append((entry, verdict, what))

    def campaign(entry, tree, write, command):
        # The input unmutated must run: a campaign whose every mutant fails
        # for the same unrelated reason tests nothing.
        proc, hung = run(command(write("base", dumps(tree))), a.timeout, env)
        if classify(proc, hung) != "ok":
            sys.exit("campaign.py: %s: the unmutated input does not run: %s"
                     % (entry, (proc.stderr or b"").decode()[-300:]))
        for i, mutant in enumerate(json_mutants(tree, rng, a.per_entry)):
            path = write(i, mutant)
            proc, hung = run(command(path), a.timeout, env)
            record(entry, classify(proc, hung), path)

    # Plans: read, validated and sized by sluice-run --memory.
    plan_tree = json.load(open(plan))

    def write_file(name):
        stem, ext = os.path.splitext(name)

        def w(i, text):
            # The extension last: sluice-compile reads .json as a config.
            path = os.path.join(work, "%s-%s%s" % (stem, i, ext))
            open(path, "w").write(text)
            return path
        return w
    campaign("plan", plan_tree, write_file("plan.json"),
             lambda p: [b("sluice-run"), p, "--memory"])
    # Hugging Face configs: imported by sluice-compile.
    campaign("config", config, write_file("config.json"),
             lambda p: [b("sluice-compile"), p, "--summary"])

    # Checkpoint manifests: resumed by sluice-run --load.
    manifest = json.load(open(os.path.join(ckpt, "checkpoint.json")))

    def write_manifest(i, text):
        d = os.path.join(work, "ckpt-%s" % i)
        shutil.copytree(ckpt, d)
        open(os.path.join(d, "checkpoint.json"), "w").write(text)
        return d
    campaign("checkpoint manifest", manifest, write_manifest,
             lambda d: [b("sluice-run"), plan, "--reference", "--steps", "2",
                        "--load", d])

    # Token datasets: the header mutated, the rest kept.
    raw = open(tokens, "rb").read()
    length = struct.unpack("<Q", raw[8:16])[0]
    header = json.loads(raw[16:16 + length])

    def write_tokens(i, text):
        # The header, then padding to 8 bytes, then the offsets and tokens
        # as they were (docs/data.md).
        data = text.encode("utf-8", "replace")
        body = raw[:8] + struct.pack("<Q", len(data)) + data
        body += bytes((-len(body)) % 8)
        path = os.path.join(work, "tokens-%s" % i)
        open(path, "wb").write(body + raw[(16 + length + 7) // 8 * 8:])
        return path
    campaign("token dataset", header, write_tokens,
             lambda p: [b("sluice-run"), byte_plan, "--reference", "--steps",
                        "1", "--data", p])

    # Tokenizers: a byte-level BPE tokenizer.json from the tests' writer.
    bpe = os.path.join(work, "bpe.json")
    subprocess.run([sys.executable, os.path.join(tokenizer_dir, "write-bpe.py"),
                    bpe, json.dumps({"type": "ByteLevel",
                                     "add_prefix_space": False,
                                     "trim_offsets": True, "use_regex": True}),
                    "--merge", "a,b", "--all-bytes"], check=True)
    campaign("tokenizer.json", json.load(open(bpe)), write_file("bpe.json"),
             lambda p: [b("sluice-tokenize"), text, "--tokenizer", p,
                        "--print"])

    # Metrics files: plotted by sluice-plot, one mutated line among good ones.
    lines = open(metrics).read().splitlines()
    first = json.loads(lines[0])

    def write_metrics(i, text):
        path = os.path.join(work, "metrics-%s.jsonl" % i)
        open(path, "w").write("\n".join(lines[1:] + [text.replace("\n", " ")])
                              + "\n")
        return path
    campaign("metrics", first, write_metrics,
             lambda p: [b("sluice-plot"), p, "-o", p + ".svg"])

    # The launcher's environment: SLURM and PBS variables and flags.
    for i in range(a.per_entry):
        value = dumps(rng.choice(BAD_VALUES)).strip('"')
        var = rng.choice(["SLURM_JOB_NUM_NODES", "SLURM_NNODES",
                          "SLURM_JOB_NODELIST", "PBS_NODEFILE", "-np",
                          "--gpus-per-node"])
        e = dict(env)
        cmd = [b("sluice-launch"), "--dry-run"]
        if var.startswith("-"):
            cmd += [var, value] if var == "--gpus-per-node" else []
            cmd += ["-np", value if var == "-np" else "2"]
        else:
            e["SLURM_JOB_ID"] = "42"
            e[var] = value
            cmd += ["-np", "2"]
        cmd += ["sluice-run", plan]
        proc, hung = run(cmd, a.timeout, e)
        record("launcher", classify(proc, hung), "%s=%r" % (var, value))

    total = sum(c["inputs"] for c in counts.values())
    print("%-20s %7s %7s %8s %9s" % ("entry point", "inputs", "ok",
                                     "refused", "findings"))
    for entry, c in counts.items():
        print("%-20s %7d %7d %8d %9d" % (entry, c["inputs"], c["ok"],
                                         c["refused"], c["findings"]))
    print("%-20s %7d" % ("all", total))
    for entry, verdict, what in findings:
        print("FINDING %s: %s: %s" % (entry, verdict, what))
    sys.exit(1 if findings else 0)


if __name__ == "__main__":
    main()
