/* Synchronization (docs/semantics.md#synchronization): stream and context synchronization,
   synchronous frees, host functions, value writes and waits, external semaphores. */
#include "semantics.h"

#define CU_STREAM_WAIT_VALUE_GEQ 0

void stream_synchronize(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    if (fixed) CHECK(cuStreamSynchronize(s1));
    reads(s2, x);
}

void stream_query(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    if (fixed)
        while (cuStreamQuery(s1) != CUDA_SUCCESS) {}
    reads(s2, x);
}

void context_synchronize(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    if (fixed) CHECK(cuCtxSynchronize());
    reads(s2, x);
}

/* CUDA 13's cuCtxSynchronize_v2, the current context named by NULL and by its handle. */
void context_synchronize_v2(int fixed) {
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
void sync_free_is_device_wide(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc_async(s1);
    order(s1, s2);
    reads(s2, x);
    if (fixed)
        CHECK(cuMemFree_v2(x));
    else
        CHECK(cuMemFreeAsync(x, s1));
}

void wait_value(int fixed) {
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
   unreported. */
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
void host_func(int fixed) { host_function(fixed, 0); }
void stream_callback(int fixed) { host_function(fixed, 1); }

/* cuStreamBatchMemOp: a write of a flag on s1 and a wait for it on s2, each in a batch. */
void batch_mem_op(int fixed) {
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
void wait_value_64(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), flag = dalloc();
    CHECK(cuMemsetD8_v2(flag, 0, 8));
    CHECK(cuCtxSynchronize());
    writes(s1, x);
    CHECK(cuStreamWriteValue64_v2(s1, flag, 1, 0));
    if (fixed) CHECK(cuStreamWaitValue64_v2(s2, flag, 1, CU_STREAM_WAIT_VALUE_GEQ));
    reads(s2, x);
}

/* An external semaphore signalled on s1 and waited for on s2 orders s2 like an event.
   Stand-in only: external semaphores come from Vulkan or similar; the stand-in imports its own. */
typedef struct CUextSemaphore_st *CUexternalSemaphore;
CUresult cuImportExternalSemaphore(CUexternalSemaphore *, const void *);
CUresult cuDestroyExternalSemaphore(CUexternalSemaphore);
CUresult cuSignalExternalSemaphoresAsync(const CUexternalSemaphore *, const void *, unsigned, CUstream);
CUresult cuWaitExternalSemaphoresAsync(const CUexternalSemaphore *, const void *, unsigned, CUstream);
void external_semaphore(int fixed) {
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
