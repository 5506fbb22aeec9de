# The launch workload of streamsan-bench from Python: a ctypes program (the GIL released
# around each call, as frameworks do) launching a four-pointer kernel on 8 streams from a few
# Python frames deep, each launch timed (the first twenty-first left out, as warm-up). Prints
# one JSON line: p50 and p99 in nanoseconds.
import ctypes
import json
import os
import time

cuda = ctypes.CDLL("libcuda.so.1")
PTX = (b".version 7.0\n.target sm_52\n.address_size 64\n"
       b".visible .entry _Z4quadPfPKfS1_S_(.param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u64 p3)\n"
       b"{\n ret;\n}\n")


def check(status):
    assert status == 0, f"driver call failed: {status}"


def setup():
    check(cuda.cuInit(0))
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    check(cuda.cuDeviceGet(ctypes.byref(dev), 0))
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
    check(cuda.cuCtxSetCurrent(ctx))
    module, kernel = ctypes.c_void_p(), ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), PTX))
    check(cuda.cuModuleGetFunction(ctypes.byref(kernel), module, b"_Z4quadPfPKfS1_S_"))
    streams = []
    for _ in range(8):
        s = ctypes.c_void_p()
        check(cuda.cuStreamCreate(ctypes.byref(s), 1))
        streams.append(s)
    buffers = []
    for _ in range(64):
        p = ctypes.c_uint64()
        check(cuda.cuMemAlloc_v2(ctypes.byref(p), 256))
        buffers.append(p)
    return kernel, streams, buffers


class Layer:
    """A little depth of Python, as a framework's module calls have."""

    def __init__(self, kernel, stream, pointers):
        self.kernel, self.stream = kernel, stream
        self.params = (ctypes.c_void_p * 4)(*[ctypes.addressof(p) for p in pointers])

    def forward(self):
        return cuda.cuLaunchKernel(self.kernel, 1, 1, 1, 128, 1, 1, 0, self.stream, self.params, None)


def step(layer, clock):
    start = clock()
    status = layer.forward()
    return clock() - start, status


def main():
    kernel, streams, buffers = setup()
    layers = [Layer(kernel, streams[i % 8], [buffers[(i % 8) * 8 + (i // 8 + k) % 8] for k in range(4)]) for i in range(64)]
    latencies = []
    # PYTHON_LAUNCHES: fewer launches for a run under callgrind (bench/count.py).
    launches = int(os.environ.get("PYTHON_LAUNCHES", 105_000))
    for i in range(launches):
        elapsed, status = step(layers[i % 64], time.perf_counter_ns)
        check(status)
        if i >= launches // 21:
            latencies.append(elapsed)
    latencies.sort()
    print(json.dumps({"p50": latencies[len(latencies) // 2], "p99": latencies[len(latencies) * 99 // 100], "buffer_bytes": None}))


main()
