/* Streams and default streams (docs/semantics.md#streams-and-default-streams): the legacy and
   per-thread default streams, streams the shim did not see made, contexts destroyed. */
#include "semantics.h"

/* The legacy default stream waits for blocking streams, not for non-blocking ones. */
void legacy_waits_for_blocking_streams(int fixed) {
    CUstream s = fixed ? blocking() : nonblocking();
    CUdeviceptr x = dalloc();
    writes(s, x);
    reads(0, x);
}

/* Blocking streams wait for the legacy default stream; non-blocking ones do not. */
void blocking_streams_wait_for_legacy(int fixed) {
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
void per_thread_default_streams(int fixed) {
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
void per_thread_entry_points(int fixed) {
    pthread_t t;
    shared_x = dalloc();
    pthread_create(&t, NULL, memset_at_per_thread_entry_point, NULL);
    pthread_join(t, NULL);
    reads(fixed ? CU_STREAM_LEGACY : CU_STREAM_PER_THREAD, shared_x);
}

/* A stream the shim did not see made (a green context's, cuGreenCtxStreamCreate, which it does
   not hook) is described by the driver: of the current context, so a context synchronize waits
   for it, and non-blocking, so the legacy default stream does not. Stand-in only: it has no
   green contexts (the stream is the current context's). */
CUresult cuGreenCtxStreamCreate(CUstream *, void *, unsigned, int);
void green_context_stream(int fixed) {
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
void context_destroy(int fixed) {
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
