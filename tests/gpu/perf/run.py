#!/usr/bin/env python3
"""Overhead on the GPU: the same PyTorch workloads (workload.py) natively, under streamsan,
under compute-sanitizer memcheck with stream-ordered race tracking, and with PyTorch's
CUDA sanitizer (TORCH_CUDA_SANITIZER=1), in one run side by side.

For each: the best time of the workload's timed loop (what the program itself measures) and
the whole process's wall time. Writes gpu-overhead.json (a list of {"workload", "native_s",
"streamsan_s", "memcheck_s", "csan_s", ...}) and gpu-overhead.log.
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


def main():
    streamsan, out = sys.argv[1], sys.argv[2]
    log = open(os.path.join(out, "gpu-overhead.log"), "w")
    results = []
    for workload in ("launch_bound", "compute_bound"):
        script = [sys.executable, os.path.join(HERE, "workload.py"), workload]
        modes = {
            "native": (script, {}),
            "streamsan": ([streamsan, "run", "--report", f"/tmp/overhead-{workload}.%p.json", "--"] + script, {}),
            "memcheck": (["compute-sanitizer", "--tool", "memcheck", "--track-stream-ordered-races", "all"] + script, {}),
            "csan": (script, {"TORCH_CUDA_SANITIZER": "1"}),
        }
        row = {"workload": workload}
        for mode, (cmd, extra) in modes.items():
            loop, wall, code = run(cmd, dict(os.environ, **extra), log)
            row[f"{mode}_s"] = round(loop["best_s"], 4) if loop else None
            row[f"{mode}_process_s"] = round(wall, 2)
            row[f"{mode}_exit"] = code
            if loop:
                row[f"{mode}_checksum"] = loop["checksum"]
            print(f"{workload:14} {mode:10} loop {row[f'{mode}_s']} s, process {wall:.1f} s, exit {code}", flush=True)
        if row["native_s"]:
            for mode in ("streamsan", "memcheck", "csan"):
                if row[f"{mode}_s"]:
                    row[f"{mode}_ratio"] = round(row[f"{mode}_s"] / row["native_s"], 3)
        results.append(row)
    with open(os.path.join(out, "gpu-overhead.json"), "w") as f:
        json.dump(results, f, indent=1)
    for row in results:
        print(row["workload"], {k: v for k, v in row.items() if k.endswith("_ratio")})


if __name__ == "__main__":
    main()
