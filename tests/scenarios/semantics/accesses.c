/* Accesses and races (docs/semantics.md#accesses-and-races): the three hazards. */
#include "semantics.h"

void cross_stream_raw(int fixed) { event_wait(fixed); }

void cross_stream_war(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    reads(s1, x);
    if (fixed) order(s1, s2);
    writes(s2, x);
}

void cross_stream_waw(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    if (fixed) order(s1, s2);
    writes(s2, x);
}
