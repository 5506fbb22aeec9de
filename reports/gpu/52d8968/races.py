"""Prints, per program and mode, the races in the perf runs' reports (/tmp/perf-reports)."""
import glob, json, collections
seen = collections.Counter()
for f in sorted(glob.glob("/tmp/perf-reports/*.json")):
    r = json.load(open(f))
    key = f.split("/")[-1].split(".")[0]
    seen[key] += len(r.get("races", []))
    print(f.split("/")[-1], "races", len(r.get("races", [])), [x["kind"] for x in r.get("races", [])][:5])
print("races in all reports:", dict(seen))
