/* Road 1: a program linked with -lcuda. Its calls bind to the driver's exported names,
   which the preloaded shim exports first. Usage: road_linked [LAUNCHES] */
#include "workload.h"

int main(int argc, char **argv) {
    Driver d = {cuInit, cuDeviceGet, cuDevicePrimaryCtxRetain, cuCtxSetCurrent, cuStreamCreate,
                cuMemAllocAsync, cuMemsetD8Async, cuModuleLoadData, cuModuleGetFunction,
                cuLaunchKernel, cuEventCreate, cuEventRecord, cuStreamWaitEvent, cuMemcpyDtoH_v2,
                cuMemFreeAsync, cuStreamSynchronize, cuStreamDestroy_v2, cuEventDestroy_v2};
    return run_workload(&d, launches_from(argc, argv, 1));
}
