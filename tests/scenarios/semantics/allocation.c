/* Allocation and free (docs/semantics.md#allocation-and-free): the race kinds of a buffer's
   life, every kind of buffer, arrays destroyed. */
#include "semantics.h"

/* Warp's pinned allocator: host memory pinned (here registered), copied into, then freed. A
   stream of another context still copying into it when it is freed is a free-race (the free
   waits for its own context only); once freed, its addresses are ordinary pageable memory, so
   copies into them afterwards are no use after free. */
void freed_host_range(int fixed) {
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

/* Warp: "array created on the current stream, kernel launched on another stream without
   wait_stream". */
void use_before_alloc(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc_async(s1);
    CHECK(cuMemsetD8Async(x, 0, N, s1));
    if (fixed) order(s1, s2);
    writes(s2, x);
    CHECK(cuCtxSynchronize());
}

/* nvmath-python, "stream-ordered deallocation": allocated on s1, used on s2, freed on s1
   without s1 waiting for s2. */
void free_race(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr a = dalloc_async(s1);
    order(s1, s2);
    writes(s2, a);
    if (fixed) order(s2, s1);
    CHECK(cuMemFreeAsync(a, s1));
    CHECK(cuCtxSynchronize());
}

void use_after_free(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc_async(s);
    /* The output buffer first: an allocation after the free could be handed x's address. */
    CUdeviceptr out = dalloc();
    if (fixed) launch(s, out, x);
    CHECK(cuMemFreeAsync(x, s));
    if (!fixed) launch(s, out, x);
    CHECK(cuCtxSynchronize());
}

/* A framework's own sub-allocation inside a driver allocation, declared through the
   annotation API (shim/include/streamsan.h) when streamsan is there: freed on its
   allocation stream while another stream still reads it. */
void annotated_suballocation(int fixed) {
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

/* Memory made by cuMemCreate, mapped at a reserved range: a buffer like any other. */
void virtual_memory(int fixed) {
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
void registered_host_memory(int fixed) {
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

void managed_memory(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr m;
    CHECK(cuMemAllocManaged(&m, N, CU_MEM_ATTACH_GLOBAL));
    writes(s1, m);
    order_if(fixed, s1, s2);
    reads(s2, m);
}

void pitched_memory(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr p;
    size_t pitch;
    CHECK(cuMemAllocPitch_v2(&p, &pitch, 64, 4, 4));
    writes(s1, p);
    order_if(fixed, s1, s2);
    reads(s2, p);
}

/* An allocation from a memory pool is stream-ordered, like cuMemAllocAsync's. */
void pool_allocation(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUmemoryPool pool;
    CUdeviceptr x;
    CHECK(cuDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cuMemAllocFromPoolAsync(&x, N, pool, s1));
    order_if(fixed, s1, s2);
    writes(s2, x);
    CHECK(cuCtxSynchronize());
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
void array_destroy_race(int fixed) { destroy_race(fixed, 0); }
void mipmap_destroy_race(int fixed) { destroy_race(fixed, 1); }

/* Memory another process exported. Stand-in only: a real driver refuses to open an IPC handle
   in the process that made it; the stand-in imports its own exports. */

/* Memory opened from an IPC handle is a buffer. */
void ipc_memory(int fixed) {
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
void pool_import(int fixed) {
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
