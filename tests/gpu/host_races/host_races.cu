// Host races through the CUDA runtime: the host touching pinned memory that a
// cudaMemcpyAsync in flight reads or writes, managed memory a kernel writes, zero-copy memory
// a kernel writes. Each scenario has a racy and a fixed twin.
// Usage: host_races SCENARIO racy|fixed   (host_races list: each scenario and what its racy
// twin must be reported as)
// A racy twin prints only what does not depend on timing (what it reads early is whatever
// the copy had done by then); a fixed twin prints what it read, to compare with a run
// without streamsan.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(call)                                                                      \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            std::fprintf(stderr, "%s failed: %s (line %d)\n", #call, cudaGetErrorString(e_), __LINE__); \
            std::exit(4);                                                                \
        }                                                                                \
    } while (0)

constexpr size_t N = 1 << 20;  // floats per buffer (4 MiB)
static bool racy;

__global__ void fill(float *out, float value, size_t n) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = value;
}

__global__ void accumulate(float *sum, const float *in, size_t n) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) sum[i] += in[i];
}

// Results of a kernel copied back with cudaMemcpyAsync, then read on the host: before the
// stream is synchronized (racy) or after.
static void d2h_read() {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *d, *h;
    CHECK(cudaMalloc(&d, N * sizeof(float)));
    CHECK(cudaMallocHost(&h, N * sizeof(float)));
    fill<<<256, 256, 0, s>>>(d, 2.0f, N);
    CHECK(cudaMemcpyAsync(h, d, N * sizeof(float), cudaMemcpyDeviceToHost, s));
    double sum = 0;
    if (racy) {
        for (size_t i = 0; i < N; i += 4096) sum += h[i];
        volatile double kept = sum;  // the loads must happen: an unused sum lets -O2 drop them
        (void)kept;
        CHECK(cudaStreamSynchronize(s));
        std::printf("read before the synchronize\n");
    } else {
        CHECK(cudaStreamSynchronize(s));
        for (size_t i = 0; i < N; i += 4096) sum += h[i];
        std::printf("sum %.0f\n", sum);
    }
}

// A pinned staging buffer refilled with the next batch while the copy of the previous one
// from it is in flight (fixed: an event recorded after the copy is waited on first).
static void staging_refill() {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *staging, *batch, *total;
    CHECK(cudaMallocHost(&staging, N * sizeof(float)));
    CHECK(cudaMalloc(&batch, N * sizeof(float)));
    CHECK(cudaMalloc(&total, N * sizeof(float)));
    CHECK(cudaMemsetAsync(total, 0, N * sizeof(float), s));
    cudaEvent_t copied;
    CHECK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
    for (int round = 1; round <= 4; round++) {
        if (!racy && round > 1) CHECK(cudaEventSynchronize(copied));
        for (size_t i = 0; i < N; i++) staging[i] = float(round);
        CHECK(cudaMemcpyAsync(batch, staging, N * sizeof(float), cudaMemcpyHostToDevice, s));
        CHECK(cudaEventRecord(copied, s));
        accumulate<<<256, 256, 0, s>>>(total, batch, N);
    }
    float first;
    // s is non-blocking: cudaMemcpy on the legacy stream is not ordered after it (the first
    // GPU run of this program reported that race in the fixed twin too).
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(&first, total, sizeof first, cudaMemcpyDeviceToHost));
    if (racy) std::printf("refilled 4 times\n");
    else std::printf("total %.0f\n", first);
}

// A kernel fills managed memory on a non-blocking stream; the host sums it after
// synchronizing the legacy default stream, which does not order a non-blocking stream (racy),
// or the kernel's stream (fixed).
static void managed_wrong_stream() {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *m;
    CHECK(cudaMallocManaged(&m, N * sizeof(float)));
    fill<<<256, 256, 0, s>>>(m, 3.0f, N);
    CHECK(cudaStreamSynchronize(racy ? 0 : s));
    double sum = 0;
    for (size_t i = 0; i < N; i += 4096) sum += m[i];
    volatile double kept = sum;
    (void)kept;
    CHECK(cudaStreamSynchronize(s));
    if (racy) std::printf("read after the wrong synchronize\n");
    else std::printf("sum %.0f\n", sum);
}

// A kernel on a blocking stream fills managed memory; the host reads it with no
// synchronization (racy), or after synchronizing the legacy default stream, which waits for
// every blocking stream first (fixed).
static void managed_legacy_sync() {
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    float *m;
    CHECK(cudaMallocManaged(&m, N * sizeof(float)));
    fill<<<256, 256, 0, s>>>(m, 5.0f, N);
    if (!racy) CHECK(cudaStreamSynchronize(0));
    float first = m[0];
    volatile float kept = first;
    (void)kept;
    CHECK(cudaDeviceSynchronize());
    if (racy) std::printf("read with no synchronize\n");
    else std::printf("first %.0f\n", first);
}

// A kernel writes zero-copy pinned memory (cudaHostAllocMapped) through its device pointer;
// the host polls the last element before the synchronize (racy) or after (fixed).
static void mapped_kernel() {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *h, *d;
    CHECK(cudaHostAlloc(&h, N * sizeof(float), cudaHostAllocMapped));
    CHECK(cudaHostGetDevicePointer(reinterpret_cast<void **>(&d), h, 0));
    std::memset(h, 0, N * sizeof(float));
    fill<<<256, 256, 0, s>>>(d, 7.0f, N);
    if (!racy) CHECK(cudaStreamSynchronize(s));
    float last = *static_cast<volatile float *>(&h[N - 1]);
    CHECK(cudaStreamSynchronize(s));
    if (racy) std::printf("polled before the synchronize\n");
    else std::printf("last %.0f\n", last);
}

static const struct {
    const char *name, *kind;
    void (*run)();
} SCENARIOS[] = {
    {"d2h_read", "host-race", d2h_read},
    {"staging_refill", "host-race", staging_refill},
    {"managed_wrong_stream", "host-race", managed_wrong_stream},
    {"managed_legacy_sync", "host-race", managed_legacy_sync},
    {"mapped_kernel", "host-race", mapped_kernel},
};

int main(int argc, char **argv) {
    if (argc == 2 && !std::strcmp(argv[1], "list")) {
        for (auto &s : SCENARIOS) std::printf("%s %s\n", s.name, s.kind);
        return 0;
    }
    if (argc != 3) {
        std::fprintf(stderr, "usage: host_races SCENARIO racy|fixed | host_races list\n");
        return 2;
    }
    racy = !std::strcmp(argv[2], "racy");
    for (auto &s : SCENARIOS) {
        if (!std::strcmp(argv[1], s.name)) {
            s.run();
            return 0;
        }
    }
    std::fprintf(stderr, "unknown scenario %s\n", argv[1]);
    return 2;
}
