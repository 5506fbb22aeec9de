// Whether a module's twin can carry the footprint engine's patch while the program's own module
// runs unpatched: the same image loaded twice, only the twin patched, a measured launch sent to
// the twin's function. Prints one JSON object; every check says what it expected.
//
//   twin_probe MODE KERNELS_CUBIN PATCH_FATBIN      MODE: native | twin | twin+launch-domain
//
// native: no Compute Sanitizer API at all (the cost baseline). twin: subscribed with the
// resource domain only, twins patched. twin+launch-domain: also the launch domain, as the
// engine subscribes today (a callback at every launch).
#include <cuda.h>
#include <sanitizer.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static int failures = 0;
static std::string json = "{";

#define CU(call)                                                                   \
    do {                                                                           \
        CUresult r_ = (call);                                                      \
        if (r_ != CUDA_SUCCESS) {                                                  \
            const char* s_ = nullptr;                                              \
            cuGetErrorName(r_, &s_);                                               \
            fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #call, s_);    \
            exit(2);                                                               \
        }                                                                          \
    } while (0)
#define SAN(call)                                                                  \
    do {                                                                           \
        SanitizerResult r_ = (call);                                               \
        if (r_ != SANITIZER_SUCCESS) {                                             \
            const char* s_ = nullptr;                                              \
            sanitizerGetResultString(r_, &s_);                                     \
            fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #call, s_);    \
            exit(3);                                                               \
        }                                                                          \
    } while (0)

static void field(const char* name, const std::string& value) {
    if (json.size() > 1) json += ", ";
    json += "\"" + std::string(name) + "\": " + value;
}
static void check(const char* name, unsigned long long got, unsigned long long expected) {
    bool ok = got == expected;
    failures += !ok;
    char buf[160];
    snprintf(buf, sizeof buf, "{\"got\": %llu, \"expected\": %llu, \"ok\": %s}", got, expected, ok ? "true" : "false");
    field(name, buf);
}
static void figure(const char* name, double value) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.4f", value);
    field(name, buf);
}

static std::vector<char> read_file(const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    std::vector<char> bytes;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
    fclose(f);
    return bytes;
}

static int modules_loaded = 0;
static int launches_seen = 0;
// The module the next load callback patches (the twin's), as the engine patches: from inside
// the callback, the patches added once per context.
static const char* patch_path = nullptr;
static const char* patch_function = nullptr;
static std::vector<char> patch_image;
static int patch_step = 0;
static bool patch_next = false;
static CUmodule last_patched = nullptr;
static SanitizerResult patch_status = SANITIZER_SUCCESS;
static CUcontext patches_added_to = nullptr;
static void SANITIZERAPI on_callback(void*, Sanitizer_CallbackDomain domain, Sanitizer_CallbackId cbid,
                                     const void* data) {
    if (domain == SANITIZER_CB_DOMAIN_RESOURCE && cbid == SANITIZER_CBID_RESOURCE_MODULE_LOADED) {
        modules_loaded++;
        auto* m = (const Sanitizer_ResourceModuleData*)data;
        if (patch_next) {
            patch_next = false;
            SanitizerResult r = SANITIZER_SUCCESS;
            patch_step = 1;
            if (patches_added_to != m->context) {
                r = sanitizerAddPatches(patch_image.data(), m->context);
                if (r == SANITIZER_SUCCESS) patches_added_to = m->context;
            }
            if (r == SANITIZER_SUCCESS) {
                patch_step = 2;
                r = sanitizerPatchInstructions(SANITIZER_INSTRUCTION_GLOBAL_MEMORY_ACCESS, m->module, patch_function);
            }
            if (r == SANITIZER_SUCCESS) {
                patch_step = 3;
                r = sanitizerPatchModule(m->module);
            }
            patch_status = r;
            last_patched = m->module;
        }
    }
    if (domain == SANITIZER_CB_DOMAIN_LAUNCH && cbid == SANITIZER_CBID_LAUNCH_BEGIN) launches_seen++;
}

// What a launch's patch left in its callback data: the first word (count_access's count), or,
// for another patch (the engine's table), how many 32-bit words it made nonzero. Zeroed after.
static const size_t DATA_BYTES = 1 << 16;
static bool counting = true;
static unsigned long long read_counter(CUdeviceptr counter) {
    std::vector<unsigned> words(DATA_BYTES / 4);
    CU(cuMemcpyDtoH(words.data(), counter, DATA_BYTES));
    CU(cuMemsetD8(counter, 0, DATA_BYTES));
    if (counting) return words[0] | ((unsigned long long)words[1] << 32);
    unsigned long long nonzero = 0;
    for (unsigned w : words) nonzero += w != 0;
    return nonzero;
}

// Whether a twin launch was measured: count_access counted every store, or the engine's patch
// filled part of its table.
static int measured(unsigned long long got, int n) { return counting ? got == (unsigned long long)n : got > 0; }

// Microseconds a launch of `f` takes to submit, median of `rounds` rounds of `per` launches.
static double submit_us(CUfunction f, CUstream s, int rounds, int per) {
    std::vector<double> us;
    for (int r = 0; r < rounds; r++) {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < per; i++) CU(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr));
        auto t1 = std::chrono::steady_clock::now();
        CU(cuStreamSynchronize(s));
        us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / per);
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
}

// Microseconds of GPU time for `per` back-to-back launches of writes over n ints.
static double device_us(CUfunction f, CUstream s, CUdeviceptr p, int n, int per) {
    void* args[] = {&p, &n};
    CUevent a, b;
    CU(cuEventCreate(&a, 0));
    CU(cuEventCreate(&b, 0));
    CU(cuEventRecord(a, s));
    for (int i = 0; i < per; i++) CU(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr));
    CU(cuEventRecord(b, s));
    CU(cuEventSynchronize(b));
    float ms = 0;
    CU(cuEventElapsedTime(&ms, a, b));
    cuEventDestroy(a);
    cuEventDestroy(b);
    return ms * 1000.0 / per;
}

int main(int argc, char** argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s native|twin|twin+launch-domain KERNELS_CUBIN PATCH_FATBIN FUNCTION\n", argv[0]);
        return 2;
    }
    std::string mode = argv[1];
    bool sanitizer = mode != "native";
    std::vector<char> image = read_file(argv[2]);
    field("mode", "\"" + mode + "\"");

    // The API must subscribe before the driver starts, as the engine does from the shim's
    // constructor: patches added to a context made before it are refused.
    Sanitizer_SubscriberHandle sub = nullptr;
    if (sanitizer) {
        SAN(sanitizerSubscribe(&sub, on_callback, nullptr));
        SAN(sanitizerEnableDomain(1, sub, SANITIZER_CB_DOMAIN_RESOURCE));
        if (mode == "twin+launch-domain") SAN(sanitizerEnableDomain(1, sub, SANITIZER_CB_DOMAIN_LAUNCH));
    }
    CU(cuInit(0));
    CUdevice dev;
    CU(cuDeviceGet(&dev, 0));
    char name[128];
    CU(cuDeviceGetName(name, sizeof name, dev));
    field("gpu", "\"" + std::string(name) + "\"");
    CUcontext ctx;
    CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU(cuCtxSetCurrent(ctx));


    // The program's module and its twin: one image, loaded twice.
    patch_path = argv[3];
    patch_image = read_file(patch_path);
    patch_function = argv[4];
    counting = std::string(patch_function) == "count_access";
    field("patch_function", "\"" + std::string(patch_function) + "\"");
    CUmodule own, twin;
    CU(cuModuleLoadData(&own, image.data()));
    patch_next = sanitizer;
    CU(cuModuleLoadData(&twin, image.data()));
    if (sanitizer) {
        check("twin_patched_in_its_load_callback", last_patched == twin, 1);
        check("twin_patch_status", patch_status, SANITIZER_SUCCESS);
        field("twin_patch_step", std::to_string(patch_step));
    }
    check("twin_is_a_second_module", own != twin, 1);
    CUfunction own_writes, twin_writes, own_scaled, twin_scaled, own_empty;
    CU(cuModuleGetFunction(&own_writes, own, "writes"));
    CU(cuModuleGetFunction(&twin_writes, twin, "writes"));
    CU(cuModuleGetFunction(&own_scaled, own, "scaled"));
    CU(cuModuleGetFunction(&twin_scaled, twin, "scaled"));
    CU(cuModuleGetFunction(&own_empty, own, "empty"));
    check("twin_function_differs", own_writes != twin_writes, 1);

    CUstream s;
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    const int n = 1 << 20;
    CUdeviceptr p, counter;
    CU(cuMemAlloc(&p, n * sizeof(int)));
    CU(cuMemAlloc(&counter, DATA_BYTES));
    CU(cuMemsetD8(counter, 0, DATA_BYTES));
    int nn = n;
    void* args[] = {&p, &nn};

    if (sanitizer) {
        field("modules_loaded_callbacks", std::to_string(modules_loaded));
        SAN(sanitizerSetCallbackData(twin_writes, (void*)counter));
        SAN(sanitizerSetCallbackData(twin_scaled, (void*)counter));

        // The program's own launch runs unpatched: nothing counted.
        CU(cuLaunchKernel(own_writes, n / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr));
        CU(cuStreamSynchronize(s));
        check("own_launch_counts_nothing", read_counter(counter), 0);
        // The twin's launch, same parameters, grid and stream: every store counted once.
        CU(cuMemsetD8(p, 0xff, n * sizeof(int)));
        CU(cuLaunchKernel(twin_writes, n / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr));
        CU(cuStreamSynchronize(s));
        check("twin_launch_counts_every_store", measured(read_counter(counter), n), 1);
        std::vector<int> host(n);
        CU(cuMemcpyDtoH(host.data(), p, n * sizeof(int)));
        int wrong = 0;
        for (int i = 0; i < n; i++) wrong += host[i] != i;
        check("twin_launch_writes_what_the_own_would", wrong, 0);

        // Module state: the twin has its own __device__ variables. Set the program's, then
        // run the twin with and without copying the program's state in first.
        CUdeviceptr own_g, twin_g;
        size_t gsize;
        CU(cuModuleGetGlobal(&own_g, &gsize, own, "g_scale"));
        CU(cuModuleGetGlobal(&twin_g, &gsize, twin, "g_scale"));
        int three = 3, got = 0;
        CU(cuMemcpyHtoD(own_g, &three, sizeof three));
        CU(cuLaunchKernel(twin_scaled, n / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr));
        CU(cuStreamSynchronize(s));
        CU(cuMemcpyDtoH(&got, p + 7 * sizeof(int), sizeof got));
        check("twin_without_state_copy_sees_its_own_state", got, 7);
        CU(cuMemcpyDtoDAsync(twin_g, own_g, gsize, s));
        CU(cuLaunchKernel(twin_scaled, n / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr));
        CU(cuMemcpyDtoDAsync(own_g, twin_g, gsize, s));
        CU(cuStreamSynchronize(s));
        CU(cuMemcpyDtoH(&got, p + 7 * sizeof(int), sizeof got));
        check("twin_with_state_copied_in_sees_the_programs", got, 21);
        read_counter(counter);

        // Libraries: the same image loaded twice as libraries, the second's module patched.
        CUlibrary lib_own, lib_twin;
        CU(cuLibraryLoadData(&lib_own, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
        patch_next = true;
        CU(cuLibraryLoadData(&lib_twin, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
        CUkernel k_own, k_twin;
        CU(cuLibraryGetKernel(&k_own, lib_own, "writes"));
        CU(cuLibraryGetKernel(&k_twin, lib_twin, "writes"));
        CUfunction f_own, f_twin;
        CU(cuKernelGetFunction(&f_own, k_own));
        CU(cuKernelGetFunction(&f_twin, k_twin));
        CUmodule m_twin;
        CU(cuLibraryGetModule(&m_twin, lib_twin));
        check("library_twin_patched_in_its_load_callback", last_patched == m_twin, 1);
        check("library_twin_patch_status", patch_status, SANITIZER_SUCCESS);
        SAN(sanitizerSetCallbackData(f_twin, (void*)counter));
        CU(cuLaunchKernel(f_own, n / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr));
        CU(cuStreamSynchronize(s));
        check("library_own_counts_nothing", read_counter(counter), 0);
        CU(cuLaunchKernel(f_twin, n / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr));
        CU(cuStreamSynchronize(s));
        check("library_twin_counts_every_store", measured(read_counter(counter), n), 1);

        // A graph kernel node: captured with the program's function, its executable graph
        // updated to the twin's function, then launched.
        CUgraph g;
        CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        CU(cuLaunchKernel(own_writes, n / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr));
        CU(cuStreamEndCapture(s, &g));
        CUgraphExec exec;
        CU(cuGraphInstantiate(&exec, g, 0));
        CU(cuGraphLaunch(exec, s));
        CU(cuStreamSynchronize(s));
        check("graph_node_own_counts_nothing", read_counter(counter), 0);
        size_t count = 1;
        CUgraphNode node;
        CU(cuGraphGetNodes(g, &node, &count));
        CUDA_KERNEL_NODE_PARAMS kp;
        memset(&kp, 0, sizeof kp);
        CU(cuGraphKernelNodeGetParams(node, &kp));
        kp.func = twin_writes;
        CUresult upd = cuGraphExecKernelNodeSetParams(exec, node, &kp);
        check("graph_exec_node_takes_the_twin_function", upd, CUDA_SUCCESS);
        if (upd == CUDA_SUCCESS) {
            CU(cuGraphLaunch(exec, s));
            CU(cuStreamSynchronize(s));
            check("graph_node_twin_counts_every_store", measured(read_counter(counter), n), 1);
        }
        cuGraphExecDestroy(exec);
        cuGraphDestroy(g);
    }

    // Cost of the program's own, unpatched launches in this mode.
    submit_us(own_empty, s, 3, 2000);
    figure("own_empty_submit_us", submit_us(own_empty, s, 15, 2000));
    device_us(own_writes, s, p, 4096, 200);
    figure("own_small_writes_device_us", device_us(own_writes, s, p, 4096, 2000));
    figure("own_1m_writes_device_us", device_us(own_writes, s, p, n, 500));
    if (sanitizer) {
        SAN(sanitizerSetCallbackData(twin_writes, nullptr));
        figure("twin_1m_writes_no_data_device_us", device_us(twin_writes, s, p, n, 500));
        SAN(sanitizerSetCallbackData(twin_writes, (void*)counter));
        figure("twin_1m_writes_counting_device_us", device_us(twin_writes, s, p, n, 100));
        field("launch_callbacks_seen", std::to_string(launches_seen));
    }
    field("failures", std::to_string(failures));
    printf("%s}\n", json.c_str());
    if (sub) sanitizerUnsubscribe(sub);
    return failures ? 1 : 0;
}
