"""Cost of the footprint modes on the GPU, side by side in one run: each workload
(workload.py) natively, under streamsan with footprint=params, learn and exact, and under
compute-sanitizer memcheck. Prints and writes footprint-perf.json: per workload and mode,
the median and best step time after warm-up, the ratio to native, every step's time (the
warm-up's too: how fast learn settles), and the engine's counters
(STREAMSAN_FOOTPRINT_TRACE=counters: launches measured, tables overflowed, modules unpatched
and patched again, launches left on their parameters, launches that ran patched without being
measured, what learn learnt and applied).
Usage: perf.py STREAMSAN OUT_DIR [WORKLOAD:WARMUP:STEPS:MODES ...]
FOOTPRINT_ROUNDS=N runs the whole plan N times in turn (default 1): one process a mode moves
with the machine's core speed, so each row carries its round, and with more than one round a
summary follows:
per workload and mode, the median of the rounds' medians and the spread of the ratios to the
same round's native process.
The default plan measures learn's steady state (six warm-up steps: AdamW's step count leaves
its kernels' keys after two changes) and exact, in about three minutes of device time; add
params and memcheck with e.g. gpt2:1:2:params,memcheck.
Also writes result-footprint-perf.json (tests/gpu/result.py): a case per workload and mode (per
workload and mode over the rounds, with more than one), which fails where a native or
streamsan process did not exit 0 or streamsan reported a race (the workloads are correct
programs); memcheck's outcome is recorded as it comes."""
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from result import Result  # noqa: E402
streamsan, out = sys.argv[1], sys.argv[2]
plan = sys.argv[3:] or ["numba:5:10:native,learn,exact", "gpt2:6:10:native,learn,exact", "resnet:6:10:native,learn,exact"]
COUNTERS = re.compile(r"^streamsan: (footprints|learnt): (.*)$", re.M)


def counters(stderr):
    """The engine's counter lines, each as its numbers in order."""
    return {m.group(1): [int(n) for n in re.findall(r"\d+", m.group(2))] for m in COUNTERS.finditer(stderr)}


results = []
log = open(os.path.join(out, "footprint-perf.log"), "w")
rounds = int(os.environ.get("FOOTPRINT_ROUNDS", "1"))
for round_no, item in ((r, item) for r in range(1, rounds + 1) for item in plan):
    workload, warmup, steps, modes = item.split(":")
    native = None
    for mode in modes.split(","):
        cmd = [sys.executable, os.path.join(HERE, "workload.py"), workload, warmup, steps]
        if mode == "memcheck":
            cmd = ["compute-sanitizer", "--tool", "memcheck"] + [sys.executable, os.path.join(HERE, "workload.py"), workload, "1", "2"]
        elif mode != "native":
            cmd = [streamsan, "run", "--footprint", mode, "--quiet", "--exitcode", "0", "--report", f"/tmp/perf-{workload}-{mode}.%p.json", "--"] + cmd
        reports = f"/tmp/perf-{workload}-{mode}.*.json"
        for old in glob.glob(reports):
            os.remove(old)
        env = dict(os.environ, STREAMSAN_FOOTPRINT_TRACE="counters")
        start = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=150, env=env)
            code, stdout, stderr = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            code, stdout, stderr = "timeout", (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), ""
        wall = time.time() - start
        log.write(f"$ {' '.join(cmd)}\n# exit {code} in {wall:.1f} s\n{stdout[-2000:]}{stderr[-3000:]}\n")
        log.flush()
        steps_s, warmup_s = None, []
        for line in stdout.splitlines():
            if line.startswith("{"):
                printed = json.loads(line)
                steps_s, warmup_s = printed["step_s"], printed.get("warmup_s", [])
        row = {"workload": workload, "mode": mode, "round": round_no, "exit": code, "wall_s": round(wall, 2)}
        if mode not in ("native", "memcheck"):
            row["counters"] = counters(stderr)
            row["races"] = sum(len(json.load(open(f))["races"]) for f in glob.glob(reports))
        if steps_s:
            row["median_ms"] = round(statistics.median(steps_s) * 1e3, 3)
            row["best_ms"] = round(min(steps_s) * 1e3, 3)
            row["warmup_ms"] = [round(t * 1e3, 2) for t in warmup_s]
            row["steps_ms"] = [round(t * 1e3, 2) for t in steps_s]
            if mode == "native":
                native = row["median_ms"]
            if native:
                row["x_native"] = round(row["median_ms"] / native, 3)
        results.append(row)
        print(json.dumps(row), flush=True)
summary = []
if rounds > 1:
    for key in dict.fromkeys((r["workload"], r["mode"]) for r in results):
        rows = [r for r in results if (r["workload"], r["mode"]) == key and "median_ms" in r]
        ratios = [r["x_native"] for r in rows if "x_native" in r]
        if rows:
            summary.append({"workload": key[0], "mode": key[1], "rounds": len(rows),
                            "median_ms": round(statistics.median(r["median_ms"] for r in rows), 3),
                            "x_native": round(statistics.median(ratios), 3) if ratios else None,
                            "x_native_spread": [min(ratios), max(ratios)] if ratios else None})
            print("summary", json.dumps(summary[-1]), flush=True)
json.dump({"rows": results, "summary": summary} if summary else results,
          open(os.path.join(out, "footprint-perf.json"), "w"), indent=1)


def outcome(rows):
    """What a workload and mode's processes did, and whether that is what a correct program
    gives: exit 0 (memcheck's recorded as it comes), no race."""
    exits = ", ".join(sorted({str(r["exit"]) for r in rows}))
    races = sum(r.get("races", 0) for r in rows)
    observed = f"exit {exits}" + (f", {races} races reported" if races else "")
    ok = rows[0]["mode"] == "memcheck" or (all(r["exit"] == 0 for r in rows) and not races)
    return observed, ok


result = Result("footprint-perf")
for key in dict.fromkeys((r["workload"], r["mode"]) for r in results):
    rows = [r for r in results if (r["workload"], r["mode"]) == key]
    observed, ok = outcome(rows)
    expected = "timed, not checked" if key[1] == "memcheck" else "exits 0" + ("" if key[1] == "native" else ", no race")
    if rounds > 1:
        over = next((o for o in summary if (o["workload"], o["mode"]) == key), None)
        figures = {k: over[k] for k in ("rounds", "median_ms", "x_native", "x_native_spread")} if over else None
        result.case(f"{key[0]}/{key[1]}", expected, observed, ok=ok, figures=figures)
    else:
        row = rows[0]
        figures = {k: row[k] for k in ("median_ms", "best_ms", "x_native", "counters") if k in row}
        result.case(f"{key[0]}/{key[1]}", expected, observed, ok=ok, figures=figures or None)
sys.exit(result.write(out))
