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
    ap.add_argument("--ok-list", help="write every input that ran to exit 0 "
                    "here (entry, path), for a look at what was accepted")
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

    findings, counts, accepted = [], {}, []

    def record(entry, verdict, what):
        c = counts.setdefault(entry, {"inputs": 0, "ok": 0, "refused": 0,
                                      "findings": 0})
        c["inputs"] += 1
        if verdict in ("ok", "refused"):
            c[verdict] += 1
            if verdict == "ok":
                accepted.append((entry, what))
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

    # Programs: the model's MLIR, mutated as text -- a number swapped for
    # a bad one, a line dropped or repeated, the file cut short, bytes
    # flipped -- and compiled as users compile it.
    program = open(model).read()
    numbers = [m for m in __import__("re").finditer(r"-?\d+(\.\d+)?",
                                                    program)]
    lines = program.splitlines(True)

    def program_mutant():
        kind = rng.random()
        if kind < 0.45:
            m = rng.choice(numbers)
            bad = rng.choice(["0", "-1", "-7", "1.5", "1e300", "nan", "inf",
                              "9223372036854775807", "18446744073709551616",
                              "999999999", "0x10", ""])
            return program[:m.start()] + bad + program[m.end():]
        if kind < 0.6:
            i = rng.randrange(len(lines))
            return "".join(lines[:i] + lines[i + 1:])
        if kind < 0.7:
            i = rng.randrange(len(lines))
            return "".join(lines[:i + 1] + lines[i:])
        if kind < 0.8:
            return program[:rng.randrange(1, len(program))]
        if kind < 0.9:
            # Nesting past what a recursive reader takes.
            return program.replace("{", "{" + "[" * 50000, 1)
        data = bytearray(program.encode())
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return data.decode("utf-8", "replace")
    proc, hung = run([b("sluice-compile"), model, "--pp", "2",
                      "--microbatches", "2", "-o",
                      os.path.join(work, "program-base.json")], a.timeout, env)
    if classify(proc, hung) != "ok":
        sys.exit("campaign.py: program: the unmutated input does not compile")
    for i in range(a.per_entry):
        path = os.path.join(work, "program-%d.mlir" % i)
        open(path, "w").write(program_mutant())
        proc, hung = run([b("sluice-compile"), path, "--pp", "2",
                          "--microbatches", "2", "-o", path + ".json"],
                         a.timeout, env)
        record("program", classify(proc, hung), path)

    # Hugging Face directories: a tiny GPT-2 saved by --save-hf, its
    # config.json mutated and loaded by --load-hf against the plan compiled
    # from the unmutated one.
    hf_config = {"activation_function": "gelu_new",
                 "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
                 "n_ctx": 32, "n_embd": 32, "n_head": 2, "n_inner": None,
                 "n_layer": 2, "n_positions": 32, "vocab_size": 64,
                 "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}
    hf_config_path = os.path.join(work, "hf-config.json")
    json.dump(hf_config, open(hf_config_path, "w"))
    hf_plan = os.path.join(work, "hf-plan.json")
    subprocess.run([b("sluice-compile"), hf_config_path, "--pp", "1",
                    "--microbatches", "1", "-o", hf_plan], check=True,
                   capture_output=True)
    hf = os.path.join(work, "hf")
    subprocess.run([b("sluice-run"), hf_plan, "--reference", "--steps", "1",
                    "--save-hf", hf], check=True, capture_output=True, env=env)
    load_hf = lambda d: [b("sluice-run"), hf_plan, "--reference", "--steps",
                         "1", "--load-hf", d]

    def write_hf(name, text=None, data=None):
        d = os.path.join(work, "hf-%s" % name)
        shutil.copytree(hf, d)
        if text is not None:
            open(os.path.join(d, "config.json"), "w").write(text)
        if data is not None:
            open(os.path.join(d, "model.safetensors"), "wb").write(data)
        return d
    campaign("hf config.json", json.load(open(os.path.join(hf, "config.json"))),
             lambda i, text: write_hf("config-%s" % i, text=text), load_hf)

    # Safetensors: the header's JSON mutated (dtypes, shapes, offsets), or
    # the bytes after it cut, flipped, or set to NaN and infinities.
    st = open(os.path.join(hf, "model.safetensors"), "rb").read()
    st_len = struct.unpack("<Q", st[:8])[0]
    st_header = json.loads(st[8:8 + st_len])
    st_body = st[8 + st_len:]

    def with_header(text):
        h = text.encode("utf-8", "replace")
        return struct.pack("<Q", len(h)) + h + st_body

    for i, text in enumerate(json_mutants(st_header, rng,
                                          a.per_entry - a.per_entry // 3)):
        d = write_hf("st-%d" % i, data=with_header(text))
        proc, hung = run(load_hf(d), a.timeout, env)
        record("safetensors", classify(proc, hung), d)
    for i in range(a.per_entry // 3):
        data = bytearray(st)
        kind = rng.random()
        if kind < 0.3:
            data = data[:rng.randrange(0, len(data))]
        elif kind < 0.5:
            # The header's length field itself.
            data[:8] = struct.pack("<Q", rng.choice(
                [0, 1, 2**63 - 1, 2**64 - 1, len(data), len(data) * 2]))
        elif kind < 0.8:
            at = 8 + st_len + 4 * rng.randrange(len(st_body) // 4)
            data[at:at + 4] = struct.pack("<f", rng.choice(
                [float("nan"), float("inf"), -float("inf"), 1e38, 1e-45]))
        else:
            for _ in range(rng.randint(1, 16)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        d = write_hf("stbytes-%d" % i, data=bytes(data))
        proc, hung = run(load_hf(d), a.timeout, env)
        record("safetensors", classify(proc, hung), d)

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
    if a.ok_list:
        with open(a.ok_list, "w") as f:
            f.writelines("%s\t%s\n" % pair for pair in accepted)
    for entry, verdict, what in findings:
        print("FINDING %s: %s: %s" % (entry, verdict, what))
    sys.exit(1 if findings else 0)


if __name__ == "__main__":
    main()
