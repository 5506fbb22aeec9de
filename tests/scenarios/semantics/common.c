/* The helpers every scenario builds on: streams, events, buffers of N bytes, and the kernels
   scale(out, in), which writes `out` and reads `in` (pointer to const), and the untyped
   touch(a, b). */
#include "semantics.h"

CUcontext ctx_a, ctx_b;
CUfunction scale, touch, copy_cfg;

void setup(void) {
    CUdevice dev;
    int count = 0;
    CUmodule module;
    CHECK(cuInit(0));
    CHECK(cuDeviceGetCount(&count));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx_a, dev));
    if (count > 1) {
        CUdevice dev1;
        CHECK(cuDeviceGet(&dev1, 1));
        CHECK(cuDevicePrimaryCtxRetain(&ctx_b, dev1));
    } else {
        CHECK(cuCtxCreate_v2(&ctx_b, 0, dev));
    }
    CHECK(cuCtxSetCurrent(ctx_a));
    CHECK(cuModuleLoadData(&module, SCALE_PTX));
    CHECK(cuModuleGetFunction(&scale, module, SCALE_NAME));
    CHECK(cuModuleGetFunction(&touch, module, TOUCH_NAME));
    CHECK(cuModuleGetFunction(&copy_cfg, module, COPY_CFG_NAME));
}

CUstream stream(unsigned flags) {
    CUstream s;
    CHECK(cuStreamCreate(&s, flags));
    return s;
}
CUstream nonblocking(void) { return stream(CU_STREAM_NON_BLOCKING); }
CUstream blocking(void) { return stream(CU_STREAM_DEFAULT); }
CUevent event(void) {
    CUevent e;
    CHECK(cuEventCreate(&e, 0));
    return e;
}
CUdeviceptr dalloc(void) {
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, N));
    return p;
}
CUdeviceptr dalloc_async(CUstream s) {
    CUdeviceptr p;
    CHECK(cuMemAllocAsync(&p, N, s));
    return p;
}
/* A 1D array of `bytes` one-byte elements. */
CUarray array_1d(size_t bytes) {
    CUDA_ARRAY_DESCRIPTOR descriptor = {bytes, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1};
    CUarray array;
    CHECK(cuArrayCreate_v2(&array, &descriptor));
    return array;
}

void launch(CUstream s, CUdeviceptr out, CUdeviceptr in) { LAUNCH_SCALE(scale, s, out, in, N / 4); }
/* A kernel that writes x (reading a private scratch buffer), or reads x (writing one). */
void writes(CUstream s, CUdeviceptr x) { launch(s, x, dalloc()); }
void reads(CUstream s, CUdeviceptr x) { launch(s, dalloc(), x); }
/* The untyped kernel touch(a, b), and touch(x, a private scratch buffer). */
void touch_both(CUstream s, CUdeviceptr a, CUdeviceptr b) {
    void *params[] = {&a, &b};
    CHECK(cuLaunchKernel(touch, 1, 1, 1, 64, 1, 1, 0, s, params, NULL));
}
void touches(CUstream s, CUdeviceptr x) { touch_both(s, x, dalloc()); }
CUdeviceptr initialized(void) {
    CUdeviceptr x = dalloc();
    CHECK(cuMemsetD8_v2(x, 0, N));
    CHECK(cuCtxSynchronize());
    return x;
}
/* The same, `bytes` long. */
CUdeviceptr initialized_bytes(size_t bytes) {
    CUdeviceptr x;
    CHECK(cuMemAlloc_v2(&x, bytes));
    CHECK(cuMemsetD8_v2(x, 0, bytes));
    CHECK(cuCtxSynchronize());
    return x;
}
void order(CUstream from, CUstream to) {
    CUevent e = event();
    CHECK(cuEventRecord(e, from));
    CHECK(cuStreamWaitEvent(to, e, 0));
}

void run_graph(CUgraph g, CUstream s) {
    CUgraphExec exec;
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    CHECK(cuGraphLaunch(exec, s));
}

/* The ordering a fixed twin makes when it needs no other. */
void order_if(int fixed, CUstream from, CUstream to) {
    if (fixed) order(from, to);
}

/* Stops the program with exit status 5 unless the `n` bytes at `got` are those at `want`. */
void expect_bytes(const void *got, const void *want, size_t n, const char *what) {
    if (memcmp(got, want, n) != 0) {
        fprintf(stderr, "%s: the bytes copied back differ\n", what);
        exit(5);
    }
}
