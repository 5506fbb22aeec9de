#!/usr/bin/env python3
"""twin_probe's lines (twin.jsonl) as one result (tests/gpu/result.py): a case per mode, patch
and check, passing when every round held it, and a case per mode and patch with the median
(and range) of its timings over the rounds.

Usage: summarize.py TWIN_JSONL OUT_DIR"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from result import Result  # noqa: E402


def main(lines_path, out_dir):
    runs = {}
    for line in open(lines_path):
        line = line.strip()
        if line.startswith("{"):
            row = json.loads(line)
            runs.setdefault((row["mode"], row.get("patch_function", "")), []).append(row)
    result = Result("footprint-twin")
    for (mode, patch), rows in sorted(runs.items()):
        name = f"{mode}/{patch}"
        if any("exit" in r for r in rows):
            result.case(f"{name}/ran", "exit 0", "exit " + ",".join(str(r.get("exit", 0)) for r in rows), ok=False)
            continue
        checks = [k for k, v in rows[0].items() if isinstance(v, dict) and "ok" in v]
        for check in checks:
            got = sorted({r[check]["got"] for r in rows})
            result.case(f"{name}/{check}", str(rows[0][check]["expected"]), ",".join(map(str, got)),
                        ok=all(r[check]["ok"] for r in rows))
        timings = [k for k, v in rows[0].items() if k.endswith("_us")]
        figures = {}
        for key in timings:
            values = [r[key] for r in rows]
            figures[key] = {"median": round(statistics.median(values), 2), "min": round(min(values), 2), "max": round(max(values), 2)}
        result.case(f"{name}/timings", "measured", f"{len(rows)} rounds", outcome="pass", figures=figures)
    return result.write(out_dir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
