// Kernels for twin_probe: one that writes its buffer, one that reads module state, one empty.
__device__ int g_scale = 1;

extern "C" __global__ void writes(int* p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = i;
}

extern "C" __global__ void scaled(int* p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = i * g_scale;
}

extern "C" __global__ void empty() {}
