/* Stress: 16 host threads, each with 16 streams, 8 buffers and 4 events of its own, issue a
   pseudo-random mix of kernel launches, copies, memsets, event records and waits, stream
   synchronizations, and stream-ordered frees and allocations: 100,000 operations in all.
   Usage: stress concurrent|serial
   concurrent: the threads run at once; serial: one after another, the same sequences. The
   threads share nothing (no buffer, stream or event, no device-wide synchronization, buffer
   sizes of their own so that no address passes from one to another), so the races found
   must be the same either way. Prints "stress: N operations". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_min.h"

#define THREADS 16
#define STREAMS 16
#define BUFFERS 8
#define EVENTS 4
#define OPS_PER_THREAD 6250 /* 100,000 in all */

static CUcontext ctx;
static CUfunction scale;

static unsigned next(unsigned *state) {
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    return *state;
}

static void launch(CUstream s, CUdeviceptr out, CUdeviceptr in) { LAUNCH_SCALE(scale, s, out, in, 64); }

static void *work(void *arg) {
    int t = (int)(size_t)arg;
    size_t size = 256 * (size_t)(t + 1); /* this thread's own size */
    unsigned state = 0x9e3779b9u ^ (unsigned)(t * 7919 + 1);
    CUstream streams[STREAMS];
    CUevent events[EVENTS];
    CUdeviceptr buffers[BUFFERS];
    CHECK(cuCtxSetCurrent(ctx));
    for (int i = 0; i < STREAMS; i++) CHECK(cuStreamCreate(&streams[i], CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < EVENTS; i++) CHECK(cuEventCreate(&events[i], 0));
    for (int i = 0; i < BUFFERS; i++) {
        CHECK(cuMemAllocAsync(&buffers[i], size, streams[0]));
        CHECK(cuMemsetD8Async(buffers[i], 0, size, streams[0]));
    }
    CHECK(cuStreamSynchronize(streams[0]));
    for (int op = 0; op < OPS_PER_THREAD; op++) {
        unsigned r = next(&state);
        CUstream s = streams[r % STREAMS], s2 = streams[(r >> 4) % STREAMS];
        CUdeviceptr a = buffers[(r >> 8) % BUFFERS], b = buffers[(r >> 12) % BUFFERS];
        CUevent e = events[(r >> 16) % EVENTS];
        switch ((r >> 20) % 8) {
        case 0:
        case 1:
            launch(s, a, b);
            break;
        case 2:
            if (a != b) CHECK(cuMemcpyDtoDAsync_v2(a, b, size, s));
            break;
        case 3:
            CHECK(cuMemsetD8Async(a, (unsigned char)r, size, s));
            break;
        case 4:
        case 5:
            CHECK(cuEventRecord(e, s));
            CHECK(cuStreamWaitEvent(s2, e, 0));
            break;
        case 6:
            CHECK(cuStreamSynchronize(s));
            break;
        case 7: {
            int i = (int)((r >> 8) % BUFFERS);
            CHECK(cuMemFreeAsync(buffers[i], s));
            CHECK(cuMemAllocAsync(&buffers[i], size, s2));
            break;
        }
        }
    }
    for (int i = 0; i < STREAMS; i++) CHECK(cuStreamSynchronize(streams[i]));
    return NULL;
}

int main(int argc, char **argv) {
    int concurrent = argc > 1 && strcmp(argv[1], "concurrent") == 0;
    CUdevice dev;
    CUmodule module;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&module, SCALE_PTX));
    CHECK(cuModuleGetFunction(&scale, module, SCALE_NAME));
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++) {
        if (concurrent) {
            pthread_create(&threads[t], NULL, work, (void *)(size_t)t);
        } else {
            work((void *)(size_t)t);
        }
    }
    if (concurrent)
        for (int t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);
    printf("stress: %d operations\n", THREADS * OPS_PER_THREAD);
    return 0;
}
