// The device half of streamsan's footprint engine: a Compute Sanitizer patch called before
// every global-memory instruction of every kernel, recording which bytes the launch read,
// wrote or accessed atomically.
//
// Built with `nvcc --fatbin --compile-as-tools-patch` (shim/footprint/patch/build.sh) and
// added from memory with sanitizerAddPatches; the host half is shim/footprint/src.
//
// Cost is what matters here: a patch runs for every thread of every memory instruction. So
// the lanes of a warp that touch the same 64 KiB granule first agree on one [lo, hi) and one
// set of flags (__match_any_sync and warp reductions), and one lane per granule updates the
// launch's table, reading before it writes so that the common case (bytes already covered)
// is a load and no atomic.
//
// The table (one per launch, chosen by the host with sanitizerSetLaunchCallbackData) is an
// open-addressing hash of granules. Its layout is shared with the host reader
// (shim/footprint/src/record.rs) and must change with it:
//
//   struct Table {                 // FOOTPRINT_TABLE_BYTES in all
//     u32 overflow;                // set when a granule found no entry
//     u32 cover_flags;             // flags of the overflowed accesses
//     u64 cover_lo_inv;            // ~lo of the overflowed accesses (max of ~lo: min of lo)
//     u64 cover_hi;                // their hi
//     u64 reserved;
//     Entry entries[FOOTPRINT_ENTRIES];
//   };
//   struct Entry {                 // 16 bytes
//     u32 granule;                 // (address >> 16) + 1; 0: free
//     u32 flags;                   // READ 1, WRITE 2, ATOMIC 4
//     u32 lo_inv;                  // ~(lowest offset in the granule): zero means none yet
//     u32 hi;                      // highest end offset in the granule (may pass 65536)
//   };
//
// The granule key is (address >> 16) + 1, which fits 32 bits for every address below 2^48
// (all of a process's device memory): the host rebuilds each address exactly. Zeroed
// memory is an empty table; the host zeroes a table after reading it.

#include <sanitizer_patching.h>
#include <stdint.h>

#define FOOTPRINT_ENTRIES 1024u
#define FOOTPRINT_PROBES 16u
#define GRANULE_SHIFT 16

struct Entry {
    uint32_t granule;
    uint32_t flags;
    uint32_t lo_inv;
    uint32_t hi;
};

struct Table {
    uint32_t overflow;
    uint32_t cover_flags;
    unsigned long long cover_lo_inv;
    unsigned long long cover_hi;
    unsigned long long reserved;
    Entry entries[FOOTPRINT_ENTRIES];
};

static __device__ __forceinline__ uint32_t flags_of(uint32_t sanitizer_flags) {
    // An atomic instruction reports READ|WRITE (and ATOMSYS at system scope): record it as
    // atomic when it says so, as read and write otherwise.
    uint32_t f = sanitizer_flags & (SANITIZER_MEMORY_DEVICE_FLAG_READ | SANITIZER_MEMORY_DEVICE_FLAG_WRITE);
    if (sanitizer_flags & SANITIZER_MEMORY_DEVICE_FLAG_ATOMSYS) f |= 4u;
    return f;
}

static __device__ __forceinline__ void update(Entry* e, uint32_t lo, uint32_t hi, uint32_t flags) {
    // Read first: most warps touch bytes whose granule is already covered that far.
    volatile Entry* v = e;
    if ((v->flags & flags) != flags) atomicOr(&e->flags, flags);
    if (v->lo_inv < ~lo) atomicMax(&e->lo_inv, ~lo);
    if (v->hi < hi) atomicMax(&e->hi, hi);
}

static __device__ void insert(Table* t, uint32_t granule, uint32_t lo, uint32_t hi, uint32_t flags, uint64_t addr_lo, uint64_t addr_hi) {
    uint32_t h = (granule * 2654435761u) & (FOOTPRINT_ENTRIES - 1);
    for (uint32_t probe = 0; probe < FOOTPRINT_PROBES; ++probe) {
        Entry* e = &t->entries[(h + probe) & (FOOTPRINT_ENTRIES - 1)];
        uint32_t k = *(volatile uint32_t*)&e->granule;
        if (k == 0) {
            k = atomicCAS(&e->granule, 0u, granule);
            if (k == 0) k = granule;
        }
        if (k == granule) {
            update(e, lo, hi, flags);
            return;
        }
    }
    // No entry: widen the launch's cover instead (the host reads it as touched, and says so).
    volatile Table* v = t;
    if (v->overflow == 0) atomicExch(&t->overflow, 1u);
    if ((v->cover_flags & flags) != flags) atomicOr(&t->cover_flags, flags);
    if (v->cover_lo_inv < ~addr_lo) atomicMax(&t->cover_lo_inv, (unsigned long long)~addr_lo);
    if (v->cover_hi < addr_hi) atomicMax(&t->cover_hi, (unsigned long long)addr_hi);
}

extern "C" __device__ __noinline__ SanitizerPatchResult streamsan_footprint_access(
    void* userdata, uint64_t pc, void* ptr, uint32_t size, uint32_t flags, const void* new_value) {
    Table* t = (Table*)userdata;
    if (t == nullptr) return SANITIZER_PATCH_SUCCESS;
    uint64_t addr = (uint64_t)ptr;
    uint32_t granule = (uint32_t)((addr >> GRANULE_SHIFT) + 1);
    uint32_t lo = (uint32_t)(addr & ((1u << GRANULE_SHIFT) - 1));
    uint32_t hi = lo + size;
    uint32_t f = flags_of(flags);
    // The lanes of the warp here now, grouped by granule (and by flags, so that one group's
    // reduction never mixes a read lane into a write's bytes).
    uint32_t active = __activemask();
    uint32_t peers = __match_any_sync(active, ((uint64_t)granule << 8) | f);
    // (The redux instruction is not allowed in tools patches: shuffles instead. A whole warp
    // in one granule, the common case, takes five butterfly steps; other groups a step per
    // member.)
    if (peers == 0xffffffffu) {
        for (int offset = 16; offset > 0; offset >>= 1) {
            lo = min(lo, __shfl_xor_sync(peers, lo, offset));
            hi = max(hi, __shfl_xor_sync(peers, hi, offset));
        }
    } else {
        uint32_t rest = peers;
        uint32_t group_lo = lo, group_hi = hi;
        while (rest) {
            int src = __ffs(rest) - 1;
            rest &= rest - 1;
            group_lo = min(group_lo, __shfl_sync(peers, lo, src));
            group_hi = max(group_hi, __shfl_sync(peers, hi, src));
        }
        lo = group_lo;
        hi = group_hi;
    }
    uint32_t lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    if ((uint32_t)(__ffs(peers) - 1) == lane) {
        uint64_t base = addr & ~(uint64_t)((1u << GRANULE_SHIFT) - 1);
        insert(t, granule, lo, hi, f, base + lo, base + hi);
    }
    return SANITIZER_PATCH_SUCCESS;
}
