/* Kernel handles outlive nothing: after cuModuleUnload the driver hands the same handle
   values out again, for other kernels (XLA's autotuner loads and unloads hundreds of
   modules). Usage: module_reload [same_name]; prints whether the driver reused the handles.
   Exit status: 0, or 4 when a call failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_min.h"

static const char MODULE_A[] =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry _Z5firstPKf(\n  .param .u64 _Z5firstPKf_param_0\n)\n{\n ret;\n}\n";
static const char MODULE_B[] =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry _Z6secondPfS_(\n  .param .u64 _Z6secondPfS__param_0,\n"
    "  .param .u64 _Z6secondPfS__param_1\n)\n{\n ret;\n}\n";
static const char MODULE_K1[] =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry k(\n  .param .u64 k_param_0\n)\n{\n ret;\n}\n";
static const char MODULE_K2[] =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry k(\n  .param .u64 k_param_0,\n  .param .u64 k_param_1\n)\n{\n ret;\n}\n";

int main(int argc, char **argv) {
    CUdevice dev;
    CUcontext ctx;
    CUstream s1, s2;
    CUmodule a, b;
    CUfunction first, second;
    CUdeviceptr x, y;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CHECK(cuMemAlloc_v2(&x, 256));
    CHECK(cuMemAlloc_v2(&y, 256));
    CHECK(cuCtxSynchronize());

    if (argc > 1 && strcmp(argv[1], "same_name") == 0) {
        /* Two extern "C" kernels named k, k(x) in module A and k(y, x) in module B, loaded at
           A's handle once A is unloaded: B's k is not A's although its name, module handle and
           function handle are. A memset of x on s1, then B's k(y, x) on s2 with no wait: a
           race on x, which A's layout (one parameter) would not see. Then first(x) of a module
           loaded all along reads x on s2: a race too, under its name (learnt again after the
           unload, from what the program asked for). */
        CUdeviceptr z;
        CUmodule kept;
        CUfunction kept_first;
        CHECK(cuMemAlloc_v2(&z, 256));
        CHECK(cuModuleLoadData(&kept, MODULE_A));
        CHECK(cuModuleGetFunction(&kept_first, kept, "_Z5firstPKf"));
        void *kept_params[] = {&z};
        CHECK(cuLaunchKernel(kept_first, 1, 1, 1, 32, 1, 1, 0, s1, kept_params, NULL));
        CHECK(cuCtxSynchronize());
        CHECK(cuModuleLoadData(&a, MODULE_K1));
        CHECK(cuModuleGetFunction(&first, a, "k"));
        void *k1_params[] = {&z};
        CHECK(cuLaunchKernel(first, 1, 1, 1, 32, 1, 1, 0, s1, k1_params, NULL));
        CHECK(cuModuleUnload(a));
        CHECK(cuModuleLoadData(&b, MODULE_K2));
        CHECK(cuModuleGetFunction(&second, b, "k"));
        CHECK(cuMemsetD8Async(x, 0, 256, s1));
        void *k2_params[] = {&y, &x};
        CHECK(cuLaunchKernel(second, 1, 1, 1, 32, 1, 1, 0, s2, k2_params, NULL));
        kept_params[0] = &x;
        CHECK(cuLaunchKernel(kept_first, 1, 1, 1, 32, 1, 1, 0, s2, kept_params, NULL));
        CHECK(cuCtxSynchronize());
        printf("module handle %s, function handle %s\n", b == a ? "reused" : "not reused",
               second == first ? "reused" : "not reused");
        return 0;
    }
    /* first(const float *x) reads x on s1; its module is unloaded; second(float *y, float *x),
       at first's handle, writes x on s2 with no wait: a race between first and second. */
    CHECK(cuModuleLoadData(&a, MODULE_A));
    CHECK(cuModuleGetFunction(&first, a, "_Z5firstPKf"));
    void *first_params[] = {&x};
    CHECK(cuLaunchKernel(first, 1, 1, 1, 32, 1, 1, 0, s1, first_params, NULL));
    CHECK(cuModuleUnload(a));

    CHECK(cuModuleLoadData(&b, MODULE_B));
    CHECK(cuModuleGetFunction(&second, b, "_Z6secondPfS_"));
    void *second_params[] = {&y, &x};
    CHECK(cuLaunchKernel(second, 1, 1, 1, 32, 1, 1, 0, s2, second_params, NULL));
    CHECK(cuCtxSynchronize());
    printf("function handle %s\n", second == first ? "reused" : "not reused");
    return 0;
}
