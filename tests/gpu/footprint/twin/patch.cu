// The probe's patch: counts the global accesses of a launch whose kernel has callback data.
#include <sanitizer_patching.h>
#include <stdint.h>

extern "C" __device__ __noinline__ SanitizerPatchResult count_access(void* userdata, uint64_t, void*, uint32_t,
                                                                      uint32_t, const void*) {
    if (userdata) atomicAdd((unsigned long long*)userdata, 1ULL);
    return SANITIZER_PATCH_SUCCESS;
}
