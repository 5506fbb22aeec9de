/* dlsym answers under the shim: hooked names get hooks, everything else what glibc gives.
   Not linked with -lcuda or -lnccl: the driver and NCCL are opened half-way through. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static const char *owner(void *p) {
    Dl_info info;
    if (!p || !dladdr(p, &info) || !info.dli_fname) return "none";
    const char *slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

int main(void) {
    /* Before the driver is loaded, RTLD_DEFAULT finds no driver function. */
    printf("before load: cuInit %s\n", dlsym(RTLD_DEFAULT, "cuInit") ? "found" : "NULL");
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) { printf("dlopen failed: %s\n", dlerror()); return 5; }
    printf("hooked name: cuLaunchKernel in %s\n", owner(dlsym(lib, "cuLaunchKernel")));
    printf("hooked name via RTLD_DEFAULT: cuInit in %s\n", owner(dlsym(RTLD_DEFAULT, "cuInit")));
    printf("unhooked name: cuDeviceGetName in %s\n", owner(dlsym(lib, "cuDeviceGetName")));
    dlerror();
    void *missing = dlsym(lib, "cuNoSuchFunction");
    printf("missing name: %s, dlerror %s\n", missing ? "found" : "NULL", dlerror() ? "set" : "clear");
    printf("non-CUDA name: strlen is libc's: %s\n", dlsym(RTLD_DEFAULT, "strlen") == (void *)strlen ? "yes" : "no");
    /* NCCL's names: absent until NCCL is loaded, hooked in a dlopen'ed NCCL, still absent from
       the global scope when that NCCL was opened RTLD_LOCAL. */
    printf("before NCCL: ncclAllReduce %s\n", dlsym(RTLD_DEFAULT, "ncclAllReduce") ? "found" : "NULL");
    void *nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!nccl) { printf("dlopen libnccl.so.2 failed: %s\n", dlerror()); return 5; }
    printf("hooked NCCL name: ncclAllReduce in %s\n", owner(dlsym(nccl, "ncclAllReduce")));
    printf("unhooked NCCL name: ncclCommCount in %s\n", owner(dlsym(nccl, "ncclCommCount")));
    printf("local NCCL via RTLD_DEFAULT: ncclAllReduce %s\n", dlsym(RTLD_DEFAULT, "ncclAllReduce") ? "found" : "NULL");
    return 0;
}
