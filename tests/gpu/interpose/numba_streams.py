# numba-cuda kernels on two streams ordered with events. Usage: numba_streams.py ROUNDS
import json, sys
import numpy as np
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack          # numba 0.68 under numpy 2.5
from numba import cuda

@cuda.jit
def scale(out, inp):
    i = cuda.grid(1)
    if i < inp.size:
        out[i] = 2.0 * inp[i]

rounds = int(sys.argv[1])
n = 1 << 16
s1, s2 = cuda.stream(), cuda.stream()
x = cuda.to_device(np.ones(n, dtype=np.float32), stream=s1)
y = cuda.device_array(n, dtype=np.float32, stream=s1)
e1, e2 = cuda.event(), cuda.event()
for _ in range(rounds):
    scale[n // 256, 256, s1](y, x)    # one launch
    e1.record(stream=s1)              # one record
    e1.wait(stream=s2)                # one wait
    scale[n // 256, 256, s2](x, y)    # one launch
    e2.record(stream=s2)
    e2.wait(stream=s1)
s1.synchronize()
print("numba_streams:", rounds, "rounds, checksum", float(x.copy_to_host(stream=s1).sum()))
print("EXPECT", json.dumps({"launch": 2, "event_record": 2, "wait": 2}))
