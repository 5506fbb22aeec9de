# CuPy: FFT, matmul and elementwise kernels on two streams ordered with events, with the
# default memory pool or MemoryAsyncPool. free_without_wait frees b on s1 while s2 may still
# read it: with MemoryAsyncPool a free-race (cuMemFreeAsync); with the default pool, whose
# frees the driver never sees, the next step's kernels on s1 write b's reused block while s2
# may still read it. missing_wait_event lets s2 read b while s1 may still write it; with
# MemoryAsyncPool b's allocation is unordered too, and the closing s2.synchronize() no longer
# joins s1, so freeing `a` at exit (on the legacy stream) meets s1's last read of it.
# Usage: cupy_app.py default|async clean|missing_wait_event|free_without_wait
import sys
import cupy as cp

pool, mode = sys.argv[1], sys.argv[2]
if pool == "async":
    cp.cuda.set_allocator(cp.cuda.MemoryAsyncPool().malloc)
s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
with s1:
    a = cp.arange(256 * 256, dtype=cp.float32).reshape(256, 256) / 65536
    w = cp.eye(256, dtype=cp.float32) * 0.5
s1.synchronize()
sums = []
for step in range(20):
    with s1:
        spectrum = cp.fft.fft2(a)                 # cuFFT on s1
        b = cp.abs(spectrum).astype(cp.float32)   # elementwise on s1
    if mode != "missing_wait_event":
        s2.wait_event(s1.record())                # s2 waits for b
    with s2:
        c = b @ w                                 # matmul on s2, reads b
        d = cp.tanh(c)                            # elementwise on s2; d allocated on s2
        sums.append(d.sum())                      # reduction on s2
    if mode != "free_without_wait":
        s1.wait_event(s2.record())                # s1 waits before b (allocated on s1) is freed
    with s1:
        del b, spectrum                           # freed on s1; its memory is s1's to reuse
s2.synchronize()
total = sum(float(x) for x in sums)
print("cupy_app:", pool, mode, "done" if mode != "clean" else f"{total:.3f}")
