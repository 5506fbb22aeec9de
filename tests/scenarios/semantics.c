/* One scenario per rule of docs/semantics.md and per race kind, each with a racy and a fixed twin.
   Usage: semantics SCENARIO racy|fixed   (semantics list: each scenario and the kinds its racy
   twin must be reported with, comma-separated; on a real driver, without the scenarios that
   only the stand-in can run)
   Driver API only, linked with -lcuda: it runs against the stand-in driver and, unchanged,
   on a GPU. The kernel scale(float* out, const float* in, int n) writes `out` and reads `in`
   (pointer to const); the stand-in runs no kernel, the GPU runs an empty one.
   Exit status: 0 when the scenario ran, 4 when a driver call failed, 5 when copies did not
   move the bytes they name. */
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
    CUcontext ctx;
    unsigned count;
    CUstreamBatchMemOpParams *paramArray;
    unsigned flags;
} CUDA_BATCH_MEM_OP_NODE_PARAMS;
CUresult cuGraphAddKernelNode_v2(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_KERNEL_NODE_PARAMS *);
CUresult cuGraphAddMemcpyNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_MEMCPY3D *, CUcontext);
CUresult cuGraphAddChildGraphNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraph);
CUresult cuGraphAddEventRecordNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUevent);
CUresult cuGraphAddEventWaitNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUevent);
CUresult cuGraphAddDependencies(CUgraph, const CUgraphNode *, const CUgraphNode *, size_t);
CUresult cuGraphAddBatchMemOpNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_BATCH_MEM_OP_NODE_PARAMS *);
typedef struct {
    CUdeviceptr dst;
    size_t pitch;
    unsigned value, elementSize;
    size_t width, height;
} CUDA_MEMSET_NODE_PARAMS;
/* CUmemPoolProps (88 bytes), then the access descriptors, the size, and the address the
   driver chooses. */
typedef struct {
    int allocType, handleTypes;
    struct { int type, id; } location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} CUmemPoolProps;
typedef struct {
    CUmemPoolProps poolProps;
    const void *accessDescs;
    size_t accessDescCount, bytesize;
    CUdeviceptr dptr;
} CUDA_MEM_ALLOC_NODE_PARAMS;
typedef struct {
    int result;
    CUgraphNode errorNode, errorFromNode;
} CUgraphExecUpdateResultInfo;
CUresult cuGraphAddMemsetNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_MEMSET_NODE_PARAMS *, CUcontext);
CUresult cuGraphAddEmptyNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t);
CUresult cuGraphAddMemAllocNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUDA_MEM_ALLOC_NODE_PARAMS *);
CUresult cuGraphAddMemFreeNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUdeviceptr);
CUresult cuGraphClone(CUgraph *, CUgraph);
CUresult cuGraphDestroyNode(CUgraphNode);
CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS *);
CUresult cuGraphMemsetNodeSetParams(CUgraphNode, const CUDA_MEMSET_NODE_PARAMS *);
CUresult cuGraphMemcpyNodeSetParams(CUgraphNode, const CUDA_MEMCPY3D *);
CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec, CUgraphNode, const CUDA_MEMCPY3D *, CUcontext);
CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS *);
CUresult cuGraphExecUpdate_v2(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *);
CUresult cuGraphExecUpdate(CUgraphExec, CUgraph, CUgraphNode *, int *);
CUresult cuStreamBeginCaptureToGraph(CUstream, CUgraph, const CUgraphNode *, const void *, size_t, int);
CUresult cuStreamUpdateCaptureDependencies(CUstream, CUgraphNode *, size_t, unsigned);
CUresult cuStreamUpdateCaptureDependencies_v2(CUstream, CUgraphNode *, const void *, size_t, unsigned);

#define N 256 /* bytes per buffer */
#define CU_STREAM_CAPTURE_MODE_GLOBAL 0
#define CU_STREAM_WAIT_VALUE_GEQ 0
#define CU_EVENT_WAIT_EXTERNAL 0x1
#define CU_STREAM_ADD_CAPTURE_DEPENDENCIES 0x0
#define CU_MEM_ALLOCATION_TYPE_PINNED 1
#define CU_MEM_LOCATION_TYPE_DEVICE 1

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
/* A 1D array of `bytes` one-byte elements. */
static CUarray array_1d(size_t bytes) {
    CUDA_ARRAY_DESCRIPTOR descriptor = {bytes, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1};
    CUarray array;
    CHECK(cuArrayCreate_v2(&array, &descriptor));
    return array;
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
/* The same, `bytes` long. */
static CUdeviceptr initialized_bytes(size_t bytes) {
    CUdeviceptr x;
    CHECK(cuMemAlloc_v2(&x, bytes));
    CHECK(cuMemsetD8_v2(x, 0, bytes));
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

/* CUDA 13's cuCtxSynchronize_v2, the current context named by NULL and by its handle. */
static void context_synchronize_v2(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc();
    CUcontext ctx;
    CHECK(cuCtxGetCurrent(&ctx));
    writes(s1, x);
    writes(s1, y);
    if (fixed) CHECK(cuCtxSynchronize_v2(NULL));
    reads(s2, x);
    writes(s1, y);
    if (fixed) CHECK(cuCtxSynchronize_v2(ctx));
    reads(s2, y);
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

/* s1's work waits at a gate the host opens: in the racy twin after the read is issued, so
   that on a GPU the function cannot have run by then. Had it run, the host would be ordered
   after it (the host keeps one clock, docs/semantics.md#clocks) and the race, though real,
   unreported, as in one run of the suite on an H200 (reports/gpu/9b71294/). */
static void open_gate(CUdeviceptr gate) { CHECK(cuStreamWriteValue32_v2(nonblocking(), gate, 1, 0)); }

static void host_function(int fixed, int as_callback) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), gate = dalloc();
    CHECK(cuMemsetD8_v2(gate, 0, 4));
    CHECK(cuCtxSynchronize());
    callback_ran = 0;
    CHECK(cuStreamWaitValue32_v2(s1, gate, 1, CU_STREAM_WAIT_VALUE_GEQ));
    writes(s1, x);
    if (as_callback)
        CHECK(cuStreamAddCallback(s1, set_flag_callback, (void *)&callback_ran, 0));
    else
        CHECK(cuLaunchHostFunc(s1, set_flag, (void *)&callback_ran));
    if (fixed) {
        /* The host waits for the function, through its own flag. */
        open_gate(gate);
        let_the_driver_run_callbacks();
        while (!callback_ran) {}
    }
    reads(s2, x);
    if (!fixed) open_gate(gate);
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

/* At a per-thread entry point (`_ptsz`, what a program built for per-thread default streams
   calls) handle 0 is the calling thread's per-thread default stream, not the legacy one: a
   memset of x there by another thread is not ordered with this thread's per-thread stream. */
CUresult cuMemsetD8Async_ptsz(CUdeviceptr, unsigned char, size_t, CUstream);
static void *memset_at_per_thread_entry_point(void *arg) {
    (void)arg;
    CHECK(cuCtxSetCurrent(ctx_a));
    CHECK(cuMemsetD8Async_ptsz(shared_x, 0, N, 0));
    return NULL;
}
static void per_thread_entry_points(int fixed) {
    pthread_t t;
    shared_x = dalloc();
    pthread_create(&t, NULL, memset_at_per_thread_entry_point, NULL);
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

/* cuMemcpy (unified addressing) learns each side's kind from its address: between two device
   buffers it does not make the host wait either. */
static void unified_copy_between_device_buffers(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc();
    CHECK(cuMemcpy(x, y, N));
    if (fixed) CHECK(cuStreamSynchronize(CU_STREAM_LEGACY));
    reads(s, x);
}

/* A memset of no bytes does nothing, and does not make the host wait, of pinned memory too:
   after a kernel on blocking stream s1, a synchronous memset of N bytes of pinned memory on the
   legacy stream (fixed twin) orders s2's read after it; of 0 bytes (racy twin), not. */
static void memset_of_no_bytes(int fixed) {
    CUstream s1 = blocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    void *pinned;
    CHECK(cuMemAllocHost_v2(&pinned, N));
    CHECK(cuCtxSynchronize());
    writes(s1, x);
    CHECK(cuMemsetD8_v2((CUdeviceptr)pinned, 0, fixed ? N : 0));
    reads(s2, x);
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

/* A 2D copy's unified side is as its address says: to pinned host memory named as unified, a
   synchronous copy has completed when it returns (as dtoh_joins_the_host), an asynchronous one
   not. */
static void unified_2d_copy_to_pinned_memory(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    void *pinned;
    CHECK(cuMemAllocHost_v2(&pinned, N));
    CHECK(cuCtxSynchronize());
    CUDA_MEMCPY2D copy = {0};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = x;
    copy.srcPitch = N;
    copy.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    copy.dstDevice = (CUdeviceptr)pinned;
    copy.dstPitch = N;
    copy.WidthInBytes = N;
    copy.Height = 1;
    if (fixed)
        CHECK(cuMemcpy2D_v2(&copy));
    else
        CHECK(cuMemcpy2DAsync_v2(&copy, s1));
    writes(s2, x);
}

/* A copy of no bytes touches nothing: the racy twin copies the buffer a kernel on s1 writes,
   the fixed one copies none of it. */
static void copy_of_no_bytes(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc();
    writes(s1, x);
    CHECK(cuMemcpyAsync(y, x, fixed ? 0 : N, s2));
    /* Nor does a 2D copy of rows of no bytes, past the rows tracked one by one. */
    CUDA_MEMCPY2D copy = {0};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = x;
    copy.srcPitch = 4;
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = y;
    copy.dstPitch = 4;
    copy.WidthInBytes = 0;
    copy.Height = 40;
    CHECK(cuMemcpy2DAsync_v2(&copy, s2));
    CHECK(cuCtxSynchronize());
}

/* Past 32 rows a 2D copy touches the cover of its rows, from its first byte to its last and
   no further: 40 rows of 4 bytes, 8 apart, from byte 4 of row 1 of x (bytes 12 to 328). The
   racy twin writes the first and the last 4 of them on s1, the fixed twin the 4 just before
   and the 4 just after. */
static void strided_copy_cover(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = initialized_bytes(512), y = initialized_bytes(512);
    CHECK(cuMemcpyDtoDAsync_v2(x + (fixed ? 8 : 12), y, 4, s1));
    CHECK(cuMemcpyDtoDAsync_v2(x + (fixed ? 328 : 324), y + 4, 4, s1));
    CUDA_MEMCPY2D copy = {0};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = x;
    copy.srcXInBytes = 4;
    copy.srcY = 1;
    copy.srcPitch = 8;
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = y + 64;
    copy.dstPitch = 8;
    copy.WidthInBytes = 4;
    copy.Height = 40;
    CHECK(cuMemcpy2DAsync_v2(&copy, s2));
    CHECK(cuCtxSynchronize());
}

/* A 3D copy of 32 one-row slices (4 bytes, 8 apart) touches each slice's row, and only those
   (32 rows are still tracked one by one): the racy twin writes slice 1's bytes on s1, the
   fixed twin the 4 between slices 0 and 1. */
static void copy_3d_of_many_slices(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = initialized_bytes(512), y = initialized_bytes(512);
    CHECK(cuMemcpyDtoDAsync_v2(x + (fixed ? 4 : 8), y, 4, s1));
    CUDA_MEMCPY3D copy;
    memset(&copy, 0, sizeof copy);
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = x;
    copy.srcPitch = 8;
    copy.srcHeight = 1;
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = y + 256;
    copy.dstPitch = 4;
    copy.dstHeight = 1;
    copy.WidthInBytes = 4;
    copy.Height = 1;
    copy.Depth = 32;
    CHECK(cuMemcpy3DAsync_v2(&copy, s2));
    CHECK(cuCtxSynchronize());
}

/* CUDA documents that an asynchronous copy from the device to pageable host memory returns
   only once the copy has completed (to pinned memory it does not): a program that copies x to
   a plain host array on s1, s1b, s1c (cuMemcpyDtoHAsync, cuMemcpyAsync, cuMemcpy2DAsync) and
   then overwrites x from s2 is correct; so is one that copies an array to it on s1d
   (cuMemcpyAtoHAsync) and then overwrites the array from s2. */
static void dtoh_async_to_pageable_memory(int fixed) {
    CUstream s1 = nonblocking(), s1b = nonblocking(), s1c = nonblocking(), s1d = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = initialized();
    CUarray a = array_1d(N);
    static char pageable[4][N];
    char *pinned, *staging;
    CHECK(cuMemAllocHost_v2((void **)&pinned, 4 * N));
    CHECK(cuMemAllocHost_v2((void **)&staging, N));
    CHECK(cuMemcpyDtoA_v2(a, 0, x, N));
    CHECK(cuCtxSynchronize());
    char *host[4];
    for (int i = 0; i < 4; i++) host[i] = fixed ? pageable[i] : pinned + i * N;
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
    CHECK(cuMemcpyAtoHAsync_v2(host[3], a, 0, N, s1d));
    writes(s2, x);
    CHECK(cuMemcpyHtoAAsync_v2(a, 0, staging, N, s2));
    CHECK(cuCtxSynchronize());
    CHECK(cuArrayDestroy(a));
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
/* Sets `node` (of a graph, or of `exec` when given) to scale(out, in). */
static void set_kernel_node(CUgraphExec exec, CUgraphNode node, CUdeviceptr out, CUdeviceptr in) {
    int count = N / 4;
    void *params[] = {&out, &in, &count};
    CUDA_KERNEL_NODE_PARAMS p = {scale, 1, 1, 1, 64, 1, 1, 0, params, NULL, NULL, NULL};
    if (exec)
        CHECK(cuGraphExecKernelNodeSetParams_v2(exec, node, &p));
    else
        CHECK(cuGraphKernelNodeSetParams_v2(node, &p));
}
/* Parameters of a memset node setting the N bytes of `x` to zero. */
static CUDA_MEMSET_NODE_PARAMS memset_params(CUdeviceptr x) {
    CUDA_MEMSET_NODE_PARAMS p = {x, N, 0, 1, N, 1};
    return p;
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

/* A 3D copy's descriptor for the N bytes of x to y, in one row. */
static CUDA_MEMCPY3D linear_3d(CUdeviceptr y, CUdeviceptr x) {
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
    return c;
}

/* A memcpy node copying what a kernel node writes: after it only with the edge. */
static void built_graph_memcpy_after_kernel(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc(), in = dalloc();
    CUgraph g;
    CUgraphNode copy;
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNode k = kernel_node(g, NULL, 0, x, in);
    CUDA_MEMCPY3D c = linear_3d(y, x);
    CHECK(cuGraphAddMemcpyNode(&copy, g, fixed ? &k : NULL, fixed ? 1 : 0, &c, ctx_a));
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* A memcpy node moved, after it was added, onto the buffer a concurrent kernel node writes
   (racy twin) or onto another (fixed twin); of the graph, or (`exec`) of its instantiation. */
static void memcpy_set_params(int fixed, int exec) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc(), z = dalloc(), in = dalloc(), out = dalloc();
    CUgraph g;
    CUgraphExec instantiated;
    CUgraphNode copy;
    CUDA_MEMCPY3D c = linear_3d(out, y);
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddMemcpyNode(&copy, g, NULL, 0, &c, ctx_a));
    kernel_node(g, NULL, 0, x, in);
    c = linear_3d(out, fixed ? z : x);
    if (exec) {
        CHECK(cuGraphInstantiateWithFlags(&instantiated, g, 0));
        CHECK(cuGraphExecMemcpyNodeSetParams(instantiated, copy, &c, ctx_a));
        CHECK(cuGraphLaunch(instantiated, s));
    } else {
        CHECK(cuGraphMemcpyNodeSetParams(copy, &c));
        run_graph(g, s);
    }
    CHECK(cuStreamSynchronize(s));
}
static void built_graph_memcpy_set_params(int fixed) { memcpy_set_params(fixed, 0); }
static void built_graph_exec_memcpy_set_params(int fixed) { memcpy_set_params(fixed, 1); }

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

/* A memset node and a kernel node writing one buffer: concurrent unless an edge joins them. */
static void built_graph_memset(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc();
    CUgraph g;
    CUgraphNode m;
    CUDA_MEMSET_NODE_PARAMS p = memset_params(x);
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddMemsetNode(&m, g, NULL, 0, &p, ctx_a));
    kernel_node(g, fixed ? &m : NULL, fixed ? 1 : 0, x, in);
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* A memset node of no bytes writes nothing: beside a kernel node writing x, a memset node of x
   N bytes wide (racy twin) or 0 (fixed twin). Stand-in only: a driver may refuse a node of no
   bytes. */
static void built_graph_memset_of_no_bytes(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc();
    CUgraph g;
    CUgraphNode m;
    CUDA_MEMSET_NODE_PARAMS p = memset_params(x);
    if (fixed) p.width = 0;
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddMemsetNode(&m, g, NULL, 0, &p, ctx_a));
    kernel_node(g, NULL, 0, x, in);
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* A memset node moved onto the buffer a concurrent kernel node writes (racy twin), or onto
   another buffer (fixed twin), after it was added. */
static void built_graph_memset_set_params(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc(), z = dalloc(), in = dalloc();
    CUgraph g;
    CUgraphNode m;
    CUDA_MEMSET_NODE_PARAMS p = memset_params(y);
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddMemsetNode(&m, g, NULL, 0, &p, ctx_a));
    kernel_node(g, NULL, 0, x, in);
    p = memset_params(fixed ? z : x);
    CHECK(cuGraphMemsetNodeSetParams(m, &p));
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* Two concurrent kernel nodes writing two buffers; the second is then set to write the first's
   buffer (racy twin) or a third (fixed twin). */
static void built_graph_kernel_set_params(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc(), z = dalloc(), in = dalloc(), in2 = dalloc();
    CUgraph g;
    CHECK(cuGraphCreate(&g, 0));
    kernel_node(g, NULL, 0, x, in);
    CUgraphNode b = kernel_node(g, NULL, 0, y, in2);
    set_kernel_node(NULL, b, fixed ? z : x, in2);
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* The same, with the node of the instantiated graph set. */
static void built_graph_exec_kernel_set_params(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc(), z = dalloc(), in = dalloc(), in2 = dalloc();
    CUgraph g;
    CUgraphExec exec;
    CHECK(cuGraphCreate(&g, 0));
    kernel_node(g, NULL, 0, x, in);
    CUgraphNode b = kernel_node(g, NULL, 0, y, in2);
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    set_kernel_node(exec, b, fixed ? z : x, in2);
    CHECK(cuGraphLaunch(exec, s));
    CHECK(cuStreamSynchronize(s));
}

/* An executable graph of two kernel nodes writing two buffers, updated (through the first
   version of the call when `v1`) from a graph of the same shape whose second node writes the
   first's buffer (racy twin) or a third (fixed twin). */
static void exec_update(int fixed, int v1) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc(), z = dalloc(), in = dalloc(), in2 = dalloc();
    CUgraph g, update;
    CUgraphExec exec;
    CUgraphExecUpdateResultInfo info;
    CUgraphNode error_node;
    int result;
    CHECK(cuGraphCreate(&g, 0));
    kernel_node(g, NULL, 0, x, in);
    kernel_node(g, NULL, 0, y, in2);
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    CHECK(cuGraphCreate(&update, 0));
    kernel_node(update, NULL, 0, x, in);
    kernel_node(update, NULL, 0, fixed ? z : x, in2);
    if (v1)
        CHECK(cuGraphExecUpdate(exec, update, &error_node, &result));
    else
        CHECK(cuGraphExecUpdate_v2(exec, update, &info));
    CHECK(cuGraphLaunch(exec, s));
    CHECK(cuStreamSynchronize(s));
}
static void built_graph_exec_update(int fixed) { exec_update(fixed, 0); }
static void built_graph_exec_update_v1(int fixed) { exec_update(fixed, 1); }

/* Kernel nodes a -> c -> b writing one buffer, c empty. Destroying c takes its edges with it
   and leaves a and b concurrent (racy twin); destroying b takes its accesses (fixed twin). */
static void built_graph_destroy_node(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc(), in2 = dalloc();
    CUgraph g;
    CUgraphNode c;
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNode a = kernel_node(g, NULL, 0, x, in);
    CHECK(cuGraphAddEmptyNode(&c, g, &a, 1));
    CUgraphNode b = kernel_node(g, &c, 1, x, in2);
    CHECK(cuGraphDestroyNode(fixed ? b : c));
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* A clone of a graph whose kernel node writes a buffer, with a kernel node added to the clone
   writing the same buffer (racy twin) or another (fixed twin). */
static void built_graph_clone(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), z = dalloc(), in = dalloc(), in2 = dalloc();
    CUgraph g, clone;
    CHECK(cuGraphCreate(&g, 0));
    kernel_node(g, NULL, 0, x, in);
    CHECK(cuGraphClone(&clone, g));
    kernel_node(clone, NULL, 0, fixed ? z : x, in2);
    run_graph(clone, s);
    CHECK(cuStreamSynchronize(s));
}

/* A capture into a graph that already holds a kernel node writing the buffer the captured
   launch writes: after that node only when the capture starts from it. */
static void capture_to_graph(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc(), in2 = dalloc();
    CUgraph g, captured;
    CHECK(cuCtxSynchronize());
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNode a = kernel_node(g, NULL, 0, x, in);
    CHECK(cuStreamBeginCaptureToGraph(s, g, fixed ? &a : NULL, NULL, fixed ? 1 : 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
    launch(s, x, in2);
    CHECK(cuStreamEndCapture(s, &captured));
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* A capture into a graph, started from an empty node, whose next launch is made (through the
   second version of the call when `v2`) to depend on the graph's kernel node writing the same
   buffer (fixed twin) or on the empty node again. */
static void update_capture_dependencies(int fixed, int v2) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc(), in2 = dalloc();
    CUgraph g, captured;
    CUgraphNode e;
    CHECK(cuCtxSynchronize());
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNode a = kernel_node(g, NULL, 0, x, in);
    CHECK(cuGraphAddEmptyNode(&e, g, NULL, 0));
    CHECK(cuStreamBeginCaptureToGraph(s, g, &e, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    if (v2)
        CHECK(cuStreamUpdateCaptureDependencies_v2(s, fixed ? &a : &e, NULL, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
    else
        CHECK(cuStreamUpdateCaptureDependencies(s, fixed ? &a : &e, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
    launch(s, x, in2);
    CHECK(cuStreamEndCapture(s, &captured));
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}
static void capture_update_dependencies(int fixed) { update_capture_dependencies(fixed, 0); }
static void capture_update_dependencies_v2(int fixed) { update_capture_dependencies(fixed, 1); }

/* A mem alloc node's memory written by a kernel node: before the allocation unless the kernel
   node follows the alloc node. */
static CUgraphNode alloc_node(CUgraph g, const CUgraphNode *deps, size_t n, CUdeviceptr *dptr) {
    CUgraphNode node;
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.poolProps.location.id = 0;
    p.bytesize = N;
    CHECK(cuGraphAddMemAllocNode(&node, g, deps, n, &p));
    *dptr = p.dptr;
    return node;
}
static void built_graph_mem_alloc(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr p, in = dalloc();
    CUgraph g;
    CUgraphNode done[2];
    CHECK(cuGraphCreate(&g, 0));
    done[0] = alloc_node(g, NULL, 0, &p);
    done[1] = kernel_node(g, fixed ? done : NULL, fixed ? 1 : 0, p, in);
    CUgraphNode f;
    CHECK(cuGraphAddMemFreeNode(&f, g, done, 2, p));
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
}

/* A mem free node freeing what a kernel node writes: after it only with the edge. */
static void built_graph_mem_free(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr p, in = dalloc();
    CUgraph g;
    CUgraphNode f;
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNode a = alloc_node(g, NULL, 0, &p);
    CUgraphNode k = kernel_node(g, &a, 1, p, in);
    CHECK(cuGraphAddMemFreeNode(&f, g, fixed ? &k : &a, 1, p));
    run_graph(g, s);
    CHECK(cuStreamSynchronize(s));
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

/* ---- Every hooked family ----------------------------------------------------------------
   One scenario per API family whose hook tells the model something: without that call into
   the model, the racy twin is clean or the fixed twin races. */

/* The ordering every scenario below makes its fixed twin with, when it needs no other. */
static void order_if(int fixed, CUstream from, CUstream to) {
    if (fixed) order(from, to);
}

/* `scale(out, in)` launched through cuLaunchKernelEx, with `attrs` (may be none). */
static void launch_ex(CUstream s, CUdeviceptr out, CUdeviceptr in, CUlaunchAttribute *attrs, unsigned count) {
    int n = N / 4;
    void *params[] = {&out, &in, &n};
    CUlaunchConfig config = {1, 1, 1, 64, 1, 1, 0, s, attrs, count};
    CHECK(cuLaunchKernelEx(&config, scale, params, NULL));
}

/* cuLaunchKernelEx is the launch cuBLAS and cuDNN use: a kernel like any other. */
static void launch_kernel_ex(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    launch_ex(s1, x, dalloc(), NULL, 0);
    order_if(fixed, s1, s2);
    launch_ex(s2, dalloc(), x, NULL, 0);
}

/* A launch's programmatic event, or its launch-completion event, is taken as recorded after
   the kernel (docs/semantics.md, deviations): a stream waiting on it follows the kernel. */
static void launch_event_attribute(int fixed, int id) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    CUevent e;
    CHECK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = id;
    if (id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT)
        attr.value.programmaticEvent.event = e;
    else
        attr.value.launchCompletionEvent.event = e;
    launch_ex(s1, x, dalloc(), &attr, 1);
    if (fixed) CHECK(cuStreamWaitEvent(s2, e, 0));
    reads(s2, x);
}
static void launch_programmatic_event(int fixed) { launch_event_attribute(fixed, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT); }
static void launch_completion_event(int fixed) { launch_event_attribute(fixed, CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT); }

/* Programmatic dependent launch lets a kernel start before the previous one on its stream
   ends; the model takes it as fully ordered (what the kernel waits for inside is not
   visible): the fixed twin's dependent launch on the same stream is clean. */
static void programmatic_stream_serialization(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    CUlaunchAttributeValue allowed;
    memset(&allowed, 0, sizeof allowed);
    allowed.programmaticStreamSerializationAllowed = 1;
    /* A launch attribute only: the driver refuses it as a stream attribute (error 1 on an
       H100, driver 580: reports/gpu/scenarios). */
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value = allowed;
    writes(s1, x);
    launch_ex(fixed ? s1 : s2, dalloc(), x, &attr, 1);
}

static void cooperative_launch(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc();
    int n = N / 4;
    void *params[] = {&x, &in, &n};
    CHECK(cuLaunchCooperativeKernel(scale, 1, 1, 1, 64, 1, 1, 0, s1, params));
    order_if(fixed, s1, s2);
    reads(s2, x);
}

/* cuMemcpyBatchAsync: each copy reads its source and writes its destination. */
static void memcpy_batch(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc(), z = dalloc(), w = dalloc();
    writes(s1, x);
    order_if(fixed, s1, s2);
    CUdeviceptr dsts[] = {y, w}, srcs[] = {z, x};
    size_t sizes[] = {N, N}, attr_index = 0, fail = 0;
    CUmemcpyAttributes attr;
    memset(&attr, 0, sizeof attr);
    attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    CHECK(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, &attr, &attr_index, 1, &fail, s2));
    /* CUDA 13's version, without the failure index: a copy from x again. */
    CUdeviceptr again_dst[] = {dalloc()}, again_src[] = {x};
    CHECK(cuMemcpyBatchAsync_v2(again_dst, again_src, sizes, 1, &attr, &attr_index, 1, s2));
}

/* A 3D copy of four 32-byte rows, 64 bytes apart, in one slice, from x to y. */
static void copy_3d_rows(CUDA_MEMCPY3D *copy, CUdeviceptr x, CUdeviceptr y) {
    memset(copy, 0, sizeof *copy);
    copy->srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy->srcDevice = x;
    copy->srcPitch = 64;
    copy->srcHeight = 4;
    copy->dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy->dstDevice = y;
    copy->dstPitch = 64;
    copy->dstHeight = 4;
    copy->WidthInBytes = 32;
    copy->Height = 4;
    copy->Depth = 1;
}

/* The 3D copies read the rows they name: cuMemcpy3DAsync on s2 and, synchronous, cuMemcpy3D
   on the legacy stream (a device-to-device copy that does not make the host wait), each read
   the first row, which a kernel on s1 wrote. */
static void copy_3d(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    CUDA_MEMCPY3D copy;
    writes(s1, x);
    if (fixed) CHECK(cuStreamSynchronize(s1));
    copy_3d_rows(&copy, x, dalloc());
    CHECK(cuMemcpy3DAsync_v2(&copy, s2));
    copy_3d_rows(&copy, x, dalloc());
    CHECK(cuMemcpy3D_v2(&copy));
}

/* cuMemcpy3DPeerAsync between two contexts reads its rows like the others. */
static void copy_3d_peer(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc();
    CUDA_MEMCPY3D rows;
    CUDA_MEMCPY3D_PEER copy;
    writes(s1, x);
    order_if(fixed, s1, s2);
    copy_3d_rows(&rows, x, y);
    memset(&copy, 0, sizeof copy);
    copy.srcMemoryType = rows.srcMemoryType;
    copy.srcDevice = x;
    copy.srcContext = ctx_a;
    copy.srcPitch = rows.srcPitch;
    copy.srcHeight = rows.srcHeight;
    copy.dstMemoryType = rows.dstMemoryType;
    copy.dstDevice = y;
    copy.dstContext = ctx_a;
    copy.dstPitch = rows.dstPitch;
    copy.dstHeight = rows.dstHeight;
    copy.WidthInBytes = rows.WidthInBytes;
    copy.Height = rows.Height;
    copy.Depth = rows.Depth;
    CHECK(cuMemcpy3DPeerAsync(&copy, s2));
}

/* Every memset width, synchronous (on the legacy stream, of device memory: the host does not
   wait) and asynchronous: each writes a buffer a kernel on s1 wrote, twelve races in all. */
static void memset_widths(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr b[12];
    for (int i = 0; i < 12; i++) {
        b[i] = dalloc();
        writes(s1, b[i]);
    }
    if (fixed) CHECK(cuStreamSynchronize(s1));
    CHECK(cuMemsetD8_v2(b[0], 1, N));
    CHECK(cuMemsetD16_v2(b[1], 1, N / 2));
    CHECK(cuMemsetD32_v2(b[2], 1, N / 4));
    CHECK(cuMemsetD2D8_v2(b[3], 64, 1, 32, 4));
    CHECK(cuMemsetD2D16_v2(b[4], 64, 1, 16, 4));
    CHECK(cuMemsetD2D32_v2(b[5], 64, 1, 8, 4));
    CHECK(cuMemsetD8Async(b[6], 1, N, s2));
    CHECK(cuMemsetD16Async(b[7], 1, N / 2, s2));
    CHECK(cuMemsetD32Async(b[8], 1, N / 4, s2));
    CHECK(cuMemsetD2D8Async(b[9], 64, 1, 32, 4, s2));
    CHECK(cuMemsetD2D16Async(b[10], 64, 1, 16, 4, s2));
    CHECK(cuMemsetD2D32Async(b[11], 64, 1, 8, 4, s2));
}

/* A 2D memset writes its rows: on s2, 4 rows of 4 bytes 8 apart from x (one by one), and 40
   from z (past 32 rows, their cover: bytes 0 to 316). The racy twin writes on s1 the last row
   of each, the fixed twin the 4 bytes after x's first row and the 4 after z's cover. */
static void memset_2d_rows(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = initialized(), z = initialized_bytes(512), y = initialized();
    CHECK(cuMemcpyDtoDAsync_v2(x + (fixed ? 4 : 24), y, 4, s1));
    CHECK(cuMemcpyDtoDAsync_v2(z + (fixed ? 316 : 312), y + 4, 4, s1));
    CHECK(cuMemsetD2D8Async(x, 8, 1, 4, 4, s2));
    CHECK(cuMemsetD2D8Async(z, 8, 1, 4, 40, s2));
    CHECK(cuCtxSynchronize());
}

/* cuStreamBatchMemOp: a write of a flag on s1 and a wait for it on s2, each in a batch. */
static void batch_mem_op(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), flag = dalloc();
    CHECK(cuMemsetD8_v2(flag, 0, 4));
    CHECK(cuCtxSynchronize());
    writes(s1, x);
    CUstreamBatchMemOpParams op;
    memset(&op, 0, sizeof op);
    op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    op.writeValue.address = flag;
    op.writeValue.value = 1;
    CHECK(cuStreamBatchMemOp_v2(s1, 1, &op, 0));
    if (fixed) {
        memset(&op, 0, sizeof op);
        op.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
        op.waitValue.address = flag;
        op.waitValue.value = 1;
        op.waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
        CHECK(cuStreamBatchMemOp_v2(s2, 1, &op, 0));
    }
    reads(s2, x);
}

/* The 64-bit value write and wait order like the 32-bit ones. */
static void wait_value_64(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), flag = dalloc();
    CHECK(cuMemsetD8_v2(flag, 0, 8));
    CHECK(cuCtxSynchronize());
    writes(s1, x);
    CHECK(cuStreamWriteValue64_v2(s1, flag, 1, 0));
    if (fixed) CHECK(cuStreamWaitValue64_v2(s2, flag, 1, CU_STREAM_WAIT_VALUE_GEQ));
    reads(s2, x);
}

/* Memory made by cuMemCreate, mapped at a reserved range: a buffer like any other. */
static void virtual_memory(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t size = 0;
    CHECK(cuMemGetAllocationGranularity(&size, &prop, 0));
    CUdeviceptr va;
    CUmemGenericAllocationHandle handle;
    CHECK(cuMemAddressReserve(&va, size, 0, 0, 0));
    CHECK(cuMemCreate(&handle, size, &prop, 0));
    CHECK(cuMemMap(va, size, 0, handle, 0));
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHECK(cuMemSetAccess(va, size, &access, 1));
    writes(s1, va);
    order_if(fixed, s1, s2);
    reads(s2, va);
    CHECK(cuCtxSynchronize());
    CHECK(cuMemUnmap(va, size));
    CHECK(cuMemRelease(handle));
    CHECK(cuMemAddressFree(va, size));
}

/* Host memory registered with cuMemHostRegister is pinned host memory the copies touch. */
static void registered_host_memory(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    void *host = aligned_alloc(4096, 4096);
    CHECK(cuMemHostRegister_v2(host, 4096, 0));
    CUdeviceptr x = initialized(), y = dalloc();
    CHECK(cuMemcpyDtoHAsync_v2(host, x, N, s1));
    order_if(fixed, s1, s2);
    CHECK(cuMemcpyHtoDAsync_v2(y, host, N, s2));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemHostUnregister(host));
    free(host);
}

static void managed_memory(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr m;
    CHECK(cuMemAllocManaged(&m, N, CU_MEM_ATTACH_GLOBAL));
    writes(s1, m);
    order_if(fixed, s1, s2);
    reads(s2, m);
}

static void pitched_memory(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr p;
    size_t pitch;
    CHECK(cuMemAllocPitch_v2(&p, &pitch, 64, 4, 4));
    writes(s1, p);
    order_if(fixed, s1, s2);
    reads(s2, p);
}

/* An allocation from a memory pool is stream-ordered, like cuMemAllocAsync's. */
static void pool_allocation(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUmemoryPool pool;
    CUdeviceptr x;
    CHECK(cuDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cuMemAllocFromPoolAsync(&x, N, pool, s1));
    order_if(fixed, s1, s2);
    writes(s2, x);
    CHECK(cuCtxSynchronize());
}

static void event_record_with_flags(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUevent e = event();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    CHECK(cuEventRecordWithFlags(e, s1, 0));
    if (fixed) CHECK(cuStreamWaitEvent(s2, e, 0));
    reads(s2, x);
}

/* Kernels of a library, launched by their CUkernel handle and through the CUfunction
   cuKernelGetFunction gives: their names (from the hooks, even where the driver cannot be
   asked) say `in` is a pointer to const, so the fixed twin's two readers do not conflict;
   in the racy twin the second writes. */
static void library_kernels(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUlibrary library;
    CUkernel kernel;
    CUfunction function;
    CUdeviceptr x = initialized(), a = initialized(), b = initialized();
    int n = N / 4;
    CHECK(cuLibraryLoadData(&library, SCALE_PTX, NULL, NULL, 0, NULL, NULL, 0));
    CHECK(cuLibraryGetKernel(&kernel, library, SCALE_NAME));
    CHECK(cuKernelGetFunction(&function, kernel));
    void *first[] = {&a, &x, &n};
    CHECK(cuLaunchKernel((CUfunction)kernel, 1, 1, 1, 64, 1, 1, 0, s1, first, NULL));
    void *second[] = {fixed ? &b : &x, fixed ? &x : &b, &n};
    CHECK(cuLaunchKernel(function, 1, 1, 1, 64, 1, 1, 0, s2, second, NULL));
    CHECK(cuCtxSynchronize());
    CHECK(cuLibraryUnload(library));
}

/* A kernel handle the shim did not see handed out (cuLibraryEnumerateKernels hands them out
   without names) is learnt from the driver's queries: its name says `in` is a pointer to const,
   so the fixed twin's two readers do not conflict; in the racy twin the second writes.
   Stand-in only: which kernel comes first is the driver's to say. */
CUresult cuLibraryGetKernelCount(unsigned *, CUlibrary);
CUresult cuLibraryEnumerateKernels(CUkernel *, unsigned, CUlibrary);
CUresult cuKernelGetName(const char **, CUkernel);
static void enumerated_library_kernels(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUlibrary library;
    CUkernel kernels[8], kernel = NULL;
    unsigned count = 0;
    CUdeviceptr x = initialized(), a = initialized(), b = initialized();
    int n = N / 4;
    CHECK(cuLibraryLoadData(&library, SCALE_PTX, NULL, NULL, 0, NULL, NULL, 0));
    CHECK(cuLibraryGetKernelCount(&count, library));
    if (count > 8) exit(4);
    CHECK(cuLibraryEnumerateKernels(kernels, count, library));
    for (unsigned i = 0; i < count; i++) {
        const char *name;
        CHECK(cuKernelGetName(&name, kernels[i]));
        if (strcmp(name, SCALE_NAME) == 0) kernel = kernels[i];
    }
    if (!kernel) exit(4);
    void *first[] = {&a, &x, &n};
    CHECK(cuLaunchKernel((CUfunction)kernel, 1, 1, 1, 64, 1, 1, 0, s1, first, NULL));
    void *second[] = {fixed ? &b : &x, fixed ? &x : &b, &n};
    CHECK(cuLaunchKernel((CUfunction)kernel, 1, 1, 1, 64, 1, 1, 0, s2, second, NULL));
    CHECK(cuCtxSynchronize());
    CHECK(cuLibraryUnload(library));
}

/* A stream the shim did not see made (a green context's, cuGreenCtxStreamCreate, which it does
   not hook) is described by the driver: of the current context, so a context synchronize waits
   for it, and non-blocking, so the legacy default stream does not. Stand-in only: it has no
   green contexts (the stream is the current context's). */
CUresult cuGreenCtxStreamCreate(CUstream *, void *, unsigned, int);
static void green_context_stream(int fixed) {
    CUstream g, s = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc();
    CHECK(cuGreenCtxStreamCreate(&g, NULL, CU_STREAM_NON_BLOCKING, 0));
    writes(g, y);
    CHECK(cuCtxSynchronize());
    reads(s, y);
    writes(g, x);
    if (fixed) order(g, CU_STREAM_LEGACY);
    reads(CU_STREAM_LEGACY, x);
}

/* Destroying a context waits for its work: a copy on its stream into portable pinned memory
   is done once cuCtxDestroy returns. */
static void context_destroy(int fixed) {
    CUdevice dev;
    CUcontext ctx;
    void *pinned;
    CUstream s = nonblocking();
    CUdeviceptr y = dalloc();
    CHECK(cuMemHostAlloc(&pinned, N, CU_MEMHOSTALLOC_PORTABLE));
    CHECK(cuCtxSynchronize());
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuCtxCreate_v2(&ctx, 0, dev));
    CUstream sc = nonblocking();
    CUdeviceptr x = initialized();
    CHECK(cuMemcpyDtoHAsync_v2(pinned, x, N, sc));
    if (fixed) CHECK(cuCtxDestroy_v2(ctx));
    CHECK(cuCtxSetCurrent(ctx_a));
    CHECK(cuMemcpyHtoDAsync_v2(y, pinned, N, s));
    CHECK(cuCtxSynchronize());
    if (!fixed) CHECK(cuCtxDestroy_v2(ctx));
}

/* Stops the program with exit status 5 unless the `n` bytes at `got` are those at `want`. */
static void expect_bytes(const void *got, const void *want, size_t n, const char *what) {
    if (memcmp(got, want, n) != 0) {
        fprintf(stderr, "%s: the bytes copied back differ\n", what);
        exit(5);
    }
}

/* Copies to and from arrays touch the host memory they name: each of the four reads or writes
   a pinned buffer a copy on s1 wrote (each on an array of its own, untouched elsewhere). */
static void array_copies(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUarray array[4];
    void *pinned[4];
    CUdeviceptr x = initialized();
    for (int i = 0; i < 4; i++) {
        array[i] = array_1d(N);
        CHECK(cuMemAllocHost_v2(&pinned[i], N));
        CHECK(cuMemcpyDtoHAsync_v2(pinned[i], x, N, s1));
    }
    if (fixed) CHECK(cuStreamSynchronize(s1));
    CHECK(cuMemcpyHtoAAsync_v2(array[0], 0, pinned[0], N, s2));
    CHECK(cuMemcpyAtoHAsync_v2(pinned[1], array[1], 0, N, s2));
    CHECK(cuMemcpyHtoA_v2(array[2], 0, pinned[2], N));
    CHECK(cuMemcpyAtoH_v2(pinned[3], array[3], 0, N));
    CHECK(cuCtxSynchronize());
    for (int i = 0; i < 4; i++) CHECK(cuArrayDestroy(array[i]));
}

/* Every copy to or from a 1D array touches the array's bytes: an array of eight N-byte blocks
   written on s1, then each copy touches a block of its own, on s2 or the legacy stream: the
   reads (cuMemcpyAtoHAsync, cuMemcpyAtoD, cuMemcpyAtoH, cuMemcpyAtoA from it) race with s1's
   write as RAW, the writes (cuMemcpyHtoAAsync, cuMemcpyDtoA, cuMemcpyHtoA, cuMemcpyAtoA into
   it) as WAW. */
static void array_sides(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUarray a = array_1d(8 * N), b = array_1d(N);
    CUdeviceptr d = initialized(), out = dalloc();
    void *source, *landing, *staged;
    char *host = calloc(2, N), back[N];
    CHECK(cuMemAllocHost_v2(&source, 8 * N));
    CHECK(cuMemAllocHost_v2(&landing, N));
    CHECK(cuMemAllocHost_v2(&staged, N));
    for (int i = 0; i < 8 * N; i++) ((unsigned char *)source)[i] = (unsigned char)(i % 251);
    CHECK(cuMemcpyHtoAAsync_v2(a, 0, source, 8 * N, s1));
    if (fixed) CHECK(cuStreamSynchronize(s1));
    CHECK(cuMemcpyAtoHAsync_v2(landing, a, 0 * N, N, s2));
    CHECK(cuMemcpyHtoAAsync_v2(a, 1 * N, staged, N, s2));
    CHECK(cuMemcpyAtoD_v2(out, a, 2 * N, N));
    CHECK(cuMemcpyDtoA_v2(a, 3 * N, d, N));
    CHECK(cuMemcpyAtoH_v2(host, a, 4 * N, N));
    CHECK(cuMemcpyHtoA_v2(a, 5 * N, host + N, N));
    CHECK(cuMemcpyAtoA_v2(b, 0, a, 6 * N, N));
    CHECK(cuMemcpyAtoA_v2(a, 7 * N, b, 0, N));
    CHECK(cuCtxSynchronize());
    /* The first block, which only s1's copy wrote. */
    CHECK(cuMemcpyAtoH_v2(back, a, 0, N));
    expect_bytes(back, source, N, "array_sides");
    CHECK(cuArrayDestroy(a));
    CHECK(cuArrayDestroy(b));
    free(host);
}

/* cuArrayDestroy is a synchronous free: it waits for the streams of the array's device only.
   A 3D peer copy on a stream of the other device (or context) still reading the array must be
   waited for first. With `mipmap`, the array is level 1 of a mipmapped array (of 2N one-byte
   elements at level 0), freed by cuMipmappedArrayDestroy. */
static void destroy_race(int fixed, int mipmap) {
    CUmipmappedArray m;
    CUarray a;
    CUDA_MEMCPY3D_PEER copy;
    if (mipmap) {
        CUDA_ARRAY3D_DESCRIPTOR descriptor = {2 * N, 0, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};
        CHECK(cuMipmappedArrayCreate(&m, &descriptor, 2));
        CHECK(cuMipmappedArrayGetLevel(&a, m, 1));
    } else {
        a = array_1d(N);
    }
    CHECK(cuMemcpyDtoA_v2(a, 0, initialized(), N));
    CHECK(cuCtxSynchronize());
    CHECK(cuCtxSetCurrent(ctx_b));
    CUstream s1 = nonblocking();
    CUdeviceptr y = dalloc();
    memset(&copy, 0, sizeof copy);
    copy.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    copy.srcArray = a;
    copy.srcContext = ctx_a;
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = y;
    copy.dstContext = ctx_b;
    copy.dstPitch = N;
    copy.dstHeight = 1;
    copy.WidthInBytes = N;
    copy.Height = 1;
    copy.Depth = 1;
    CHECK(cuMemcpy3DPeerAsync(&copy, s1));
    if (fixed) CHECK(cuStreamSynchronize(s1));
    CHECK(cuCtxSetCurrent(ctx_a));
    if (mipmap)
        CHECK(cuMipmappedArrayDestroy(m));
    else
        CHECK(cuArrayDestroy(a));
    CHECK(cuCtxSetCurrent(ctx_b));
    CHECK(cuStreamSynchronize(s1));
    CHECK(cuCtxSetCurrent(ctx_a));
}
static void array_destroy_race(int fixed) { destroy_race(fixed, 0); }
static void mipmap_destroy_race(int fixed) { destroy_race(fixed, 1); }

/* Arrays of 16 x 8 four-byte elements (uchar4: 64-byte rows), and `depth` slices of them
   (0: a 2D array, made with cuArrayCreate). */
#define ROW 64
static CUarray array_of_rows(size_t depth) {
    CUarray array;
    if (depth) {
        CUDA_ARRAY3D_DESCRIPTOR descriptor = {16, 8, depth, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};
        CHECK(cuArray3DCreate_v2(&array, &descriptor));
    } else {
        CUDA_ARRAY_DESCRIPTOR descriptor = {16, 8, CU_AD_FORMAT_UNSIGNED_INT8, 4};
        CHECK(cuArrayCreate_v2(&array, &descriptor));
    }
    return array;
}
/* A 2D copy of `rows` 64-byte rows between device memory at `x` (pitch 64) and rows from `y`
   of `array`, to the array when `to_array`. */
static CUDA_MEMCPY2D rows_2d(CUarray array, size_t y, CUdeviceptr x, size_t rows, int to_array) {
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    if (to_array) {
        c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        c.srcDevice = x;
        c.srcPitch = ROW;
        c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
        c.dstArray = array;
        c.dstY = y;
    } else {
        c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
        c.srcArray = array;
        c.srcY = y;
        c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        c.dstDevice = x;
        c.dstPitch = ROW;
    }
    c.WidthInBytes = ROW;
    c.Height = rows;
    return c;
}
/* The same as a 3D copy, from rows from `y` of slice `z` of `array` to device memory. */
static CUDA_MEMCPY3D rows_3d(CUarray array, size_t y, size_t z, CUdeviceptr x, size_t rows) {
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    c.srcArray = array;
    c.srcY = y;
    c.srcZ = z;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = x;
    c.dstPitch = ROW;
    c.dstHeight = rows;
    c.WidthInBytes = ROW;
    c.Height = rows;
    c.Depth = 1;
    return c;
}
static CUDA_MEMCPY3D_PEER peer_of(CUDA_MEMCPY3D c) {
    CUDA_MEMCPY3D_PEER p;
    memset(&p, 0, sizeof p);
    p.srcMemoryType = c.srcMemoryType;
    p.srcArray = c.srcArray;
    p.srcY = c.srcY;
    p.srcContext = ctx_a;
    p.dstMemoryType = c.dstMemoryType;
    p.dstDevice = c.dstDevice;
    p.dstPitch = c.dstPitch;
    p.dstHeight = c.dstHeight;
    p.dstContext = ctx_a;
    p.WidthInBytes = c.WidthInBytes;
    p.Height = c.Height;
    p.Depth = c.Depth;
    return p;
}

/* An array whose format's element size cuda.h does not give (block-compressed BC1 here) is
   covered whole by every copy to or from it: a copy into its first row on s1 and one out of its
   fifth on s2 meet. Stand-in only: a real driver places a block-compressed array's rows by blocks. */
#define CU_AD_FORMAT_BC1_UNORM 0x91
static void array_of_unknown_element_size(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUDA_ARRAY_DESCRIPTOR descriptor = {ROW, 8, CU_AD_FORMAT_BC1_UNORM, 1};
    CUarray a;
    CHECK(cuArrayCreate_v2(&a, &descriptor));
    CUDA_MEMCPY2D c2 = rows_2d(a, 0, initialized_bytes(ROW), 1, 1);
    CHECK(cuMemcpy2DAsync_v2(&c2, s1));
    if (fixed) order(s1, s2);
    c2 = rows_2d(a, 4, dalloc(), 1, 0);
    CHECK(cuMemcpy2DAsync_v2(&c2, s2));
    CHECK(cuCtxSynchronize());
}

/* 2D and 3D copies with an array side touch the array's rows (the array's own: 64 bytes of
   four-byte elements each). A 2D array written on s1; then rows 0-3 read by cuMemcpy2D,
   cuMemcpy3D, cuMemcpy3DPeer (legacy stream), cuMemcpy3DAsync, cuMemcpy3DPeerAsync and a
   graph's memcpy node (s2), and rows 6-7 written by cuMemcpy2DAsync on s2: in the fixed twin
   s2 waits for s1, and the reads and the write meet no row of each other's. */
static void array_strided_copies(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUarray a = array_of_rows(0);
    CUdeviceptr x = initialized_bytes(8 * ROW), y = initialized();
    CUgraph g;
    CUgraphNode node;
    CUDA_MEMCPY2D c2 = rows_2d(a, 0, x, 8, 1);
    CHECK(cuMemcpy2DAsync_v2(&c2, s1));
    if (fixed) CHECK(cuStreamSynchronize(s1));
    c2 = rows_2d(a, 0, dalloc(), 4, 0);
    CHECK(cuMemcpy2D_v2(&c2));
    CUDA_MEMCPY3D c3 = rows_3d(a, 0, 0, dalloc(), 4);
    CHECK(cuMemcpy3D_v2(&c3));
    c3 = rows_3d(a, 0, 0, dalloc(), 4);
    CUDA_MEMCPY3D_PEER peer = peer_of(c3);
    CHECK(cuMemcpy3DPeer(&peer));
    c3 = rows_3d(a, 0, 0, dalloc(), 4);
    CHECK(cuMemcpy3DAsync_v2(&c3, s2));
    peer = peer_of(rows_3d(a, 0, 0, dalloc(), 4));
    CHECK(cuMemcpy3DPeerAsync(&peer, s2));
    c3 = rows_3d(a, 0, 0, dalloc(), 4);
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddMemcpyNode(&node, g, NULL, 0, &c3, ctx_a));
    run_graph(g, s2);
    c2 = rows_2d(a, 6, y, 2, 1);
    CHECK(cuMemcpy2DAsync_v2(&c2, s2));
    CHECK(cuCtxSynchronize());
    CHECK(cuArrayDestroy(a));
}

/* A mipmapped array's level is an array of its own size: level 1 of a 32 x 16 uchar4 mipmap
   (16 x 8 elements: 64-byte rows) written on s1, its rows 6-7 read on s2. */
static void mipmap_levels(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUDA_ARRAY3D_DESCRIPTOR descriptor = {32, 16, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};
    CUmipmappedArray m;
    CUarray level;
    CHECK(cuMipmappedArrayCreate(&m, &descriptor, 2));
    CHECK(cuMipmappedArrayGetLevel(&level, m, 1));
    CUDA_MEMCPY2D c = rows_2d(level, 0, initialized_bytes(8 * ROW), 8, 1);
    CHECK(cuMemcpy2DAsync_v2(&c, s1));
    order_if(fixed, s1, s2);
    c = rows_2d(level, 6, dalloc(), 2, 0);
    CHECK(cuMemcpy2DAsync_v2(&c, s2));
    CHECK(cuCtxSynchronize());
    CHECK(cuMipmappedArrayDestroy(m));
}

/* A level of a 3D mipmapped array has its depth halved too; of a layered one, all its layers:
   level 1 of a 32 x 16 x 4 uchar4 mipmap is 16 x 8 x 2 elements (1024 bytes), of a layered
   32 x 16 mipmap of 6 layers 16 x 8 x 6 (3072 bytes). Rows 0-1 of slice 1 of each level read on
   s1 and written on s2. */
#define CUDA_ARRAY3D_LAYERED 0x01
static CUarray level_1(size_t depth, unsigned flags) {
    CUDA_ARRAY3D_DESCRIPTOR descriptor = {32, 16, depth, CU_AD_FORMAT_UNSIGNED_INT8, 4, flags};
    CUmipmappedArray m;
    CUarray level;
    CHECK(cuMipmappedArrayCreate(&m, &descriptor, 2));
    CHECK(cuMipmappedArrayGetLevel(&level, m, 1));
    return level;
}
/* A 3D copy of rows 0-1 of slice 1 of `array` from device memory at `x`. */
static CUDA_MEMCPY3D rows_3d_to(CUarray array, CUdeviceptr x) {
    CUDA_MEMCPY3D w;
    memset(&w, 0, sizeof w);
    w.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    w.srcDevice = x;
    w.srcPitch = ROW;
    w.srcHeight = 2;
    w.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    w.dstArray = array;
    w.dstZ = 1;
    w.WidthInBytes = ROW;
    w.Height = 2;
    w.Depth = 1;
    return w;
}
static void mipmap_3d_levels(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUarray of_3d = level_1(4, 0), of_layered = level_1(6, CUDA_ARRAY3D_LAYERED);
    CUdeviceptr x = initialized();
    CUDA_MEMCPY3D c = rows_3d(of_3d, 0, 1, dalloc(), 2);
    CHECK(cuMemcpy3DAsync_v2(&c, s1));
    c = rows_3d(of_layered, 0, 1, dalloc(), 2);
    CHECK(cuMemcpy3DAsync_v2(&c, s1));
    order_if(fixed, s1, s2);
    c = rows_3d_to(of_3d, x);
    CHECK(cuMemcpy3DAsync_v2(&c, s2));
    c = rows_3d_to(of_layered, x);
    CHECK(cuMemcpy3DAsync_v2(&c, s2));
    CHECK(cuCtxSynchronize());
}

/* A 3D array's slices: rows 4-7 of slice 1 written on s1, rows 6-7 of slice 1 (racy twin) or
   of slice 0 (fixed twin) read on s2. */
static void array_slices(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUarray a = array_of_rows(2);
    CUdeviceptr x = dalloc();
    unsigned char rows[4 * ROW], back[4 * ROW];
    CUDA_MEMCPY3D c;
    for (int i = 0; i < 4 * ROW; i++) rows[i] = (unsigned char)(i % 251);
    CHECK(cuMemcpyHtoD_v2(x, rows, sizeof rows));
    CHECK(cuCtxSynchronize());
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = x;
    c.srcPitch = ROW;
    c.srcHeight = 4;
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    c.dstArray = a;
    c.dstY = 4;
    c.dstZ = 1;
    c.WidthInBytes = ROW;
    c.Height = 4;
    c.Depth = 1;
    CHECK(cuMemcpy3DAsync_v2(&c, s1));
    c = rows_3d(a, 6, fixed ? 0 : 1, dalloc(), 2);
    CHECK(cuMemcpy3DAsync_v2(&c, s2));
    CHECK(cuCtxSynchronize());
    /* Rows 4-7 of slice 1 back, to the host. */
    c = rows_3d(a, 4, 1, 0, 4);
    c.dstMemoryType = CU_MEMORYTYPE_HOST;
    c.dstHost = back;
    CHECK(cuMemcpy3D_v2(&c));
    expect_bytes(back, rows, sizeof back, "array_slices");
    CHECK(cuArrayDestroy(a));
}

/* cuMemcpy3DBatchAsync and its CUDA 13 version: operations between pointers (one-byte
   elements) and arrays (the array's elements: offsets and extents in four-byte elements). A
   kernel on s1 writes x and a 2D copy on s1 writes the 2D array; on s2 the first batch copies
   x (RAW), reads rows 2-3 of the array (RAW) and writes its rows 6-7 (WAW), the second copies x
   again (RAW). */
static CUmemcpy3DOperand pointer_operand(CUdeviceptr p) {
    CUmemcpy3DOperand o;
    memset(&o, 0, sizeof o);
    o.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    o.op.ptr.ptr = p;
    return o;
}
static CUmemcpy3DOperand array_operand(CUarray a, size_t y) {
    CUmemcpy3DOperand o;
    memset(&o, 0, sizeof o);
    o.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
    o.op.array.array = a;
    o.op.array.offset.y = y;
    return o;
}
static CUDA_MEMCPY3D_BATCH_OP batch_op(CUmemcpy3DOperand src, CUmemcpy3DOperand dst, size_t width, size_t height) {
    CUDA_MEMCPY3D_BATCH_OP op;
    memset(&op, 0, sizeof op);
    op.src = src;
    op.dst = dst;
    op.extent.width = width;
    op.extent.height = height;
    op.extent.depth = 1;
    op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    return op;
}
static void memcpy_3d_batch(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUarray a = array_of_rows(0);
    CUdeviceptr x = dalloc(), rows = initialized_bytes(8 * ROW), more_rows = initialized();
    size_t fail = 0;
    writes(s1, x);
    CUDA_MEMCPY2D c2 = rows_2d(a, 0, rows, 8, 1);
    CHECK(cuMemcpy2DAsync_v2(&c2, s1));
    order_if(fixed, s1, s2);
    CUDA_MEMCPY3D_BATCH_OP ops[] = {
        batch_op(pointer_operand(x), pointer_operand(dalloc()), N, 1),
        batch_op(array_operand(a, 2), pointer_operand(dalloc()), 16, 2),
        batch_op(pointer_operand(more_rows), array_operand(a, 6), 16, 2),
    };
    CHECK(cuMemcpy3DBatchAsync(3, ops, &fail, 0, s2));
    CUDA_MEMCPY3D_BATCH_OP again = batch_op(pointer_operand(x), pointer_operand(dalloc()), N, 1);
    CHECK(cuMemcpy3DBatchAsync_v2(1, &again, 0, s2));
    CHECK(cuCtxSynchronize());
    CHECK(cuArrayDestroy(a));
}

/* A pointer operand of a batched copy with an array has rows of the array's elements, packed
   to the extent where its row length is 0: 2 rows of 16 four-byte elements read from p are
   bytes 0 to 128. The racy twin writes bytes 96 to 128 on s1 (row 1's end) unordered. */
static void batch_3d_pointer_rows(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUarray a = array_of_rows(0);
    CUdeviceptr p = initialized(), y = initialized();
    CHECK(cuMemcpyDtoDAsync_v2(p + 96, y, 32, s1));
    order_if(fixed, s1, s2);
    size_t fail = 0;
    CUDA_MEMCPY3D_BATCH_OP op = batch_op(pointer_operand(p), array_operand(a, 0), 16, 2);
    CHECK(cuMemcpy3DBatchAsync(1, &op, &fail, 0, s2));
    CHECK(cuCtxSynchronize());
    CHECK(cuArrayDestroy(a));
}

/* An array operand's offset is in elements: 8 four-byte elements in, 8 wide, a batched copy
   reads bytes 32 to 64 of the array's row 0. The racy twin writes its bytes 48 to 64 on s1
   (a 2D copy) unordered. */
static void batch_3d_array_offset(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUarray a = array_of_rows(0);
    CUdeviceptr x = initialized(), y = initialized();
    CUDA_MEMCPY2D c2 = rows_2d(a, 0, x, 1, 1);
    c2.dstXInBytes = 48;
    c2.WidthInBytes = 16;
    CHECK(cuMemcpy2DAsync_v2(&c2, s1));
    order_if(fixed, s1, s2);
    size_t fail = 0;
    CUmemcpy3DOperand src = array_operand(a, 0);
    src.op.array.offset.x = 8;
    CUDA_MEMCPY3D_BATCH_OP op = batch_op(src, pointer_operand(y), 8, 1);
    CHECK(cuMemcpy3DBatchAsync(1, &op, &fail, 0, s2));
    CHECK(cuCtxSynchronize());
    CHECK(cuArrayDestroy(a));
}

/* Managed-memory hints order nothing and touch nothing: advice, a prefetch and an attachment
   on s2 do not make s2 wait for a kernel on s1. */
#define CU_MEM_ADVISE_SET_PREFERRED_LOCATION 3
static void managed_memory_hints(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr m;
    CUmemLocation device0 = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    CHECK(cuMemAllocManaged(&m, N, CU_MEM_ATTACH_GLOBAL));
    writes(s1, m);
    CHECK(cuMemAdvise_v2(m, N, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, device0));
    CHECK(cuMemPrefetchAsync_v2(m, N, device0, 0, s2));
    CHECK(cuStreamAttachMemAsync(s2, m, 0, CU_MEM_ATTACH_SINGLE));
    order_if(fixed, s1, s2);
    reads(s2, m);
}

/* A call the driver refuses does nothing, and tells the model nothing: a wait with flags no
   driver accepts orders nothing (the program ignores its status). */
static void refused_wait(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUevent e = event();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    CHECK(cuEventRecord(e, s1));
    CUresult status = cuStreamWaitEvent(s2, e, fixed ? 0 : 0xff);
    if ((status == CUDA_SUCCESS) != fixed) fprintf(stderr, "unexpected status %d\n", status);
    reads(s2, x);
}

/* A refused instantiation tells the model nothing either: instantiating no graph into the
   executable graph of a kernel node writing x leaves it that graph, whose launch on s2 meets s1's
   write of x. Stand-in only: a real driver is only required to refuse it. */
static void refused_instantiate(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc();
    CUgraph g;
    CUgraphExec exec;
    CHECK(cuGraphCreate(&g, 0));
    kernel_node(g, NULL, 0, x, in);
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    writes(s1, x);
    CUresult status = cuGraphInstantiateWithFlags(&exec, NULL, 0);
    if (status == CUDA_SUCCESS) fprintf(stderr, "unexpected status %d\n", status);
    order_if(fixed, s1, s2);
    CHECK(cuGraphLaunch(exec, s2));
    CHECK(cuCtxSynchronize());
}

/* ---- Imports (stand-in only) -------------------------------------------------------------
   Memory and semaphores another process or API exported. A real driver refuses to open an
   IPC handle in the process that made it, and external semaphores come from Vulkan or
   similar; the stand-in imports its own exports, so these run there only (`list` leaves them
   out on a real driver). */

typedef struct {
    char reserved[64];
} CUipcMemHandle;
typedef struct CUextSemaphore_st *CUexternalSemaphore;
CUresult cuIpcGetMemHandle(CUipcMemHandle *, CUdeviceptr);
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *, CUipcMemHandle, unsigned);
CUresult cuIpcCloseMemHandle(CUdeviceptr);
CUresult cuMemPoolExportPointer(void *, CUdeviceptr);
CUresult cuMemPoolImportPointer(CUdeviceptr *, CUmemoryPool, void *);
CUresult cuImportExternalSemaphore(CUexternalSemaphore *, const void *);
CUresult cuDestroyExternalSemaphore(CUexternalSemaphore);
CUresult cuSignalExternalSemaphoresAsync(const CUexternalSemaphore *, const void *, unsigned, CUstream);
CUresult cuWaitExternalSemaphoresAsync(const CUexternalSemaphore *, const void *, unsigned, CUstream);
#define CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1

/* Memory opened from an IPC handle is a buffer. */
static void ipc_memory(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUipcMemHandle handle;
    CUdeviceptr exported = dalloc(), x;
    CHECK(cuIpcGetMemHandle(&handle, exported));
    CHECK(cuIpcOpenMemHandle_v2(&x, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    writes(s1, x);
    order_if(fixed, s1, s2);
    reads(s2, x);
    CHECK(cuCtxSynchronize());
    CHECK(cuIpcCloseMemHandle(x));
}

/* A pointer imported from another process's pool is a buffer. */
static void pool_import(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUmemoryPool pool;
    CUdeviceptr exported, x;
    char data[64];
    CHECK(cuDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cuMemAllocFromPoolAsync(&exported, N, pool, s1));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemPoolExportPointer(data, exported));
    CHECK(cuMemPoolImportPointer(&x, pool, data));
    writes(s1, x);
    order_if(fixed, s1, s2);
    reads(s2, x);
    CHECK(cuCtxSynchronize());
    CHECK(cuMemFree_v2(x));
}

/* An external semaphore signalled on s1 and waited for on s2 orders s2 like an event. */
static void external_semaphore(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUexternalSemaphore sem;
    char description[128] = {0}, params[256] = {0};
    CUdeviceptr x = dalloc();
    CHECK(cuImportExternalSemaphore(&sem, description));
    writes(s1, x);
    CHECK(cuSignalExternalSemaphoresAsync(&sem, params, 1, s1));
    if (fixed) CHECK(cuWaitExternalSemaphoresAsync(&sem, params, 1, s2));
    reads(s2, x);
    CHECK(cuCtxSynchronize());
    CHECK(cuDestroyExternalSemaphore(sem));
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
    CUstreamBatchMemOpParams op;
    memset(&op, 0, sizeof op);
    op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    op.writeValue.address = x;
    op.writeValue.value = 1;
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
    int standin_only;
} SCENARIOS[] = {
    {"event_wait", event_wait, "cross-stream-race"},
    {"wait_unrecorded_event", wait_unrecorded_event, "cross-stream-race"},
    {"event_synchronize", event_synchronize, "cross-stream-race"},
    {"event_query", event_query, "cross-stream-race"},
    {"stream_synchronize", stream_synchronize, "cross-stream-race"},
    {"stream_query", stream_query, "cross-stream-race"},
    {"context_synchronize", context_synchronize, "cross-stream-race"},
    {"context_synchronize_v2", context_synchronize_v2, "cross-stream-race"},
    {"sync_free_is_device_wide", sync_free_is_device_wide, "free-race"},
    {"wait_value", wait_value, "cross-stream-race"},
    {"host_func", host_func, "cross-stream-race"},
    {"stream_callback", stream_callback, "cross-stream-race"},
    {"legacy_waits_for_blocking_streams", legacy_waits_for_blocking_streams, "cross-stream-race"},
    {"blocking_streams_wait_for_legacy", blocking_streams_wait_for_legacy, "cross-stream-race"},
    {"per_thread_default_streams", per_thread_default_streams, "cross-stream-race"},
    {"per_thread_entry_points", per_thread_entry_points, "cross-stream-race"},
    {"htod_from_pageable_memory", htod_from_pageable_memory, "cross-stream-race"},
    {"dtoh_joins_the_host", dtoh_joins_the_host, "cross-stream-race"},
    {"dtod_does_not_join_the_host", dtod_does_not_join_the_host, "cross-stream-race"},
    {"unified_copy_between_device_buffers", unified_copy_between_device_buffers, "cross-stream-race"},
    {"memset_of_device_memory", memset_of_device_memory, "cross-stream-race"},
    {"memset_of_no_bytes", memset_of_no_bytes, "cross-stream-race"},
    {"async_copy_does_not_join_the_host", async_copy_does_not_join_the_host, "cross-stream-race"},
    {"copy_of_no_bytes", copy_of_no_bytes, "cross-stream-race"},
    {"strided_copy_cover", strided_copy_cover, "cross-stream-race"},
    {"copy_3d_of_many_slices", copy_3d_of_many_slices, "cross-stream-race"},
    {"unified_2d_copy_to_pinned_memory", unified_2d_copy_to_pinned_memory, "cross-stream-race"},
    {"strided_copy", strided_copy, "cross-stream-race"},
    {"dtoh_async_to_pageable_memory", dtoh_async_to_pageable_memory, "cross-stream-race"},
    {"freed_host_range", freed_host_range, "free-race"},
    {"use_before_alloc", use_before_alloc, "use-before-alloc,cross-stream-race"},
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
    {"built_graph_memset", built_graph_memset, "cross-stream-race"},
    {"built_graph_memset_set_params", built_graph_memset_set_params, "cross-stream-race"},
    {"built_graph_memset_of_no_bytes", built_graph_memset_of_no_bytes, "cross-stream-race", 1},
    {"built_graph_memcpy_set_params", built_graph_memcpy_set_params, "cross-stream-race"},
    {"built_graph_exec_memcpy_set_params", built_graph_exec_memcpy_set_params, "cross-stream-race"},
    {"built_graph_kernel_set_params", built_graph_kernel_set_params, "cross-stream-race"},
    {"built_graph_exec_kernel_set_params", built_graph_exec_kernel_set_params, "cross-stream-race"},
    {"built_graph_exec_update", built_graph_exec_update, "cross-stream-race"},
    {"built_graph_exec_update_v1", built_graph_exec_update_v1, "cross-stream-race"},
    {"built_graph_destroy_node", built_graph_destroy_node, "cross-stream-race"},
    {"built_graph_clone", built_graph_clone, "cross-stream-race"},
    {"capture_to_graph", capture_to_graph, "cross-stream-race"},
    {"capture_update_dependencies", capture_update_dependencies, "cross-stream-race"},
    {"capture_update_dependencies_v2", capture_update_dependencies_v2, "cross-stream-race"},
    {"built_graph_mem_alloc", built_graph_mem_alloc, "use-before-alloc"},
    {"built_graph_mem_free", built_graph_mem_free, "free-race"},
    {"peer_copy_into_new_array", peer_copy_into_new_array, "use-before-alloc"},
    {"sync_free_and_another_device", sync_free_and_another_device, "free-race"},
    {"cross_device_event", cross_device_event, "cross-stream-race"},
    {"launch_kernel_ex", launch_kernel_ex, "cross-stream-race"},
    {"launch_programmatic_event", launch_programmatic_event, "cross-stream-race"},
    {"launch_completion_event", launch_completion_event, "cross-stream-race"},
    {"programmatic_stream_serialization", programmatic_stream_serialization, "cross-stream-race"},
    {"cooperative_launch", cooperative_launch, "cross-stream-race"},
    {"memcpy_batch", memcpy_batch, "cross-stream-race"},
    {"copy_3d", copy_3d, "cross-stream-race"},
    {"copy_3d_peer", copy_3d_peer, "cross-stream-race"},
    {"memset_widths", memset_widths, "cross-stream-race"},
    {"memset_2d_rows", memset_2d_rows, "cross-stream-race"},
    {"batch_mem_op", batch_mem_op, "cross-stream-race"},
    {"wait_value_64", wait_value_64, "cross-stream-race"},
    {"virtual_memory", virtual_memory, "cross-stream-race"},
    {"registered_host_memory", registered_host_memory, "cross-stream-race"},
    {"managed_memory", managed_memory, "cross-stream-race"},
    {"pitched_memory", pitched_memory, "cross-stream-race"},
    {"pool_allocation", pool_allocation, "use-before-alloc"},
    {"event_record_with_flags", event_record_with_flags, "cross-stream-race"},
    {"library_kernels", library_kernels, "cross-stream-race"},
    {"enumerated_library_kernels", enumerated_library_kernels, "cross-stream-race", 1},
    {"green_context_stream", green_context_stream, "cross-stream-race", 1},
    {"context_destroy", context_destroy, "cross-stream-race"},
    {"array_copies", array_copies, "cross-stream-race"},
    {"array_sides", array_sides, "cross-stream-race"},
    {"array_destroy_race", array_destroy_race, "free-race"},
    {"mipmap_destroy_race", mipmap_destroy_race, "free-race"},
    {"mipmap_levels", mipmap_levels, "cross-stream-race"},
    {"mipmap_3d_levels", mipmap_3d_levels, "cross-stream-race"},
    {"array_strided_copies", array_strided_copies, "cross-stream-race"},
    {"array_of_unknown_element_size", array_of_unknown_element_size, "cross-stream-race", 1},
    {"array_slices", array_slices, "cross-stream-race"},
    {"memcpy_3d_batch", memcpy_3d_batch, "cross-stream-race"},
    {"batch_3d_pointer_rows", batch_3d_pointer_rows, "cross-stream-race"},
    {"batch_3d_array_offset", batch_3d_array_offset, "cross-stream-race"},
    {"refused_wait", refused_wait, "cross-stream-race"},
    {"refused_instantiate", refused_instantiate, "cross-stream-race", 1},
    {"managed_memory_hints", managed_memory_hints, "cross-stream-race"},
    {"ipc_memory", ipc_memory, "cross-stream-race", 1},
    {"pool_import", pool_import, "cross-stream-race", 1},
    {"external_semaphore", external_semaphore, "cross-stream-race", 1},
    {"notes", notes, "clean"},
};

int main(int argc, char **argv) {
    size_t count = sizeof SCENARIOS / sizeof *SCENARIOS;
    if (argc == 2 && strcmp(argv[1], "list") == 0) {
        int standin = dlsym(RTLD_DEFAULT, "standinRunCallbacks") != NULL;
        for (size_t i = 0; i < count; i++)
            if (standin || !SCENARIOS[i].standin_only)
                printf("%s %s\n", SCENARIOS[i].name, SCENARIOS[i].racy_twin_reports);
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
