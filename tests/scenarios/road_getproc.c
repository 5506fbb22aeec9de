/* Road 3: cuGetProcAddress, as cudart and cuda-bindings do: fetch cuGetProcAddress (or
   cuGetProcAddress_v2) by dlsym, then every function by base name, CUDA version and flags.
   Usage: road_getproc v1|v2 FLAGS [LAUNCHES]   (FLAGS 0: legacy stream, 2: per-thread) */
#include <dlfcn.h>
#include <string.h>
#include "workload.h"

typedef CUresult (*GetProcV1)(const char *, void **, int, unsigned long long);
typedef CUresult (*GetProcV2)(const char *, void **, int, unsigned long long, int *);

static GetProcV1 get_v1;
static GetProcV2 get_v2;
static unsigned long long flags;

static void *need(const char *name, int version) {
    void *f = NULL;
    /* Per-thread variants date from CUDA 7.0: cudart asks for them at 7000 or later. */
    if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && version < 7000) version = 7000;
    int status = -1;
    CUresult rc = get_v1 ? get_v1(name, &f, version, flags) : get_v2(name, &f, version, flags, &status);
    if (rc != CUDA_SUCCESS || !f) {
        fprintf(stderr, "cuGetProcAddress(%s, %d, %llu): rc %d status %d\n", name, version, flags, rc, status);
        exit(5);
    }
    return f;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: road_getproc v1|v2 FLAGS [LAUNCHES]\n");
        return 2;
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 5;
    }
    if (strcmp(argv[1], "v1") == 0)
        get_v1 = (GetProcV1)dlsym(lib, "cuGetProcAddress");
    else
        get_v2 = (GetProcV2)dlsym(lib, "cuGetProcAddress_v2");
    flags = strtoull(argv[2], NULL, 0);

    /* cudart asks for cuGetProcAddress itself: the 4-argument ABI at 11030. */
    void *self_v1 = need("cuGetProcAddress", 11030);
    printf("cuGetProcAddress@11030 is dlsym's cuGetProcAddress: %s\n",
           self_v1 == dlsym(lib, "cuGetProcAddress") ? "yes" : "no");
    /* A name the driver does not have: success and NULL (status 1 through v2). */
    void *none = (void *)1;
    int status = -1;
    CUresult rc = get_v1 ? get_v1("cuNoSuchFunction", &none, 12000, flags)
                         : get_v2("cuNoSuchFunction", &none, 12000, flags, &status);
    printf("unknown symbol: rc %d pointer %s status %d\n", rc, none ? "set" : "NULL", status);

    Driver d = {need("cuInit", 2000), need("cuDeviceGet", 2000), need("cuDevicePrimaryCtxRetain", 7000),
                need("cuCtxSetCurrent", 4000), need("cuStreamCreate", 2000),
                need("cuMemAllocAsync", 11020), need("cuMemsetD8Async", 3020),
                need("cuModuleLoadData", 2000), need("cuModuleGetFunction", 2000),
                need("cuLaunchKernel", 4000), need("cuEventCreate", 2000),
                need("cuEventRecord", 2000), need("cuStreamWaitEvent", 3020),
                need("cuMemcpyDtoH", 3020), need("cuMemFreeAsync", 11020),
                need("cuStreamSynchronize", 2000), need("cuStreamDestroy", 4000),
                need("cuEventDestroy", 4000)};
    return run_workload(&d, launches_from(argc, argv, 3));
}
