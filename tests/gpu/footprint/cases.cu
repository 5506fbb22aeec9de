// Races that a kernel's parameters hide, each with a fixed twin. Usage:
//   cases interior racy|fixed    a raw interior pointer p + n/2 read on stream B while
//                                stream A writes all of p
//   cases struct racy|fixed      a kernel taking its buffer inside a by-value struct,
//                                launched on two streams
//   cases strided racy|fixed     stream A writes the floats p[0::2], stream B p[0::4] (racy)
//                                or p[1::2] (fixed: the bytes never overlap)
//   cases async racy|fixed       stream B reads p only through cp.async (into shared memory)
//                                while stream A writes all of p
//   cases pair racy|fixed        a by-value struct holding two buffers, passed to a kernel on
//                                each stream: both write the first (racy), or each its own
//                                (fixed: CuSan's 13_struct_recursion)
//   cases graph racy|fixed       a graph captured from stream A, forked to B and joined back
//                                (as Warp's wp.ScopedCapture makes one): write_all writes p
//                                on A's branch, fill_args a quarter of p from p + n/4 on B's
//                                (a kernel launched in the graph alone); launched 3 times
//   cases built racy|fixed       the same two kernels as nodes of a graph built with
//                                cudaGraphAddKernelNode, no edge (racy) or one; launched 3 times
//   cases graph_same racy|fixed  as graph, fill_args on both branches (one kernel in two
//                                nodes: measured one node a launch); launched 3 times
//   cases programmatic racy|fixed          one stream: write_all, then a dependent launched
//                                with programmatic stream serialization reading p, which
//                                never waits on its grid dependencies (racy) or waits first
//   cases programmatic_weights racy|fixed  the dependent reads weights q before its wait, p
//                                after it: clean in both twins
//   cases programmatic_early racy|fixed    as programmatic, the dependent waiting on its grid
//                                dependencies: it reads p before its wait (racy) or only
//                                after it (fixed)
//   cases programmatic_graph racy|fixed    programmatic captured from stream A into a graph
//                                (capture joins the two kernel nodes by a programmatic edge)
//   cases programmatic_graph_weights racy|fixed  programmatic_weights captured likewise
//   cases programmatic_built racy|fixed    the two kernels as nodes of a graph built with
//                                cudaGraphAddKernelNode, joined by a programmatic edge from
//                                write_all's programmatic port
//   cases programmatic_node racy|fixed     as programmatic_built, the nodes added with
//                                cudaGraphAddNode, the edge given as the dependent is added
//   cases neighbours racy|fixed  three arrays of 4 KiB side by side in one 32 KiB granule:
//                                stream A copies the first into the second, stream B the
//                                first into the second (racy) or the third (fixed)
//   cases between racy|fixed     stream A sums the first and third arrays of one granule,
//                                stream B writes the third (racy) or the second, between
//                                them (fixed)
//   cases list racy|fixed        a tensor list by value (as PyTorch's multi-tensor kernels take
//                                it): six arrays of 3 KiB in one 32 KiB granule, 2 KiB apart,
//                                512 bytes past a KiB; stream A writes them, stream B reads
//                                the first (racy) or the 2 KiB after it (fixed)
//   cases large_input racy|fixed three rounds of Warp's stream tests: streams A and B each
//                                copy a 40 MB array, plus one, into a 40 MB array of their
//                                own (fixed) or into the same one (racy), with no wait: more
//                                granules than a table holds, read and written
//   cases stateful racy|fixed    three rounds of interior, the writer in a module with
//                                variables (stateful.cu): its count of launches must be 3
//   cases stateful_graph racy|fixed  the same writer, and sum_part on an eighth of what it
//                                writes, captured from two streams into a graph launched
//                                three times: its count must be 3
// "fixed" orders the second stream (or node) after the first, but for strided, pair,
// neighbours, between, list and large_input, whose fixed twins touch other bytes with no wait. Prints a checksum; exit 0.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 4; } } while (0)

extern "C" __global__ void write_all(float* p, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = 1.0f + i % 7;
}

extern "C" __global__ void sum_part(const float* part, int n, float* out) {
    float s = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += part[i];
    atomicAdd(out, s);
}

// Dependents launched with programmatic stream serialization: sum_nowait never waits on its
// grid dependencies, so it may read `in` while the kernel ahead of it still writes it;
// sum_waits waits first; scale_waits reads weights the kernel ahead never writes, then waits;
// read_then_wait reads its first element of `in` before it waits, the rest after.
extern "C" __global__ void sum_nowait(const float* in, int n, float* out) {
    float s = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += in[i];
    atomicAdd(out, s);
}

extern "C" __global__ void sum_waits(const float* in, int n, float* out) {
    cudaGridDependencySynchronize();
    float s = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += in[i];
    atomicAdd(out, s);
}

extern "C" __global__ void scale_waits(const float* weights, const float* in, int n, float* out) {
    float w = weights[threadIdx.x];
    cudaGridDependencySynchronize();
    float s = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += w * in[i];
    atomicAdd(out, s);
}

extern "C" __global__ void read_then_wait(const float* in, int n, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float s = i < n ? in[i] : 0.0f;
    cudaGridDependencySynchronize();
    for (i += gridDim.x * blockDim.x; i < n; i += gridDim.x * blockDim.x) s += in[i];
    atomicAdd(out, s);
}

// Launches `kernel` on `s` allowed to start before the kernel ahead of it completes.
template <typename... Params, typename... Args>
static cudaError_t launch_programmatic(void (*kernel)(Params...), cudaStream_t s, Args... args) {
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(264);
    config.blockDim = dim3(256);
    config.stream = s;
    config.attrs = &attr;
    config.numAttrs = 1;
    return cudaLaunchKernelEx(&config, kernel, args...);
}

struct Args {
    float* out;
    int n;
    float value;
};

extern "C" __global__ void fill_args(Args a) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x) a.out[i] = a.value;
}

extern "C" __global__ void write_strided(float* p, int count, int stride, float value) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) p[i * stride] = value;
}

// Reads its input only with cp.async, which the global-memory instruction class does not
// report: the footprint patch sees it through SANITIZER_INSTRUCTION_MEMCPY_ASYNC.
extern "C" __global__ void sum_async(const float* in, int n, float* out) {
    __shared__ float tile[256];
    float s = 0;
    for (int base = blockIdx.x * blockDim.x; base < n; base += gridDim.x * blockDim.x) {
        int i = base + threadIdx.x;
        if (i < n) __pipeline_memcpy_async(&tile[threadIdx.x], &in[i], sizeof(float));
        __pipeline_commit();
        __pipeline_wait_prior(0);
        if (i < n) s += tile[threadIdx.x];
        __syncthreads();
    }
    atomicAdd(out, s);
}

extern "C" __global__ void copy_plus(const float* in, float* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = in[i] + 1.0f;
}

extern "C" __global__ void sum_two(const float* first, const float* second, int n, float* out) {
    float s = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += first[i] + second[i];
    atomicAdd(out, s);
}

cudaError_t stateful(float* p, int n, float* out, cudaStream_t a, cudaStream_t b, cudaEvent_t done, bool fixed,
                     float* host, unsigned* counted);
cudaError_t stateful_graph(float* p, int n, cudaStream_t a, cudaStream_t b, bool fixed,
                           void (*read)(const float*, int, cudaStream_t), unsigned* counted);

// stateful_graph's reader: sum_part into a sum of its own.
static float* graph_sum;
static void sum_part_on(const float* part, int n, cudaStream_t on) { sum_part<<<264, 256, 0, on>>>(part, n, graph_sum); }

struct Pair {
    float* first;
    float* second;
    int n;
    int which;
    float value;
};

extern "C" __global__ void fill_pair(Pair s) {
    float* out = s.which ? s.second : s.first;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < s.n; i += gridDim.x * blockDim.x) out[i] = s.value;
}

// Arrays of a list, LIST_FLOATS each, one block of write_list each.
#define LIST 6
#define LIST_FLOATS 768
struct List {
    float* arrays[LIST];
};

extern "C" __global__ void write_list(List l) {
    for (int i = threadIdx.x; i < LIST_FLOATS; i += blockDim.x) l.arrays[blockIdx.x][i] = 2.0f;
}

int main(int argc, char** argv) {
    if (argc != 3) { printf("usage: cases interior|struct|strided|async|pair|graph|built|graph_same|programmatic|programmatic_weights|programmatic_early|programmatic_graph|programmatic_graph_weights|programmatic_built|programmatic_node|neighbours|between|list|large_input|stateful|stateful_graph racy|fixed\n"); return 2; }
    bool fixed = strcmp(argv[2], "fixed") == 0;
    const int n = 1 << 22;
    cudaStream_t a, b;
    cudaEvent_t done;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    float *p, *q, *out;
    CHECK(cudaMalloc(&p, n * sizeof(float)));
    CHECK(cudaMalloc(&q, n * sizeof(float)));
    CHECK(cudaMemset(q, 0, n * sizeof(float)));
    CHECK(cudaMalloc(&out, sizeof(float)));
    CHECK(cudaMemset(p, 0, n * sizeof(float)));
    CHECK(cudaMemset(out, 0, sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    float host = 0;
    if (strcmp(argv[1], "interior") == 0) {
        write_all<<<264, 256, 0, a>>>(p, n);
        if (fixed) { CHECK(cudaEventRecord(done, a)); CHECK(cudaStreamWaitEvent(b, done, 0)); }
        sum_part<<<264, 256, 0, b>>>(p + n / 2, n / 2, out);
        CHECK(cudaMemcpyAsync(&host, out, sizeof(float), cudaMemcpyDeviceToHost, b));
        CHECK(cudaStreamSynchronize(b));
    } else if (strcmp(argv[1], "struct") == 0) {
        fill_args<<<264, 256, 0, a>>>(Args{p, n, 1.0f});
        if (fixed) { CHECK(cudaEventRecord(done, a)); CHECK(cudaStreamWaitEvent(b, done, 0)); }
        fill_args<<<264, 256, 0, b>>>(Args{p + n / 4, n / 4, 2.0f});
        CHECK(cudaMemcpyAsync(&host, p + n / 4, sizeof(float), cudaMemcpyDeviceToHost, b));
        CHECK(cudaStreamSynchronize(b));
    } else if (strcmp(argv[1], "strided") == 0) {
        write_strided<<<264, 256, 0, a>>>(p, n / 2, 2, 1.0f);
        if (fixed) write_strided<<<264, 256, 0, b>>>(p + 1, n / 2, 2, 2.0f);
        else write_strided<<<264, 256, 0, b>>>(p, n / 4, 4, 2.0f);
        CHECK(cudaMemcpyAsync(&host, p + 1, sizeof(float), cudaMemcpyDeviceToHost, b));
        CHECK(cudaStreamSynchronize(b));
    } else if (strcmp(argv[1], "async") == 0) {
        write_all<<<264, 256, 0, a>>>(p, n);
        if (fixed) { CHECK(cudaEventRecord(done, a)); CHECK(cudaStreamWaitEvent(b, done, 0)); }
        sum_async<<<264, 256, 0, b>>>(p, n, out);
        CHECK(cudaMemcpyAsync(&host, out, sizeof(float), cudaMemcpyDeviceToHost, b));
        CHECK(cudaStreamSynchronize(b));
    } else if (strcmp(argv[1], "pair") == 0) {
        fill_pair<<<264, 256, 0, a>>>(Pair{p, q, n, 0, 1.0f});
        fill_pair<<<264, 256, 0, b>>>(Pair{p, q, n, fixed ? 1 : 0, 2.0f});
        CHECK(cudaMemcpyAsync(&host, fixed ? q : p, sizeof(float), cudaMemcpyDeviceToHost, b));
        CHECK(cudaStreamSynchronize(b));
    } else if (strcmp(argv[1], "graph") == 0 || strcmp(argv[1], "graph_same") == 0) {
        bool same = strcmp(argv[1], "graph_same") == 0;
        cudaEvent_t fork, join;
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
        CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
        CHECK(cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal));
        CHECK(cudaEventRecord(fork, a));
        CHECK(cudaStreamWaitEvent(b, fork, 0));
        if (same) fill_args<<<264, 256, 0, a>>>(Args{p, n, 1.0f});
        else write_all<<<264, 256, 0, a>>>(p, n);
        if (fixed) { CHECK(cudaEventRecord(done, a)); CHECK(cudaStreamWaitEvent(b, done, 0)); }
        fill_args<<<264, 256, 0, b>>>(Args{p + n / 4, n / 4, 2.0f});
        CHECK(cudaEventRecord(join, b));
        CHECK(cudaStreamWaitEvent(a, join, 0));
        CHECK(cudaStreamEndCapture(a, &graph));
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        for (int i = 0; i < 3; i++) CHECK(cudaGraphLaunch(exec, a));
        CHECK(cudaMemcpyAsync(&host, p + n / 4, sizeof(float), cudaMemcpyDeviceToHost, a));
        CHECK(cudaStreamSynchronize(a));
    } else if (strcmp(argv[1], "built") == 0) {
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        cudaGraphNode_t first, second;
        int count = n;
        Args args{p + n / 4, n / 4, 2.0f};
        void* write_params[] = {&p, &count};
        void* fill_params[] = {&args};
        cudaKernelNodeParams w{(void*)write_all, dim3(264), dim3(256), 0, write_params, nullptr};
        cudaKernelNodeParams f{(void*)fill_args, dim3(264), dim3(256), 0, fill_params, nullptr};
        CHECK(cudaGraphCreate(&graph, 0));
        CHECK(cudaGraphAddKernelNode(&first, graph, nullptr, 0, &w));
        CHECK(cudaGraphAddKernelNode(&second, graph, fixed ? &first : nullptr, fixed ? 1 : 0, &f));
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        for (int i = 0; i < 3; i++) CHECK(cudaGraphLaunch(exec, a));
        CHECK(cudaMemcpyAsync(&host, p + n / 4, sizeof(float), cudaMemcpyDeviceToHost, a));
        CHECK(cudaStreamSynchronize(a));
    } else if (strcmp(argv[1], "programmatic") == 0) {
        // One stream: write_all, then a dependent that reads what it writes.
        write_all<<<264, 256, 0, a>>>(p, n);
        CHECK(fixed ? launch_programmatic(sum_waits, a, (const float*)p, n, out)
                    : launch_programmatic(sum_nowait, a, (const float*)p, n, out));
        CHECK(cudaMemcpyAsync(&host, out, sizeof(float), cudaMemcpyDeviceToHost, a));
        CHECK(cudaStreamSynchronize(a));
    } else if (strcmp(argv[1], "programmatic_weights") == 0) {
        // The dependent reads weights (q) before its wait, the writer's output after it:
        // correct in both twins.
        write_all<<<264, 256, 0, a>>>(p, n);
        CHECK(launch_programmatic(scale_waits, a, (const float*)q, (const float*)p, n, out));
        CHECK(cudaMemcpyAsync(&host, out, sizeof(float), cudaMemcpyDeviceToHost, a));
        CHECK(cudaStreamSynchronize(a));
    } else if (strcmp(argv[1], "programmatic_early") == 0) {
        // One stream: write_all, then a dependent that waits, reading p before its wait
        // (racy) or only after it (fixed).
        write_all<<<264, 256, 0, a>>>(p, n);
        CHECK(fixed ? launch_programmatic(sum_waits, a, (const float*)p, n, out)
                    : launch_programmatic(read_then_wait, a, (const float*)p, n, out));
        CHECK(cudaMemcpyAsync(&host, out, sizeof(float), cudaMemcpyDeviceToHost, a));
        CHECK(cudaStreamSynchronize(a));
    } else if (strcmp(argv[1], "programmatic_graph") == 0 || strcmp(argv[1], "programmatic_graph_weights") == 0) {
        // As programmatic (or programmatic_weights), captured from A: the dependent's node is
        // joined to write_all's by a programmatic edge. Launched once: the sum accumulates.
        bool weights = strcmp(argv[1], "programmatic_graph_weights") == 0;
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CHECK(cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal));
        write_all<<<264, 256, 0, a>>>(p, n);
        if (weights) CHECK(launch_programmatic(scale_waits, a, (const float*)q, (const float*)p, n, out));
        else CHECK(fixed ? launch_programmatic(sum_waits, a, (const float*)p, n, out)
                         : launch_programmatic(sum_nowait, a, (const float*)p, n, out));
        CHECK(cudaStreamEndCapture(a, &graph));
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        CHECK(cudaGraphLaunch(exec, a));
        CHECK(cudaMemcpyAsync(&host, out, sizeof(float), cudaMemcpyDeviceToHost, a));
        CHECK(cudaStreamSynchronize(a));
    } else if (strcmp(argv[1], "programmatic_built") == 0 || strcmp(argv[1], "programmatic_node") == 0) {
        // write_all and the dependent as kernel nodes, the dependent reached through a
        // programmatic edge from write_all's programmatic port (its completion, with
        // cudaGridDependencySynchronize, in the fixed twin). Launched once.
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        cudaGraphNode_t first, second;
        int count = n;
        const float* in = p;
        void* write_params[] = {&p, &count};
        void* sum_params[] = {&in, &count, &out};
        cudaKernelNodeParams w{(void*)write_all, dim3(264), dim3(256), 0, write_params, nullptr};
        cudaKernelNodeParams d{fixed ? (void*)sum_waits : (void*)sum_nowait, dim3(264), dim3(256), 0, sum_params, nullptr};
        cudaGraphEdgeData edge{};
        edge.from_port = cudaGraphKernelNodePortProgrammatic;
        edge.type = cudaGraphDependencyTypeProgrammatic;
        CHECK(cudaGraphCreate(&graph, 0));
        if (strcmp(argv[1], "programmatic_node") == 0) {
            cudaGraphNodeParams wn{}, dn{};
            wn.type = dn.type = cudaGraphNodeTypeKernel;
            wn.kernel.func = w.func;
            dn.kernel.func = d.func;
            wn.kernel.gridDim = dn.kernel.gridDim = dim3(264);
            wn.kernel.blockDim = dn.kernel.blockDim = dim3(256);
            wn.kernel.kernelParams = write_params;
            dn.kernel.kernelParams = sum_params;
#if CUDART_VERSION >= 13000
            CHECK(cudaGraphAddNode(&first, graph, nullptr, nullptr, 0, &wn));
            CHECK(cudaGraphAddNode(&second, graph, &first, &edge, 1, &dn));
#else
            CHECK(cudaGraphAddNode_v2(&first, graph, nullptr, nullptr, 0, &wn));
            CHECK(cudaGraphAddNode_v2(&second, graph, &first, &edge, 1, &dn));
#endif
        } else {
            CHECK(cudaGraphAddKernelNode(&first, graph, nullptr, 0, &w));
            CHECK(cudaGraphAddKernelNode(&second, graph, nullptr, 0, &d));
#if CUDART_VERSION >= 13000
            CHECK(cudaGraphAddDependencies(graph, &first, &second, &edge, 1));
#else
            CHECK(cudaGraphAddDependencies_v2(graph, &first, &second, &edge, 1));
#endif
        }
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        CHECK(cudaGraphLaunch(exec, a));
        CHECK(cudaMemcpyAsync(&host, out, sizeof(float), cudaMemcpyDeviceToHost, a));
        CHECK(cudaStreamSynchronize(a));
    } else if (strcmp(argv[1], "neighbours") == 0 || strcmp(argv[1], "between") == 0) {
        // Arrays of 1024 floats from the first 64 KiB boundary in p: one granule.
        const int len = 1024;
        float* g = p + ((65536 - (uintptr_t)p % 65536) % 65536) / sizeof(float);
        if (strcmp(argv[1], "neighbours") == 0) {
            copy_plus<<<4, 256, 0, a>>>(g, g + len, len);
            copy_plus<<<4, 256, 0, b>>>(g, g + (fixed ? 2 : 1) * len, len);
            CHECK(cudaMemcpyAsync(&host, g + 2 * len, sizeof(float), cudaMemcpyDeviceToHost, b));
        } else {
            sum_two<<<4, 256, 0, a>>>(g, g + 2 * len, len, out);
            write_all<<<4, 256, 0, b>>>(g + (fixed ? 1 : 2) * len, len);
            CHECK(cudaMemcpyAsync(&host, g + len, sizeof(float), cudaMemcpyDeviceToHost, b));
        }
        CHECK(cudaStreamSynchronize(b));
    } else if (strcmp(argv[1], "list") == 0) {
        // From the first 64 KiB boundary in p plus 512 bytes: every array starts 512 bytes
        // past a KiB, in one granule.
        float* g = p + ((65536 - (uintptr_t)p % 65536) % 65536) / sizeof(float) + 128;
        List l;
        for (int k = 0; k < LIST; k++) l.arrays[k] = g + k * 1280;
        write_list<<<LIST, 256, 0, a>>>(l);
        sum_part<<<4, 256, 0, b>>>(fixed ? g + LIST_FLOATS : g, fixed ? 512 : LIST_FLOATS, out);
        CHECK(cudaMemcpyAsync(&host, out, sizeof(float), cudaMemcpyDeviceToHost, b));
        CHECK(cudaStreamSynchronize(b));
    } else if (strcmp(argv[1], "large_input") == 0) {
        const int len = 10 << 20;
        float *in, *first, *second;
        CHECK(cudaMalloc(&in, len * sizeof(float)));
        CHECK(cudaMalloc(&first, len * sizeof(float)));
        CHECK(cudaMalloc(&second, len * sizeof(float)));
        CHECK(cudaMemset(in, 0, len * sizeof(float)));
        CHECK(cudaDeviceSynchronize());
        for (int round = 0; round < 3; round++) {
            copy_plus<<<264, 256, 0, a>>>(in, first, len);
            copy_plus<<<264, 256, 0, b>>>(in, fixed ? second : first, len);
            CHECK(cudaDeviceSynchronize());
        }
        CHECK(cudaMemcpy(&host, fixed ? second : first, sizeof(float), cudaMemcpyDeviceToHost));
    } else if (strcmp(argv[1], "stateful") == 0) {
        unsigned counted = 0;
        CHECK(stateful(p, n, out, a, b, done, fixed, &host, &counted));
        if (counted != 3) { printf("counted_write counted %u launches, not 3\n", counted); return 3; }
    } else if (strcmp(argv[1], "stateful_graph") == 0) {
        unsigned counted = 0;
        graph_sum = out;
        CHECK(stateful_graph(p, n, a, b, fixed, sum_part_on, &counted));
        CHECK(cudaMemcpy(&host, out, sizeof(float), cudaMemcpyDeviceToHost));
        if (counted != 3) { printf("counted_write counted %u launches, not 3\n", counted); return 3; }
    } else {
        printf("unknown case %s\n", argv[1]);
        return 2;
    }
    CHECK(cudaDeviceSynchronize());
    printf("%s %s: %g\n", argv[1], argv[2], host);
    return 0;
}
