/* Events (docs/semantics.md#events): records, waits, event synchronization and queries. */
#include "semantics.h"

void event_wait(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    if (fixed) order(s1, s2);
    reads(s2, x);
}

void wait_unrecorded_event(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUevent e = event();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    if (fixed) CHECK(cuEventRecord(e, s1));
    CHECK(cuStreamWaitEvent(s2, e, 0)); /* racy: e was never recorded, the wait orders nothing */
    reads(s2, x);
}

void event_synchronize(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUevent e = event();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    CHECK(cuEventRecord(e, s1));
    if (fixed) CHECK(cuEventSynchronize(e));
    reads(s2, x);
}

void event_query(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUevent e = event();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    CHECK(cuEventRecord(e, s1));
    if (fixed)
        while (cuEventQuery(e) != CUDA_SUCCESS) {}
    reads(s2, x);
}

/* CuPy: "s2.wait_event(e2)" before s2 copies what s1 computed. */
void cupy_wait_event(int fixed) {
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

void event_record_with_flags(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUevent e = event();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    CHECK(cuEventRecordWithFlags(e, s1, 0));
    if (fixed) CHECK(cuStreamWaitEvent(s2, e, 0));
    reads(s2, x);
}

/* A call the driver refuses does nothing, and tells the model nothing: a wait with flags no
   driver accepts orders nothing (the program ignores its status). */
void refused_wait(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUevent e = event();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    CHECK(cuEventRecord(e, s1));
    CUresult status = cuStreamWaitEvent(s2, e, fixed ? 0 : 0xff);
    if ((status == CUDA_SUCCESS) != fixed) fprintf(stderr, "unexpected status %d\n", status);
    reads(s2, x);
}
