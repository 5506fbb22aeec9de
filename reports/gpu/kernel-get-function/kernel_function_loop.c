/* What cuKernelGetFunction costs its caller: PyTorch asks for a kernel's function before
 * many launches (119 calls a ResNet-18 step), for the same pair every time. N calls in a
 * row for one kernel of a library, the host's time per call printed, ROUNDS times. Run
 * natively and under each streamsan build: the difference is the shim's.
 * Build: cc -O2 kernel_function_loop.c -I$CUDA_HOME/include -L$CUDA_HOME/lib64/stubs -lcuda
 * Usage: kernel_function_loop N ROUNDS */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char *ptx =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry k(.param .u64 a, .param .u32 n) { ret; }\n";

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
    CUlibrary lib;
    CUkernel kernel;
    CUfunction f;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
    CHECK(cuLibraryGetKernel(&kernel, lib, "k"));
    for (int i = 0; i < 1000; i++) CHECK(cuKernelGetFunction(&f, kernel));
    printf("{\"calls\": %d, \"ns_per_call\": [", n);
    for (int r = 0; r < rounds; r++) {
        double t0 = now();
        for (int i = 0; i < n; i++) CHECK(cuKernelGetFunction(&f, kernel));
        double t1 = now();
        printf("%s%.0f", r ? ", " : "", (t1 - t0) / n * 1e9);
    }
    printf("]}\n");
    return 0;
}
