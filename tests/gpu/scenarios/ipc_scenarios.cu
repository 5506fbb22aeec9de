// Two processes sharing memory and events through CUDA IPC, as CUDA C++ programs write them
// (the runtime API: cudaIpcGetMemHandle, cudaIpcOpenMemHandle, cudaIpcGetEventHandle,
// cudaIpcOpenEventHandle, events made with cudaEventInterprocess). The parent forks the child
// before either touches CUDA (a process forked after CUDA started cannot use it), and they
// talk through pipes. Usage:
//   ipc_scenarios SCENARIO racy|fixed
//   ipc_scenarios list     (each scenario and what its racy twin must be reported as;
//                           peer_devices only on a machine with two GPUs)
// Prints only what does not depend on timing, so output is the same with and without streamsan.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

#include "check.cuh"

constexpr int N = 1 << 20;
constexpr size_t BYTES = N * sizeof(float);

// Slow on purpose (each thread writes its element many times): a reader that does not wait
// for it runs while it still writes.
__global__ void fill(float *x, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        for (int k = 0; k < 256; k++) x[i] = v + k - 255;
}
__global__ void scale(float *out, const float *in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}
#define LAUNCH(kernel, stream, ...) kernel<<<N / 256, 256, 0, stream>>>(__VA_ARGS__)

// What the parent hands the child, and the child the parent.
struct Handles {
    cudaIpcMemHandle_t memory;
    cudaIpcEventHandle_t event;
};

// The pipes between the two: `down` parent to child, `up` child to parent.
struct Pipes {
    int down[2], up[2];
};
static void send_bytes(int fd, const void *bytes, size_t n) {
    if (write(fd, bytes, n) != (ssize_t)n) exit(5);
}
static void receive_bytes(int fd, void *bytes, size_t n) {
    if (read(fd, bytes, n) != (ssize_t)n) exit(5);
}

static cudaStream_t nonblocking() {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
}
static cudaEvent_t interprocess_event() {
    cudaEvent_t e;
    CHECK(cudaEventCreateWithFlags(&e, cudaEventInterprocess | cudaEventDisableTiming));
    return e;
}

// The producer's side, in the parent, on device 0: writes x on its stream, records an IPC
// event after the write and hands both handles over; then, in producer_writes_again, writes x
// again on a side stream once the child says its read was issued (the fixed twin first waits
// on the event the child recorded after its read); lets the child finish only then.
static void producer(const Pipes &p, bool again, bool fixed) {
    CHECK(cudaSetDevice(0));
    cudaStream_t s = nonblocking(), side = nonblocking();
    cudaEvent_t written = interprocess_event(), read_done;
    float *x;
    CHECK(cudaMalloc(&x, BYTES));
    LAUNCH(fill, s, x, 1.0f, N);
    CHECK(cudaEventRecord(written, s));
    Handles mine, theirs;
    CHECK(cudaIpcGetMemHandle(&mine.memory, x));
    CHECK(cudaIpcGetEventHandle(&mine.event, written));
    send_bytes(p.down[1], &mine, sizeof mine);
    receive_bytes(p.up[0], &theirs, sizeof theirs);
    if (again) {
        CHECK(cudaStreamWaitEvent(side, written, 0));  // after the first write, in this process
        if (fixed) {
            CHECK(cudaIpcOpenEventHandle(&read_done, theirs.event));
            CHECK(cudaStreamWaitEvent(side, read_done, 0));
        }
        LAUNCH(fill, side, x, 2.0f, N);
    }
    char c = 'g';
    send_bytes(p.down[1], &c, 1);
    receive_bytes(p.up[0], &c, 1);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(x));
}

// The consumer's side, in the child, on `device` (1 in peer_devices): opens both handles,
// reads x into a buffer of its own (the fixed twin of event_not_waited first waits on the
// opened event; producer_writes_again always does), records an IPC event of its own after the
// read and hands its handle back; synchronizes once the parent is done with x.
static void consumer(const Pipes &p, int device, bool waits) {
    Handles theirs, mine;
    receive_bytes(p.down[0], &theirs, sizeof theirs);
    CHECK(cudaSetDevice(device));
    cudaStream_t s = nonblocking();
    cudaEvent_t written, read_done = interprocess_event();
    float *x, *y;
    CHECK(cudaMalloc(&y, BYTES));
    CHECK(cudaIpcOpenMemHandle((void **)&x, theirs.memory, cudaIpcMemLazyEnablePeerAccess));
    CHECK(cudaIpcOpenEventHandle(&written, theirs.event));
    if (waits) CHECK(cudaStreamWaitEvent(s, written, 0));
    LAUNCH(scale, s, y, x, N);
    CHECK(cudaEventRecord(read_done, s));
    memset(&mine, 0, sizeof mine);
    CHECK(cudaIpcGetEventHandle(&mine.event, read_done));
    send_bytes(p.up[1], &mine, sizeof mine);
    char c;
    receive_bytes(p.down[0], &c, 1);
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaIpcCloseMemHandle(x));
    CHECK(cudaFree(y));
    send_bytes(p.up[1], &c, 1);
}

// Forks the child (the consumer) before CUDA is touched, runs the producer, waits.
static void run_pair(int consumer_device, bool waits, bool again, bool fixed) {
    Pipes p;
    if (pipe(p.down) || pipe(p.up)) exit(5);
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) exit(5);
    if (child == 0) {
        consumer(p, consumer_device, waits);
        exit(0);
    }
    producer(p, again, fixed);
    int status;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) exit(6);
}

// The child reads what the parent wrote without waiting on the IPC event recorded after the
// write (fixed: it waits).
static void event_not_waited(bool fixed) { run_pair(0, fixed, false, fixed); }
// The child waits and reads; the parent writes x again on a side stream while the read may
// still run (fixed: its side stream waits on the event the child recorded after the read).
static void producer_writes_again(bool fixed) { run_pair(0, true, true, fixed); }
// event_not_waited with the child on the second GPU, reaching x through peer access.
static void peer_devices(bool fixed) { run_pair(1, fixed, false, fixed); }

struct Scenario {
    const char *name;
    const char *racy_twin_reports;
    void (*run)(bool fixed);
    int devices;
};
static const Scenario SCENARIOS[] = {
    {"event_not_waited", "cross-stream-race", event_not_waited, 1},
    {"producer_writes_again", "cross-stream-race", producer_writes_again, 1},
    {"peer_devices", "cross-stream-race", peer_devices, 2},
};

int main(int argc, char **argv) {
    const size_t count = sizeof SCENARIOS / sizeof *SCENARIOS;
    if (argc == 2 && !strcmp(argv[1], "list")) {
        int devices = 0;
        CHECK(cudaGetDeviceCount(&devices));
        for (size_t i = 0; i < count; i++)
            if (SCENARIOS[i].devices <= devices) printf("%s %s\n", SCENARIOS[i].name, SCENARIOS[i].racy_twin_reports);
        return 0;
    }
    if (argc != 3 || (strcmp(argv[2], "racy") && strcmp(argv[2], "fixed"))) {
        fprintf(stderr, "usage: ipc_scenarios SCENARIO racy|fixed | list\n");
        return 2;
    }
    for (size_t i = 0; i < count; i++) {
        if (!strcmp(argv[1], SCENARIOS[i].name)) {
            SCENARIOS[i].run(!strcmp(argv[2], "fixed"));
            printf("%s %s: done\n", argv[1], argv[2]);
            return 0;
        }
    }
    fprintf(stderr, "no scenario %s\n", argv[1]);
    return 2;
}
