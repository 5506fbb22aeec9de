# A Python program that reaches the driver through ctypes (as numba and CuPy partly do) and
# launches a kernel on a stream other than the one that allocated its buffer, without a wait:
# a use-before-alloc whose report must point at this file's lines. With "--deep", it runs
# from under a dozen nested calls through C, each a few more of the interpreter's native frames,
# after a hundred event records (so that its launch's Python frames are read the way a long
# program's are, past the shim's first checked reads).
import ctypes
import sys

# ctypes.CDLL releases the GIL around each call, as frameworks do; PyDLL keeps it.
cuda = (ctypes.PyDLL if "--hold-gil" in sys.argv else ctypes.CDLL)("libcuda.so.1")
PTX = b""".version 7.0
.target sm_52
.address_size 64
.visible .entry _Z5scalePfPKfi(.param .u64 p0, .param .u64 p1, .param .u32 p2) { ret; }
"""


def check(status):
    if status != 0:
        sys.exit(f"driver call failed: {status}")


def setup():
    check(cuda.cuInit(0))
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    check(cuda.cuDeviceGet(ctypes.byref(dev), 0))
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
    check(cuda.cuCtxSetCurrent(ctx))


def stream():
    s = ctypes.c_void_p()
    check(cuda.cuStreamCreate(ctypes.byref(s), 1))
    return s


def launch(kernel, s, out, inp):
    n = ctypes.c_int(64)
    params = (ctypes.c_void_p * 3)(ctypes.addressof(out), ctypes.addressof(inp), ctypes.addressof(n))
    check(cuda.cuLaunchKernel(kernel, 1, 1, 1, 64, 1, 1, 0, s, params, None))


def main(fixed):
    setup()
    module, kernel = ctypes.c_void_p(), ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), PTX))
    check(cuda.cuModuleGetFunction(ctypes.byref(kernel), module, b"_Z5scalePfPKfi"))
    s1, s2 = stream(), stream()
    x, y = ctypes.c_uint64(), ctypes.c_uint64()
    check(cuda.cuMemAllocAsync(ctypes.byref(x), 256, s1))
    check(cuda.cuMemAllocAsync(ctypes.byref(y), 256, s2))
    if fixed:
        event = ctypes.c_void_p()
        check(cuda.cuEventCreate(ctypes.byref(event), 0))
        check(cuda.cuEventRecord(event, s1))
        check(cuda.cuStreamWaitEvent(s2, event, 0))
    launch(kernel, s2, y, x)  # THE LAUNCH
    check(cuda.cuCtxSynchronize())
    print("python_race: done")


def through_c(levels, f):
    """Calls `f` from `levels` calls deep, each through a C function (map), so that each adds
    the interpreter's native frames to the stack (Python-to-Python calls add none)."""
    return f() if levels == 0 else list(map(lambda _: through_c(levels - 1, f), [0]))[0]


def record_often():
    event = ctypes.c_void_p()
    check(cuda.cuEventCreate(ctypes.byref(event), 0))
    for _ in range(100):
        check(cuda.cuEventRecord(event, None))


if "--deep" in sys.argv:
    through_c(12, lambda: (setup(), record_often(), main(False)))
else:
    main("fixed" in sys.argv[1:])
