/* NCCL collectives as operations on their streams: a racy and a fixed twin per scenario.
   Usage: nccl SCENARIO racy|fixed   (nccl list: each scenario and what its racy twin must be
   reported as)
   One process, two ranks on two devices (ncclCommInitAll), every collective of both ranks in
   one group, as single-process multi-GPU NCCL requires. Checks are made on rank 0's buffers,
   by rank 0's kernels: scale(out, in) writes `out` and reads `in` (pointer to const).
   Linked with -lnccl, or, built with -DNCCL_DLOPEN, NCCL opened with dlopen and its functions
   found with dlsym, as PyTorch's and CuPy's loaders do. The same program runs against the
   stand-ins and, on a machine with two GPUs, against the real driver and NCCL.
   Exit status: 0 when the scenario ran, 4 when a driver call failed, 5 when an NCCL one did. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_min.h"

/* What nccl.h declares that this program uses. */
typedef struct ncclComm *ncclComm_t;
typedef int ncclResult_t;
#define ncclFloat32 7
#define ncclSum 0

typedef ncclResult_t (*CommInitAll)(ncclComm_t *, int, const int *);
typedef ncclResult_t (*Group)(void);
typedef ncclResult_t (*AllReduce)(const void *, void *, size_t, int, int, ncclComm_t, CUstream);
typedef ncclResult_t (*Broadcast)(const void *, void *, size_t, int, int, ncclComm_t, CUstream);
typedef ncclResult_t (*AllGather)(const void *, void *, size_t, int, ncclComm_t, CUstream);
typedef ncclResult_t (*SendRecv)(void *, size_t, int, int, ncclComm_t, CUstream);

static struct {
    CommInitAll comm_init_all;
    Group group_start, group_end;
    AllReduce all_reduce;
    Broadcast broadcast;
    AllGather all_gather;
    SendRecv send, recv;
} nccl;

#ifdef NCCL_DLOPEN
static void *find(void *lib, const char *name) {
    void *f = dlsym(lib, name);
    if (!f) { fprintf(stderr, "dlsym %s: %s\n", name, dlerror()); exit(5); }
    return f;
}
static void load_nccl(void) {
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "dlopen libnccl.so.2: %s\n", dlerror()); exit(5); }
    nccl.comm_init_all = (CommInitAll)find(lib, "ncclCommInitAll");
    nccl.group_start = (Group)find(lib, "ncclGroupStart");
    nccl.group_end = (Group)find(lib, "ncclGroupEnd");
    nccl.all_reduce = (AllReduce)find(lib, "ncclAllReduce");
    nccl.broadcast = (Broadcast)find(lib, "ncclBroadcast");
    nccl.all_gather = (AllGather)find(lib, "ncclAllGather");
    nccl.send = (SendRecv)find(lib, "ncclSend");
    nccl.recv = (SendRecv)find(lib, "ncclRecv");
}
#else
ncclResult_t ncclCommInitAll(ncclComm_t *, int, const int *);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t ncclAllReduce(const void *, void *, size_t, int, int, ncclComm_t, CUstream);
ncclResult_t ncclBroadcast(const void *, void *, size_t, int, int, ncclComm_t, CUstream);
ncclResult_t ncclAllGather(const void *, void *, size_t, int, ncclComm_t, CUstream);
ncclResult_t ncclSend(const void *, size_t, int, int, ncclComm_t, CUstream);
ncclResult_t ncclRecv(void *, size_t, int, int, ncclComm_t, CUstream);
static void load_nccl(void) {
    nccl.comm_init_all = ncclCommInitAll;
    nccl.group_start = ncclGroupStart;
    nccl.group_end = ncclGroupEnd;
    nccl.all_reduce = ncclAllReduce;
    nccl.broadcast = ncclBroadcast;
    nccl.all_gather = ncclAllGather;
    nccl.send = (SendRecv)ncclSend;
    nccl.recv = ncclRecv;
}
#endif

#define NCCL_CHECK(call)                                                            \
    do {                                                                            \
        ncclResult_t r_ = (call);                                                   \
        if (r_ != 0) {                                                              \
            fprintf(stderr, "%s failed: %d (line %d)\n", #call, r_, __LINE__);      \
            exit(5);                                                                \
        }                                                                           \
    } while (0)

#define N 256           /* bytes per rank's block */
#define COUNT (N / 4)   /* floats per block */

static CUcontext ctx[2];
static ncclComm_t comm[2];
static CUstream s[2];   /* each rank's NCCL stream */
static CUfunction scale;
static CUdeviceptr scratch; /* rank 0's kernels' other buffer */

static void on(int rank) { CHECK(cuCtxSetCurrent(ctx[rank])); }
static CUdeviceptr alloc(int rank, size_t bytes) {
    CUdeviceptr p;
    on(rank);
    CHECK(cuMemAlloc_v2(&p, bytes));
    on(0);
    return p;
}
static CUstream nonblocking(int rank) {
    CUstream t;
    on(rank);
    CHECK(cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
    on(0);
    return t;
}

static void setup(void) {
    int devs[2] = {0, 1}, count = 0;
    CUmodule module;
    CHECK(cuInit(0));
    CHECK(cuDeviceGetCount(&count));
    if (count < 2) { fprintf(stderr, "two devices needed, %d found\n", count); exit(3); }
    for (int r = 0; r < 2; r++) {
        CUdevice dev;
        CHECK(cuDeviceGet(&dev, r));
        CHECK(cuDevicePrimaryCtxRetain(&ctx[r], dev));
    }
    on(0);
    CHECK(cuModuleLoadData(&module, SCALE_PTX));
    CHECK(cuModuleGetFunction(&scale, module, SCALE_NAME));
    load_nccl();
    NCCL_CHECK(nccl.comm_init_all(comm, 2, devs));
    for (int r = 0; r < 2; r++) s[r] = nonblocking(r);
    scratch = alloc(0, N);
}

/* Rank 0's kernels: scale writes `out`, reads `in`. */
static void reads(CUstream t, CUdeviceptr x) { LAUNCH_SCALE(scale, t, scratch, x, 1); }
static void writes(CUstream t, CUdeviceptr x) { LAUNCH_SCALE(scale, t, x, scratch, 1); }
/* `to` waits for what `from` has issued so far. */
static void order(CUstream from, CUstream to) {
    CUevent e;
    CHECK(cuEventCreate(&e, 0));
    CHECK(cuEventRecord(e, from));
    CHECK(cuStreamWaitEvent(to, e, 0));
}

/* torch.distributed's all_reduce(async_op=True) read before work.wait(): the result is read
   on another stream before that stream waits for NCCL's. */
static void all_reduce_read_before_wait(int fixed) {
    CUdeviceptr x[2] = {alloc(0, N), alloc(1, N)};
    CUstream t = nonblocking(0);
    NCCL_CHECK(nccl.group_start());
    for (int r = 0; r < 2; r++) NCCL_CHECK(nccl.all_reduce((void *)x[r], (void *)x[r], COUNT, ncclFloat32, ncclSum, comm[r], s[r]));
    NCCL_CHECK(nccl.group_end());
    if (fixed) order(s[0], t);
    reads(t, x[0]);
}

/* torch.distributed's all_reduce(async_op=True) read on a side stream that waited for the
   current (legacy) stream, before work.wait() made the current stream wait for NCCL's end
   event (racy); the fixed twin waits first. */
static void side_stream_read_before_wait(int fixed) {
    CUdeviceptr x[2] = {alloc(0, N), alloc(1, N)};
    CUstream legacy = NULL, side = nonblocking(0);
    CUevent end;
    CHECK(cuEventCreate(&end, 0));
    writes(legacy, x[0]);
    order(legacy, s[0]);
    NCCL_CHECK(nccl.group_start());
    for (int r = 0; r < 2; r++) NCCL_CHECK(nccl.all_reduce((void *)x[r], (void *)x[r], COUNT, ncclFloat32, ncclSum, comm[r], s[r]));
    NCCL_CHECK(nccl.group_end());
    CHECK(cuEventRecord(end, s[0]));
    if (fixed) CHECK(cuStreamWaitEvent(legacy, end, 0));
    order(legacy, side);
    reads(side, x[0]);
    CHECK(cuStreamWaitEvent(legacy, end, 0));
}

/* The root's source block overwritten while the broadcast may still read it. */
static void broadcast_source_overwritten(int fixed) {
    CUdeviceptr src = alloc(0, N), dst[2] = {alloc(0, N), alloc(1, N)};
    CUstream t = nonblocking(0);
    NCCL_CHECK(nccl.group_start());
    NCCL_CHECK(nccl.broadcast((void *)src, (void *)dst[0], COUNT, ncclFloat32, 0, comm[0], s[0]));
    NCCL_CHECK(nccl.broadcast((void *)dst[1], (void *)dst[1], COUNT, ncclFloat32, 0, comm[1], s[1]));
    NCCL_CHECK(nccl.group_end());
    if (fixed) order(s[0], t);
    writes(t, src);
}

/* An all-gather writes two blocks (one per rank) of a three-block buffer: the racy twin reads
   the last byte of the second block, the fixed twin the first byte of the third, which no
   rank writes. */
static void all_gather_receive_range(int fixed) {
    CUdeviceptr in[2] = {alloc(0, N), alloc(1, N)}, out[2] = {alloc(0, 3 * N), alloc(1, 3 * N)};
    CUstream t = nonblocking(0);
    NCCL_CHECK(nccl.group_start());
    for (int r = 0; r < 2; r++) NCCL_CHECK(nccl.all_gather((void *)in[r], (void *)out[r], COUNT, ncclFloat32, comm[r], s[r]));
    NCCL_CHECK(nccl.group_end());
    reads(t, out[0] + (fixed ? 2 * N : 2 * N - 1));
}

/* Rank 1 sends to rank 0; rank 0 reads what it received on another stream. */
static void recv_read_before_wait(int fixed) {
    CUdeviceptr from = alloc(1, N), into = alloc(0, N);
    CUstream t = nonblocking(0);
    NCCL_CHECK(nccl.group_start());
    NCCL_CHECK(nccl.send((void *)from, COUNT, ncclFloat32, 0, comm[1], s[1]));
    NCCL_CHECK(nccl.recv((void *)into, COUNT, ncclFloat32, 1, comm[0], s[0]));
    NCCL_CHECK(nccl.group_end());
    if (fixed) order(s[0], t);
    reads(t, into);
}

/* A group's calls are issued at ncclGroupEnd: work the program orders before the NCCL stream
   between the all-reduce call and the end of its group comes before the all-reduce. */
static void group_issues_at_end(int fixed) {
    CUdeviceptr x[2] = {alloc(0, N), alloc(1, N)}, y[2] = {alloc(0, N), alloc(1, N)};
    CUstream t = nonblocking(0);
    NCCL_CHECK(nccl.group_start());
    for (int r = 0; r < 2; r++) NCCL_CHECK(nccl.all_reduce((void *)x[r], (void *)y[r], COUNT, ncclFloat32, ncclSum, comm[r], s[r]));
    writes(t, x[0]);
    if (fixed) order(t, s[0]);
    NCCL_CHECK(nccl.group_end());
}

/* A call NCCL refuses does nothing, and tells the model nothing: an all-reduce into x on rank
   0's stream, of both ranks in a group (racy twin), or on no communicator, which NCCL refuses
   (fixed twin; the program ignores its status), then x read on another stream, no wait. */
static void refused_call(int fixed) {
    CUdeviceptr x[2] = {alloc(0, N), alloc(1, N)};
    CUstream t = nonblocking(0);
    if (fixed) {
        ncclResult_t status = nccl.all_reduce((void *)x[0], (void *)x[0], COUNT, ncclFloat32, ncclSum, NULL, s[0]);
        if (status == 0) fprintf(stderr, "unexpected status %d\n", status);
    } else {
        NCCL_CHECK(nccl.group_start());
        for (int r = 0; r < 2; r++) NCCL_CHECK(nccl.all_reduce((void *)x[r], (void *)x[r], COUNT, ncclFloat32, ncclSum, comm[r], s[r]));
        NCCL_CHECK(nccl.group_end());
    }
    reads(t, x[0]);
}

/* A call outside any group is issued at once: on a communicator of rank 0 alone (where NCCL
   needs no group), an all-reduce into x, then x read on another stream. */
static void call_outside_a_group(int fixed) {
    ncclComm_t solo;
    int device = 0;
    NCCL_CHECK(nccl.comm_init_all(&solo, 1, &device));
    CUdeviceptr x = alloc(0, N);
    CUstream t = nonblocking(0);
    NCCL_CHECK(nccl.all_reduce((void *)x, (void *)x, COUNT, ncclFloat32, ncclSum, solo, s[0]));
    if (fixed) order(s[0], t);
    reads(t, x);
}

/* A collective of no elements touches nothing: an all-reduce of x of a block (racy twin) or of
   none (fixed twin), and x read on another stream with no wait. */
static void all_reduce_of_no_elements(int fixed) {
    CUdeviceptr x[2] = {alloc(0, N), alloc(1, N)};
    CUstream t = nonblocking(0);
    NCCL_CHECK(nccl.group_start());
    for (int r = 0; r < 2; r++)
        NCCL_CHECK(nccl.all_reduce((void *)x[r], (void *)x[r], fixed ? 0 : COUNT, ncclFloat32, ncclSum, comm[r], s[r]));
    NCCL_CHECK(nccl.group_end());
    reads(t, x[0]);
}

static const struct {
    const char *name;
    void (*run)(int fixed);
    const char *racy_twin_reports;
} SCENARIOS[] = {
    {"all_reduce_read_before_wait", all_reduce_read_before_wait, "cross-stream-race"},
    {"side_stream_read_before_wait", side_stream_read_before_wait, "cross-stream-race"},
    {"broadcast_source_overwritten", broadcast_source_overwritten, "cross-stream-race"},
    {"all_gather_receive_range", all_gather_receive_range, "cross-stream-race"},
    {"recv_read_before_wait", recv_read_before_wait, "cross-stream-race"},
    {"group_issues_at_end", group_issues_at_end, "cross-stream-race"},
    {"refused_call", refused_call, "cross-stream-race"},
    {"call_outside_a_group", call_outside_a_group, "cross-stream-race"},
    {"all_reduce_of_no_elements", all_reduce_of_no_elements, "cross-stream-race"},
};

int main(int argc, char **argv) {
    size_t count = sizeof SCENARIOS / sizeof *SCENARIOS;
    if (argc == 2 && strcmp(argv[1], "list") == 0) {
        for (size_t i = 0; i < count; i++) printf("%s %s\n", SCENARIOS[i].name, SCENARIOS[i].racy_twin_reports);
        return 0;
    }
    if (argc != 3 || (strcmp(argv[2], "racy") && strcmp(argv[2], "fixed"))) {
        fprintf(stderr, "usage: nccl SCENARIO racy|fixed | nccl list\n");
        return 2;
    }
    for (size_t i = 0; i < count; i++) {
        if (strcmp(argv[1], SCENARIOS[i].name) == 0) {
            setup();
            SCENARIOS[i].run(strcmp(argv[2], "fixed") == 0);
            for (int r = 0; r < 2; r++) {
                on(r);
                CHECK(cuCtxSynchronize());
            }
            printf("%s %s: done\n", argv[1], argv[2]);
            return 0;
        }
    }
    fprintf(stderr, "no scenario %s\n", argv[1]);
    return 2;
}
