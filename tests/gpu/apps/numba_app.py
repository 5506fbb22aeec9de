# numba-cuda: kernels on three streams ordered with events.
# Usage: numba_app.py clean|missing_wait
import sys
import numpy as np
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack          # numba 0.68 under numpy 2.5
from numba import cuda

mode = sys.argv[1]


@cuda.jit
def scale(out, inp, factor):
    i = cuda.grid(1)
    if i < inp.size:
        out[i] = factor * inp[i]


n = 1 << 16
streams = [cuda.stream() for _ in range(3)]
events = [cuda.event() for _ in range(3)]
x = cuda.to_device(np.ones(n, dtype=np.float32), stream=streams[0])
bufs = [cuda.device_array(n, dtype=np.float32, stream=streams[0]) for _ in range(3)]
streams[0].synchronize()
for step in range(10):
    src = x
    for k in range(3):
        s = streams[k]
        scale[n // 256, 256, s](bufs[k], src, 1.0 + k)
        events[k].record(stream=s)
        nxt = streams[(k + 1) % 3]
        if mode != "missing_wait":
            events[k].wait(stream=nxt)
        src = bufs[k]
    events[2].wait(stream=streams[0])
for s in streams:
    s.synchronize()
print("numba_app:", mode, "done" if mode != "clean" else float(bufs[2].copy_to_host().sum()))
