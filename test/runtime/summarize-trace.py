"""Summarizes a sluice-run --trace file for trace.test: per rank and
stream, how many events and the first pass; whether every complete event
has a non-negative start and duration."""
import json
import sys

trace = json.load(open(sys.argv[1]))
names = {}
spans = {}
ordered = True
for event in trace["traceEvents"]:
    if event["ph"] == "M" and event["name"] == "thread_name":
        names[(event["pid"], event["tid"])] = event["args"]["name"]
    elif event["ph"] == "X":
        spans.setdefault((event["pid"], event["tid"]), []).append(event)
        ordered &= event["ts"] >= 0 and event["dur"] >= 0
for (pid, tid), events in sorted(spans.items()):
    stream = names[(pid, tid)]
    if stream == "compute":
        passes = sorted((e for e in events if "shard" not in e["name"]),
                        key=lambda e: e["ts"])
        shards = len(events) - len(passes)
        print(f"rank {pid} compute: {len(passes)} stage passes, "
              f"{shards} shard passes, first {passes[0]['name']}")
    else:
        print(f"rank {pid} {stream}: {len(events)} collectives")
print("ordered:", "yes" if ordered else "no")
