"""Can a process's own CPU speed be measured and divided out? Runs one of
tests/gpu/perf/programs.py's programs (warm-up, then timed steps as programs.py times them)
between two calibrations: a fixed pure-Python loop on the main thread, no driver call in it,
timed seven times (the median). Prints one JSON line: the median step, both calibrations,
and the main thread's CPU time per step (/proc/self/task/*/schedstat).
Usage: calibrated.py PROGRAM STEPS WARMUP"""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tests/gpu/perf"))
import programs  # noqa: E402
import torch  # noqa: E402


def calibrate():
    times = []
    for _ in range(7):
        start = time.perf_counter()
        sum(i * i for i in range(300_000))
        times.append((time.perf_counter() - start) * 1e3)
    return round(statistics.median(times), 3)


def main_thread_ns():
    with open(f"/proc/self/task/{os.getpid()}/schedstat") as f:
        return int(f.read().split()[0])


name, steps, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
before = calibrate()
step = programs.PROGRAMS[name]()
for _ in range(warmup):
    step()
torch.cuda.synchronize()
cpu0 = main_thread_ns()
times = []
for _ in range(steps):
    start = time.perf_counter()
    step()
    torch.cuda.synchronize()
    times.append((time.perf_counter() - start) * 1e3)
cpu = (main_thread_ns() - cpu0) / 1e6 / steps
print(json.dumps({"program": name, "median_step_ms": round(statistics.median(times), 3),
                  "calibration_ms": [before, calibrate()], "main_thread_cpu_ms": round(cpu, 3)}))
