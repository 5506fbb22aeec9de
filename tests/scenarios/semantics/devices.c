/* Multiple devices (docs/semantics.md#multiple-devices): peer copies, frees and events
   across two devices (or two contexts of one). */
#include "semantics.h"

/* Warp: a peer copy into an array just allocated on the other device's stream must wait for
   that stream. */
void peer_copy_into_new_array(int fixed) {
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
void sync_free_and_another_device(int fixed) {
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
void cross_device_event(int fixed) {
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
