"""Where a program's host time goes, per thread: runs one of tests/gpu/perf/programs.py's
programs (warm-up, then timed steps as programs.py times them) and prints one JSON line with
the median step and, for every thread of the process, its time on a CPU and its time
waiting for one (runnable, not running) per step, from /proc/self/task/*/schedstat.
Natively and under streamsan alike: the shim's own threads show under their names.
Usage: threads.py PROGRAM STEPS WARMUP"""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tests/gpu/perf"))
import programs  # noqa: E402
import torch  # noqa: E402


def threads():
    """tid -> (name, ns on a CPU, ns runnable and waiting)."""
    seen = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                run, wait, _ = (int(x) for x in f.read().split())
        except OSError:
            continue
        seen[tid] = (name, run, wait)
    return seen


name, steps, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
step = programs.PROGRAMS[name]()
for _ in range(warmup):
    step()
torch.cuda.synchronize()
before = threads()
times = []
for _ in range(steps):
    start = time.perf_counter()
    step()
    torch.cuda.synchronize()
    times.append((time.perf_counter() - start) * 1e3)
after = threads()
per_thread = []
for tid, (tname, run, wait) in after.items():
    _, run0, wait0 = before.get(tid, (tname, 0, 0))
    run_ms, wait_ms = (run - run0) / 1e6 / steps, (wait - wait0) / 1e6 / steps
    if run_ms >= 0.01 or wait_ms >= 0.01:
        per_thread.append({"tid": int(tid), "name": tname, "run_ms": round(run_ms, 3), "wait_ms": round(wait_ms, 3)})
per_thread.sort(key=lambda t: -t["run_ms"])
print(json.dumps({"program": name, "steps": steps, "median_step_ms": round(statistics.median(times), 3),
                  "threads": per_thread}))
