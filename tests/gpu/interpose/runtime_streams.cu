// Runtime-API program (static cudart): ITERS rounds on two streams, each round a
// stream-ordered allocation, two kernels, two event records and waits, a copy, a free.
// Built twice: plain, and with --default-stream per-thread.
// Usage: runtime_streams ITERS
#include <cstdio>
#include <cstdlib>

__global__ void scale(float *out, const float *in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); return 3; } } while (0)

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 10;
    const int n = 1 << 16;
    const size_t bytes = n * sizeof(float);
    cudaStream_t s1, s2;
    cudaEvent_t e1, e2;
    float *in, *out, *tmp, host[4];
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&e2, cudaEventDisableTiming));
    CHECK(cudaMalloc(&in, bytes));
    CHECK(cudaMalloc(&out, bytes));
    CHECK(cudaMemset(in, 0, bytes));
    CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < iters; i++) {
        CHECK(cudaMallocAsync(&tmp, bytes, s1));
        scale<<<n / 256, 256, 0, s1>>>(tmp, in, n);
        CHECK(cudaEventRecord(e1, s1));
        CHECK(cudaStreamWaitEvent(s2, e1, 0));
        scale<<<n / 256, 256, 0, s2>>>(out, tmp, n);
        CHECK(cudaEventRecord(e2, s2));
        CHECK(cudaStreamWaitEvent(s1, e2, 0));
        CHECK(cudaMemcpyAsync(host, out, sizeof host, cudaMemcpyDeviceToHost, s1));
        CHECK(cudaFreeAsync(tmp, s1));
    }
    CHECK(cudaStreamSynchronize(s1));
    printf("runtime_streams: %d rounds, out[0] = %g\n", iters, host[0]);
    printf("EXPECT {\"launch\": 2, \"alloc\": 1, \"free\": 1, \"copy\": 1, \"event_record\": 2, \"wait\": 2}\n");
    return 0;
}
