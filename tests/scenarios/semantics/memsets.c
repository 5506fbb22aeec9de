/* Memsets (docs/semantics.md#memsets): the host's ordering, every width, 2D rows. */
#include "semantics.h"

/* A memset of no bytes does nothing, and does not make the host wait, of pinned memory too:
   after a kernel on blocking stream s1, a synchronous memset of N bytes of pinned memory on the
   legacy stream (fixed twin) orders s2's read after it; of 0 bytes (racy twin), not. */
void memset_of_no_bytes(int fixed) {
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
void memset_of_device_memory(int fixed) {
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

/* Every memset width, synchronous (on the legacy stream, of device memory: the host does not
   wait) and asynchronous: each writes a buffer a kernel on s1 wrote, twelve races in all. */
void memset_widths(int fixed) {
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
void memset_2d_rows(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = initialized(), z = initialized_bytes(512), y = initialized();
    CHECK(cuMemcpyDtoDAsync_v2(x + (fixed ? 4 : 24), y, 4, s1));
    CHECK(cuMemcpyDtoDAsync_v2(z + (fixed ? 316 : 312), y + 4, 4, s1));
    CHECK(cuMemsetD2D8Async(x, 8, 1, 4, 4, s2));
    CHECK(cuMemsetD2D8Async(z, 8, 1, 4, 40, s2));
    CHECK(cuCtxSynchronize());
}
