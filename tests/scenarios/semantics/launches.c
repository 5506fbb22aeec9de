/* Kernel launches (docs/semantics.md#kernel-launches): what a kernel's parameters say it
   touches, and every launch entry point. */
#include "semantics.h"

/* Kernels on two streams writing through different pointers into one buffer do not
   conflict (the single-location rule); through the same pointer they do. */
void chunks_of_one_buffer(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    writes(s1, x);
    writes(s2, fixed ? x + N / 2 : x);
}

/* Kernels on two streams reading one buffer through pointers to const do not conflict. */
void concurrent_reads(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    reads(s1, x);
    if (fixed)
        reads(s2, x);
    else
        writes(s2, x);
}

/* Kernels whose signature is unknown (extern "C", as Warp, CuPy's RawKernel and Numba emit
   them): two may run together on the same data (they are taken to read it, or to write
   disjoint parts of it), but not alongside a write. */
void untyped_kernels(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = initialized();
    if (fixed)
        touches(s1, x);
    else
        writes(s1, x);
    touches(s2, x);
}

/* ...except the first kernel on fresh memory: whatever it does is the initialization the
   next one must wait for. */
void untyped_first_touch(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    touches(s1, x);
    if (fixed) order(s1, s2);
    touches(s2, x);
}

/* ...and a kernel's parameter once given fresh memory is an output of that kernel: here
   touch's first parameter. touch(x, y) on s1 then writes x, which touch(z, x) on s2 reads
   (Numba, Warp and CuPy's producer and consumer kernels on two streams). */
void untyped_learned_output(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = initialized(), y = initialized(), z = initialized();
    touch_both(s1, dalloc(), y); /* a fresh output: touch's first parameter writes */
    touch_both(s1, x, y);        /* produce x */
    if (fixed) order(s1, s2);
    touch_both(s2, z, x);        /* consume x */
}

/* PyTorch's side-stream prefetcher (timm's): a copy kernel takes its offsets and
   pointers in one structure passed by value, and fills only the dimensions its tensors have:
   the rest is whatever the host stack held, at first a host address, later the address of
   the previous batch. The compute stream waits for the side stream, takes the batch and
   reads it, while the side stream already copies the next batch, whose launch carries the
   taken batch's stale address: correct. Racy twin: the compute stream does not wait. */
typedef struct {
    uint64_t dims, stride[2]; /* stride[1]: a dimension the tensors do not have */
    CUdeviceptr out, in;
} CopyCfg;
static void launch_copy_cfg(CUstream s, CopyCfg cfg) {
    void *params[] = {&cfg};
    CHECK(cuLaunchKernel(copy_cfg, 1, 1, 1, 64, 1, 1, 0, s, params, NULL));
}
static CUdeviceptr prefetch(CUstream side, uint64_t stale) {
    CUdeviceptr staged = dalloc(), batch = dalloc();
    CHECK(cuMemsetD8Async(staged, 1, N, side));
    launch_copy_cfg(side, (CopyCfg){1, {4, stale ? stale : batch}, batch, staged});
    return batch;
}
void stale_parameter_words(int fixed) {
    CUstream side = nonblocking(), compute = nonblocking();
    int on_the_stack = 0;
    launch_copy_cfg(compute, (CopyCfg){1, {4, (uint64_t)(uintptr_t)&on_the_stack}, dalloc(), initialized()});
    CUdeviceptr next = prefetch(side, 0);
    for (int i = 0; i < 3; i++) {
        if (fixed) order(side, compute);
        CUdeviceptr x = next;
        next = prefetch(side, x);
        reads(compute, x);
    }
}

/* `scale(out, in)` launched through cuLaunchKernelEx, with `attrs` (may be none). */
static void launch_ex(CUstream s, CUdeviceptr out, CUdeviceptr in, CUlaunchAttribute *attrs, unsigned count) {
    int n = N / 4;
    void *params[] = {&out, &in, &n};
    CUlaunchConfig config = {1, 1, 1, 64, 1, 1, 0, s, attrs, count};
    CHECK(cuLaunchKernelEx(&config, scale, params, NULL));
}

/* cuLaunchKernelEx is the launch cuBLAS and cuDNN use: a kernel like any other. */
void launch_kernel_ex(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    launch_ex(s1, x, dalloc(), NULL, 0);
    order_if(fixed, s1, s2);
    launch_ex(s2, dalloc(), x, NULL, 0);
}

/* A launch's programmatic event, or its launch-completion event, is taken as recorded after
   the kernel (docs/semantics.md, deviations): a stream waiting on it follows the kernel. */
static void launch_event_attribute(int fixed, int id) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    CUevent e;
    CHECK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = id;
    if (id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT)
        attr.value.programmaticEvent.event = e;
    else
        attr.value.launchCompletionEvent.event = e;
    launch_ex(s1, x, dalloc(), &attr, 1);
    if (fixed) CHECK(cuStreamWaitEvent(s2, e, 0));
    reads(s2, x);
}
void launch_programmatic_event(int fixed) { launch_event_attribute(fixed, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT); }
void launch_completion_event(int fixed) { launch_event_attribute(fixed, CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT); }

/* Programmatic dependent launch lets a kernel start before the previous one on its stream
   ends; the model takes it as fully ordered (what the kernel waits for inside is not
   visible): the fixed twin's dependent launch on the same stream is clean. */
void programmatic_stream_serialization(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc();
    CUlaunchAttributeValue allowed;
    memset(&allowed, 0, sizeof allowed);
    allowed.programmaticStreamSerializationAllowed = 1;
    /* A launch attribute only: the driver refuses it as a stream attribute
       (CUDA_ERROR_INVALID_VALUE). */
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value = allowed;
    writes(s1, x);
    launch_ex(fixed ? s1 : s2, dalloc(), x, &attr, 1);
}

void cooperative_launch(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUdeviceptr x = dalloc(), in = dalloc();
    int n = N / 4;
    void *params[] = {&x, &in, &n};
    CHECK(cuLaunchCooperativeKernel(scale, 1, 1, 1, 64, 1, 1, 0, s1, params));
    order_if(fixed, s1, s2);
    reads(s2, x);
}

/* Kernels of a library, launched by their CUkernel handle and through the CUfunction
   cuKernelGetFunction gives: their names (from the hooks, even where the driver cannot be
   asked) say `in` is a pointer to const, so the fixed twin's two readers do not conflict;
   in the racy twin the second writes. */
void library_kernels(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUlibrary library;
    CUkernel kernel;
    CUfunction function;
    CUdeviceptr x = initialized(), a = initialized(), b = initialized();
    int n = N / 4;
    CHECK(cuLibraryLoadData(&library, SCALE_PTX, NULL, NULL, 0, NULL, NULL, 0));
    CHECK(cuLibraryGetKernel(&kernel, library, SCALE_NAME));
    CHECK(cuKernelGetFunction(&function, kernel));
    void *first[] = {&a, &x, &n};
    CHECK(cuLaunchKernel((CUfunction)kernel, 1, 1, 1, 64, 1, 1, 0, s1, first, NULL));
    void *second[] = {fixed ? &b : &x, fixed ? &x : &b, &n};
    CHECK(cuLaunchKernel(function, 1, 1, 1, 64, 1, 1, 0, s2, second, NULL));
    CHECK(cuCtxSynchronize());
    CHECK(cuLibraryUnload(library));
}

/* A kernel handle the shim did not see handed out (cuLibraryEnumerateKernels hands them out
   without names) is learnt from the driver's queries: its name says `in` is a pointer to const,
   so the fixed twin's two readers do not conflict; in the racy twin the second writes.
   Stand-in only: which kernel comes first is the driver's to say. */
CUresult cuLibraryGetKernelCount(unsigned *, CUlibrary);
CUresult cuLibraryEnumerateKernels(CUkernel *, unsigned, CUlibrary);
CUresult cuKernelGetName(const char **, CUkernel);
void enumerated_library_kernels(int fixed) {
    CUstream s1 = nonblocking(), s2 = nonblocking();
    CUlibrary library;
    CUkernel kernels[8], kernel = NULL;
    unsigned count = 0;
    CUdeviceptr x = initialized(), a = initialized(), b = initialized();
    int n = N / 4;
    CHECK(cuLibraryLoadData(&library, SCALE_PTX, NULL, NULL, 0, NULL, NULL, 0));
    CHECK(cuLibraryGetKernelCount(&count, library));
    if (count > 8) exit(4);
    CHECK(cuLibraryEnumerateKernels(kernels, count, library));
    for (unsigned i = 0; i < count; i++) {
        const char *name;
        CHECK(cuKernelGetName(&name, kernels[i]));
        if (strcmp(name, SCALE_NAME) == 0) kernel = kernels[i];
    }
    if (!kernel) exit(4);
    void *first[] = {&a, &x, &n};
    CHECK(cuLaunchKernel((CUfunction)kernel, 1, 1, 1, 64, 1, 1, 0, s1, first, NULL));
    void *second[] = {fixed ? &b : &x, fixed ? &x : &b, &n};
    CHECK(cuLaunchKernel((CUfunction)kernel, 1, 1, 1, 64, 1, 1, 0, s2, second, NULL));
    CHECK(cuCtxSynchronize());
    CHECK(cuLibraryUnload(library));
}
