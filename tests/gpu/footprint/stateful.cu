// The stateful cases of `cases`, in a module of their own (a graph node of a module with
// variables is measured only where no other node runs that module's code): counted_write
// counts its launches in a __device__ variable and scales what it writes by a __constant__ the
// host sets each round. CCCL's headers add the one-byte tag objects real modules carry. A twin
// must hold the program's values of all of them while a launch runs on it, and give the count
// back.
#include <cub/cub.cuh>
#include <cuda_runtime.h>

__device__ unsigned launches_counted;
__constant__ float scale;

extern "C" __global__ void counted_write(float* p, int n) {
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&launches_counted, 1u);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = scale * (1 + i % 7);
}

extern "C" __global__ void sum_written(const float* part, int n, float* out) {
    float s = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += part[i];
    atomicAdd(out, s);
}

// Three rounds: the host sets scale on a, counted_write writes all of p on a, sum_written sums an eighth of it from p + n/2
// on b, after a's work (fixed) or not; the sum is exact in floats. The launches the program's
// copy of the variable counted, in `counted`.
cudaError_t stateful(float* p, int n, float* out, cudaStream_t a, cudaStream_t b, cudaEvent_t done, bool fixed,
                     float* host, unsigned* counted) {
    cudaError_t e = cudaSuccess;
    for (int round = 0; round < 3 && e == cudaSuccess; round++) {
        float s = 1.0f + round;
        // On a, so that the writer reads it: cudaMemcpyToSymbol from pageable memory may return
        // before the copy lands, and a is a non-blocking stream.
        e = cudaMemcpyToSymbolAsync(scale, &s, sizeof s, 0, cudaMemcpyHostToDevice, a);
        if (e == cudaSuccess) counted_write<<<264, 256, 0, a>>>(p, n);
        if (e == cudaSuccess && fixed) e = cudaEventRecord(done, a);
        if (e == cudaSuccess && fixed) e = cudaStreamWaitEvent(b, done, 0);
        if (e == cudaSuccess) sum_written<<<264, 256, 0, b>>>(p + n / 2, n / 8, out);
        if (e == cudaSuccess) e = cudaMemcpyAsync(host, out, sizeof(float), cudaMemcpyDeviceToHost, b);
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
    }
    if (e == cudaSuccess) e = cudaMemcpyFromSymbol(counted, launches_counted, sizeof *counted);
    return e;
}

// counted_write on a and, forked from a onto b, `read` (a kernel of another module) after it
// (fixed) or not, captured into a graph launched three times. The launches the program's
// copy of the variable counted, in `counted`.
cudaError_t stateful_graph(float* p, int n, cudaStream_t a, cudaStream_t b, bool fixed,
                           void (*read)(const float*, int, cudaStream_t), unsigned* counted) {
    cudaEvent_t fork, done, join;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    float s = 2.0f;
    cudaError_t e = cudaMemcpyToSymbolAsync(scale, &s, sizeof s, 0, cudaMemcpyHostToDevice, a);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&join, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal);
    if (e != cudaSuccess) return e;
    cudaEventRecord(fork, a);
    cudaStreamWaitEvent(b, fork, 0);
    counted_write<<<264, 256, 0, a>>>(p, n);
    if (fixed) {
        cudaEventRecord(done, a);
        cudaStreamWaitEvent(b, done, 0);
    }
    read(p + n / 2, n / 8, b);
    cudaEventRecord(join, b);
    cudaStreamWaitEvent(a, join, 0);
    e = cudaStreamEndCapture(a, &graph);
    if (e == cudaSuccess) e = cudaGraphInstantiate(&exec, graph, 0);
    for (int i = 0; i < 3 && e == cudaSuccess; i++) e = cudaGraphLaunch(exec, a);
    if (e == cudaSuccess) e = cudaStreamSynchronize(a);
    if (e == cudaSuccess) e = cudaMemcpyFromSymbol(counted, launches_counted, sizeof *counted);
    return e;
}
