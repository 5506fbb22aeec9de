# numba-cuda: one kernel writes an array on stream 1 while another reads it on stream 2 with
# no wait (numba passes arrays as by-value structures: their parameters say nothing).
# Usage: numba_streams.py racy|fixed
import sys
import numpy as np
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack          # numba 0.68 under numpy 2.5
from numba import cuda

@cuda.jit
def writer(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = i * 0.5

@cuda.jit
def reader(a, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i] + 1.0

fixed = sys.argv[1] == "fixed"
n = 1 << 20
s1, s2 = cuda.stream(), cuda.stream()
a = cuda.device_array(n, dtype=np.float32)
out = cuda.device_array(n, dtype=np.float32)
cuda.synchronize()
writer[n // 256, 256, s1](a)
if fixed:
    e = cuda.event()
    e.record(stream=s1)
    e.wait(stream=s2)
reader[n // 256, 256, s2](a, out)
s2.synchronize()
cuda.synchronize()
print("numba_streams", sys.argv[1], float(out.copy_to_host().sum()))
