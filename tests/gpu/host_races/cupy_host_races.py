"""Host races in CuPy: `ndarray.get(stream=s, out=pinned, blocking=False)` read
before `s.synchronize()` (racy) or after it (fixed); an array in managed memory filled on a
stream and read through a NumPy view of the same memory before the stream's synchronize
(racy) or after (fixed).

Usage: cupy_host_races.py SCENARIO racy|fixed   (list: each scenario and what its racy twin
must be reported as)
"""
import ctypes
import sys

import cupy as cp
import numpy as np

N = 1 << 20


def get_into_pinned(racy):
    s = cp.cuda.Stream(non_blocking=True)
    memory = cp.cuda.alloc_pinned_memory(N * 4)
    out = np.frombuffer(memory, np.float32, N)
    with s:
        x = cp.full(N, 3.0, dtype=cp.float32) * 2
        x.get(stream=s, out=out, blocking=False)
    if racy:
        first = float(out[0])
        s.synchronize()
        print("read before the synchronize")
    else:
        s.synchronize()
        first = float(out[0])
        print("first", first)


def managed_view(racy):
    s = cp.cuda.Stream(non_blocking=True)
    memory = cp.cuda.malloc_managed(N * 4)
    x = cp.ndarray(N, cp.float32, memory)
    view = np.ctypeslib.as_array(ctypes.cast(memory.ptr, ctypes.POINTER(ctypes.c_float)), (N,))
    with s:
        x.fill(5.0)
    if racy:
        first = float(view[0])
        s.synchronize()
        print("read before the synchronize")
    else:
        s.synchronize()
        first = float(view[0])
        print("first", first)


SCENARIOS = {"get_into_pinned": ("host-race", get_into_pinned), "managed_view": ("host-race", managed_view)}


def main():
    if sys.argv[1:] == ["list"]:
        for name, (kind, _) in SCENARIOS.items():
            print(name, kind)
        return 0
    name, twin = sys.argv[1:3]
    SCENARIOS[name][1](twin == "racy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
