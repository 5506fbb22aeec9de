#!/usr/bin/env python3
"""Overhead on the GPU: the same PyTorch workloads (workload.py) natively, under streamsan,
under compute-sanitizer memcheck with stream-ordered race tracking, and with PyTorch's
CUDA sanitizer (TORCH_CUDA_SANITIZER=1), in one run side by side.

For each: the best time of the workload's timed loop (what the program itself measures),
the best and the median over its runs, and each run's process wall time. Writes
gpu-overhead.json (a list of {"workload", "native_s", "streamsan_s", "memcheck_s", "csan_s",
...}) and gpu-overhead.log.
Usage: run.py STREAMSAN OUT_DIR
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, env, log, timeout=400):
    start = time.time()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        code = "timeout"
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    wall = time.time() - start
    log.write(f"$ {' '.join(cmd)}\n# exit {code}, {wall:.2f} s\n{out}{err[-4000:]}\n")
    log.flush()
    loop = None
    for line in out.splitlines():
        if line.startswith("{"):
            loop = json.loads(line)
    return loop, wall, code


# Native and streamsan runs alternate, five each, so that a machine's slow minute falls on
# both (on the H100 machine one process's loop runs up to 1.5x slower than the next one's,
# either way); the slower tools run once, with fewer repeats of the loop (memcheck's
# compute-bound loop takes over a second). STREAMSAN_PERF_CPUS (a taskset list) pins every
# run to the same cores.
ROUNDS = 5
REPEATS = {"native": 20, "streamsan": 20, "memcheck": 5, "csan": 20}


def main():
    streamsan, out = sys.argv[1], sys.argv[2]
    log = open(os.path.join(out, "gpu-overhead.log"), "w")
    results = []
    for workload in ("launch_bound", "compute_bound"):
        def script(mode):
            return [sys.executable, os.path.join(HERE, "workload.py"), workload, str(REPEATS[mode])]

        modes = {
            "native": (script("native"), {}),
            "streamsan": ([streamsan, "run", "--report", f"/tmp/overhead-{workload}.%p.json", "--"] + script("streamsan"), {}),
            "memcheck": (["compute-sanitizer", "--tool", "memcheck", "--track-stream-ordered-races", "all"] + script("memcheck"), {}),
            "csan": (script("csan"), {"TORCH_CUDA_SANITIZER": "1"}),
        }
        pin = os.environ.get("STREAMSAN_PERF_CPUS")
        if pin:
            modes = {mode: (["taskset", "-c", pin] + cmd, extra) for mode, (cmd, extra) in modes.items()}
        order = ["native", "streamsan"] * ROUNDS + ["memcheck", "csan"]
        row = {"workload": workload}
        for mode in order:
            cmd, extra = modes[mode]
            loop, wall, code = run(cmd, dict(os.environ, **extra), log)
            row.setdefault(f"{mode}_runs_s", []).append(round(loop["best_s"], 5) if loop else None)
            row.setdefault(f"{mode}_process_s", []).append(round(wall, 2))
            row.setdefault(f"{mode}_exit", []).append(code)
            if loop:
                row.setdefault(f"{mode}_checksum", []).append(loop["checksum"])
            print(f"{workload:14} {mode:10} loop {loop and loop['best_s']} s, process {wall:.1f} s, exit {code}", flush=True)
        for mode in modes:
            times = [t for t in row[f"{mode}_runs_s"] if t is not None]
            row[f"{mode}_s"] = min(times) if times else None
            row[f"{mode}_median_s"] = sorted(times)[len(times) // 2] if times else None
        if row["native_s"]:
            for mode in ("streamsan", "memcheck", "csan"):
                if row[f"{mode}_s"]:
                    row[f"{mode}_ratio"] = round(row[f"{mode}_s"] / row["native_s"], 3)
            row["streamsan_median_ratio"] = round(row["streamsan_median_s"] / row["native_median_s"], 3)
        results.append(row)
    with open(os.path.join(out, "gpu-overhead.json"), "w") as f:
        json.dump(results, f, indent=1)
    for row in results:
        print(row["workload"], {k: v for k, v in row.items() if k.endswith("_ratio")})


if __name__ == "__main__":
    main()
