/* Footprints: races that kernels' parameters hide, for the stand-in driver with the stand-in
   Compute Sanitizer library (tests/standin-sanitizer), which plays the device for kernels
   named footprint_*: each touches what its parameters list as (address, length, flags)
   triples (flags: 1 read, 2 write, 4 atomic, 8 touched before the kernel's first
   grid-dependency wait; bits 8-15 the log2 of a strided triple's spacing).
   Usage: footprint SCENARIO racy|fixed [ROUNDS]
   "fixed" orders the second stream after the first with an event. Exit 0 when it ran. */
#include <string.h>
#include "cuda_min.h"

#define N (1 << 20) /* bytes per buffer */
#define R 1
#define W 2
#define A 4
#define BEFORE 8
#define STRIDED(count, len) ((1ull << 63) | ((unsigned long long)(count) << 32) | (len))
#define SPACED(shift) ((unsigned long long)(shift) << 8)
#define BIG (96ull << 20) /* bytes of the buffer whose footprint overflows a table */
#define FRESH 8 /* kernels named footprint_fresh0..7, launched once each by "toggle" */
#define LIST 6 /* footprint_list's triples */
#define BURST 70 /* overflow_burst's launches a round: more than a context's wide tables */

/* footprint_touch: one triple, untyped (an extern "C" kernel: its pointer says nothing of
   direction or extent). footprint_args: the triple inside a by-value struct. footprint_step:
   the triple and a step count that touches nothing. footprint_fresh*: as footprint_touch.
   footprint_beyond: footprint_touch's parameters, each triple's bytes just after it.
   footprint_two: two triples. footprint_list: a by-value struct of LIST triples (PyTorch's
   multi-tensor kernels: a tensor list by value). footprint_pair: a by-value struct of a triple and a second buffer's address it never
   follows (CuSan's 13_struct_recursion: a struct of two buffers, each kernel using one).
   footprint_indirect(u64 base, u64 index): reads the triple (offset, length, flags) at index
   in device memory and touches `length` bytes at base + offset (a gather: its footprint
   follows device data, not its parameters).
   footprint_packed(u32 length, u8 junk, u64 address, u64 flags): one triple whose length is
   a 4-byte parameter sharing its word with a byte that touches nothing (PyTorch's
   elementwise kernels: a size, then an empty lambda's unwritten byte). */
#define TOUCH_ENTRY(name)                                                                     \
    ".visible .entry " name "(\n  .param .u64 " name "_param_0,\n  .param .u64 " name "_param_1,\n" \
    "  .param .u64 " name "_param_2\n)\n{\n ret;\n}\n"
static const char PTX[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    TOUCH_ENTRY("footprint_touch")
    ".visible .entry footprint_args(\n  .param .align 8 .b8 footprint_args_param_0[24]\n)\n{\n ret;\n}\n"
    ".visible .entry footprint_indirect(\n"
    "  .param .u64 footprint_indirect_param_0,\n  .param .u64 footprint_indirect_param_1\n)\n{\n ret;\n}\n"
    ".visible .entry footprint_pair(\n  .param .align 8 .b8 footprint_pair_param_0[32]\n)\n{\n ret;\n}\n"
    ".visible .entry footprint_list(\n  .param .align 8 .b8 footprint_list_param_0[144]\n)\n{\n ret;\n}\n"
    ".visible .entry footprint_step(\n"
    "  .param .u64 footprint_step_param_0,\n  .param .u64 footprint_step_param_1,\n"
    "  .param .u64 footprint_step_param_2,\n  .param .u64 footprint_step_param_3\n)\n{\n ret;\n}\n"
    TOUCH_ENTRY("footprint_fresh0") TOUCH_ENTRY("footprint_fresh1") TOUCH_ENTRY("footprint_fresh2")
    TOUCH_ENTRY("footprint_fresh3") TOUCH_ENTRY("footprint_fresh4") TOUCH_ENTRY("footprint_fresh5")
    TOUCH_ENTRY("footprint_fresh6") TOUCH_ENTRY("footprint_fresh7") TOUCH_ENTRY("footprint_beyond")
    ".visible .entry footprint_two(\n  .param .u64 footprint_two_param_0,\n  .param .u64 footprint_two_param_1,\n"
    "  .param .u64 footprint_two_param_2,\n  .param .u64 footprint_two_param_3,\n"
    "  .param .u64 footprint_two_param_4,\n  .param .u64 footprint_two_param_5\n)\n{\n ret;\n}\n"
    ".visible .entry footprint_waits(\n  .param .u64 footprint_waits_param_0,\n"
    "  .param .u64 footprint_waits_param_1,\n  .param .u64 footprint_waits_param_2\n)\n{\n"
    " griddepcontrol.wait;\n ret;\n}\n"
    ".visible .entry footprint_packed(\n"
    "  .param .u32 footprint_packed_param_0,\n  .param .u8 footprint_packed_param_1,\n"
    "  .param .u64 footprint_packed_param_2,\n  .param .u64 footprint_packed_param_3\n)\n{\n ret;\n}\n";
/* A module with a variable of its own, which footprint_counted adds one to (the stand-in
   plays that kernel's effect), and a constant: its twin must hold the program's values while
   a launch runs on it, and give the variable back. */
static const char STATEFUL_PTX[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n.visible .global .align 4 .u32 launches;\n"
    ".visible .const .align 4 .u32 limit;\n"
    TOUCH_ENTRY("footprint_counted");

static CUfunction touch, two, args, pair, list, indirect, step, fresh[FRESH], beyond, packed, counted, waits, early;

/* footprint_early: two triples, in an sm_90 cubin whose machine code waits on its grid
   dependencies (ACQBULK, griddepcontrol.wait) at its third instruction, byte 32: what the
   footprint engine reads. The stand-in runs no machine code: it takes the cubin's kernels
   from the PTX it carries in a section `.standin.ptx`. */
static const char EARLY_PTX[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry footprint_early(\n  .param .u64 footprint_early_param_0,\n"
    "  .param .u64 footprint_early_param_1,\n  .param .u64 footprint_early_param_2,\n"
    "  .param .u64 footprint_early_param_3,\n  .param .u64 footprint_early_param_4,\n"
    "  .param .u64 footprint_early_param_5\n)\n{\n griddepcontrol.wait;\n ret;\n}\n";
static unsigned char early_cubin[4096];

static void put(unsigned char *at, unsigned long long value, int bytes) {
    for (int i = 0; i < bytes; i++) at[i] = (unsigned char)(value >> (8 * i));
}

/* The ELF64 cubin of footprint_early into early_cubin: a header, the kernel's code, its PTX,
   the section names, then the section headers. */
static void make_early_cubin(void) {
    static const char names[] = "\0.text.footprint_early\0.standin.ptx\0.shstrtab";
    /* NOP, NOP, ACQBULK, EXIT: each instruction's first 8 bytes as sm_90 encodes them. */
    static const unsigned long long code[] = {0x7918, 0x7918, 0x782e, 0x794d};
    unsigned char *e = early_cubin;
    size_t text = 64, ptx = text + sizeof code * 2, strtab = ptx + sizeof EARLY_PTX - 1;
    size_t shoff = (strtab + sizeof names + 7) & ~(size_t)7;
    memset(e, 0, sizeof early_cubin);
    memcpy(e, "\x7f" "ELF", 4);
    e[4] = 2; /* 64-bit */
    e[5] = 1; /* little-endian */
    e[6] = 1;
    put(e + 0x10, 2, 2);         /* an executable */
    put(e + 0x12, 190, 2);       /* EM_CUDA */
    put(e + 0x14, 1, 4);
    put(e + 0x28, shoff, 8);
    put(e + 0x30, 90 << 8, 4);   /* sm_90, as CUDA 12.8's ELF ABI says it */
    put(e + 0x34, 64, 2);
    put(e + 0x3a, 64, 2);
    put(e + 0x3c, 4, 2);
    put(e + 0x3e, 3, 2);
    for (size_t i = 0; i < sizeof code / sizeof code[0]; i++) put(e + text + 16 * i, code[i], 8);
    memcpy(e + ptx, EARLY_PTX, sizeof EARLY_PTX - 1);
    memcpy(e + strtab, names, sizeof names);
    /* (name, type, offset, size) of each section after the null one. */
    const unsigned long long sections[3][4] = {
        {1, 1, text, sizeof code * 2}, {23, 1, ptx, sizeof EARLY_PTX - 1}, {36, 3, strtab, sizeof names}};
    for (int i = 0; i < 3; i++) {
        unsigned char *h = e + shoff + 64 * (i + 1);
        put(h, sections[i][0], 4);
        put(h + 4, sections[i][1], 4);
        put(h + 24, sections[i][2], 8);
        put(h + 32, sections[i][3], 8);
    }
}


/* A kernel node of `kernel` (taking one triple) after `deps`. */
static CUgraphNode triple_node(CUgraph g, CUfunction kernel, const CUgraphNode *deps, size_t n, CUdeviceptr p,
                               unsigned long long len, unsigned long long flags) {
    CUgraphNode node;
    unsigned long long a = p, l = len, f = flags;
    void *params[] = {&a, &l, &f};
    CUDA_KERNEL_NODE_PARAMS k = {kernel, 1, 1, 1, 32, 1, 1, 0, params, NULL, NULL, NULL};
    CHECK(cuGraphAddKernelNode_v2(&node, g, deps, n, &k));
    return node;
}

static void launch_triple(CUfunction f, CUstream s, CUdeviceptr p, unsigned long long len, unsigned long long flags) {
    unsigned long long a = p, l = len, f_ = flags;
    void *params[] = {&a, &l, &f_};
    CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
}

/* `f` with `params`, launched with programmatic stream serialization: it may start before
   the kernel ahead of it on `s` completes. */
static void launch_ex_programmatic(CUfunction f, CUstream s, void **params) {
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config = {1, 1, 1, 32, 1, 1, 0, s, &attr, 1};
    CHECK(cuLaunchKernelEx(&config, f, params, NULL));
}

/* `f` (taking one triple) launched with programmatic stream serialization. */
static void launch_programmatic(CUfunction f, CUstream s, CUdeviceptr p, unsigned long long len,
                                unsigned long long flags) {
    unsigned long long a = p, l = len, f_ = flags;
    void *params[] = {&a, &l, &f_};
    launch_ex_programmatic(f, s, params);
}

static void launch_touch(CUstream s, CUdeviceptr p, unsigned long long len, unsigned long long flags) {
    launch_triple(touch, s, p, len, flags);
}

/* footprint_touch over a grid of `blocks` blocks (the stand-in touches its triple once). */
static void launch_touch_grid(CUstream s, unsigned blocks, CUdeviceptr p, unsigned long long len,
                              unsigned long long flags) {
    unsigned long long a = p, l = len, f = flags;
    void *params[] = {&a, &l, &f};
    CHECK(cuLaunchKernel(touch, blocks, 1, 1, 32, 1, 1, 0, s, params, NULL));
}

/* footprint_early, launched with programmatic stream serialization on `s`: (p, len, flags)
   and (q, len2, flags2). */
static void launch_early(CUstream s, CUdeviceptr p, unsigned long long len, unsigned long long flags, CUdeviceptr q,
                         unsigned long long len2, unsigned long long flags2) {
    unsigned long long a = p, l = len, f = flags, b = q, l2 = len2, f2 = flags2;
    void *params[] = {&a, &l, &f, &b, &l2, &f2};
    launch_ex_programmatic(early, s, params);
}

/* footprint_two: (p, len, flags) and (q, len2, flags2). */
static void launch_two(CUstream s, CUdeviceptr p, unsigned long long len, unsigned long long flags, CUdeviceptr q,
                       unsigned long long len2, unsigned long long flags2) {
    unsigned long long a = p, l = len, f = flags, b = q, l2 = len2, f2 = flags2;
    void *params[] = {&a, &l, &f, &b, &l2, &f2};
    CHECK(cuLaunchKernel(two, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
}

static void launch_step(CUstream s, CUdeviceptr p, unsigned long long len, unsigned long long n) {
    unsigned long long a = p, l = len, f = W, count = n;
    void *params[] = {&a, &l, &f, &count};
    CHECK(cuLaunchKernel(step, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
}

static void launch_packed(CUstream s, CUdeviceptr p, unsigned len, unsigned char junk) {
    unsigned long long a = p, f = W;
    void *params[] = {&len, &junk, &a, &f};
    CHECK(cuLaunchKernel(packed, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
}

static void launch_fresh(CUstream s, int which, CUdeviceptr p, unsigned long long len) {
    unsigned long long a = p, l = len, f = W;
    void *params[] = {&a, &l, &f};
    CHECK(cuLaunchKernel(fresh[which % FRESH], 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
}

static void launch_args(CUstream s, CUdeviceptr p, unsigned long long len, unsigned long long flags) {
    struct { unsigned long long p, len, flags; } a = {p, len, flags};
    void *params[] = {&a};
    CHECK(cuLaunchKernel(args, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
}

static void launch_pair(CUstream s, CUdeviceptr p, unsigned long long len, CUdeviceptr other) {
    struct { unsigned long long p, len, flags, other; } a = {p, len, W, other};
    void *params[] = {&a};
    CHECK(cuLaunchKernel(pair, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
}

/* footprint_list writing LIST arrays of 3 KiB at `at[i]` in x, laid out and ordered as a
   round's caching allocator might: one 32 KiB granule, blocks between them untouched, the
   layout and order new at every round. */
static void launch_list(CUstream s, CUdeviceptr x, int round, CUdeviceptr *at) {
    struct { unsigned long long p, len, flags; } t[LIST];
    for (int i = 0; i < LIST; i++) {
        at[i] = x + (unsigned long long)((i + round) % LIST) * 5120 + (round % 2) * 512;
        t[i].p = at[i];
        t[i].len = 3072;
        t[i].flags = W;
    }
    void *params[] = {t};
    CHECK(cuLaunchKernel(list, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: footprint same_words|interior|struct|pair|interleaved|indirect|later|gap|reuse|flood|captured|out-of-order|strided|atomics|neighbours|between|free|freed_unread|overflow|overflow_input|external|overflow_burst|overflow_sizes|steps|packed|toggle|tensor_list|stateful|stateful_legacy|big-shared|gated|capturing|graph|built|built_stateful|built_stateful_pair|built_capturing|programmatic|programmatic_stream|programmatic_captured|programmatic_built|programmatic_node|programmatic_early|programmatic_early_captured|pool_steps racy|fixed [ROUNDS]\n");
        return 2;
    }
    const char *scenario = argv[1];
    int fixed = strcmp(argv[2], "fixed") == 0;
    int rounds = argc > 3 ? atoi(argv[3]) : 1;
    CUdevice dev;
    CUcontext ctx;
    CUmodule module, stateful, early_module;
    CUstream a, b;
    CUevent done;
    CUdeviceptr x, y, index, big = 0, big2 = 0, big3 = 0;
    /* "graph", "built" and "external" (with its second graph and event): made in the first
       round, launched in each */
    CUgraphExec exec = NULL, second = NULL;
    CUevent external = NULL;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&module, PTX));
    CHECK(cuModuleGetFunction(&touch, module, "footprint_touch"));
    CHECK(cuModuleGetFunction(&two, module, "footprint_two"));
    CHECK(cuModuleGetFunction(&args, module, "footprint_args"));
    CHECK(cuModuleGetFunction(&pair, module, "footprint_pair"));
    CHECK(cuModuleGetFunction(&list, module, "footprint_list"));
    CHECK(cuModuleGetFunction(&indirect, module, "footprint_indirect"));
    CHECK(cuModuleGetFunction(&step, module, "footprint_step"));
    CHECK(cuModuleGetFunction(&packed, module, "footprint_packed"));
    CHECK(cuModuleGetFunction(&waits, module, "footprint_waits"));
    for (int i = 0; i < FRESH; i++) {
        char name[32];
        snprintf(name, sizeof name, "footprint_fresh%d", i);
        CHECK(cuModuleGetFunction(&fresh[i], module, name));
    }
    CHECK(cuModuleGetFunction(&beyond, module, "footprint_beyond"));
    CHECK(cuModuleLoadData(&stateful, STATEFUL_PTX));
    CHECK(cuModuleGetFunction(&counted, stateful, "footprint_counted"));
    make_early_cubin();
    CHECK(cuModuleLoadData(&early_module, early_cubin));
    CHECK(cuModuleGetFunction(&early, early_module, "footprint_early"));
    CHECK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&done, 0));
    CHECK(cuMemAlloc_v2(&x, N));
    CHECK(cuMemAlloc_v2(&y, N));
    CHECK(cuMemAlloc_v2(&index, 24));
    CHECK(cuMemsetD8_v2(x, 0, N));
    CHECK(cuMemsetD8_v2(y, 0, N));
    if (strncmp(scenario, "overflow", 8) == 0) CHECK(cuMemAlloc_v2(&big, BIG));
    if (strcmp(scenario, "overflow_input") == 0) {
        CHECK(cuMemAlloc_v2(&big2, BIG));
        CHECK(cuMemAlloc_v2(&big3, BIG));
    }
    CHECK(cuCtxSynchronize()); /* a memset of device memory may return before it is done */
    for (int round = 0; round < rounds; round++) {
        if (strcmp(scenario, "same_words") == 0) {
            /* What is learnt belongs to its kernel: footprint_touch and footprint_beyond each
               launched once, learnt at the synchronization; then A writes the first half of x
               with footprint_touch and B launches, with the same words, footprint_touch (racy
               twin) or footprint_beyond, which writes the second half (fixed twin). */
            launch_triple(beyond, b, y, N / 2, W);
            launch_touch(a, x, N / 2, W);
            CHECK(cuCtxSynchronize());
            launch_touch(a, x, N / 2, W);
            launch_triple(fixed ? beyond : touch, b, x, N / 2, W);
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "interior") == 0) {
            /* A writes all of x; B reads its second half through an interior pointer. */
            launch_touch(a, x, N, W);
            if (fixed) { CHECK(cuEventRecord(done, a)); CHECK(cuStreamWaitEvent(b, done, 0)); }
            launch_touch(b, x + N / 2, N / 2, R);
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "struct") == 0) {
            launch_args(a, x, N, W);
            if (fixed) { CHECK(cuEventRecord(done, a)); CHECK(cuStreamWaitEvent(b, done, 0)); }
            launch_args(b, x + N / 4, N / 4, W);
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "pair") == 0) {
            /* A writes x, B writes y (fixed) or x (racy), each through a struct that holds
               both buffers' addresses, with no wait. */
            launch_pair(a, x, N, y);
            launch_pair(b, fixed ? y : x, N, fixed ? x : y);
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "interleaved") == 0) {
            /* A writes the floats x[0::2] of x's first 64 KiB; B writes x[1::2] (fixed) or
               x[0::4] (racy), with no wait: the bytes never overlap, or some do. */
            launch_touch(a, x, STRIDED(8192, 4), W | SPACED(3));
            if (fixed) launch_touch(b, x + 4, STRIDED(8192, 4), W | SPACED(3));
            else launch_touch(b, x, STRIDED(4096, 4), W | SPACED(4));
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "indirect") == 0) {
            /* A's gather writes 64 bytes of x at the offset its index holds: the start of x
               for 20 rounds, its middle after; B's memset writes 8 bytes of x's middle. Every
               launch of the gather has the same parameters. */
            unsigned long long triple[3] = {round < 20 ? 0 : N / 2, 64, W};
            CHECK(cuMemcpyHtoDAsync_v2(index, triple, sizeof triple, a));
            unsigned long long base = x, at = index;
            void *params[] = {&base, &at};
            CHECK(cuLaunchKernel(indirect, 1, 1, 1, 32, 1, 1, 0, a, params, NULL));
            if (fixed) { CHECK(cuEventRecord(done, a)); CHECK(cuStreamWaitEvent(b, done, 0)); }
            CHECK(cuMemsetD8Async(x + N / 2, 1, 8, b));
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "later") == 0) {
            /* A's kernel reads x; B's memset, issued after it and checked before the kernel's
               footprint is known, writes x. */
            launch_touch(a, x + 4096, 64, R);
            if (fixed) { CHECK(cuEventRecord(done, a)); CHECK(cuStreamWaitEvent(b, done, 0)); }
            CHECK(cuMemsetD8Async(x, 1, N, b));
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "gap") == 0) {
            /* Three measured launches, their tables handed out in turn; the first and the
               third (on A) are read when A is synchronized, the second's (on B) later, so the
               third's table is not the one after the first's. The third writes 64 bytes of x
               through an interior pointer; B's memset writes bytes 32-63 of them (not the byte
               the pointer names) with no wait. */
            launch_touch(a, x, 64, R);
            launch_touch(b, y, 64, R);
            launch_touch(a, x + 4096, 64, W);
            if (fixed) { CHECK(cuEventRecord(done, a)); CHECK(cuStreamWaitEvent(b, done, 0)); }
            CHECK(cuMemsetD8Async(x + 4096 + 32, 1, 32, b));
            CHECK(cuStreamSynchronize(a));
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "reuse") == 0) {
            /* A table read is zeroed before a launch gets it again: A's kernel writes x and is
               read at A's synchronization; B's kernel, handed the same table, writes y (fixed
               twin) or x (racy twin) while A's memset writes x with no wait. */
            launch_touch(a, x, 64, W);
            CHECK(cuStreamSynchronize(a));
            launch_touch(b, fixed ? y : x, 64, W);
            CHECK(cuMemsetD8Async(x, 1, 64, a));
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "flood") == 0) {
            /* More launches to measure than the engine has tables (4096 a context), none read
               before the last: those past the tables stand on their parameters. B's, the last,
               writes x (racy twin) or y (fixed) with no wait. */
            for (int i = 0; i < 4200; i++) launch_touch(a, x, 64, W);
            launch_touch(b, fixed ? y : x, 64, W);
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "pool_steps") == 0 && round == 0) {
            /* A training loop's batches from a stream-ordered pool (PyTorch's cudaMallocAsync
               backend): each step B allocates and fills the next batch, A waits for B and
               reads the current one, then B waits for A and frees it; addresses come back.
               Racy: A does not wait for B. Nothing synchronizes until the end. */
            CUdeviceptr cur, next;
            CUevent ready;
            CHECK(cuEventCreate(&ready, 0));
            CHECK(cuMemAllocAsync(&cur, 4096, b));
            CHECK(cuMemsetD8Async(cur, 1, 4096, b));
            for (int step = 0; step < 40; step++) {
                if (fixed || step == 0) { CHECK(cuEventRecord(ready, b)); CHECK(cuStreamWaitEvent(a, ready, 0)); }
                CHECK(cuMemAllocAsync(&next, 4096, b));
                CHECK(cuMemsetD8Async(next, 1, 4096, b));
                launch_touch(a, cur, 4096, R);
                launch_touch(a, y, 64, W);
                CHECK(cuEventRecord(done, a));
                CHECK(cuStreamWaitEvent(b, done, 0));
                CHECK(cuMemFreeAsync(cur, b));
                cur = next;
            }
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "programmatic_stream") == 0) {
            /* As "programmatic", the attribute set on the stream (cuStreamSetAttribute), the
               dependent launched with cuLaunchKernel; then the attribute cleared, and the same
               pair again, ordered. */
            CUdeviceptr z, w;
            CHECK(cuMemAlloc_v2(&z, N));
            CHECK(cuMemAlloc_v2(&w, N));
            CUlaunchAttributeValue value;
            memset(&value, 0, sizeof value);
            value.programmaticStreamSerializationAllowed = 1;
            CHECK(cuStreamSetAttribute(a, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, &value));
            launch_touch(a, z, 64, W);
            launch_triple(fixed ? waits : touch, a, z, 64, R);
            value.programmaticStreamSerializationAllowed = 0;
            CHECK(cuStreamSetAttribute(a, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, &value));
            launch_touch(a, w, 64, W);
            launch_touch(a, w, 64, R);
            CHECK(cuCtxSynchronize());
            CHECK(cuMemFree_v2(z));
            CHECK(cuMemFree_v2(w));
        } else if (strcmp(scenario, "programmatic") == 0) {
            /* A writes z; then, on A too, a kernel launched with programmatic stream
               serialization reads z: footprint_touch never waits on its grid dependencies
               (racy), footprint_waits does (fixed). */
            CUdeviceptr z; /* fresh: the writer's record is its only one (the GPU case) */
            CHECK(cuMemAlloc_v2(&z, N));
            launch_touch(a, z, 64, W);
            launch_programmatic(fixed ? waits : touch, a, z, 64, R);
            CHECK(cuCtxSynchronize());
            CHECK(cuMemFree_v2(z));
        } else if (strcmp(scenario, "programmatic_early") == 0) {
            /* A writes z; then, on A too, footprint_early, launched with programmatic stream
               serialization, reads x (weights, written and synchronized before) before its
               grid-dependency wait, and z before it (racy) or after it (fixed). */
            CUdeviceptr z; /* fresh: the writer's record is its only one */
            CHECK(cuMemAlloc_v2(&z, N));
            launch_touch(a, z, 64, W);
            launch_early(a, x, 64, R | BEFORE, z, 64, fixed ? R : R | BEFORE);
            CHECK(cuCtxSynchronize());
            CHECK(cuMemFree_v2(z));
        } else if (strcmp(scenario, "programmatic_early_captured") == 0) {
            /* As "programmatic_early", captured from A into a graph made in the first round and
               launched in each: footprint_fresh0 writes y, the dependent's node, reached
               through a programmatic edge, reads y before its wait (racy) or after it. */
            if (!exec) {
                CUgraph graph;
                CHECK(cuStreamBeginCapture_v2(a, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */));
                launch_triple(fresh[0], a, y, 64, W);
                launch_early(a, x, 64, R | BEFORE, y, 64, fixed ? R : R | BEFORE);
                CHECK(cuStreamEndCapture(a, &graph));
                CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
            }
            CHECK(cuGraphLaunch(exec, a));
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "programmatic_captured") == 0 && round == 0) {
            /* As "programmatic", captured from A into a graph launched on A: the dependent's
               node is reached from the writer's through a programmatic edge. The writer is
               footprint_fresh0 (as footprint_touch): a launch measures one node per kernel. */
            CUdeviceptr z;
            CUgraph graph;
            CHECK(cuMemAlloc_v2(&z, N));
            CHECK(cuStreamBeginCapture_v2(a, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */));
            launch_triple(fresh[0], a, z, 64, W);
            launch_programmatic(fixed ? waits : touch, a, z, 64, R);
            CHECK(cuStreamEndCapture(a, &graph));
            CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
            CHECK(cuGraphLaunch(exec, a));
            CHECK(cuCtxSynchronize());
            CHECK(cuMemFree_v2(z));
        } else if ((strcmp(scenario, "programmatic_built") == 0 || strcmp(scenario, "programmatic_node") == 0)
                   && round == 0) {
            /* As "programmatic", in a graph built node by node: the writer's node, then the
               dependent's, joined by a programmatic edge from the writer's programmatic port
               (cuGraphAddDependencies_v2; "programmatic_node": the dependent added with its edge
               by cuGraphAddNode_v2). The writer is footprint_fresh0, as captured. */
            CUdeviceptr z;
            CUgraph graph;
            CUgraphNode writer, dependent;
            CUgraphEdgeData edge;
            CHECK(cuMemAlloc_v2(&z, N));
            CHECK(cuGraphCreate(&graph, 0));
            writer = triple_node(graph, fresh[0], NULL, 0, z, 64, W);
            memset(&edge, 0, sizeof edge);
            edge.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
            edge.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
            if (strcmp(scenario, "programmatic_node") == 0) {
                unsigned long long a_ = z, l = 64, f = R;
                void *params[] = {&a_, &l, &f};
                CUgraphNodeParams node;
                memset(&node, 0, sizeof node);
                node.type = CU_GRAPH_NODE_TYPE_KERNEL;
                node.kernel.func = fixed ? waits : touch;
                node.kernel.gridDimX = node.kernel.gridDimY = node.kernel.gridDimZ = 1;
                node.kernel.blockDimX = 32;
                node.kernel.blockDimY = node.kernel.blockDimZ = 1;
                node.kernel.kernelParams = params;
                CHECK(cuGraphAddNode_v2(&dependent, graph, &writer, &edge, 1, &node));
            } else {
                dependent = triple_node(graph, fixed ? waits : touch, NULL, 0, z, 64, R);
                CHECK(cuGraphAddDependencies_v2(graph, &writer, &dependent, &edge, 1));
            }
            CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
            CHECK(cuGraphLaunch(exec, a));
            CHECK(cuCtxSynchronize());
            CHECK(cuMemFree_v2(z));
        } else if (strcmp(scenario, "freed_unread") == 0) {
            /* A and B write a fresh buffer with no wait between them (racy) or with one
               (fixed); then the buffer is freed with cuMemFree, nothing synchronized before
               it: the launches' footprints are read only after the free (CuSan's 31 test). */
            CUdeviceptr z;
            CHECK(cuMemAlloc_v2(&z, N));
            launch_touch(a, z, 64, W);
            if (fixed) { CHECK(cuEventRecord(done, a)); CHECK(cuStreamWaitEvent(b, done, 0)); }
            launch_touch(b, z, 64, W);
            CHECK(cuMemFree_v2(z));
        } else if (strcmp(scenario, "captured") == 0) {
            /* More launches to measure than the engine has tables, captured into a graph (none
               runs as measured: their tables go back); then B's launch, measured, writes x
               (racy twin) or y (fixed) while A's memset writes x's second half with no wait. */
            CUgraph graph;
            CHECK(cuStreamBeginCapture_v2(a, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */));
            for (int i = 0; i < 4200; i++) launch_touch(a, y, 64, W);
            CHECK(cuStreamEndCapture(a, &graph));
            launch_touch(b, fixed ? y : x, 64, W);
            CHECK(cuMemsetD8Async(x + 32, 1, 32, a));
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "out-of-order") == 0) {
            /* B's kernel is read (its stream synchronized) before A's, issued first. */
            launch_touch(a, x, N, W);
            if (fixed) { CHECK(cuEventRecord(done, a)); CHECK(cuStreamWaitEvent(b, done, 0)); }
            launch_touch(b, x + N - 8, 8, R);
            CHECK(cuStreamSynchronize(b));
            CHECK(cuStreamSynchronize(a));
        } else if (strcmp(scenario, "strided") == 0) {
            /* A writes 256 disjoint 4-byte pieces of x, 4 KiB apart; B writes the last one
               (racy) or y (fixed). */
            launch_touch(a, x, STRIDED(256, 4), W);
            launch_touch(b, fixed ? y : x + 255 * 4096, 4, W);
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "atomics") == 0) {
            /* Atomics on two streams on the same bytes are no race; a plain read is. */
            launch_touch(a, x, 64, A);
            launch_touch(b, x, 64, fixed ? A : R);
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "neighbours") == 0) {
            /* Arrays side by side in one 32 KiB granule (as an allocator places small arrays):
               A's kernel reads the first and writes the second; B's reads the first and
               writes the third (fixed) or the second (racy), with no wait. */
            CUdeviceptr g = (x + 0xffff) & ~0xffffull;
            launch_two(a, g, 4096, R, g + 4096, 4096, W);
            launch_two(b, g, 4096, R, g + (fixed ? 8192 : 4096), 4096, W);
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "between") == 0) {
            /* A's kernel reads the first and the third array of one granule; B's writes the
               second, between them (fixed), or the third (racy), with no wait. */
            CUdeviceptr g = (x + 0xffff) & ~0xffffull;
            launch_two(a, g, 4096, R, g + 8192, 4096, R);
            launch_touch(b, g + (fixed ? 4096 : 8192), 4096, W);
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "free") == 0) {
            /* A's kernel reads y; y is freed on B without waiting (racy) or after (fixed). */
            CUdeviceptr z;
            CHECK(cuMemAllocAsync(&z, N, a));
            launch_touch(a, z + 100, 8, R);
            if (fixed) { CHECK(cuEventRecord(done, a)); CHECK(cuStreamWaitEvent(b, done, 0)); }
            CHECK(cuMemFreeAsync(z, b));
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "overflow") == 0) {
            /* A writes 4 bytes in each of 2,600 32 KiB granules of big (more than a table
               holds); B reads bytes A wrote in the 2,000th. */
            launch_touch(a, big, STRIDED(2600, 4), W | SPACED(15));
            if (fixed) { CHECK(cuEventRecord(done, a)); CHECK(cuStreamWaitEvent(b, done, 0)); }
            launch_touch(b, big + 2000ull * 32768, 4, R);
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "overflow_input") == 0) {
            /* Warp's stream tests: A and B each read 2,100 granules of big and write 2,100 of
               another buffer (each more than a table holds), with no wait: A big2's, B big3's
               (fixed) or big2's (racy). */
            launch_two(a, big, STRIDED(2100, 4), R | SPACED(15), big2, STRIDED(2100, 4), W | SPACED(15));
            launch_two(b, big, STRIDED(2100, 4), R | SPACED(15), fixed ? big3 : big2, STRIDED(2100, 4), W | SPACED(15));
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "overflow_burst") == 0) {
            /* overflow's writer, once in the first round and BURST times before one
               synchronize in each later round. */
            for (int i = 0; i < (round ? BURST : 1); i++) launch_touch(a, big, STRIDED(2600, 4), W | SPACED(15));
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "overflow_sizes") == 0) {
            /* overflow's writer over 64 blocks; in later rounds, BURST small launches of it
               over one block each, then the large one, before one synchronize. */
            for (int i = 0; i < (round ? BURST : 0); i++) launch_touch_grid(a, 1, big + i * 64, 4, W);
            launch_touch_grid(a, 64, big, STRIDED(2600, 4), W | SPACED(15));
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "tensor_list") == 0) {
            /* A's list kernel writes its arrays; with no wait, B reads the first slot's
               (racy) or the 2 KiB after it, which no array holds (fixed). */
            CUdeviceptr at[LIST];
            launch_list(a, x, round, at);
            launch_touch(b, fixed ? at[0] + 3072 : at[0], fixed ? 2048 : 3072, R);
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "steps") == 0) {
            /* A writes the first half or quarter of x (in turn), with a step count that
               changes at every launch; B reads 8 bytes both cover. */
            launch_step(a, x, round % 2 ? N / 4 : N / 2, round);
            if (fixed) { CHECK(cuEventRecord(done, a)); CHECK(cuStreamWaitEvent(b, done, 0)); }
            launch_touch(b, x + N / 4 - 8, 8, R);
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "packed") == 0) {
            /* A writes the first half or quarter of x (in turn), its length beside a byte
               that is new at every launch; B reads 8 bytes both cover. */
            launch_packed(a, x, round % 2 ? N / 4 : N / 2, (unsigned char)(round * 37 + 11));
            if (fixed) { CHECK(cuEventRecord(done, a)); CHECK(cuStreamWaitEvent(b, done, 0)); }
            launch_touch(b, x + N / 4 - 8, 8, R);
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "toggle") == 0) {
            /* One module: 300 launches of one learnt key, then a new key of that kernel and a
               kernel never launched before, every round; B reads what the new key wrote. */
            for (int i = 0; i < 300; i++) launch_touch(a, x, 64, W);
            launch_touch(a, y, 128 + 64ull * round, W);
            launch_fresh(a, round, x + 4096, 64);
            if (fixed) { CHECK(cuEventRecord(done, a)); CHECK(cuStreamWaitEvent(b, done, 0)); }
            launch_touch(b, y, 8, R);
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "stateful") == 0 || strcmp(scenario, "stateful_legacy") == 0) {
            /* The interior race, its writer in a module with a variable of its own, which
               counts its launches; every round's launches must have counted in the
               program's copy of the variable. "stateful_legacy": the writer on the legacy
               NULL stream, which the copies of the variables share. */
            CUstream on = strcmp(scenario, "stateful") == 0 ? a : CU_STREAM_LEGACY;
            CUdeviceptr count_at;
            unsigned count = 0;
            launch_triple(counted, on, x, 64, W);
            if (fixed) { CHECK(cuEventRecord(done, on)); CHECK(cuStreamWaitEvent(b, done, 0)); }
            launch_touch(b, x + 32, 8, R);
            CHECK(cuCtxSynchronize());
            CHECK(cuModuleGetGlobal_v2(&count_at, NULL, stateful, "launches"));
            CHECK(cuMemcpyDtoH_v2(&count, count_at, sizeof count));
            if (count != (unsigned)round + 1) {
                fprintf(stderr, "footprint_counted counted %u launches in round %d\n", count, round);
                return 3;
            }
        } else if (strcmp(scenario, "big-shared") == 0) {
            /* The interior race, the writer asking for 64 KiB of dynamic shared memory, which
               its function's attribute allows. */
            unsigned long long p = x, l = 64, f_ = W;
            void *params[] = {&p, &l, &f_};
            CHECK(cuFuncSetAttribute(beyond, 8 /* MAX_DYNAMIC_SHARED_SIZE_BYTES */, 64 << 10));
            CHECK(cuLaunchKernel(beyond, 1, 1, 1, 32, 1, 1, 64 << 10, a, params, NULL));
            if (fixed) { CHECK(cuEventRecord(done, a)); CHECK(cuStreamWaitEvent(b, done, 0)); }
            launch_touch(b, x + 96, 8, R);
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "capturing") == 0) {
            /* While another stream captures in global mode, a kernel's first launch runs
               unmeasured (loading its twin would break the capture); once the capture
               ended, its next launch is measured. B reads what both wrote. */
            CUstream c;
            CUgraph graph;
            CHECK(cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
            CHECK(cuStreamBeginCapture_v2(c, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */));
            launch_touch(a, x, 64, W);
            CHECK(cuStreamEndCapture(c, &graph));
            launch_touch(a, x, 64, W);
            if (fixed) { CHECK(cuEventRecord(done, a)); CHECK(cuStreamWaitEvent(b, done, 0)); }
            launch_touch(b, x + 32, 8, R);
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "gated") == 0) {
            /* A waits for a value the host may release later (here set already): its writer
               runs unmeasured; once the host synchronized, the same write is measured. B
               reads what both wrote through an interior pointer. */
            CHECK(cuMemsetD8_v2(y, 1, 4));
            CHECK(cuCtxSynchronize());
            CHECK(cuStreamWaitValue32_v2(a, y, 1, 0 /* CU_STREAM_WAIT_VALUE_GEQ */));
            launch_touch(a, x, 64, W);
            CHECK(cuCtxSynchronize());
            launch_touch(a, x, 64, W);
            if (fixed) { CHECK(cuEventRecord(done, a)); CHECK(cuStreamWaitEvent(b, done, 0)); }
            launch_touch(b, x + 32, 8, R);
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "external") == 0) {
            /* Warp's test_event_external: one graph adds to x then y and records an external
               event; another waits on it and reads x and y into x + 256; each launched on a
               stream of its own, 4 times. The next first graph is ordered after the second
               (fixed) or not (racy: it writes x and y while the second reads them). */
            if (!exec) {
                CUgraph graph;
                CHECK(cuEventCreate(&external, 0));
                CHECK(cuStreamBeginCapture_v2(a, 0));
                launch_touch(a, x, 64, R | W);
                launch_touch(a, y, 64, R | W);
                CHECK(cuEventRecordWithFlags(external, a, 1 /* CU_EVENT_RECORD_EXTERNAL */));
                CHECK(cuStreamEndCapture(a, &graph));
                CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
                CHECK(cuStreamBeginCapture_v2(a, 0));
                CHECK(cuStreamWaitEvent(a, external, 1 /* CU_EVENT_WAIT_EXTERNAL */));
                launch_two(a, x, 64, R, y, 64, R);
                launch_touch(a, x + 256, 64, W);
                CHECK(cuStreamEndCapture(a, &graph));
                CHECK(cuGraphInstantiateWithFlags(&second, graph, 0));
            }
            for (int i = 0; i < 4; i++) {
                CHECK(cuGraphLaunch(exec, a));
                CHECK(cuGraphLaunch(second, b));
                if (fixed) { CHECK(cuEventRecord(done, b)); CHECK(cuStreamWaitEvent(a, done, 0)); }
            }
            CHECK(cuCtxSynchronize());
        } else if (strcmp(scenario, "graph") == 0) {
            /* A graph captured from A, forked to B and joined back (as Warp's ScopedCapture
               makes one): A's branch writes x's first 64 bytes through a pointer inside a
               struct, B's writes 64 bytes from x + 32 through an interior pointer, unordered
               (racy) or B's after A's (fixed). Their parameters name two different bytes.
               footprint_args runs in the graph alone, never launched outside it. */
            if (!exec) {
                CUgraph graph;
                CUevent fork, join;
                CHECK(cuEventCreate(&fork, 0));
                CHECK(cuEventCreate(&join, 0));
                CHECK(cuStreamBeginCapture_v2(a, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */));
                CHECK(cuEventRecord(fork, a));
                CHECK(cuStreamWaitEvent(b, fork, 0));
                launch_args(a, x, 64, W);
                if (fixed) { CHECK(cuEventRecord(done, a)); CHECK(cuStreamWaitEvent(b, done, 0)); }
                launch_touch(b, x + 32, 64, W);
                CHECK(cuEventRecord(join, b));
                CHECK(cuStreamWaitEvent(a, join, 0));
                CHECK(cuStreamEndCapture(a, &graph));
                CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
            }
            CHECK(cuGraphLaunch(exec, a));
            CHECK(cuStreamSynchronize(a));
        } else if (strncmp(scenario, "built", 5) == 0) {
            /* A graph built node by node: footprint_touch writes x's first 64 bytes, and
               again 64 bytes from x + 32 (an interior pointer), with no edge (racy) or after
               the first (fixed). One kernel in two nodes. "built_stateful": the first node is
               footprint_counted, of a module with a variable of its own, which must count
               every launch in the program's copy; "built_stateful_pair": both nodes are.
               "built_capturing": the first round's launch is made while another stream
               captures in global mode. */
            int counted_pair = strcmp(scenario, "built_stateful_pair") == 0;
            int stateful_node = strcmp(scenario, "built_stateful") == 0 || counted_pair;
            CUstream c = NULL;
            CUgraph captured;
            if (!exec) {
                CUgraph graph;
                CHECK(cuGraphCreate(&graph, 0));
                CUgraphNode first = triple_node(graph, stateful_node ? counted : touch, NULL, 0, x, 64, W);
                triple_node(graph, counted_pair ? counted : touch, &first, fixed ? 1 : 0, x + 32, 64, W);
                CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
                if (strcmp(scenario, "built_capturing") == 0) {
                    CHECK(cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
                    CHECK(cuStreamBeginCapture_v2(c, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */));
                }
            }
            CHECK(cuGraphLaunch(exec, a));
            if (c) CHECK(cuStreamEndCapture(c, &captured));
            CHECK(cuStreamSynchronize(a));
            if (stateful_node) {
                CUdeviceptr count_at;
                unsigned count = 0;
                CHECK(cuModuleGetGlobal_v2(&count_at, NULL, stateful, "launches"));
                CHECK(cuMemcpyDtoH_v2(&count, count_at, sizeof count));
                if (count != ((unsigned)round + 1) * (counted_pair ? 2 : 1)) {
                    fprintf(stderr, "footprint_counted counted %u launches in round %d\n", count, round);
                    return 3;
                }
            }
        } else {
            fprintf(stderr, "unknown scenario %s\n", scenario);
            return 2;
        }
    }
    printf("footprint %s %s: done\n", scenario, argv[2]);
    return 0;
}
