/* The driver's own cost of a launch: an empty kernel with four pointer and four integer
 * parameters, launched N times in a row on one stream with cuLaunchKernel, the host's
 * time per launch printed (the GPU runs each in well under the time the host takes to
 * launch it). Natively this is the driver's cost; under streamsan --phase-times, the
 * table's "launches in the driver" row is the same driver work measured inside the shim.
 * Build: cc -O2 launch_loop.c -I$CUDA_HOME/include -L$CUDA_HOME/lib64/stubs -lcuda
 * Usage: launch_loop N ROUNDS */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char *ptx =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry k(.param .u64 a, .param .u64 b, .param .u64 c, .param .u64 d,\n"
    "  .param .u32 e, .param .u32 f, .param .u32 g, .param .u32 h) { ret; }\n";

#define CHECK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { fprintf(stderr, "%s: %d\n", #x, r_); exit(1); } } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100000, rounds = argc > 2 ? atoi(argv[2]) : 5;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction k;
    CUstream s;
    CUdeviceptr p[4];
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&mod, ptx));
    CHECK(cuModuleGetFunction(&k, mod, "k"));
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 4; i++) CHECK(cuMemAlloc(&p[i], 1 << 20));
    unsigned e = 1, f = 2, g = 3, h = 4;
    void *args[] = {&p[0], &p[1], &p[2], &p[3], &e, &f, &g, &h};
    for (int i = 0; i < 1000; i++) CHECK(cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
    CHECK(cuStreamSynchronize(s));
    printf("{\"launches\": %d, \"ns_per_launch\": [", n);
    for (int r = 0; r < rounds; r++) {
        double t0 = now();
        for (int i = 0; i < n; i++) CHECK(cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
        double t1 = now();
        CHECK(cuStreamSynchronize(s));
        printf("%s%.0f", r ? ", " : "", (t1 - t0) / n * 1e9);
    }
    printf("]}\n");
    return 0;
}
