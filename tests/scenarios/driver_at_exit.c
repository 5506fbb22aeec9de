/* Driver calls in an exit handler, after the main thread's thread-locals are gone (glibc
   destroys them before it runs atexit handlers; Python frameworks free their memory
   there). main writes x on s1; the handler reads it on s2 with no wait, frees it and
   synchronizes. The race must still be reported. Prints "exit handler done". */
#include <stdio.h>
#include <stdlib.h>
#include "cuda_min.h"

CUresult cuInit(unsigned);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxSynchronize(void);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        CUstream, void **, void **);

#define CHECK(call)                                                            \
    do {                                                                       \
        CUresult rc_ = (call);                                                 \
        if (rc_ != CUDA_SUCCESS) {                                             \
            fprintf(stderr, "%s failed: %d (line %d)\n", #call, rc_, __LINE__); \
            _exit(3);                                                          \
        }                                                                      \
    } while (0)

static CUfunction scale;
static CUstream s1, s2;
static CUdeviceptr x, scratch;

static void launch(CUstream s, CUdeviceptr out, CUdeviceptr in) {
    int n = 64;
    void *params[] = {&out, &in, &n};
    CHECK(cuLaunchKernel(scale, 1, 1, 1, 64, 1, 1, 0, s, params, NULL));
}

static void at_exit(void) {
    launch(s2, scratch, x); /* reads x: no wait for s1 */
    CHECK(cuCtxSynchronize());
    CHECK(cuMemFree_v2(x));
    printf("exit handler done\n");
}

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    CUmodule module;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&module, SCALE_PTX));
    CHECK(cuModuleGetFunction(&scale, module, SCALE_NAME));
    CHECK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CHECK(cuMemAlloc_v2(&x, 256));
    CHECK(cuMemAlloc_v2(&scratch, 256));
    CHECK(cuCtxSynchronize());
    atexit(at_exit);
    launch(s1, x, scratch); /* writes x */
    return 0;
}
