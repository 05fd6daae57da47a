"""memory-agrees.test: each plan's --report parameter_bytes against
sluice-run --memory's training state, device by device."""
import json
import re
import sys

work = sys.argv[1]
for name in sys.argv[2:]:
    report = json.load(open("%s/%s.report.json" % (work, name)))
    devices = {d["device"]: d["parameter_bytes"] for d in report["per_device"]}
    runtime = {}
    params = {}
    for line in open("%s/%s.memory" % (work, name)):
        m = re.match(r"device (\d+): .* training state (\d+) bytes for (\d+) parameters", line)
        if m:
            runtime[int(m.group(1))] = int(m.group(2))
            params[int(m.group(1))] = int(m.group(3))
    assert devices == runtime, (name, devices, runtime)
    per = sorted({round(runtime[d] / params[d], 3) for d in runtime})
    text = ", ".join("%g" % p for p in per)
    print("%s: %d devices agree, %s bytes a parameter" % (name, len(runtime), text))
