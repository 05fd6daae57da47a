"""Brute force for sluice-compile --search: compiles every choice the
search considers (docs/search.md) one by one through sluice-compile
--report, and prints the fastest that fits the memory, as `best STEP
FLAGS` (the fastest: the search may rank a tie within 2% first). argv: sluice-compile, model, GPUs, GiB per GPU, costs, global
batch (sequences), micro-batch size of the model."""
import json
import os
import subprocess
import sys
import tempfile

compile_, model, gpus, gib, costs, batch, mb = sys.argv[1:8]
gpus, gib, batch, mb = int(gpus), float(gib), int(batch), int(mb)
SCHEDULES = ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v",
             "v-half", "v-min", "seq1f1b", "seq1f1b-i", "terapipe"]
SLICED = {"seq1f1b", "seq1f1b-i", "terapipe"}
# Any number of chunks: the search tries 2, 4 and 8.
CHUNKED = {"interleaved-1f1b", "seq1f1b-i"}
# The schedules built from blocks, the only ones the compiler places
# vocabulary shards in ("schedule 'gpipe' is not built from building
# blocks, so it cannot place the vocabulary shards' passes"): the other
# pairs are not compiled here (1,092 of the 2,490 choices, each a refused
# sluice-compile). Were one accepted and fastest, the search would beat
# this brute force and the test would fail.
BLOCKS = {"1f1b", "zb-h1", "zb-h2", "zb-v", "v-half", "v-min"}
best = None
with tempfile.TemporaryDirectory() as work:
    report = os.path.join(work, "r.json")
    for tp in range(1, gpus + 1):
        if gpus % tp:
            continue
        for pp in range(1, gpus // tp + 1):
          if (gpus // tp) % pp:
              continue
          # Context parallelism up to 8 (a model that cannot split is
          # refused by the compile).
          for cp in [1, 2, 4, 8]:
            if (gpus // (tp * pp)) % cp:
                continue
            dp = gpus // (tp * pp * cp)
            if batch % (dp * mb):
                continue
            m = batch // (dp * mb)
            for zero in ([0, 1, 2, 3, "3s"] if dp * cp > 1 else [0]):
                for sp in ([False, True] if tp > 1 else [False]):
                    # One device: one schedule, the vocabulary layers
                    # whole (every other choice is the same plan there).
                    for s in (SCHEDULES if pp > 1 else ["1f1b"]):
                        for vocab in (["baseline", "vocab-1", "vocab-2"]
                                      if pp > 1 and s in BLOCKS
                                      else ["baseline"]):
                          for v in ([2, 4, 8] if s in CHUNKED else [0]):
                            for slices in ([2, 4] if s in SLICED else [1]):
                                for rc in ["none", "selective", "full"]:
                                    flags = ["--pp", str(pp), "--tp", str(tp),
                                             "--dp", str(dp), "--schedule", s,
                                             "--microbatches", str(m),
                                             "--recompute", rc, "--vocab", vocab]
                                    if cp > 1:
                                        flags += ["--cp", str(cp)]
                                    if v:
                                        flags += ["--virtual", str(v)]
                                    if zero == "3s":
                                        flags += ["--zero", "3",
                                                  "--reshard", "step"]
                                    elif zero:
                                        flags += ["--zero", str(zero)]
                                    if sp:
                                        flags += ["--sequence-parallel"]
                                    if slices > 1:
                                        flags += ["--slices", str(slices),
                                                  "--slicing", "seq1f1b"]
                                    done = subprocess.run(
                                        [compile_, model, "--costs", costs,
                                         "--report", report] + flags,
                                        capture_output=True)
                                    if done.returncode:
                                        continue
                                    r = json.load(open(report))
                                    peak = max(d["peak_memory_bytes"]
                                               for d in r["per_device"])
                                    if peak > gib * 2**30:
                                        continue
                                    step = r["step_time"]
                                    if best is None or step < best[0]:
                                        best = (step, " ".join(flags))
print("best %.4g %s" % best if best else "none fits")
