"""Summarizes a sluice-run --trace file for trace.test: per rank and
stream, how many events and the first pass; for an overlapped group's
lane 1, how many of its passes ran beside a forward of the compute track;
whether every complete event has a non-negative start and duration."""
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
    elif stream == "compute, lane 1":
        forwards = [e for e in spans.get((pid, 0), [])
                    if e["name"].startswith("F ")]
        beside = sum(
            any(f["ts"] < e["ts"] + e["dur"] and e["ts"] < f["ts"] + f["dur"]
                for f in forwards) for e in events)
        print(f"rank {pid} {stream}: {len(events)} passes, "
              f"{'some' if beside else 'none'} beside a forward")
    else:
        print(f"rank {pid} {stream}: {len(events)} collectives")
print("ordered:", "yes" if ordered else "no")
