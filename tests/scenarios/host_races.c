/* Host races: the host touching pinned or managed memory that an asynchronous copy, memset
   or kernel in flight reads or writes. One scenario per case, each with a racy and a fixed
   twin.
   Usage: host_races SCENARIO racy|fixed   (host_races list: each scenario and what its racy
   twin must be reported as: host-race, or none)
   Driver API only, linked with -lcuda: it runs against the stand-in driver (whose copies to
   and from pinned memory complete at the next wait, so a racy read sees the old bytes) and,
   unchanged, on a GPU. Every scenario prints what the host read, so that a run under
   streamsan can be compared with a run without it.
   Exit status: 0 when the scenario ran, 4 when a driver call failed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <sys/wait.h>
#include "cuda_min.h"

CUresult cuMemHostRegister_v2(void *, size_t, unsigned);
CUresult cuMemHostUnregister(void *);
CUresult cuMemFreeHost(void *);

#define N 256 /* bytes per buffer */

static CUstream s;
static CUdeviceptr d; /* device bytes, all 7 */
static int racy;

static void setup(void) {
    primary_context();
    CHECK(cuMemAlloc_v2(&d, N));
    CHECK(cuMemsetD8_v2(d, 7, N));
    CHECK(cuCtxSynchronize());
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
}

static unsigned char *pinned(size_t bytes) {
    void *p;
    CHECK(cuMemAllocHost_v2(&p, bytes));
    memset(p, 0, bytes);
    return p;
}

/* The host's own loads and stores, which the compiler must not move or drop. Macros, so that
   an access's place is the scenario's own line. */
#define load(p) (*(volatile const unsigned char *)(p))
#define store(p, v) (*(volatile unsigned char *)(p) = (v))

/* A device-to-host copy, then a read of its destination: before the synchronize (racy) or
   after it (fixed). */
static void d2h_read(void) {
    unsigned char *h = pinned(N);
    CHECK(cuMemcpyDtoHAsync_v2(h, d, N, s));
    unsigned char seen = racy ? load(h + 10) : 0;
    CHECK(cuStreamSynchronize(s));
    if (!racy) seen = load(h + 10);
    printf("read %d\n", seen);
}

/* A device-to-host copy in flight while the program goes on issuing work on another stream
   (a prefetcher's copy beside a training step's memsets and device-to-device copies), then a
   read of its destination: before the copy's synchronize (racy) or after it (fixed). Then,
   with nothing in flight, memsets and copies to pageable memory that the host waits for. */
#define BESIDE 1000
static void work_beside_copy(void) {
    unsigned char *h = pinned(N), *pageable = malloc(N);
    CUstream other;
    CUdeviceptr scratch, copied;
    CHECK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    CHECK(cuMemAlloc_v2(&scratch, N));
    CHECK(cuMemAlloc_v2(&copied, N));
    CHECK(cuMemcpyDtoHAsync_v2(h, d, N, s));
    for (int i = 0; i < BESIDE; i++) {
        CHECK(cuMemsetD8Async(scratch, (unsigned char)i, N, other));
        CHECK(cuMemcpyDtoDAsync_v2(copied, scratch, N, other));
    }
    unsigned char seen = racy ? load(h + 10) : 0;
    CHECK(cuStreamSynchronize(s));
    if (!racy) seen = load(h + 10);
    CHECK(cuStreamSynchronize(other));
    for (int i = 0; i < BESIDE; i++) {
        CHECK(cuMemsetD8Async(scratch, (unsigned char)i, N, other));
        CHECK(cuMemcpyDtoH_v2(pageable, copied, N));
    }
    CHECK(cuStreamSynchronize(other));
    printf("read %d, copied %d\n", seen, pageable[0]);
    free(pageable);
}

/* Small device-to-host copies into pinned memory, each beside work on another stream (a
   detection model's counts, copied between its launches), then a read of the last one's
   destination: before the copies' synchronize (racy) or after it (fixed). */
static void copies_beside_work(void) {
    unsigned char *h = pinned(N);
    CUstream other;
    CUdeviceptr scratch;
    CHECK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    CHECK(cuMemAlloc_v2(&scratch, N));
    for (int i = 0; i < BESIDE; i++) {
        CHECK(cuMemsetD8Async(scratch, (unsigned char)i, N, other));
        CHECK(cuMemcpyDtoHAsync_v2(h, d, 64, s));
    }
    unsigned char seen = racy ? load(h + 10) : 0;
    CHECK(cuStreamSynchronize(s));
    if (!racy) seen = load(h + 10);
    CHECK(cuStreamSynchronize(other));
    printf("read %d\n", seen);
}

/* A device-to-host copy, then a read of its destination after synchronizing another stream
   (racy) or the copy's own (fixed). */
static void other_stream(void) {
    unsigned char *h = pinned(N);
    CUstream other;
    CHECK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    CHECK(cuMemcpyDtoHAsync_v2(h, d, N, s));
    CHECK(cuStreamSynchronize(racy ? other : s));
    unsigned char seen = load(h + 10);
    CHECK(cuStreamSynchronize(s));
    printf("read %d\n", seen);
}

/* A device-to-host copy on a stream of a second context, then a read of its destination
   after synchronizing the first context (racy: that does not wait for the second's work) or
   the second (fixed). Portable pinned memory, which every context copies as pinned. */
static void other_context(void) {
    CUdevice dev;
    CUcontext first, second;
    CUstream theirs;
    CUdeviceptr source;
    void *p;
    CHECK(cuCtxGetCurrent(&first));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuMemHostAlloc(&p, N, CU_MEMHOSTALLOC_PORTABLE));
    unsigned char *h = p;
    memset(h, 0, N);
    CHECK(cuCtxCreate_v2(&second, 0, dev));
    CHECK(cuMemAlloc_v2(&source, N));
    CHECK(cuMemsetD8_v2(source, 7, N));
    CHECK(cuCtxSynchronize());
    CHECK(cuStreamCreate(&theirs, CU_STREAM_NON_BLOCKING));
    CHECK(cuMemcpyDtoHAsync_v2(h, source, N, theirs));
    CHECK(cuCtxSetCurrent(racy ? first : second));
    CHECK(cuCtxSynchronize());
    unsigned char seen = load(h + 10);
    CHECK(cuCtxSetCurrent(second));
    CHECK(cuCtxSynchronize());
    printf("read %d\n", seen);
    CHECK(cuCtxSetCurrent(first));
}

/* A device-to-host copy of 64 pages, then the host reads its first, a middle and its last
   byte: before the synchronize (racy) or after it (fixed). By default streamsan guards the
   first 16 pages and the last of a long copy (`host_race_pages`), so the middle read is
   reported only with every page guarded. */
#define LONG (64 * 4096)
static void long_copy(void) {
    unsigned char *h = pinned(LONG);
    CUdeviceptr source;
    CHECK(cuMemAlloc_v2(&source, LONG));
    CHECK(cuMemsetD8_v2(source, 7, LONG));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpyDtoHAsync_v2(h, source, LONG, s));
    if (!racy) CHECK(cuStreamSynchronize(s));
    unsigned first = load(h);
    unsigned middle = load(h + LONG / 2);
    unsigned last = load(h + LONG - 1);
    CHECK(cuStreamSynchronize(s));
    printf("read %u %u %u\n", first, middle, last);
}

/* A write into the destination of a copy in flight. */
static void d2h_write(void) {
    unsigned char *h = pinned(N);
    CHECK(cuMemcpyDtoHAsync_v2(h, d, N, s));
    if (racy) store(h + 1, 5);
    CHECK(cuStreamSynchronize(s));
    if (!racy) store(h + 1, 5);
    printf("h[1] %d\n", load(h + 1));
}

/* A staging buffer refilled for the next round while the copy from it is in flight (fixed:
   an event recorded after the copy is waited on first). */
static void h2d_refill(void) {
    unsigned char *h = pinned(N);
    CUevent done;
    CHECK(cuEventCreate(&done, 0));
    for (int round = 0; round < 3; round++) {
        if (!racy && round > 0) CHECK(cuEventSynchronize(done));
        memset(h, round, N);
        CHECK(cuMemcpyHtoDAsync_v2(d, h, N, s));
        CHECK(cuEventRecord(done, s));
    }
    CHECK(cuStreamSynchronize(s));
    unsigned char back[N];
    CHECK(cuMemcpyDtoH_v2(back, d, N));
    printf("device %d\n", back[0]);
}

/* Reading the source of a host-to-device copy in flight is no race. */
static void h2d_read_source(void) {
    unsigned char *h = pinned(N);
    memset(h, 3, N);
    CHECK(cuMemcpyHtoDAsync_v2(d, h, N, s));
    printf("source %d\n", load(h + 5));
    if (racy) store(h + 5, 4);
    CHECK(cuStreamSynchronize(s));
}

/* Two small pinned allocations share a page (as the driver packs them): the host writes the
   other one while a copy into the first is in flight. Not a race, either twin; the racy twin
   touches the other allocation, the fixed one does not. */
static void shared_page(void) {
    unsigned char *a = pinned(64), *b = pinned(64);
    if (((uintptr_t)a >> 12) != ((uintptr_t)b >> 12)) {
        fprintf(stderr, "the two allocations do not share a page\n");
        exit(3);
    }
    CHECK(cuMemcpyDtoHAsync_v2(a, d, 64, s));
    if (racy) store(b + 3, 9);
    CHECK(cuStreamSynchronize(s));
    printf("a %d b %d\n", load(a), load(b + 3));
}

/* The host waits through an event recorded before the copy (racy) or after it (fixed). */
static void event_before_copy(void) {
    unsigned char *h = pinned(N);
    CUevent e;
    CHECK(cuEventCreate(&e, 0));
    if (racy) CHECK(cuEventRecord(e, s));
    CHECK(cuMemcpyDtoHAsync_v2(h, d, N, s));
    if (!racy) CHECK(cuEventRecord(e, s));
    CHECK(cuEventSynchronize(e));
    printf("read %d\n", load(h));
    CHECK(cuStreamSynchronize(s));
}

/* The host polls cuStreamQuery until the copy is done (fixed), or reads first (racy). */
static void query(void) {
    unsigned char *h = pinned(N);
    CHECK(cuMemcpyDtoHAsync_v2(h, d, N, s));
    unsigned char seen = racy ? load(h) : 0;
    while (cuStreamQuery(s) != CUDA_SUCCESS) {
    }
    if (!racy) seen = load(h);
    printf("read %d\n", seen);
}

/* A host function after the copy sets a flag the host waits for (fixed); before the copy
   (racy), the flag says nothing about the copy. */
static volatile int flag;
static void set_flag(void *unused) {
    (void)unused;
    flag = 1;
}
static void *run_host_functions(void *unused) {
    (void)unused;
    /* The stand-in, told to defer them, runs host functions when asked; a GPU on its own. */
    void (*run)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "standinRunCallbacks");
    if (run) run();
    return NULL;
}
static void host_function(void) {
    unsigned char *h = pinned(N);
    pthread_t driver;
    if (racy) CHECK(cuLaunchHostFunc(s, set_flag, NULL));
    CHECK(cuMemcpyDtoHAsync_v2(h, d, N, s));
    if (!racy) CHECK(cuLaunchHostFunc(s, set_flag, NULL));
    pthread_create(&driver, NULL, run_host_functions, NULL);
    while (!flag) {
    }
    pthread_join(driver, NULL);
    printf("read %d\n", load(h));
    CHECK(cuStreamSynchronize(s));
}

/* The program's own memory, registered with cuMemHostRegister. */
static void registered(void) {
    unsigned char *h = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(cuMemHostRegister_v2(h, 4096, 0));
    CHECK(cuMemcpyDtoHAsync_v2(h, d, N, s));
    if (racy) store(h, 1);
    CHECK(cuStreamSynchronize(s));
    printf("registered %d\n", load(h + 1));
    CHECK(cuMemHostUnregister(h));
}

/* A device-to-host copy, a second stream that waits for it, a small host-to-device copy of
   the same bytes on that stream, then a synchronous one from other pinned bytes on their
   page: a GPU's driver reads such sources on the CPU inside the call (each the call's own
   access; the first is ordered by the wait). Then the host reads the first copy's bytes:
   before its synchronize (racy) or after it (fixed). */
static void driver_reads_source(void) {
    unsigned char *h = pinned(N), *beside = pinned(N);
    CUstream after;
    CUevent copied;
    CUdeviceptr back, back_beside;
    CHECK(cuStreamCreate(&after, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&copied, 0));
    CHECK(cuMemAlloc_v2(&back, N));
    CHECK(cuMemAlloc_v2(&back_beside, N));
    CHECK(cuMemcpyDtoHAsync_v2(h, d, N, s));
    CHECK(cuEventRecord(copied, s));
    CHECK(cuStreamWaitEvent(after, copied, 0));
    CHECK(cuMemcpyHtoDAsync_v2(back, h, N, after));
    CHECK(cuMemcpyHtoD_v2(back_beside, beside, N));
    if (!racy) CHECK(cuStreamSynchronize(s));
    unsigned char seen = load(h + 10);
    CHECK(cuCtxSynchronize());
    printf("read %d, pages shared %d\n", seen, (uintptr_t)h / 4096 == (uintptr_t)beside / 4096);
}

/* Another thread reads the destination: started before the synchronize (racy) or after it. */
static unsigned char *shared;
static void *reader(void *unused) {
    (void)unused;
    printf("thread read %d\n", load(shared + 2));
    return NULL;
}
static void other_thread(void) {
    pthread_t t;
    shared = pinned(N);
    CHECK(cuMemcpyDtoHAsync_v2(shared, d, N, s));
    if (racy) {
        pthread_create(&t, NULL, reader, NULL);
        pthread_join(t, NULL);
    }
    CHECK(cuStreamSynchronize(s));
    if (!racy) {
        pthread_create(&t, NULL, reader, NULL);
        pthread_join(t, NULL);
    }
}

/* The program's own SIGSEGV handler, installed after streamsan loaded, still sees the
   program's own faults (here on a page it protected itself), and sigaction reports it as
   the action in place; host races are still caught. */
static sigjmp_buf escape;
static void own_handler(int signal) {
    (void)signal;
    siglongjmp(escape, 1);
}
static void own_segv_handler(void) {
    struct sigaction action, seen;
    memset(&action, 0, sizeof action);
    action.sa_handler = own_handler;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, NULL);
    sigaction(SIGSEGV, NULL, &seen);
    printf("handler in place: %s\n", seen.sa_handler == own_handler ? "yes" : "no");
    unsigned char *locked = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (sigsetjmp(escape, 1) == 0) {
        store(locked, 1);
        printf("no fault\n");
    } else {
        printf("own fault handled\n");
    }
    d2h_read();
}

/* A child forked while a copy is in flight reads the buffer (it cannot synchronize with its
   parent's stream, and must run as without streamsan); the parent reads before its
   synchronize (racy) or after it. */
static void fork_child(void) {
    unsigned char *h = pinned(N);
    CHECK(cuMemcpyDtoHAsync_v2(h, d, N, s));
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        store(h + 4, 1);
        _exit(load(h + 4) == 1 ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    printf("child %s\n", WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "ran" : "failed");
    unsigned char seen = racy ? load(h + 8) : 0;
    CHECK(cuStreamSynchronize(s));
    if (!racy) seen = load(h + 8);
    printf("read %d\n", seen);
}

/* The racy twin reads and returns at once: the race is in the report all the same. */
static void exit_after(void) {
    unsigned char *h = pinned(N);
    CHECK(cuMemcpyDtoHAsync_v2(h, d, N, s));
    if (!racy) CHECK(cuStreamSynchronize(s));
    printf("read %d\n", load(h + 9));
}

/* A fault of the program's own, with no handler of its own: it dies of SIGSEGV, as without
   streamsan. (One twin: `racy` and `fixed` alike.) */
static void own_crash(void) {
    unsigned char *locked = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *h = pinned(N);
    CHECK(cuMemcpyDtoHAsync_v2(h, d, N, s));
    printf("before the fault\n");
    fflush(stdout);
    store(locked, 1);
    printf("after the fault\n");
}

/* An asynchronous copy into pageable memory completes before it returns: no race. */
static void pageable(void) {
    unsigned char *h = malloc(N);
    CHECK(cuMemcpyDtoHAsync_v2(h, d, N, s));
    if (!racy) CHECK(cuStreamSynchronize(s));
    store(h, 1);
    printf("pageable %d\n", load(h));
    CHECK(cuStreamSynchronize(s));
    free(h);
}

/* The C library's calls that copy between a file or socket and memory, into the destination
   of a device-to-host copy in flight (the host writes it) or out of it (the host reads it),
   before the synchronize (racy) or after it (fixed). The kernel refuses a protected page
   (EFAULT): under streamsan every call must return what it returns natively. IO bytes: more
   than a FILE's buffer, so that fread and fwrite copy straight to and from the caller's
   memory. Scenarios io_CALL, one per call of the table. */
#define IO 8192
ssize_t __read_chk(int, void *, size_t, size_t);
static const struct {
    const char *call;
    int into; /* the call writes the program's memory */
} IO_CALLS[] = {
    {"read", 1}, {"__read_chk", 1}, {"pread", 1}, {"readv", 1}, {"preadv", 1}, {"recv", 1}, {"recvfrom", 1},
    {"recvmsg", 1}, {"fread", 1}, {"write", 0}, {"pwrite", 0}, {"writev", 0}, {"pwritev", 0}, {"send", 0},
    {"sendto", 0}, {"sendmsg", 0}, {"fwrite", 0},
};
static int io_file, io_socket[2];

static ssize_t transfer(const char *call, unsigned char *p) {
    struct iovec iov = {p, IO};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    int sock = io_socket[0];
    FILE *f = NULL;
    ssize_t n = -2;
    if (!strcmp(call, "read")) n = read(sock, p, IO);
    if (!strcmp(call, "__read_chk")) n = __read_chk(sock, p, IO, IO);
    if (!strcmp(call, "pread")) n = pread(io_file, p, IO, 0);
    if (!strcmp(call, "readv")) n = readv(sock, &iov, 1);
    if (!strcmp(call, "preadv")) n = preadv(io_file, &iov, 1, 0);
    if (!strcmp(call, "recv")) n = recv(sock, p, IO, MSG_WAITALL);
    if (!strcmp(call, "recvfrom")) n = recvfrom(sock, p, IO, MSG_WAITALL, NULL, NULL);
    if (!strcmp(call, "recvmsg")) n = recvmsg(sock, &msg, MSG_WAITALL);
    if (!strcmp(call, "write")) n = write(sock, p, IO);
    if (!strcmp(call, "pwrite")) n = pwrite(io_file, p, IO, 0);
    if (!strcmp(call, "writev")) n = writev(sock, &iov, 1);
    if (!strcmp(call, "pwritev")) n = pwritev(io_file, &iov, 1, 0);
    if (!strcmp(call, "send")) n = send(sock, p, IO, 0);
    if (!strcmp(call, "sendto")) n = sendto(sock, p, IO, 0, NULL, 0);
    if (!strcmp(call, "sendmsg")) n = sendmsg(sock, &msg, 0);
    if (!strcmp(call, "fread") || !strcmp(call, "fwrite")) {
        f = fdopen(dup(io_file), "r+");
        n = call[1] == 'r' ? (ssize_t)fread(p, 1, IO, f) : (ssize_t)fwrite(p, 1, IO, f);
        fclose(f);
    }
    return n;
}

static void io(const char *call, int into) {
    static unsigned char payload[IO];
    memset(payload, 42, IO);
    char path[] = "/tmp/streamsan-io-XXXXXX";
    io_file = mkstemp(path);
    unlink(path);
    if (io_file < 0 || pwrite(io_file, payload, IO, 0) != IO || socketpair(AF_UNIX, SOCK_STREAM, 0, io_socket)) {
        perror("io setup");
        exit(3);
    }
    if (into && write(io_socket[1], payload, IO) != IO) exit(3);
    unsigned char *h = pinned(IO);
    CHECK(cuMemcpyDtoHAsync_v2(h, d, N, s));
    if (!racy) CHECK(cuStreamSynchronize(s));
    ssize_t n = transfer(call, h);
    CHECK(cuStreamSynchronize(s));
    unsigned char back = 0;
    if (!into && pread(io_file, &back, 1, 0) == 1 && back == 42) {
        /* The file still holds the payload: the call wrote to the socket. */
        if (read(io_socket[1], &back, 1) != 1) back = 255;
    }
    printf("%s returned %zd, h[0] %d h[%d] %d, copied out %d\n", call, n, load(h), IO - 1, load(h + IO - 1), back);
}

/* A file read refills the staging buffer of a host-to-device copy in flight. */
static void io_refill(void) {
    unsigned char *h = pinned(IO);
    int pipe_ends[2];
    static unsigned char payload[IO];
    memset(payload, 42, IO);
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, pipe_ends) || write(pipe_ends[1], payload, IO) != IO) exit(3);
    memset(h, 1, N);
    CHECK(cuMemcpyHtoDAsync_v2(d, h, N, s));
    if (!racy) CHECK(cuStreamSynchronize(s));
    ssize_t n = read(pipe_ends[0], h, IO);
    CHECK(cuStreamSynchronize(s));
    unsigned char back[N];
    CHECK(cuMemcpyDtoH_v2(back, d, N));
    printf("read returned %zd, device %d\n", n, back[0]);
}

/* A read into other data on the page of a copy's destination: no race (noted), and the read
   succeeds. */
static void io_shared_page(void) {
    unsigned char *a = pinned(64), *b = pinned(64);
    if (((uintptr_t)a >> 12) != ((uintptr_t)b >> 12)) exit(3);
    int ends[2];
    unsigned char payload[32];
    memset(payload, 42, sizeof payload);
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, ends) || write(ends[1], payload, sizeof payload) != sizeof payload) exit(3);
    CHECK(cuMemcpyDtoHAsync_v2(a, d, 64, s));
    ssize_t n = racy ? read(ends[0], b, 32) : 0;
    CHECK(cuStreamSynchronize(s));
    printf("read returned %zd, a %d b %d\n", n, load(a), load(b));
}

/* Kernels, memsets and copies on managed memory, and kernels on pinned memory through its
   own address (zero-copy): `scale(out, in, n)` writes `out` and reads `in`. */
static CUfunction scale;
static void load_scale(void) {
    CUmodule module;
    CHECK(cuModuleLoadData(&module, SCALE_PTX));
    CHECK(cuModuleGetFunction(&scale, module, SCALE_NAME));
}
static unsigned char *managed(size_t bytes) {
    CUdeviceptr p;
    CHECK(cuMemAllocManaged(&p, bytes, 1 /* CU_MEM_ATTACH_GLOBAL */));
    memset((void *)p, 0, bytes);
    return (unsigned char *)p;
}

/* A kernel writes managed memory; the host reads it before the synchronize (racy) or after. */
static void managed_kernel(void) {
    load_scale();
    unsigned char *m = managed(N);
    LAUNCH_SCALE(scale, s, (CUdeviceptr)m, d, N / 4);
    unsigned char seen = racy ? load(m + 8) : 0;
    CHECK(cuStreamSynchronize(s));
    if (!racy) seen = load(m + 8);
    printf("read %d\n", seen);
}

/* The host synchronizes another stream than the kernel's (racy) or the kernel's (fixed). */
static void managed_other_stream(void) {
    load_scale();
    CUstream other;
    CHECK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    unsigned char *m = managed(N);
    LAUNCH_SCALE(scale, s, (CUdeviceptr)m, d, N / 4);
    CHECK(cuStreamSynchronize(racy ? other : s));
    unsigned char seen = load(m);
    CHECK(cuStreamSynchronize(s));
    printf("read %d\n", seen);
}

/* The host refills a kernel's managed input while the kernel may still read it (racy), or
   once a query said the kernel is done (fixed). */
static void managed_input(void) {
    load_scale();
    unsigned char *m = managed(N);
    LAUNCH_SCALE(scale, s, d, (CUdeviceptr)m, N / 4);
    if (!racy)
        while (cuStreamQuery(s) != CUDA_SUCCESS) {
        }
    store(m + 4, 9);
    CHECK(cuStreamSynchronize(s));
    printf("wrote %d\n", load(m + 4));
}

/* An asynchronous memset of managed memory, read before its synchronize (racy) or after. */
static void managed_memset(void) {
    unsigned char *m = managed(N);
    CHECK(cuMemsetD8Async((CUdeviceptr)m, 3, N, s));
    unsigned char seen = racy ? load(m + 1) : 0;
    CHECK(cuStreamSynchronize(s));
    if (!racy) seen = load(m + 1);
    printf("read %d\n", seen);
}

/* A kernel writes pinned memory through its own address (zero-copy), read before the
   synchronize (racy) or after. */
static void mapped_kernel(void) {
    load_scale();
    unsigned char *h = pinned(N);
    LAUNCH_SCALE(scale, s, (CUdeviceptr)h, d, N / 4);
    unsigned char seen = racy ? load(h + 16) : 0;
    CHECK(cuStreamSynchronize(s));
    if (!racy) seen = load(h + 16);
    printf("read %d\n", seen);
}

/* Two extern "C" kernels, whose code alone says how they read: poll_flag(u32 *flag) spins
   until a volatile load of *flag finds it nonzero (XLA's DelayKernel, a GPU timer's hold);
   read_once(u32 *in, u32 *out) copies *in to *out with plain loads and stores. */
static const char FLAG_PTX[] =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry poll_flag(\n  .param .u64 poll_flag_param_0\n)\n{\n"
    "  .reg .pred %p;\n  .reg .b32 %r;\n  .reg .b64 %rd<3>;\n"
    "  ld.param.u64 %rd1, [poll_flag_param_0];\n  cvta.to.global.u64 %rd2, %rd1;\n"
    "POLL:\n  ld.volatile.global.u32 %r, [%rd2];\n  setp.eq.u32 %p, %r, 0;\n  @%p bra POLL;\n"
    "  ret;\n}\n"
    ".visible .entry read_once(\n  .param .u64 read_once_param_0,\n  .param .u64 read_once_param_1\n)\n{\n"
    "  .reg .b32 %r;\n  .reg .b64 %rd<5>;\n"
    "  ld.param.u64 %rd1, [read_once_param_0];\n  ld.param.u64 %rd2, [read_once_param_1];\n"
    "  cvta.to.global.u64 %rd3, %rd1;\n  cvta.to.global.u64 %rd4, %rd2;\n"
    "  ld.global.u32 %r, [%rd3];\n  st.global.u32 [%rd4], %r;\n  ret;\n}\n";

/* The host sets a flag in pinned memory while a kernel polls it through a volatile load:
   how the two talk while the kernel runs, no race (fixed; without the store the kernel never
   ends). The host writes the same bytes while a kernel reads them with a plain load: a race
   (racy). */
static void polled_flag(void) {
    CUmodule module;
    CUfunction kernel;
    CHECK(cuModuleLoadData(&module, FLAG_PTX));
    CHECK(cuModuleGetFunction(&kernel, module, racy ? "read_once" : "poll_flag"));
    unsigned char *flag = pinned(N);
    CUdeviceptr at = (CUdeviceptr)flag;
    void *params[] = {&at, &d};
    CHECK(cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    store(flag, 1);
    CHECK(cuStreamSynchronize(s));
    printf("flag %d\n", load(flag));
}

/* footprint_indirect(u64 base, u64 table): reads (offset, length) at `table` and writes
   `length` bytes of 1 at base + offset, from one thread. Real PTX, so that a GPU measures
   the same footprint as the stand-in's sanitizer, which reads the table as the footprint
   scenarios' kernel of that name does (flags: its third word). */
static const char INDIRECT_PTX[] =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .entry footprint_indirect(\n"
    "  .param .u64 footprint_indirect_param_0,\n  .param .u64 footprint_indirect_param_1\n)\n{\n"
    "  .reg .pred %p;\n  .reg .b16 %h;\n  .reg .b64 %rd<8>;\n"
    "  ld.param.u64 %rd1, [footprint_indirect_param_0];\n"
    "  ld.param.u64 %rd2, [footprint_indirect_param_1];\n"
    "  cvta.to.global.u64 %rd2, %rd2;\n"
    "  ld.global.u64 %rd3, [%rd2];\n  ld.global.u64 %rd4, [%rd2+8];\n"
    "  add.u64 %rd5, %rd1, %rd3;\n  cvta.to.global.u64 %rd5, %rd5;\n  add.u64 %rd6, %rd5, %rd4;\n"
    "  mov.u16 %h, 1;\n"
    "LOOP:\n  setp.ge.u64 %p, %rd5, %rd6;\n  @%p bra DONE;\n"
    "  st.global.u8 [%rd5], %h;\n  add.u64 %rd5, %rd5, 1;\n  bra LOOP;\n"
    "DONE:\n  ret;\n}\n";

/* A kernel given only a table in managed memory, which names the managed bytes it writes
   (a table of pointers); the host reads those bytes before the synchronize (racy) or after,
   and in both twins reads another managed buffer the kernel never touches (no race): at its
   last page, over 64 KiB from the bytes the kernel touches (a measured footprint keeps one
   range per 64 KiB of memory, which would span the two). */
static void managed_table(void) {
    CUmodule module;
    CUfunction indirect;
    CHECK(cuModuleLoadData(&module, INDIRECT_PTX));
    CHECK(cuModuleGetFunction(&indirect, module, "footprint_indirect"));
    unsigned char *data = managed(N), *other = managed(1 << 17);
    unsigned long long *table = (unsigned long long *)managed(3 * sizeof(unsigned long long));
    table[0] = (unsigned long long)(size_t)data;
    table[1] = N;
    table[2] = 2; /* a write */
    unsigned long long base = 0, at = (unsigned long long)(size_t)table;
    void *params[] = {&base, &at};
    CHECK(cuLaunchKernel(indirect, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    unsigned char seen = racy ? load(data + 8) : 0;
    unsigned char untouched = load(other + (1 << 17) - 8);
    CHECK(cuStreamSynchronize(s));
    if (!racy) seen = load(data + 8);
    printf("read %d %d\n", seen, untouched);
}

/* CuSan's 34_negative_array: small managed allocations share a page, a table of pointers
   and the buffer it names. The kernel (footprint_indirect, given a pointer to the table's
   second entry) reads the table and writes the buffer; the host reads the table's first
   entry `loops` + 1 times, bytes the kernel does not use (no race), then the buffer through
   it: before the synchronize when `early`, else after it. */
static void shared_managed_page(int loops, int early) {
    CUmodule module;
    CUfunction indirect;
    CHECK(cuModuleLoadData(&module, INDIRECT_PTX));
    CHECK(cuModuleGetFunction(&indirect, module, "footprint_indirect"));
    unsigned long long *table = (unsigned long long *)managed(4 * sizeof(unsigned long long));
    unsigned char *data = managed(N);
    if (((uintptr_t)table >> 12) != ((uintptr_t)data >> 12)) {
        fprintf(stderr, "the table and the buffer do not share a page\n");
        exit(3);
    }
    table[0] = (unsigned long long)(size_t)data;
    table[1] = table[0]; /* the kernel's triple: offset (from base 0), length, a write */
    table[2] = N;
    table[3] = 2;
    unsigned long long base = 0, at = (unsigned long long)(size_t)(table + 1);
    void *params[] = {&base, &at};
    CHECK(cuLaunchKernel(indirect, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    int same = 1;
    for (int i = 0; i < loops; i++) same &= *(volatile unsigned long long *)table == (size_t)data;
    unsigned char *buffer = (unsigned char *)(size_t)*(volatile unsigned long long *)table;
    unsigned char seen = early ? load(buffer + 8) : 0;
    CHECK(cuStreamSynchronize(s));
    if (!early) seen = load(buffer + 8);
    printf("read %d, table %s\n", seen, same ? "unchanged" : "changed");
}

/* The buffer read before the synchronize (racy) or after it (fixed). */
static void managed_shared_page(void) { shared_managed_page(0, racy); }

/* The table read a thousand times while the kernel runs (racy) or once (fixed), the buffer
   after the synchronize: no race. */
static void managed_table_loop(void) { shared_managed_page(racy ? 1000 : 0, 0); }

static const struct {
    const char *name;
    const char *kind;
    void (*run)(void);
} SCENARIOS[] = {
    {"d2h_read", "host-race", d2h_read},
    {"d2h_write", "host-race", d2h_write},
    {"long_copy", "host-race", long_copy},
    {"work_beside_copy", "host-race", work_beside_copy},
    {"copies_beside_work", "host-race", copies_beside_work},
    {"other_context", "host-race", other_context},
    {"other_stream", "host-race", other_stream},
    {"h2d_refill", "host-race", h2d_refill},
    {"h2d_read_source", "host-race", h2d_read_source},
    {"shared_page", "none", shared_page},
    {"event_before_copy", "host-race", event_before_copy},
    {"query", "host-race", query},
    {"host_function", "host-race", host_function},
    {"registered", "host-race", registered},
    {"driver_reads_source", "host-race", driver_reads_source},
    {"other_thread", "host-race", other_thread},
    {"own_segv_handler", "host-race", own_segv_handler},
    {"fork_child", "host-race", fork_child},
    {"exit_after", "host-race", exit_after},
    {"pageable", "none", pageable},
    {"own_crash", "crash", own_crash},
    {"io_refill", "host-race", io_refill},
    {"io_shared_page", "none", io_shared_page},
    {"managed_kernel", "host-race", managed_kernel},
    {"managed_other_stream", "host-race", managed_other_stream},
    {"managed_input", "host-race", managed_input},
    {"managed_memset", "host-race", managed_memset},
    {"mapped_kernel", "host-race", mapped_kernel},
    {"managed_table", "host-race", managed_table},
    {"polled_flag", "host-race", polled_flag},
    {"managed_shared_page", "host-race", managed_shared_page},
    {"managed_table_loop", "none", managed_table_loop},
};

int main(int argc, char **argv) {
    size_t count = sizeof SCENARIOS / sizeof SCENARIOS[0];
    if (argc == 2 && strcmp(argv[1], "list") == 0) {
        for (size_t i = 0; i < count; i++) printf("%s %s\n", SCENARIOS[i].name, SCENARIOS[i].kind);
        for (size_t i = 0; i < sizeof IO_CALLS / sizeof IO_CALLS[0]; i++) printf("io_%s host-race\n", IO_CALLS[i].call);
        return 0;
    }
    if (argc != 3 || (strcmp(argv[2], "racy") != 0 && strcmp(argv[2], "fixed") != 0)) {
        fprintf(stderr, "usage: host_races SCENARIO racy|fixed | host_races list\n");
        return 2;
    }
    racy = strcmp(argv[2], "racy") == 0;
    for (size_t i = 0; i < count; i++) {
        if (strcmp(argv[1], SCENARIOS[i].name) == 0) {
            setup();
            SCENARIOS[i].run();
            return 0;
        }
    }
    for (size_t i = 0; i < sizeof IO_CALLS / sizeof IO_CALLS[0]; i++) {
        if (strncmp(argv[1], "io_", 3) == 0 && strcmp(argv[1] + 3, IO_CALLS[i].call) == 0) {
            setup();
            io(IO_CALLS[i].call, IO_CALLS[i].into);
            return 0;
        }
    }
    fprintf(stderr, "unknown scenario %s\n", argv[1]);
    return 2;
}
