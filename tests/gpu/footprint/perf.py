"""Cost of the footprint modes on the GPU, side by side in one run: each workload
(workload.py) natively, under streamsan with footprint=params, learn and exact, and under
compute-sanitizer memcheck. Prints and writes footprint-perf.json: per workload and mode,
the median and best step time after warm-up, and the ratio to native.
Usage: perf.py STREAMSAN OUT_DIR [WORKLOAD:WARMUP:STEPS:MODES ...]"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
streamsan, out = sys.argv[1], sys.argv[2]
plan = sys.argv[3:] or ["numba:2:5:native,params,learn,exact", "gpt2:3:8:native,params,learn,exact,memcheck", "resnet:3:8:native,learn,exact"]
results = []
log = open(os.path.join(out, "footprint-perf.log"), "w")
for item in plan:
    workload, warmup, steps, modes = item.split(":")
    native = None
    for mode in modes.split(","):
        cmd = [sys.executable, os.path.join(HERE, "workload.py"), workload, warmup, steps]
        if mode == "memcheck":
            cmd = ["compute-sanitizer", "--tool", "memcheck"] + [sys.executable, os.path.join(HERE, "workload.py"), workload, "1", "2"]
        elif mode != "native":
            cmd = [streamsan, "run", "--footprint", mode, "--quiet", "--exitcode", "0", "--report", f"/tmp/perf-{workload}-{mode}.%p.json", "--"] + cmd
        start = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
            code, stdout, stderr = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            code, stdout, stderr = "timeout", (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), ""
        wall = time.time() - start
        log.write(f"$ {' '.join(cmd)}\n# exit {code} in {wall:.1f} s\n{stdout[-2000:]}{stderr[-3000:]}\n")
        log.flush()
        steps_s = None
        for line in stdout.splitlines():
            if line.startswith("{"):
                steps_s = json.loads(line)["step_s"]
        row = {"workload": workload, "mode": mode, "exit": code, "wall_s": round(wall, 2)}
        if steps_s:
            row["median_ms"] = round(statistics.median(steps_s) * 1e3, 3)
            row["best_ms"] = round(min(steps_s) * 1e3, 3)
            if mode == "native":
                native = row["median_ms"]
            if native:
                row["x_native"] = round(row["median_ms"] / native, 3)
        results.append(row)
        print(json.dumps(row), flush=True)
json.dump(results, open(os.path.join(out, "footprint-perf.json"), "w"), indent=1)
