"""The same step time, sorted by the speed of the core at the time: before and after every
timed step of one of tests/gpu/perf/programs.py's programs, a fixed pure-Python loop (no
driver call) is timed; a step both of whose probes ran within 25% of the process's fastest
probe counts as run at full speed. Prints one JSON line: every step's time and probes, the
median of all steps and of the full-speed ones, and how many those are.
Usage: probed.py PROGRAM STEPS WARMUP"""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tests/gpu/perf"))
import programs  # noqa: E402
import torch  # noqa: E402


def probe():
    start = time.perf_counter()
    sum(i * i for i in range(30_000))
    return (time.perf_counter() - start) * 1e3


name, steps, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
step = programs.PROGRAMS[name]()
for _ in range(warmup):
    step()
torch.cuda.synchronize()
rows = []
for _ in range(steps):
    before = probe()
    start = time.perf_counter()
    step()
    torch.cuda.synchronize()
    took = (time.perf_counter() - start) * 1e3
    rows.append((round(before, 3), round(took, 3), round(probe(), 3)))
fastest = min(min(b, a) for b, _, a in rows)
full = [t for b, t, a in rows if b <= 1.25 * fastest and a <= 1.25 * fastest]
print(json.dumps({"program": name, "median_step_ms": round(statistics.median(t for _, t, _ in rows), 3),
                  "full_speed_steps": len(full), "full_speed_median_ms": round(statistics.median(full), 3) if full else None,
                  "fastest_probe_ms": fastest, "steps": rows}))
