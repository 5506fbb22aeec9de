/* Managed-memory hints (docs/semantics.md#managed-memory-hints). */
#include "semantics.h"

/* Managed-memory hints order nothing and touch nothing: advice, a prefetch and an attachment
   on s2 do not make s2 wait for a kernel on s1. */
#define CU_MEM_ADVISE_SET_PREFERRED_LOCATION 3
void managed_memory_hints(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr m;
    CUmemLocation device0 = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    CHECK(cuMemAllocManaged(&m, N, CU_MEM_ATTACH_GLOBAL));
    writes(s1, m);
    CHECK(cuMemAdvise_v2(m, N, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, device0));
    CHECK(cuMemPrefetchAsync_v2(m, N, device0, 0, s2));
    CHECK(cuStreamAttachMemAsync(s2, m, 0, CU_MEM_ATTACH_SINGLE));
    order_if(fixed, s1, s2);
    reads(s2, m);
}
