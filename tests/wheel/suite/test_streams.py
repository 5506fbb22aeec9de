"""A test suite for `pytest --streamsan` (tests/wheel/check.py): two tests with the same race
(a launch on a stream other than the one that allocated its input, no wait), each of which
must fail with the race naming it, and clean tests, which must pass. The driver is the
stand-in's `libcuda.so.1`, through ctypes."""

import ctypes

import pytest

PTX = b""".version 7.0
.target sm_52
.address_size 64
.visible .entry _Z5scalePfPKfi(.param .u64 p0, .param .u64 p1, .param .u32 p2) { ret; }
"""


def check(status):
    assert status == 0, f"driver call failed: {status}"


@pytest.fixture(scope="module")
def cuda():
    cuda = ctypes.CDLL("libcuda.so.1")
    check(cuda.cuInit(0))
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    check(cuda.cuDeviceGet(ctypes.byref(dev), 0))
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
    check(cuda.cuCtxSetCurrent(ctx))
    module, kernel = ctypes.c_void_p(), ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), PTX))
    check(cuda.cuModuleGetFunction(ctypes.byref(kernel), module, b"_Z5scalePfPKfi"))
    cuda.kernel = kernel
    return cuda


def pipeline(cuda, wait):
    """Allocates on one stream, launches on another (after a wait on the first if `wait`)."""
    s1, s2 = ctypes.c_void_p(), ctypes.c_void_p()
    check(cuda.cuStreamCreate(ctypes.byref(s1), 1))
    check(cuda.cuStreamCreate(ctypes.byref(s2), 1))
    x, y = ctypes.c_uint64(), ctypes.c_uint64()
    check(cuda.cuMemAllocAsync(ctypes.byref(x), 256, s1))
    check(cuda.cuMemAllocAsync(ctypes.byref(y), 256, s2))
    if wait:
        event = ctypes.c_void_p()
        check(cuda.cuEventCreate(ctypes.byref(event), 0))
        check(cuda.cuEventRecord(event, s1))
        check(cuda.cuStreamWaitEvent(s2, event, 0))
    n = ctypes.c_int(64)
    params = (ctypes.c_void_p * 3)(ctypes.addressof(y), ctypes.addressof(x), ctypes.addressof(n))
    check(cuda.cuLaunchKernel(cuda.kernel, 1, 1, 1, 64, 1, 1, 0, s2, params, None))
    check(cuda.cuCtxSynchronize())


def test_ordered(cuda):
    pipeline(cuda, wait=True)


def test_racy(cuda):
    pipeline(cuda, wait=False)


def test_host_only():
    assert sum(range(4)) == 6


def test_racy_again(cuda):
    pipeline(cuda, wait=False)


def test_ordered_after(cuda):
    pipeline(cuda, wait=True)
