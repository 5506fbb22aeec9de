/* One workload, run through whichever road a program took to the driver: the program
   fills a Driver table (by linking, by dlsym, by cuGetProcAddress) and calls
   run_workload. Two streams, a stream-ordered allocation, a memset, an event join,
   LAUNCHES kernel launches, a copy back that checks the data, a stream-ordered free. */
#ifndef STREAMSAN_WORKLOAD_H
#define STREAMSAN_WORKLOAD_H
#include <stdio.h>
#include <stdlib.h>
#include "cuda_min.h"

typedef struct {
    CUresult (*Init)(unsigned);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*MemAllocAsync)(CUdeviceptr *, size_t, CUstream);
    CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void **, void **);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*StreamWaitEvent)(CUstream, CUevent, unsigned);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*MemFreeAsync)(CUdeviceptr, CUstream);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*EventDestroy)(CUevent);
} Driver;

static int run_workload(const Driver *d, int launches) {
    CUdevice dev;
    CUcontext ctx;
    CUstream s1, s2;
    CUevent ready, done;
    CUmodule module;
    CUfunction scale;
    CUdeviceptr buf, out;
    enum { N = 256 };
    unsigned char host[N];
    int n = N / 4;

    CHECK(d->Init(0));
    CHECK(d->DeviceGet(&dev, 0));
    CHECK(d->DevicePrimaryCtxRetain(&ctx, dev));
    CHECK(d->CtxSetCurrent(ctx));
    CHECK(d->StreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CHECK(d->StreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CHECK(d->EventCreate(&ready, 0));
    CHECK(d->EventCreate(&done, 0));
    CHECK(d->ModuleLoadData(&module, SCALE_PTX));
    CHECK(d->ModuleGetFunction(&scale, module, SCALE_NAME));

    CHECK(d->MemAllocAsync(&buf, N, s1));
    CHECK(d->MemAllocAsync(&out, N, s1));
    CHECK(d->MemsetD8Async(buf, 0x5a, N, s1));
    CHECK(d->EventRecord(ready, s1));
    CHECK(d->StreamWaitEvent(s2, ready, 0));
    for (int i = 0; i < launches; i++) {
        void *params[] = {&out, &buf, &n};
        CHECK(d->LaunchKernel(scale, 1, 1, 1, 64, 1, 1, 0, s2, params, NULL));
    }
    CHECK(d->EventRecord(done, s2));
    CHECK(d->StreamWaitEvent(s1, done, 0));
    CHECK(d->StreamSynchronize(s1));
    CHECK(d->MemcpyDtoH(host, buf, N));
    CHECK(d->MemFreeAsync(buf, s1));
    CHECK(d->MemFreeAsync(out, s1));
    CHECK(d->StreamSynchronize(s1));
    CHECK(d->EventDestroy(ready));
    CHECK(d->EventDestroy(done));
    CHECK(d->StreamDestroy(s1));
    CHECK(d->StreamDestroy(s2));
    printf("workload: %d launches, first byte 0x%02x\n", launches, host[0]);
    return host[0] == 0x5a ? 0 : 4;
}

static int launches_from(int argc, char **argv, int index) {
    return argc > index ? atoi(argv[index]) : 3;
}
#endif
