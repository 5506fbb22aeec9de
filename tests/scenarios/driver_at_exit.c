/* Driver calls in an exit handler, after the main thread's thread-locals are gone (glibc
   destroys them before it runs atexit handlers; Python frameworks free their memory
   there). main writes x on s1; the handler reads it on s2 with no wait, frees it and
   synchronizes. The race must still be reported. Prints "exit handler done". */
#include <stdio.h>
#include <stdlib.h>
/* Its checks run in an exit handler too, where exit() must not be called again. */
#define CHECK_EXIT _exit
#include "cuda_min.h"

static CUfunction scale;
static CUstream s1, s2;
static CUdeviceptr x, scratch;

static void launch(CUstream s, CUdeviceptr out, CUdeviceptr in) { LAUNCH_SCALE(scale, s, out, in, 64); }

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
