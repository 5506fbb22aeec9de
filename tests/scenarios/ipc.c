/* Two processes sharing memory and an event through CUDA IPC. The parent writes a buffer on
   its stream, records an IPC event after the write and hands both handles to a child forked
   before either touched the driver; the child opens them and reads the buffer on a stream of
   its own.
   Usage: ipc MODE; prints "done" and exits 0.
     racy       the child reads without waiting on the opened event
     fixed      the child waits on the opened event before it reads
     synced     the parent synchronizes with its write before it hands the handles on; the
                child reads without waiting on the event
     overwrite  the child waits and reads; told the read was issued, the parent writes again
                without waiting for it
     answered   as overwrite, but the parent first waits on the IPC event the child recorded
                after its read
     pool       as racy, the buffer allocated from the parent's default pool and shared
                with cuMemPoolExportPointer and cuMemPoolImportPointer
     unseen     one process opens, twice, handles no process of the run exported */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cuda_min.h"

#define N 256

struct handles {
    CUipcMemHandle memory;
    CUipcEventHandle event;
};

static CUstream stream(void) {
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    return s;
}

static void send_bytes(int fd, const void *bytes, size_t n) {
    if (write(fd, bytes, n) != (ssize_t)n) exit(5);
}

static void receive_bytes(int fd, void *bytes, size_t n) {
    if (read(fd, bytes, n) != (ssize_t)n) exit(5);
}

/* The parent: writes, records, exports; in `overwrite`, writes again once the child's read
   was issued; lets the child finish only then. */
static void producer(const char *mode, int to_child, int from_child) {
    primary_context();
    CUstream s = stream();
    CUevent done;
    CUdeviceptr buf;
    struct handles handles;
    CUipcEventHandle answer;
    char told;
    CHECK(cuEventCreate(&done, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
    int pool = !strcmp(mode, "pool");
    if (pool) {
        CUmemoryPool parents;
        CHECK(cuDeviceGetDefaultMemPool(&parents, 0));
        CHECK(cuMemAllocFromPoolAsync(&buf, N, parents, s));
    } else {
        CHECK(cuMemAlloc_v2(&buf, N));
    }
    CHECK(cuMemsetD8Async(buf, 1, N, s));
    CHECK(cuEventRecord(done, s));
    if (!strcmp(mode, "synced")) CHECK(cuStreamSynchronize(s));
    if (pool) {
        CHECK(cuMemPoolExportPointer(handles.memory.reserved, buf));
    } else {
        CHECK(cuIpcGetMemHandle(&handles.memory, buf));
    }
    CHECK(cuIpcGetEventHandle(&handles.event, done));
    send_bytes(to_child, &handles, sizeof handles);
    receive_bytes(from_child, &answer, sizeof answer);
    if (!strcmp(mode, "answered")) {
        CUevent read;
        CHECK(cuIpcOpenEventHandle(&read, answer));
        CHECK(cuStreamWaitEvent(s, read, 0));
    }
    if (!strcmp(mode, "overwrite") || !strcmp(mode, "answered")) CHECK(cuMemsetD8Async(buf, 2, N, s));
    send_bytes(to_child, "g", 1);
    receive_bytes(from_child, &told, 1);
    CHECK(cuStreamSynchronize(s));
    CHECK(cuMemFree_v2(buf));
}

/* The child: opens both handles, reads the buffer (a copy to a buffer of its own), records
   an IPC event of its own after the read and hands its handle back, and synchronizes only
   when the parent is done with the buffer. */
static void consumer(const char *mode, int from_parent, int to_parent) {
    struct handles handles;
    CUdeviceptr x, y;
    CUevent done, read;
    CUipcEventHandle answer;
    char go;
    receive_bytes(from_parent, &handles, sizeof handles);
    primary_context();
    CUstream s = stream();
    CHECK(cuEventCreate(&read, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
    CHECK(cuMemAlloc_v2(&y, N));
    int pool = !strcmp(mode, "pool");
    if (pool) {
        CUmemoryPool childs;
        CHECK(cuDeviceGetDefaultMemPool(&childs, 0));
        CHECK(cuMemPoolImportPointer(&x, childs, handles.memory.reserved));
    } else {
        CHECK(cuIpcOpenMemHandle_v2(&x, handles.memory, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    }
    CHECK(cuIpcOpenEventHandle(&done, handles.event));
    if (strcmp(mode, "racy") && strcmp(mode, "synced") && !pool) CHECK(cuStreamWaitEvent(s, done, 0));
    CHECK(cuMemcpyDtoDAsync_v2(y, x, N, s));
    CHECK(cuEventRecord(read, s));
    CHECK(cuIpcGetEventHandle(&answer, read));
    send_bytes(to_parent, &answer, sizeof answer);
    receive_bytes(from_parent, &go, 1);
    CHECK(cuStreamSynchronize(s));
    CHECK(pool ? cuMemFree_v2(x) : cuIpcCloseMemHandle(x));
    send_bytes(to_parent, "c", 1);
}

/* Handles made up here, as if a process not run under streamsan had sent them (the
   stand-in's: base, size and exporting process in the first 24 bytes). */
static void unseen(void) {
    primary_context();
    for (int i = 0; i < 2; i++) {
        CUipcMemHandle memory;
        CUipcEventHandle event;
        unsigned long long words[3] = {0x7f0000000000ull, N, 1};
        CUdeviceptr x;
        CUevent e;
        memset(&memory, 0, sizeof memory);
        memset(&event, 0, sizeof event);
        memcpy(memory.reserved, words, sizeof words);
        CHECK(cuIpcOpenMemHandle_v2(&x, memory, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
        CHECK(cuIpcOpenEventHandle(&e, event));
        CHECK(cuIpcCloseMemHandle(x));
    }
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "racy";
    if (!strcmp(mode, "unseen")) {
        unseen();
    } else {
        int down[2], up[2], status;
        if (pipe(down) || pipe(up)) return 5;
        pid_t child = fork();
        if (child < 0) return 5;
        if (child == 0) {
            consumer(mode, down[0], up[1]);
            exit(0);
        }
        producer(mode, down[1], up[0]);
        if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) return 6;
    }
    printf("done\n");
    return 0;
}
