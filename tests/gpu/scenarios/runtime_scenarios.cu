// Scenarios as CUDA C++ programs write them: the runtime API (static cudart, which reaches the
// driver through cuGetProcAddress with CUkernel handles), real kernels, racy and fixed twins,
// including the seed documents' examples. Usage:
//   runtime_scenarios SCENARIO racy|fixed
//   runtime_scenarios list     (each scenario and what its racy twin must be reported as)
// Built twice: plain, and with --default-stream per-thread (the per_thread_build scenario).
// Prints only what does not depend on timing, so output is the same with and without streamsan.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "check.cuh"

constexpr int N = 1 << 16;
constexpr size_t BYTES = N * sizeof(float);

__global__ void fill(float *x, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}
__global__ void scale(float *out, const float *in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}
__global__ void axpy(float *y, const float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += x[i];
}

static cudaStream_t nonblocking() {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
}
static float *dalloc() {
    float *p;
    CHECK(cudaMalloc(&p, BYTES));
    CHECK(cudaMemset(p, 0, BYTES));
    CHECK(cudaDeviceSynchronize());
    return p;
}
static void order(cudaStream_t from, cudaStream_t to) {
    cudaEvent_t e;
    CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CHECK(cudaEventRecord(e, from));
    CHECK(cudaStreamWaitEvent(to, e, 0));
}
#define LAUNCH(kernel, stream, ...) kernel<<<N / 256, 256, 0, stream>>>(__VA_ARGS__)

// Warp: "array created on the current stream, kernel launched on another stream without
// wait_stream" (wp.zeros allocates from the stream-ordered pool and memsets on its stream: the
// racy twin uses the array before its allocation and reads it beside the memset's write).
static void warp_array_on_another_stream(bool fixed) {
    cudaStream_t current = nonblocking(), s = nonblocking();
    float *a, *b = dalloc();
    CHECK(cudaMallocAsync(&a, BYTES, current));
    CHECK(cudaMemsetAsync(a, 0, BYTES, current));
    if (fixed) order(current, s);  // s.wait_stream(wp.get_stream())
    LAUNCH(scale, s, b, a, N);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFreeAsync(a, current));
}

// nvmath-python, "stream-ordered deallocation": allocate on s1, use on s2, drop on s1
// without s1 waiting for s2.
static void nvmath_stream_ordered_deallocation(bool fixed) {
    cudaStream_t s1 = nonblocking(), s2 = nonblocking();
    float *a, *r = dalloc();
    CHECK(cudaMallocAsync(&a, BYTES, s1));
    LAUNCH(fill, s1, a, 1.0f, N);
    order(s1, s2);                  // s2.wait_event(s1.record())
    LAUNCH(scale, s2, r, a, N);     // fft(a, stream=s2)
    if (fixed) order(s2, s1);       // s1.wait_event(s2.record())
    CHECK(cudaFreeAsync(a, s1));    // a = None
    CHECK(cudaDeviceSynchronize());
}

static void use_after_free(bool fixed) {
    cudaStream_t s = nonblocking();
    float *a, *r = dalloc();
    CHECK(cudaMallocAsync(&a, BYTES, s));
    LAUNCH(fill, s, a, 1.0f, N);
    if (fixed) LAUNCH(scale, s, r, a, N);
    CHECK(cudaFreeAsync(a, s));
    if (!fixed) LAUNCH(scale, s, r, a, N);
    CHECK(cudaDeviceSynchronize());
}

// CuPy: "s2.wait_event(e2)" before s2 copies what s1 computed.
static void cupy_wait_event(bool fixed) {
    cudaStream_t s1 = nonblocking(), s2 = nonblocking();
    float *a = dalloc(), *b = dalloc(), *host;
    CHECK(cudaMallocHost(&host, BYTES));
    LAUNCH(axpy, s1, a, b, N);  // a_cp = b_cp * a_cp + 8
    if (fixed) order(s1, s2);   // e2 = s1.record(); s2.wait_event(e2)
    CHECK(cudaMemcpyAsync(host, a, BYTES, cudaMemcpyDeviceToHost, s2));  // cp.asnumpy(a_cp) on s2
    CHECK(cudaStreamSynchronize(s2));
    CHECK(cudaFreeHost(host));
}

static void cross_stream_raw(bool fixed) {
    cudaStream_t s1 = nonblocking(), s2 = nonblocking();
    float *x = dalloc(), *y = dalloc();
    LAUNCH(fill, s1, x, 3.0f, N);
    if (fixed) order(s1, s2);
    LAUNCH(scale, s2, y, x, N);
    CHECK(cudaDeviceSynchronize());
}

static void cross_stream_war(bool fixed) {
    cudaStream_t s1 = nonblocking(), s2 = nonblocking();
    float *x = dalloc(), *y = dalloc();
    LAUNCH(scale, s1, y, x, N);
    if (fixed) order(s1, s2);
    LAUNCH(fill, s2, x, 3.0f, N);
    CHECK(cudaDeviceSynchronize());
}

static void cross_stream_waw(bool fixed) {
    cudaStream_t s1 = nonblocking(), s2 = nonblocking();
    float *x = dalloc();
    LAUNCH(fill, s1, x, 1.0f, N);
    if (fixed) order(s1, s2);
    LAUNCH(fill, s2, x, 2.0f, N);
    CHECK(cudaDeviceSynchronize());
}

// The legacy default stream waits for blocking streams, not for non-blocking ones.
static void legacy_default_stream(bool fixed) {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, fixed ? cudaStreamDefault : cudaStreamNonBlocking));
    float *x = dalloc(), *y = dalloc();
    LAUNCH(fill, s, x, 1.0f, N);
    scale<<<N / 256, 256, 0, cudaStreamLegacy>>>(y, x, N);
    CHECK(cudaDeviceSynchronize());
}

// Two host threads on "the default stream": the legacy one is shared, the per-thread ones
// are not ordered with each other. The racy twin is the --default-stream per-thread build
// of the same code (see the build); here `fixed` names the stream explicitly.
static void two_threads_default_streams(bool fixed) {
    float *x = dalloc(), *y = dalloc();
    cudaStream_t first = fixed ? cudaStreamLegacy : cudaStreamPerThread;
    std::thread producer([&] { fill<<<N / 256, 256, 0, first>>>(x, 1.0f, N); });
    producer.join();
    std::thread consumer([&] { scale<<<N / 256, 256, 0, first>>>(y, x, N); });
    consumer.join();
    CHECK(cudaDeviceSynchronize());
}

// The same code with the default stream (0): legacy in a plain build, per-thread in a
// --default-stream per-thread build. Racy only in the per-thread build.
static void default_stream_from_two_threads(bool) {
    float *x = dalloc(), *y = dalloc();
    std::thread producer([&] { fill<<<N / 256, 256, 0, 0>>>(x, 1.0f, N); });
    producer.join();
    std::thread consumer([&] { scale<<<N / 256, 256, 0, 0>>>(y, x, N); });
    consumer.join();
    CHECK(cudaDeviceSynchronize());
}

// cudaMemcpy from pageable memory may return before the data lands.
static void pageable_copy(bool fixed) {
    cudaStream_t s = nonblocking();
    float *x = dalloc(), *y = dalloc();
    static float pageable[N];
    float *pinned;
    CHECK(cudaMallocHost(&pinned, BYTES));
    CHECK(cudaMemcpy(x, fixed ? pinned : pageable, BYTES, cudaMemcpyHostToDevice));
    LAUNCH(scale, s, y, x, N);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFreeHost(pinned));
}

static volatile int host_func_ran;
static void CUDART_CB mark(void *) { host_func_ran = 1; }

// A host function that the host waited for orders the host after its stream's work.
static void host_function(bool fixed) {
    cudaStream_t s1 = nonblocking(), s2 = nonblocking();
    float *x = dalloc(), *y = dalloc();
    host_func_ran = 0;
    LAUNCH(fill, s1, x, 1.0f, N);
    if (fixed) {
        CHECK(cudaLaunchHostFunc(s1, mark, nullptr));
        while (!host_func_ran) {}
    }
    LAUNCH(scale, s2, y, x, N);
    CHECK(cudaDeviceSynchronize());
}

// A captured graph with a fork: the two branches are concurrent unless joined.
static void graph_branches(bool fixed) {
    cudaStream_t s1 = nonblocking(), s2 = nonblocking();
    float *x = dalloc();
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    order(s1, s2);
    LAUNCH(fill, s1, x, 1.0f, N);
    if (fixed) order(s1, s2);
    LAUNCH(fill, s2, x, 2.0f, N);
    order(s2, s1);
    CHECK(cudaStreamEndCapture(s1, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, s1));
    CHECK(cudaStreamSynchronize(s1));
}

// Multi-stream graph capture over buffers allocated and synchronized before it (the
// Warp case where memcheck reports "accessed before it is allocated"): clean both ways
// but for the missing join of the racy twin's consumer stream.
static void graph_after_device_synchronize(bool fixed) {
    cudaStream_t s1 = nonblocking(), s2 = nonblocking(), s3 = nonblocking();
    float *a, *b, *c = dalloc();
    CHECK(cudaMallocAsync(&a, BYTES, s1));
    CHECK(cudaMallocAsync(&b, BYTES, s1));
    CHECK(cudaMemsetAsync(a, 0, BYTES, s1));
    CHECK(cudaMemsetAsync(b, 0, BYTES, s1));
    CHECK(cudaDeviceSynchronize());
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    order(s1, s2);
    LAUNCH(fill, s1, a, 1.0f, N);
    LAUNCH(fill, s2, b, 2.0f, N);
    order(s2, s1);
    CHECK(cudaStreamEndCapture(s1, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, s1));
    if (fixed) order(s1, s3);
    LAUNCH(axpy, s3, c, b, N);
    CHECK(cudaDeviceSynchronize());
}

static const struct {
    const char *name;
    void (*run)(bool fixed);
    const char *racy_twin_reports;
} SCENARIOS[] = {
    {"warp_array_on_another_stream", warp_array_on_another_stream, "use-before-alloc,cross-stream-race"},
    {"nvmath_stream_ordered_deallocation", nvmath_stream_ordered_deallocation, "free-race"},
    {"use_after_free", use_after_free, "use-after-free"},
    {"cupy_wait_event", cupy_wait_event, "cross-stream-race"},
    {"cross_stream_raw", cross_stream_raw, "cross-stream-race"},
    {"cross_stream_war", cross_stream_war, "cross-stream-race"},
    {"cross_stream_waw", cross_stream_waw, "cross-stream-race"},
    {"legacy_default_stream", legacy_default_stream, "cross-stream-race"},
    {"two_threads_default_streams", two_threads_default_streams, "cross-stream-race"},
    {"default_stream_from_two_threads", default_stream_from_two_threads, "clean"},
    {"pageable_copy", pageable_copy, "cross-stream-race"},
    {"host_function", host_function, "cross-stream-race"},
    {"graph_branches", graph_branches, "cross-stream-race"},
    {"graph_after_device_synchronize", graph_after_device_synchronize, "cross-stream-race"},
};

int main(int argc, char **argv) {
    const size_t count = sizeof SCENARIOS / sizeof *SCENARIOS;
    if (argc == 2 && !strcmp(argv[1], "list")) {
        for (size_t i = 0; i < count; i++) printf("%s %s\n", SCENARIOS[i].name, SCENARIOS[i].racy_twin_reports);
        return 0;
    }
    if (argc != 3 || (strcmp(argv[2], "racy") && strcmp(argv[2], "fixed"))) {
        fprintf(stderr, "usage: runtime_scenarios SCENARIO racy|fixed | list\n");
        return 2;
    }
    for (size_t i = 0; i < count; i++) {
        if (!strcmp(argv[1], SCENARIOS[i].name)) {
            SCENARIOS[i].run(!strcmp(argv[2], "fixed"));
            CHECK(cudaDeviceSynchronize());
            printf("%s %s: done\n", argv[1], argv[2]);
            return 0;
        }
    }
    fprintf(stderr, "no scenario %s\n", argv[1]);
    return 2;
}
