# nvmath-python: the documentation's stream semantics. Clean: stateless FFTs on two streams
# ordered with events, the stream-ordered deallocation done right (s1 waits for s2 before the
# operand allocated on s1 is dropped), and a stateful FFT executed on s1 then reset and
# executed on s2 after s2 waits for s1. Racy: the deallocation without s1.wait_event(e2).
# CuPy's MemoryAsyncPool makes the drop a stream-ordered free the driver sees.
# Usage: nvmath_app.py clean|stream_ordered_deallocation
import sys
import cupy as cp
import nvmath

mode = sys.argv[1]
cp.cuda.set_allocator(cp.cuda.MemoryAsyncPool().malloc)
s1, s2 = cp.cuda.Stream(), cp.cuda.Stream()
m, n = 64, 128

# Stateless: compute on s1, continue on s2 after an event.
with s1:
    a = cp.random.rand(m, n) + 1j * cp.random.rand(m, n)
b = nvmath.fft.fft(a, axes=[-2, -1], stream=s1)
s2.wait_event(s1.record())
c = nvmath.fft.ifft(b, axes=[-2, -1], stream=s2)
s2.synchronize()

# Stream-ordered deallocation: created on s1, used on s2, dropped.
with s1:
    x = cp.random.rand(m, n) + 1j * cp.random.rand(m, n)
s2.wait_event(s1.record())
with s2:
    x *= 2.0
r = nvmath.fft.fft(x, axes=[-2, -1], stream=s2)
if mode != "stream_ordered_deallocation":
    s1.wait_event(s2.record())
x = None                                    # freed on s1, its allocation stream
s1.synchronize()
s2.synchronize()

# Stateful: execute on s1, reset the operand and execute on s2 after s2 waits for s1.
with s1:
    p = cp.random.rand(m, n) + 1j * cp.random.rand(m, n)
with nvmath.fft.FFT(p, axes=[-2, -1], stream=s1) as f:
    f.plan(stream=s1)
    r1 = f.execute(stream=s1)
    done = s1.record()
    with s2:
        q = cp.random.rand(m, n) + 1j * cp.random.rand(m, n)
    s2.wait_event(done)
    f.reset_operand(q, stream=s2)
    r2 = f.execute(stream=s2)
    s2.synchronize()
print("nvmath_app:", mode, "done")
