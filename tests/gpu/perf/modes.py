"""One program of programs.py natively and under each footprint mode, one process each, in turn:
each step's time, its host part, and the warm-up (the steps before the window) beside it.
Writes result-footprint-perf[-VARIANT].json (tests/gpu/result.py), a case per program and mode,
with the engine's counters (STREAMSAN_FOOTPRINT_TRACE=counters) for the measured modes.
Usage, from the repository root with .device/ filled:
    python3 tests/gpu/perf/modes.py OUT_DIR PROGRAM STEPS WINDOW [MODE...]
(STEPS timed steps after programs.py's 5 untimed ones; figures over the last WINDOW; modes
default to params learn; `floor` is `exact` with every patch point an empty function, the
experiments shim's STREAMSAN_FOOTPRINT_FLOOR; `grouping` is `exact` whose patch groups a
warp's lanes at every access as it does to record and leaves the table alone; a mode ending
in `+host` runs with --host-races too)."""
import json
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from result import Result  # noqa: E402

out, program, steps, window = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
# The command a result names: this one, the output folder by its variable's name.
variant = os.environ.get("STREAMSAN_RESULT_VARIANT")
os.environ.setdefault("STREAMSAN_RESULT_VIA", (f"STREAMSAN_RESULT_VARIANT={variant} " if variant else "")
                      + "python3 tests/gpu/perf/modes.py $OUT " + " ".join(sys.argv[2:]))
modes = sys.argv[5:] or ["params", "learn"]
result = Result("footprint-perf")
native_median = None
for mode in ["native"] + modes:
    argv = [sys.executable, "tests/gpu/perf/programs.py", program, str(steps), "5"]
    env = dict(os.environ)
    footprint, guarded = mode.removesuffix("+host"), mode.endswith("+host")
    if footprint in ("floor", "grouping"):
        env["STREAMSAN_SHIM"] = os.path.abspath(".device/experiments/libstreamsan_shim.so")
        env["STREAMSAN_FOOTPRINT_FLOOR"] = "1" if footprint == "floor" else footprint
    if mode != "native":
        argv = [".device/streamsan", "run", "--quiet", "--exitcode", "0",
                "--footprint", "exact" if footprint in ("floor", "grouping") else footprint,
                *(["--host-races"] if guarded else []),
                "--report", "/tmp/modes.%p.json", "--"] + argv
        env["STREAMSAN_FOOTPRINT_TRACE"] = "counters"
    run = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    line = next((line for line in run.stdout.splitlines() if line.startswith("{")), None)
    if run.returncode != 0 or line is None:
        result.case(f"{program}/{mode}", "exits 0", f"exit {run.returncode}", ok=False, note=run.stderr[-300:])
        continue
    d = json.loads(line)
    step, host = d["step_ms"][-window:], d["host_ms"][-window:]
    median = statistics.median(step)
    native_median = native_median or median
    figures = {
        "median_ms": round(median, 2),
        "best_ms": round(min(step), 2),
        "worst_ms": round(max(step), 2),
        "host_median_ms": round(statistics.median(host), 2),
        "x_native": round(median / native_median, 3),
        "warmup_ms": round(sum(d["step_ms"][:-window]), 1),
        "window": window,
    }
    for name in ["footprints", "learnt"]:
        counted = re.search(rf"streamsan: {name}: (.*)", run.stderr)
        if counted:
            figures.setdefault("counters", {})[name] = [int(n) for n in re.findall(r"\d+", counted.group(1))]
    result.case(f"{program}/{mode}", "exits 0", "exit 0", ok=True, figures=figures)
    print(mode, figures, flush=True)
sys.exit(result.write(out))
