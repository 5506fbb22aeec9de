/* One scenario per rule of docs/semantics.md and per race kind, each with a racy and a fixed twin.
   Usage: semantics SCENARIO racy|fixed   (semantics list: each scenario and what its racy
   twin must be reported as)
   Driver API only, linked with -lcuda: it runs against the stand-in driver and, unchanged,
   on a GPU. The kernel scale(float* out, const float* in, int n) writes `out` and reads `in`
   (pointer to const); the stand-in runs no kernel, the GPU runs an empty one.
   Exit status: 0 when the scenario ran, 4 when a driver call failed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_min.h"

typedef struct CUgraphNode_st *CUgraphNode;
/* The explicit graph API's parameter blocks, laid out as in cuda.h. */
typedef struct {
    CUfunction func;
    unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    void **kernelParams, **extra;
    void *kern;
    CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS;
typedef struct {
    size_t srcXInBytes, srcY, srcZ, srcLOD;
    CUmemorytype srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    CUarray srcArray;
    void *reserved0;
    size_t srcPitch, srcHeight;
    size_t dstXInBytes, dstY, dstZ, dstLOD;
    CUmemorytype dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    CUarray dstArray;
    void *reserved1;
    size_t dstPitch, dstHeight;
    size_t WidthInBytes, Height, Depth;
} CUDA_MEMCPY3D;
typedef struct { /* CUstreamBatchMemOpParams, as a 32-bit value write */
    unsigned operation, pad;
    CUdeviceptr address;
    unsigned long long value;
    unsigned flags, pad2;
    CUdeviceptr alias;
    unsigned long long reserved;
} CUstreamBatchMemOpParams;
typedef struct {
    CUcontext ctx;
    unsigned count;
    CUstreamBatchMemOpParams *paramArray;
    unsigned flags;
} CUDA_BATCH_MEM_OP_NODE_PARAMS;
#define CU_STREAM_MEM_OP_WRITE_VALUE_32 2
CUresult cuGraphAddKernelNode_v2(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_KERNEL_NODE_PARAMS *);
CUresult cuGraphAddMemcpyNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_MEMCPY3D *, CUcontext);
CUresult cuGraphAddChildGraphNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraph);
CUresult cuGraphAddEventRecordNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUevent);
CUresult cuGraphAddEventWaitNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUevent);
CUresult cuGraphAddDependencies(CUgraph, const CUgraphNode *, const CUgraphNode *, size_t);
CUresult cuGraphAddBatchMemOpNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_BATCH_MEM_OP_NODE_PARAMS *);

#define N 256 /* bytes per buffer */
#define CU_STREAM_CAPTURE_MODE_GLOBAL 0
#define CU_STREAM_WAIT_VALUE_GEQ 0
#define CU_EVENT_WAIT_EXTERNAL 0x1

static CUcontext ctx_a, ctx_b; /* two devices, or two contexts of one */
static CUfunction scale, touch, copy_cfg;

static void setup(void) {
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

static CUstream stream(unsigned flags) {
    CUstream s;
    CHECK(cuStreamCreate(&s, flags));
    return s;
}
static CUstream nonblocking(void) { return stream(CU_STREAM_NON_BLOCKING); }
static CUstream blocking(void) { return stream(CU_STREAM_DEFAULT); }
static CUevent event(void) {
    CUevent e;
    CHECK(cuEventCreate(&e, 0));
    return e;
}
static CUdeviceptr dalloc(void) {
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, N));
    return p;
}
static CUdeviceptr dalloc_async(CUstream s) {
    CUdeviceptr p;
    CHECK(cuMemAllocAsync(&p, N, s));
    return p;
}
static void launch(CUstream s, CUdeviceptr out, CUdeviceptr in) { LAUNCH_SCALE(scale, s, out, in, N / 4); }
/* A kernel that writes x (reading a private scratch buffer), or reads x (writing one). */
static void writes(CUstream s, CUdeviceptr x) { launch(s, x, dalloc()); }
static void reads(CUstream s, CUdeviceptr x) { launch(s, dalloc(), x); }
/* The untyped kernel touch(a, b), and touch(x, a private scratch buffer). */
static void touch_both(CUstream s, CUdeviceptr a, CUdeviceptr b) {
    void *params[] = {&a, &b};
    CHECK(cuLaunchKernel(touch, 1, 1, 1, 64, 1, 1, 0, s, params, NULL));
}
static void touches(CUstream s, CUdeviceptr x) { touch_both(s, x, dalloc()); }
static CUdeviceptr initialized(void) {
    CUdeviceptr x = dalloc();
    CHECK(cuMemsetD8_v2(x, 0, N));
    CHECK(cuCtxSynchronize());
    return x;
}
static void order(CUstream from, CUstream to) {
    CUevent e = event();
    CHECK(cuEventRecord(e, from));
    CHECK(cuStreamWaitEvent(to, e, 0));
}

/* ---- Synchronization ------------------------------------------------------------------ */

static void event_wait(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    if (fixed) order(s1, s2);
    reads(s2, x);
}

static void wait_unrecorded_event(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUevent e = event();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    if (fixed) CHECK(cuEventRecord(e, s1));
    CHECK(cuStreamWaitEvent(s2, e, 0)); /* racy: e was never recorded, the wait orders nothing */
    reads(s2, x);
}

static void event_synchronize(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUevent e = event();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    CHECK(cuEventRecord(e, s1));
    if (fixed) CHECK(cuEventSynchronize(e));
    reads(s2, x);
}

static void event_query(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUevent e = event();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    CHECK(cuEventRecord(e, s1));
    if (fixed)
        while (cuEventQuery(e) != CUDA_SUCCESS) {}
    reads(s2, x);
}

static void stream_synchronize(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    if (fixed) CHECK(cuStreamSynchronize(s1));
    reads(s2, x);
}

static void stream_query(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    if (fixed)
        while (cuStreamQuery(s1) != CUDA_SUCCESS) {}
    reads(s2, x);
}

static void context_synchronize(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    if (fixed) CHECK(cuCtxSynchronize());
    reads(s2, x);
}

/* cuMemFree synchronizes the device; cuMemFreeAsync on another stream does not. */
static void sync_free_is_device_wide(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc_async(s1);
    order(s1, s2);
    reads(s2, x);
    if (fixed)
        CHECK(cuMemFree_v2(x));
    else
        CHECK(cuMemFreeAsync(x, s1));
}

static void wait_value(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), flag = dalloc();
    CHECK(cuMemsetD8_v2(flag, 0, 4));
    CHECK(cuCtxSynchronize());
    writes(s1, x);
    CHECK(cuStreamWriteValue32_v2(s1, flag, 1, 0));
    if (fixed) CHECK(cuStreamWaitValue32_v2(s2, flag, 1, CU_STREAM_WAIT_VALUE_GEQ));
    reads(s2, x);
}

static volatile int callback_ran;
static void set_flag(void *data) { *(volatile int *)data = 1; }
static void set_flag_callback(CUstream s, CUresult status, void *data) {
    (void)s;
    (void)status;
    set_flag(data);
}
/* The stand-in defers host functions until this is called (STANDIN_DEFER_CALLBACKS=1); a
   real driver runs them by itself. */
static void let_the_driver_run_callbacks(void) {
    void (*run)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "standinRunCallbacks");
    if (run) run();
}

static void host_function(int fixed, int as_callback) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    callback_ran = 0;
    writes(s1, x);
    if (as_callback)
        CHECK(cuStreamAddCallback(s1, set_flag_callback, (void *)&callback_ran, 0));
    else
        CHECK(cuLaunchHostFunc(s1, set_flag, (void *)&callback_ran));
    if (fixed) {
        /* The host waits for the function, through its own flag. */
        let_the_driver_run_callbacks();
        while (!callback_ran) {}
    }
    reads(s2, x);
    let_the_driver_run_callbacks();
    CHECK(cuCtxSynchronize());
}
static void host_func(int fixed) { host_function(fixed, 0); }
static void stream_callback(int fixed) { host_function(fixed, 1); }

/* ---- Default streams ------------------------------------------------------------------ */

/* The legacy default stream waits for blocking streams, not for non-blocking ones. */
static void legacy_waits_for_blocking_streams(int fixed) {
    CUstream s = fixed ? blocking() : nonblocking();
    CUdeviceptr x = dalloc();
    writes(s, x);
    reads(0, x);
}

/* Blocking streams wait for the legacy default stream; non-blocking ones do not. */
static void blocking_streams_wait_for_legacy(int fixed) {
    CUstream s = fixed ? blocking() : nonblocking();
    CUdeviceptr x = dalloc();
    writes(CU_STREAM_LEGACY, x);
    reads(s, x);
}

/* Per-thread default streams of two host threads are not ordered with each other; each is
   ordered with the legacy default stream. */
static CUdeviceptr shared_x;
static void *write_on_per_thread_stream(void *arg) {
    (void)arg;
    CHECK(cuCtxSetCurrent(ctx_a));
    writes(CU_STREAM_PER_THREAD, shared_x);
    return NULL;
}
static void per_thread_default_streams(int fixed) {
    pthread_t t;
    shared_x = dalloc();
    pthread_create(&t, NULL, write_on_per_thread_stream, NULL);
    pthread_join(t, NULL);
    reads(fixed ? CU_STREAM_LEGACY : CU_STREAM_PER_THREAD, shared_x);
}

/* ---- Synchronous copies and memsets --------------------------------------------------- */

/* A copy from pageable memory may return before the data lands; from pinned memory, not. */
static void htod_from_pageable_memory(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc();
    static char pageable[N];
    void *pinned;
    CHECK(cuMemAllocHost_v2(&pinned, N));
    CHECK(cuMemcpyHtoD_v2(x, fixed ? pinned : (void *)pageable, N));
    reads(s, x);
}

/* A synchronous copy to the host has completed when it returns; an asynchronous one not. */
static void dtoh_joins_the_host(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    static char pageable[N];
    void *pinned;
    CHECK(cuMemAllocHost_v2(&pinned, N));
    CHECK(cuCtxSynchronize());
    if (fixed)
        CHECK(cuMemcpyDtoH_v2(pageable, x, N));
    else
        CHECK(cuMemcpyDtoHAsync_v2(pinned, x, N, s1));
    writes(s2, x);
}

/* A synchronous device-to-device copy does not make the host wait for it. */
static void dtod_does_not_join_the_host(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc();
    CHECK(cuMemcpyDtoD_v2(x, y, N));
    if (fixed) CHECK(cuStreamSynchronize(CU_STREAM_LEGACY));
    reads(s, x);
}

/* A synchronous memset of device memory does not make the host wait; of pinned memory, it does. */
static void memset_of_device_memory(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x;
    if (fixed) {
        void *pinned;
        CHECK(cuMemAllocHost_v2(&pinned, N));
        x = (CUdeviceptr)pinned;
    } else {
        x = dalloc();
    }
    CHECK(cuMemsetD8_v2(x, 0, N));
    reads(s, x);
}

/* A 2D copy reads the rows it names: here the first of four 32-byte rows, 64 bytes apart,
   is where the kernel on s1 wrote. */
static void strided_copy(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc();
    writes(s1, x);
    if (fixed) order(s1, s2);
    CUDA_MEMCPY2D copy = {0};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = x;
    copy.srcPitch = 64;
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = y;
    copy.dstPitch = 64;
    copy.WidthInBytes = 32;
    copy.Height = 4;
    CHECK(cuMemcpy2DAsync_v2(&copy, s2));
}

static void async_copy_does_not_join_the_host(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    void *pinned;
    CHECK(cuMemAllocHost_v2(&pinned, N));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpyHtoDAsync_v2(x, pinned, N, s1));
    if (fixed) CHECK(cuStreamSynchronize(s1));
    reads(s2, x);
}

/* CUDA documents that an asynchronous copy from the device to pageable host memory returns
   only once the copy has completed (to pinned memory it does not): a program that copies x to
   a plain host array on s1, s1b, s1c (cuMemcpyDtoHAsync, cuMemcpyAsync, cuMemcpy2DAsync) and
   then overwrites x from s2 is correct. */
static void dtoh_async_to_pageable_memory(int fixed) {
    CUstream s1 = nonblocking(), s1b = nonblocking(), s1c = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = initialized();
    static char pageable[3][N];
    char *pinned;
    CHECK(cuMemAllocHost_v2((void **)&pinned, 3 * N));
    char *host[3] = {fixed ? pageable[0] : pinned, fixed ? pageable[1] : pinned + N, fixed ? pageable[2] : pinned + 2 * N};
    CHECK(cuMemcpyDtoHAsync_v2(host[0], x, N, s1));
    CHECK(cuMemcpyAsync((CUdeviceptr)host[1], x, N, s1b));
    CUDA_MEMCPY2D copy = {0};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = x;
    copy.srcPitch = N;
    copy.dstMemoryType = CU_MEMORYTYPE_HOST;
    copy.dstHost = host[2];
    copy.dstPitch = N;
    copy.WidthInBytes = N;
    copy.Height = 1;
    CHECK(cuMemcpy2DAsync_v2(&copy, s1c));
    writes(s2, x);
}

/* Warp's pinned allocator: host memory pinned (here registered), copied into, then freed. A
   stream of another context still copying into it when it is freed is a free-race (the free
   waits for its own context only); once freed, its addresses are ordinary pageable memory, so
   copies into them afterwards are no use after free. */
static void freed_host_range(int fixed) {
    char *host = aligned_alloc(4096, 4096);
    CHECK(cuMemHostRegister_v2(host, 4096, CU_MEMHOSTREGISTER_PORTABLE));
    CHECK(cuCtxSetCurrent(ctx_b));
    CUstream s1 = nonblocking();
    CUdeviceptr y = initialized();
    CHECK(cuMemcpyDtoHAsync_v2(host, y, N, s1));
    if (fixed) CHECK(cuStreamSynchronize(s1));
    CHECK(cuCtxSetCurrent(ctx_a));
    CHECK(cuMemHostUnregister(host));
    CUdeviceptr x = initialized();
    CHECK(cuMemcpyDtoHAsync_v2(host, x, N, nonblocking()));
    CHECK(cuMemcpyHtoD_v2(x, host, N));
    CHECK(cuCtxSetCurrent(ctx_b));
    CHECK(cuStreamSynchronize(s1));
    CHECK(cuCtxSetCurrent(ctx_a));
    free(host);
}

/* ---- Buffers and accesses ------------------------------------------------------------- */

/* Warp: "array created on the current stream, kernel launched on another stream without
   wait_stream". */
static void use_before_alloc(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc_async(s1);
    CHECK(cuMemsetD8Async(x, 0, N, s1));
    if (fixed) order(s1, s2);
    writes(s2, x);
    CHECK(cuCtxSynchronize());
}

/* nvmath-python, "stream-ordered deallocation": allocated on s1, used on s2, freed on s1
   without s1 waiting for s2. */
static void free_race(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr a = dalloc_async(s1);
    order(s1, s2);
    writes(s2, a);
    if (fixed) order(s2, s1);
    CHECK(cuMemFreeAsync(a, s1));
    CHECK(cuCtxSynchronize());
}

static void use_after_free(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc_async(s);
    /* The output buffer first: an allocation after the free could be handed x's address. */
    CUdeviceptr out = dalloc();
    if (fixed) launch(s, out, x);
    CHECK(cuMemFreeAsync(x, s));
    if (!fixed) launch(s, out, x);
    CHECK(cuCtxSynchronize());
}

static void cross_stream_raw(int fixed) { event_wait(fixed); }

static void cross_stream_war(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    reads(s1, x);
    if (fixed) order(s1, s2);
    writes(s2, x);
}

static void cross_stream_waw(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    if (fixed) order(s1, s2);
    writes(s2, x);
}

/* Kernels on two streams writing through different pointers into one buffer do not
   conflict (the single-location rule); through the same pointer they do. */
static void chunks_of_one_buffer(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    writes(s2, fixed ? x + N / 2 : x);
}

/* Kernels on two streams reading one buffer through pointers to const do not conflict. */
static void concurrent_reads(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    reads(s1, x);
    if (fixed)
        reads(s2, x);
    else
        writes(s2, x);
}

/* Kernels whose signature is unknown (extern "C", as Warp, CuPy's RawKernel and Numba emit
   them): two may run together on the same data (they are taken to read it, or to write
   disjoint parts of it), but not alongside a write. */
static void untyped_kernels(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = initialized();
    if (fixed)
        touches(s1, x);
    else
        writes(s1, x);
    touches(s2, x);
}

/* ...except the first kernel on fresh memory: whatever it does is the initialization the
   next one must wait for. */
static void untyped_first_touch(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    touches(s1, x);
    if (fixed) order(s1, s2);
    touches(s2, x);
}

/* ...and a kernel's parameter once given fresh memory is an output of that kernel: here
   touch's first parameter. touch(x, y) on s1 then writes x, which touch(z, x) on s2 reads
   (Numba, Warp and CuPy's producer and consumer kernels on two streams). */
static void untyped_learned_output(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = initialized(), y = initialized(), z = initialized();
    touch_both(s1, dalloc(), y); /* a fresh output: touch's first parameter writes */
    touch_both(s1, x, y);        /* produce x */
    if (fixed) order(s1, s2);
    touch_both(s2, z, x);        /* consume x */
}

/* CuPy: "s2.wait_event(e2)" before s2 copies what s1 computed. */
/* PyTorch's side-stream prefetcher (issue 17, timm): a copy kernel takes its offsets and
   pointers in one structure passed by value, and fills only the dimensions its tensors have:
   the rest is whatever the host stack held, at first a host address, later the address of
   the previous batch. The compute stream waits for the side stream, takes the batch and
   reads it, while the side stream already copies the next batch, whose launch carries the
   taken batch's stale address: correct. Racy twin: the compute stream does not wait. */
typedef struct {
    uint64_t dims, stride[2]; /* stride[1]: a dimension the tensors do not have */
    CUdeviceptr out, in;
} CopyCfg;
static void launch_copy_cfg(CUstream s, CopyCfg cfg) {
    void *params[] = {&cfg};
    CHECK(cuLaunchKernel(copy_cfg, 1, 1, 1, 64, 1, 1, 0, s, params, NULL));
}
static CUdeviceptr prefetch(CUstream side, uint64_t stale) {
    CUdeviceptr staged = dalloc(), batch = dalloc();
    CHECK(cuMemsetD8Async(staged, 1, N, side));
    launch_copy_cfg(side, (CopyCfg){1, {4, stale ? stale : batch}, batch, staged});
    return batch;
}
static void stale_parameter_words(int fixed) {
    CUstream side = nonblocking(), compute = nonblocking();
    int on_the_stack = 0;
    launch_copy_cfg(compute, (CopyCfg){1, {4, (uint64_t)(uintptr_t)&on_the_stack}, dalloc(), initialized()});
    CUdeviceptr next = prefetch(side, 0);
    for (int i = 0; i < 3; i++) {
        if (fixed) order(side, compute);
        CUdeviceptr x = next;
        next = prefetch(side, x);
        reads(compute, x);
    }
}

static void cupy_wait_event(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr a = dalloc();
    void *pinned;
    CHECK(cuMemAllocHost_v2(&pinned, N));
    CHECK(cuCtxSynchronize());
    writes(s1, a); /* a_cp = b_cp * a_cp + 8 */
    if (fixed) order(s1, s2);
    CHECK(cuMemcpyDtoHAsync_v2(pinned, a, N, s2)); /* cp.asnumpy(a_cp) on s2 */
    CHECK(cuStreamSynchronize(s2));
}

/* A framework's own sub-allocation inside a driver allocation, declared through the
   annotation API (shim/include/streamsan.h) when streamsan is there: freed on its
   allocation stream while another stream still reads it. */
static void annotated_suballocation(int fixed) {
    void (*annotate_alloc)(const void *, size_t, void *, int) =
        (void (*)(const void *, size_t, void *, int))dlsym(RTLD_DEFAULT, "streamsan_annotate_alloc");
    void (*annotate_free)(const void *, void *, int) =
        (void (*)(const void *, void *, int))dlsym(RTLD_DEFAULT, "streamsan_annotate_free");
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr segment, block;
    CHECK(cuMemAlloc_v2(&segment, 1 << 20));
    block = segment + 4096;
    if (annotate_alloc) annotate_alloc((const void *)block, N, s1, 0);
    writes(s1, block);
    order(s1, s2);
    reads(s2, block);
    if (fixed) order(s2, s1);
    if (annotate_free) annotate_free((const void *)block, s1, 0);
    CHECK(cuCtxSynchronize());
}

/* ---- Graphs --------------------------------------------------------------------------- */

/* Two captured streams writing one buffer: concurrent nodes unless joined by an event. */
static void graph_branches(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc(), in2 = dalloc();
    CUevent fork = event(), dep = event(), join = event();
    CUgraph graph;
    CUgraphExec exec;
    CHECK(cuCtxSynchronize());
    CHECK(cuStreamBeginCapture_v2(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuEventRecord(fork, s1));
    CHECK(cuStreamWaitEvent(s2, fork, 0));
    launch(s1, x, in);
    if (fixed) {
        CHECK(cuEventRecord(dep, s1));
        CHECK(cuStreamWaitEvent(s2, dep, 0));
    }
    launch(s2, x, in2);
    CHECK(cuEventRecord(join, s2));
    CHECK(cuStreamWaitEvent(s1, join, 0));
    CHECK(cuStreamEndCapture(s1, &graph));
    CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    CHECK(cuGraphLaunch(exec, s1));
    CHECK(cuStreamSynchronize(s1));
}

/* Work after a graph launch on another stream must wait for the launch. */
/* NCCL's strong streams, when a program mixes graphs and eager calls: the capture waits,
   as an external wait, on an event that another stream records only later, before the graph
   is launched; each launch waits for the event as it then is. Racy twin: the event is never
   recorded, and the wait orders nothing. */
static void capture_waits_on_a_later_event(int fixed) {
    CUstream live = nonblocking(), s = nonblocking();
    CUdeviceptr x = dalloc(), out = dalloc();
    CUevent e = event();
    CUgraph graph;
    CUgraphExec exec;
    CHECK(cuCtxSynchronize());
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuStreamWaitEvent(s, e, CU_EVENT_WAIT_EXTERNAL));
    launch(s, out, x);
    CHECK(cuStreamEndCapture(s, &graph));
    CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    writes(live, x);
    if (fixed) CHECK(cuEventRecord(e, live));
    CHECK(cuGraphLaunch(exec, s));
    CHECK(cuStreamSynchronize(s));
}

static void graph_launch_order(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc();
    CUgraph graph;
    CUgraphExec exec;
    CHECK(cuCtxSynchronize());
    CHECK(cuStreamBeginCapture_v2(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    launch(s1, x, in);
    CHECK(cuStreamEndCapture(s1, &graph));
    CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    CHECK(cuGraphLaunch(exec, s1));
    if (fixed) order(s1, s2);
    reads(s2, x);
    CHECK(cuCtxSynchronize());
}


/* ---- Graphs built with the explicit graph API ------------------------------------------ */

/* A kernel node scale(out, in) after `deps`. The parameters are copied by the driver. */
static CUgraphNode kernel_node(CUgraph g, const CUgraphNode *deps, size_t n, CUdeviceptr out, CUdeviceptr in) {
    CUgraphNode node;
    int count = N / 4;
    void *params[] = {&out, &in, &count};
    CUDA_KERNEL_NODE_PARAMS p = {scale, 1, 1, 1, 64, 1, 1, 0, params, NULL, NULL, NULL};
    CHECK(cuGraphAddKernelNode_v2(&node, g, deps, n, &p));
    return node;
}
static void run_graph(CUgraph g, CUstream s) {
    CUgraphExec exec;
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    CHECK(cuGraphLaunch(exec, s));
}

/* Two kernel nodes writing one buffer: concurrent unless an edge joins them. */
static void built_graph_kernels(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc(), in2 = dalloc();
    CUgraph g;
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNode a = kernel_node(g, NULL, 0, x, in);
    CUgraphNode b = kernel_node(g, NULL, 0, x, in2);
    if (fixed) CHECK(cuGraphAddDependencies(g, &a, &b, 1));
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* A memcpy node copying what a kernel node writes: after it only with the edge. */
static void built_graph_memcpy_after_kernel(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc(), in = dalloc();
    CUgraph g;
    CUgraphNode copy;
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNode k = kernel_node(g, NULL, 0, x, in);
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = x;
    c.srcPitch = N;
    c.srcHeight = 1;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = y;
    c.dstPitch = N;
    c.dstHeight = 1;
    c.WidthInBytes = N;
    c.Height = 1;
    c.Depth = 1;
    CHECK(cuGraphAddMemcpyNode(&copy, g, fixed ? &k : NULL, fixed ? 1 : 0, &c, ctx_a));
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* A child graph's kernel and the parent's kernel write one buffer. */
static void built_graph_child(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc(), in2 = dalloc();
    CUgraph child, g;
    CUgraphNode c;
    CHECK(cuGraphCreate(&child, 0));
    kernel_node(child, NULL, 0, x, in);
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNode k = kernel_node(g, NULL, 0, x, in2);
    CHECK(cuGraphAddChildGraphNode(&c, g, fixed ? &k : NULL, fixed ? 1 : 0, child));
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* An event record node after a kernel node: a stream that waits on the event reads what the
   kernel wrote. In the racy twin the record node does not follow the kernel node. */
static void built_graph_event_record(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc();
    CUevent e = event();
    CUgraph g;
    CUgraphNode r;
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNode k = kernel_node(g, NULL, 0, x, in);
    CHECK(cuGraphAddEventRecordNode(&r, g, fixed ? &k : NULL, fixed ? 1 : 0, e));
    run_graph(g, s1);
    CHECK(cuStreamWaitEvent(s2, e, 0));
    reads(s2, x);
    CHECK(cuCtxSynchronize());
}

/* An event wait node before a kernel node that reads what another stream wrote before
   recording the event. In the racy twin the kernel node does not follow the wait node. */
static void built_graph_event_wait(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), out = dalloc();
    CUevent e = event();
    CUgraph g;
    CUgraphNode w;
    writes(s2, x);
    CHECK(cuEventRecord(e, s2));
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddEventWaitNode(&w, g, NULL, 0, e));
    kernel_node(g, fixed ? &w : NULL, fixed ? 1 : 0, out, x);
    run_graph(g, s1);
    CHECK(cuCtxSynchronize());
}

/* ---- Several devices ------------------------------------------------------------------ */

/* Warp: a peer copy into an array just allocated on the other device's stream must wait for
   that stream. */
static void peer_copy_into_new_array(int fixed) {
    CUstream s0 = nonblocking();
    CUdeviceptr a0 = dalloc_async(s0);
    CHECK(cuMemsetD8Async(a0, 1, N, s0));
    CHECK(cuCtxSetCurrent(ctx_b));
    CUstream s1 = nonblocking();
    CUevent allocated = event();
    CUdeviceptr a1 = dalloc_async(s1);
    CHECK(cuEventRecord(allocated, s1));
    CHECK(cuCtxSetCurrent(ctx_a));
    if (fixed) CHECK(cuStreamWaitEvent(s0, allocated, 0));
    CHECK(cuMemcpyPeerAsync(a1, ctx_b, a0, ctx_a, N, s0));
    CHECK(cuStreamSynchronize(s0));
}

/* cuMemFree synchronizes its own device only: a stream of another device reading the
   buffer (peer access) must be waited for first. */
static void sync_free_and_another_device(int fixed) {
    CUdeviceptr x = dalloc();
    CHECK(cuCtxSynchronize());
    CHECK(cuCtxSetCurrent(ctx_b));
    CUstream s1 = nonblocking();
    CUdeviceptr y = dalloc();
    CHECK(cuMemcpyPeerAsync(y, ctx_b, x, ctx_a, N, s1));
    if (fixed) CHECK(cuStreamSynchronize(s1));
    CHECK(cuCtxSetCurrent(ctx_a));
    CHECK(cuMemFree_v2(x));
    CHECK(cuCtxSetCurrent(ctx_b));
    CHECK(cuStreamSynchronize(s1));
    CHECK(cuCtxSetCurrent(ctx_a));
}

/* An event recorded on one device orders a stream of another. */
static void cross_device_event(int fixed) {
    CUstream s0 = nonblocking();
    CUevent e = event();
    CUdeviceptr x = dalloc();
    writes(s0, x);
    CHECK(cuEventRecord(e, s0));
    CHECK(cuCtxSetCurrent(ctx_b));
    CUstream s1 = nonblocking();
    CUdeviceptr y = dalloc();
    if (fixed) CHECK(cuStreamWaitEvent(s1, e, 0));
    CHECK(cuMemcpyPeerAsync(y, ctx_b, x, ctx_a, N, s1));
    CHECK(cuStreamSynchronize(s1));
    CHECK(cuCtxSetCurrent(ctx_a));
}

/* ---- Notes, not races ----------------------------------------------------------------- */

/* A stream destroyed with work pending, and a graph holding a batch memory operation node
   (whose effect streamsan does not follow): two notes, no race. Both twins are the same
   program. */
static void notes(int fixed) {
    (void)fixed;
    CUstream s = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    CUgraph graph;
    CUgraphExec exec;
    writes(s, x);
    CHECK(cuStreamDestroy_v2(s));
    CUgraphNode node;
    CUstreamBatchMemOpParams op = {CU_STREAM_MEM_OP_WRITE_VALUE_32, 0, x, 1, 0, 0, 0, 0};
    CUDA_BATCH_MEM_OP_NODE_PARAMS params = {ctx_a, 1, &op, 0};
    CHECK(cuGraphCreate(&graph, 0));
    CHECK(cuGraphAddBatchMemOpNode(&node, graph, NULL, 0, &params));
    CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    CHECK(cuGraphLaunch(exec, s2));
    CHECK(cuStreamSynchronize(s2));
}

/* Each scenario, and what its racy twin must be reported as ("clean": nothing). */
static const struct {
    const char *name;
    void (*run)(int fixed);
    const char *racy_twin_reports;
} SCENARIOS[] = {
    {"event_wait", event_wait, "cross-stream-race"},
    {"wait_unrecorded_event", wait_unrecorded_event, "cross-stream-race"},
    {"event_synchronize", event_synchronize, "cross-stream-race"},
    {"event_query", event_query, "cross-stream-race"},
    {"stream_synchronize", stream_synchronize, "cross-stream-race"},
    {"stream_query", stream_query, "cross-stream-race"},
    {"context_synchronize", context_synchronize, "cross-stream-race"},
    {"sync_free_is_device_wide", sync_free_is_device_wide, "free-race"},
    {"wait_value", wait_value, "cross-stream-race"},
    {"host_func", host_func, "cross-stream-race"},
    {"stream_callback", stream_callback, "cross-stream-race"},
    {"legacy_waits_for_blocking_streams", legacy_waits_for_blocking_streams, "cross-stream-race"},
    {"blocking_streams_wait_for_legacy", blocking_streams_wait_for_legacy, "cross-stream-race"},
    {"per_thread_default_streams", per_thread_default_streams, "cross-stream-race"},
    {"htod_from_pageable_memory", htod_from_pageable_memory, "cross-stream-race"},
    {"dtoh_joins_the_host", dtoh_joins_the_host, "cross-stream-race"},
    {"dtod_does_not_join_the_host", dtod_does_not_join_the_host, "cross-stream-race"},
    {"memset_of_device_memory", memset_of_device_memory, "cross-stream-race"},
    {"async_copy_does_not_join_the_host", async_copy_does_not_join_the_host, "cross-stream-race"},
    {"strided_copy", strided_copy, "cross-stream-race"},
    {"dtoh_async_to_pageable_memory", dtoh_async_to_pageable_memory, "cross-stream-race"},
    {"freed_host_range", freed_host_range, "free-race"},
    {"use_before_alloc", use_before_alloc, "use-before-alloc"},
    {"free_race", free_race, "free-race"},
    {"use_after_free", use_after_free, "use-after-free"},
    {"cross_stream_raw", cross_stream_raw, "cross-stream-race"},
    {"cross_stream_war", cross_stream_war, "cross-stream-race"},
    {"cross_stream_waw", cross_stream_waw, "cross-stream-race"},
    {"chunks_of_one_buffer", chunks_of_one_buffer, "cross-stream-race"},
    {"concurrent_reads", concurrent_reads, "cross-stream-race"},
    {"untyped_kernels", untyped_kernels, "cross-stream-race"},
    {"untyped_first_touch", untyped_first_touch, "cross-stream-race"},
    {"untyped_learned_output", untyped_learned_output, "cross-stream-race"},
    {"stale_parameter_words", stale_parameter_words, "cross-stream-race"},
    {"cupy_wait_event", cupy_wait_event, "cross-stream-race"},
    {"annotated_suballocation", annotated_suballocation, "free-race"},
    {"graph_branches", graph_branches, "cross-stream-race"},
    {"graph_launch_order", graph_launch_order, "cross-stream-race"},
    {"capture_waits_on_a_later_event", capture_waits_on_a_later_event, "cross-stream-race"},
    {"built_graph_kernels", built_graph_kernels, "cross-stream-race"},
    {"built_graph_memcpy_after_kernel", built_graph_memcpy_after_kernel, "cross-stream-race"},
    {"built_graph_child", built_graph_child, "cross-stream-race"},
    {"built_graph_event_record", built_graph_event_record, "cross-stream-race"},
    {"built_graph_event_wait", built_graph_event_wait, "cross-stream-race"},
    {"peer_copy_into_new_array", peer_copy_into_new_array, "use-before-alloc"},
    {"sync_free_and_another_device", sync_free_and_another_device, "free-race"},
    {"cross_device_event", cross_device_event, "cross-stream-race"},
    {"notes", notes, "clean"},
};

int main(int argc, char **argv) {
    size_t count = sizeof SCENARIOS / sizeof *SCENARIOS;
    if (argc == 2 && strcmp(argv[1], "list") == 0) {
        for (size_t i = 0; i < count; i++) printf("%s %s\n", SCENARIOS[i].name, SCENARIOS[i].racy_twin_reports);
        return 0;
    }
    if (argc != 3 || (strcmp(argv[2], "racy") && strcmp(argv[2], "fixed"))) {
        fprintf(stderr, "usage: semantics SCENARIO racy|fixed | semantics list\n");
        return 2;
    }
    for (size_t i = 0; i < count; i++) {
        if (strcmp(argv[1], SCENARIOS[i].name) == 0) {
            setup();
            SCENARIOS[i].run(strcmp(argv[2], "fixed") == 0);
            CHECK(cuCtxSynchronize());
            printf("%s %s: done\n", argv[1], argv[2]);
            return 0;
        }
    }
    fprintf(stderr, "no scenario %s\n", argv[1]);
    return 2;
}
