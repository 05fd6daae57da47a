"""Summarises SluiceCommConformanceTests' documents (comm-conformance.test):
one line per document; fails on any failed result."""
import json
import sys

for path in sys.argv[1:]:
    doc = json.load(open(path))
    results = doc["results"]
    failed = [r for r in results if r["outcome"] == "FAIL"]
    assert not failed, failed
    ranks = {r["rank"] for r in results}
    assert len(ranks) == doc["ranks"], (path, ranks)
    passed = sum(r["outcome"] == "pass" for r in results)
    lacking = sorted({r["op"] for r in results if r["outcome"] == "unsupported"})
    line = "%s %s: %d results on %d ranks: %d pass" % (
        doc["backend"], doc["transport"], len(results), doc["ranks"], passed)
    if lacking:
        line += ", %d unsupported (%s)" % (len(results) - passed, ", ".join(lacking))
    print(line)
