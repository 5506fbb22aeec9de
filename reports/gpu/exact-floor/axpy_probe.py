"""Where footprint=exact's time goes on one kernel: a numba axpy over N floats, launched in
rounds of 100. Prints one JSON line: per round, the host's time per launch (the launch calls
alone), the wait for the round at cuda.synchronize() (the device's backlog and, under
streamsan, the reading of the round's tables), and the device time per kernel between two
events around 20 launches. Usage: axpy_probe.py N"""
import json
import statistics
import sys
import time

import numpy as np
if not hasattr(np, "row_stack"):  # numba-cuda still names it; NumPy 2.4 removed it
    np.row_stack = np.vstack
from numba import cuda

n = int(sys.argv[1])


@cuda.jit
def axpy(out, a, x, y):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = a * x[i] + y[i]


x = cuda.to_device(np.ones(n, dtype=np.float32))
y = cuda.to_device(np.ones(n, dtype=np.float32))
out = cuda.device_array(n, dtype=np.float32)
grid = (n + 255) // 256
for _ in range(20):
    axpy[grid, 256](out, 0.5, x, y)
cuda.synchronize()
host, wait, device = [], [], []
for _ in range(5):
    t0 = time.perf_counter()
    for _ in range(100):
        axpy[grid, 256](out, 0.5, x, y)
    t1 = time.perf_counter()
    cuda.synchronize()
    t2 = time.perf_counter()
    host.append((t1 - t0) / 100 * 1e6)
    wait.append((t2 - t1) * 1e6)
start, end = cuda.event(), cuda.event()
for _ in range(5):
    start.record()
    for _ in range(20):
        axpy[grid, 256](out, 0.5, x, y)
    end.record()
    end.synchronize()
    device.append(cuda.event_elapsed_time(start, end) * 1000 / 20)
med = statistics.median
print(json.dumps({"n": n, "host_us_per_launch": med(host), "wait_us_per_round": med(wait),
                  "device_us_per_kernel": med(device), "device_us_all": [round(d, 1) for d in device],
                  "check": float(out.copy_to_host()[:4].sum())}))
