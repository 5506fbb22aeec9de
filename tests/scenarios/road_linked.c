/* Road 1: a program linked with -lcuda. Its calls bind to the driver's exported names,
   which the preloaded shim exports first. Usage: road_linked [LAUNCHES] */
#include "workload.h"

CUresult cuInit(unsigned);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, CUstream);
CUresult cuMemsetD8Async(CUdeviceptr, unsigned char, size_t, CUstream);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuStreamSynchronize(CUstream);
CUresult cuStreamDestroy_v2(CUstream);
CUresult cuEventDestroy_v2(CUevent);

int main(int argc, char **argv) {
    Driver d = {cuInit, cuDeviceGet, cuDevicePrimaryCtxRetain, cuCtxSetCurrent, cuStreamCreate,
                cuMemAllocAsync, cuMemsetD8Async, cuModuleLoadData, cuModuleGetFunction,
                cuLaunchKernel, cuEventCreate, cuEventRecord, cuStreamWaitEvent, cuMemcpyDtoH_v2,
                cuMemFreeAsync, cuStreamSynchronize, cuStreamDestroy_v2, cuEventDestroy_v2};
    return run_workload(&d, launches_from(argc, argv, 1));
}
