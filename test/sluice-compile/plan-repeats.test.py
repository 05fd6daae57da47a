"""Expands a version 9 plan's repeat blocks by the rule docs/plan-format.md
states and compares the result with the same plan written out in full."""
import json
import sys

SLOTS = ("state", "wstate", "kv", "in", "out", "rstate", "buffer")


def expand(entries):
    out = []
    for entry in entries:
        if "repeat" not in entry:
            out.append(entry)
            continue
        slot_map = dict((a, b) for a, b in entry["slots"])
        for run in range(entry["repeat"]):
            for body in entry["body"]:
                instr = dict(body)
                if "mb" in instr:
                    instr["mb"] += run * entry["mb_step"]
                if "key" in instr:
                    instr["key"] += run * entry["key_step"]
                for role in SLOTS:
                    if instr.get(role, -1) >= 0:
                        for _ in range(run):
                            instr[role] = slot_map.get(instr[role], instr[role])
                out.append(instr)
    return out


blocks, full = (json.load(open(path)) for path in sys.argv[1:3])
assert blocks["version"] == full["version"] == 9
entries = instructions = 0
for a, b in zip(blocks["programs"], full["programs"]):
    expanded = expand(a["instructions"])
    if expanded != b["instructions"]:
        first = next(i for i, (x, y) in enumerate(zip(expanded, b["instructions"])) if x != y)
        sys.exit(f"device {a['device']}: instruction {first} differs")
    assert any("repeat" in e for e in a["instructions"]), "no repeat block"
    entries += len(a["instructions"])
    instructions += len(expanded)
blocks.pop("programs")
full.pop("programs")
assert blocks == full, "the plans differ outside their programs"
print(f"the blocks are the written-out lists: {blocks['devices']} "
      f"devices, {instructions} instructions in {entries} entries")
