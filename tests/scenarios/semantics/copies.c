/* Copies (docs/semantics.md#copies): how each copy orders the host, the rows of 2D and 3D
   copies, batches, and copies with an array side. */
#include "semantics.h"

/* A copy from pageable memory may return before the data lands; from pinned memory, not. */
void htod_from_pageable_memory(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc();
    static char pageable[N];
    void *pinned;
    CHECK(cuMemAllocHost_v2(&pinned, N));
    CHECK(cuMemcpyHtoD_v2(x, fixed ? pinned : (void *)pageable, N));
    reads(s, x);
}

/* A synchronous copy to the host has completed when it returns; an asynchronous one not. */
void dtoh_joins_the_host(int fixed) {
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
void dtod_does_not_join_the_host(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc();
    CHECK(cuMemcpyDtoD_v2(x, y, N));
    if (fixed) CHECK(cuStreamSynchronize(CU_STREAM_LEGACY));
    reads(s, x);
}

/* cuMemcpy (unified addressing) learns each side's kind from its address: between two device
   buffers it does not make the host wait either. */
void unified_copy_between_device_buffers(int fixed) {
    CUstream s = nonblocking();
    CUdeviceptr x = dalloc(), y = dalloc();
    CHECK(cuMemcpy(x, y, N));
    if (fixed) CHECK(cuStreamSynchronize(CU_STREAM_LEGACY));
    reads(s, x);
}

/* A 2D copy reads the rows it names: here the first of four 32-byte rows, 64 bytes apart,
   is where the kernel on s1 wrote. */
void strided_copy(int fixed) {
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

void async_copy_does_not_join_the_host(int fixed) {
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
void unified_2d_copy_to_pinned_memory(int fixed) {
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
void copy_of_no_bytes(int fixed) {
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
void strided_copy_cover(int fixed) {
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
void copy_3d_of_many_slices(int fixed) {
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
void dtoh_async_to_pageable_memory(int fixed) {
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

/* cuMemcpyBatchAsync: each copy reads its source and writes its destination. */
void memcpy_batch(int fixed) {
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
void copy_3d(int fixed) {
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
void copy_3d_peer(int fixed) {
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

/* Copies to and from arrays touch the host memory they name: each of the four reads or writes
   a pinned buffer a copy on s1 wrote (each on an array of its own, untouched elsewhere). */
void array_copies(int fixed) {
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
void array_sides(int fixed) {
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
void array_of_unknown_element_size(int fixed) {
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
void array_strided_copies(int fixed) {
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
void mipmap_levels(int fixed) {
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
void mipmap_3d_levels(int fixed) {
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
void array_slices(int fixed) {
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
void memcpy_3d_batch(int fixed) {
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
void batch_3d_pointer_rows(int fixed) {
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
void batch_3d_array_offset(int fixed) {
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
