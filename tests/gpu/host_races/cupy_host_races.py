"""Host races in CuPy: `ndarray.get(stream=s, out=pinned, blocking=False)` read
before `s.synchronize()` (racy) or after it (fixed).

Usage: cupy_host_races.py SCENARIO racy|fixed   (list: each scenario and what its racy twin
must be reported as)
"""
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


SCENARIOS = {"get_into_pinned": ("host-race", get_into_pinned)}


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
