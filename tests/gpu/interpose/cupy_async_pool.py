# CuPy with MemoryAsyncPool on two streams ordered with events (the CuPy documentation's
# s2.wait_event(e) pattern). Usage: cupy_async_pool.py ROUNDS
import json, sys
import cupy as cp

rounds = int(sys.argv[1])
cp.cuda.set_allocator(cp.cuda.MemoryAsyncPool().malloc)
s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
with s1:
    x = cp.ones(1 << 20, dtype=cp.float32)
    acc = cp.zeros(1 << 20, dtype=cp.float32)
s1.synchronize()
for _ in range(rounds):
    with s1:
        y = x * 2                     # one allocation, one kernel
    e = s1.record()                   # one event record
    s2.wait_event(e)                  # one wait
    with s2:
        z = y + acc                   # one allocation, one kernel
    e2 = s2.record()
    s1.wait_event(e2)
    with s1:
        acc += z                      # one kernel
    # z was allocated on s2 and is freed there: s2 must first wait for s1's read of it.
    s2.wait_event(s1.record())        # one event record, one wait
    del y, z                          # two frees
s1.synchronize()
print("cupy_async_pool:", rounds, "rounds, checksum", float(acc.sum()))
print("EXPECT", json.dumps({"launch": 3, "alloc": 2, "free": 2, "event_record": 3, "wait": 3}))
