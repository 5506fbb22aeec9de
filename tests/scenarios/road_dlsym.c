/* Road 2: dlopen("libcuda.so.1") and dlsym on its handle, as cudart, PyTorch and cuBLAS
   do. Such a lookup never searches the preloaded shim: only the interposed dlsym can
   answer it with a hook. Usage: road_dlsym [LAUNCHES] */
#include <dlfcn.h>
#include "workload.h"

static void *lib;

static void *need(const char *name) {
    void *f = dlsym(lib, name);
    if (!f) {
        fprintf(stderr, "dlsym(%s): %s\n", name, dlerror());
        exit(5);
    }
    return f;
}

int main(int argc, char **argv) {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 5;
    }
    Driver d = {need("cuInit"), need("cuDeviceGet"), need("cuDevicePrimaryCtxRetain"),
                need("cuCtxSetCurrent"), need("cuStreamCreate"), need("cuMemAllocAsync"),
                need("cuMemsetD8Async"), need("cuModuleLoadData"), need("cuModuleGetFunction"),
                need("cuLaunchKernel"), need("cuEventCreate"), need("cuEventRecord"),
                need("cuStreamWaitEvent"), need("cuMemcpyDtoH_v2"), need("cuMemFreeAsync"),
                need("cuStreamSynchronize"), need("cuStreamDestroy_v2"), need("cuEventDestroy_v2")};
    return run_workload(&d, launches_from(argc, argv, 1));
}
