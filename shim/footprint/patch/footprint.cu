// The device half of streamsan's footprint engine: a Compute Sanitizer patch called before
// every global-memory instruction (and before every cp.async, a read of global memory) of
// every kernel, recording which bytes the launch read, wrote or accessed atomically.
//
// Built with `nvcc --fatbin --compile-as-tools-patch` (shim/footprint/patch/build.sh) and
// added from memory with sanitizerAddPatches; the host half is shim/footprint/src.
//
// Cost is what matters here: a patch runs for every thread of every memory instruction. So
// the lanes of a warp that touch the same 64 KiB granule first agree on one [lo, hi) and one
// set of flags and one residue mask (__match_any_sync and warp reductions), and one lane per
// granule updates the
// launch's table, reading before it writes so that the common case (bytes already covered)
// is a load and no atomic. The reads are few trips to memory, each waited for in turn by the
// whole warp: an entry is read in two loads issued together (its granule and what it holds), a
// granule not at its first slot has its other slots read at once, and the atomics' results
// are never waited for. A launch with no table (footprint=learn's learnt launches in a
// patched module, graph kernel nodes) returns from an entry that saves almost nothing.
//
// The table (one per launch, chosen by the host with sanitizerSetLaunchCallbackData) is an
// open-addressing hash of granules. Its layout is shared with the host reader
// (shim/footprint/src/table.rs) and must change with it:
//
//   struct Table {                 // FOOTPRINT_TABLE_BYTES in all
//     u32 overflow;                // set when a granule found no entry
//     u32 cover_flags;             // flags of the overflowed accesses
//     u64 cover_lo_inv;            // ~lo of the overflowed accesses (max of ~lo: min of lo)
//     u64 cover_hi;                // their hi
//     u64 reserved;
//     Entry entries[FOOTPRINT_ENTRIES];
//   };
//   struct Entry {                 // 32 bytes
//     u32 granule;                 // (address >> 16) + 1; 0: free
//     u32 flags;                   // READ 1, WRITE 2, ATOMIC 4
//     u32 lo_inv;                  // ~(lowest offset in the granule): zero means none yet
//     u32 hi;                      // highest end offset in the granule (may pass 65536)
//     u64 residues;                // bit i: a byte b touched with (b % 256) / 4 == i
//     u64 reserved;
//   };
//
// The residues keep the gaps of strided access within [lo, hi): x[0::2] and x[1::2] of a
// float array set disjoint bits, so the host can tell their bytes apart.
//
// The granule key is (address >> 16) + 1, which fits 32 bits for every address below 2^48
// (all of a process's device memory): the host rebuilds each address exactly. Zeroed
// memory is an empty table; the host zeroes a table after reading it.

#include <sanitizer_patching.h>
#include <stdint.h>

#define FOOTPRINT_ENTRIES 1024u
#define FOOTPRINT_PROBES 16u
#define GRANULE_SHIFT 16
// Slots whose granules are read at once when a granule is not at its first.
#define PROBE_BATCH 8u

struct Entry {
    uint32_t granule;
    uint32_t flags;
    uint32_t lo_inv;
    uint32_t hi;
    unsigned long long residues;
    unsigned long long reserved;
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

// 16 aligned bytes of a table in one load: an entry (granule, flags, lo_inv, hi), or the
// header's first half (overflow, cover_flags, cover_lo_inv). Every field only grows, so a
// value read is never ahead of the truth: "covered" read is covered.
static __device__ __forceinline__ uint4 load16(const void* p) {
    uint4 v;
    asm volatile("ld.volatile.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p)
                 : "memory");
    return v;
}

static __device__ __forceinline__ unsigned long long load_residues(const Entry* e) {
    return *(volatile const unsigned long long*)&e->residues;
}

static __device__ __forceinline__ void update(Entry* e, uint4 seen, unsigned long long seen_residues, uint32_t lo,
                                              uint32_t hi, uint32_t flags, unsigned long long residues) {
    if ((seen.y & flags) != flags) atomicOr(&e->flags, flags);
    if (seen.z < ~lo) atomicMax(&e->lo_inv, ~lo);
    if (seen.w < hi) atomicMax(&e->hi, hi);
    if ((seen_residues & residues) != residues) atomicOr(&e->residues, residues);
}

// Claims `e` for `granule` if it is free (`seen` its granule as read); returns whether it is
// the granule's entry.
static __device__ __forceinline__ bool claim(Entry* e, uint32_t seen, uint32_t granule) {
    if (seen == 0) {
        seen = atomicCAS(&e->granule, 0u, granule);
        if (seen == 0) return true;
    }
    return seen == granule;
}

static __device__ __noinline__ void insert(Table* t, uint32_t granule, uint32_t lo, uint32_t hi, uint32_t flags,
                                           unsigned long long residues, uint64_t addr_lo, uint64_t addr_hi) {
    // Linear probing from the granule's hash, FOOTPRINT_PROBES slots (table.rs reads the same).
    uint32_t h = (granule * 2654435761u) & (FOOTPRINT_ENTRIES - 1);
    Entry* first = &t->entries[h];
    uint4 seen = load16(first);
    unsigned long long seen_residues = load_residues(first);
    if (seen.x == granule || (seen.x == 0 && claim(first, 0, granule))) {
        // A slot just claimed holds nothing yet (a zeroed table).
        bool mine = seen.x == granule;
        update(first, mine ? seen : make_uint4(granule, 0, 0, 0), mine ? seen_residues : 0, lo, hi, flags, residues);
        return;
    }
    // The other slots' granules, read a batch at once rather than one trip each.
    for (uint32_t from = 1; from < FOOTPRINT_PROBES; from += PROBE_BATCH) {
        uint32_t granules[PROBE_BATCH];
#pragma unroll
        for (uint32_t k = 0; k < PROBE_BATCH; ++k) {
            uint32_t slot = (h + from + k) & (FOOTPRINT_ENTRIES - 1);
            granules[k] = from + k < FOOTPRINT_PROBES ? *(volatile uint32_t*)&t->entries[slot].granule : granule;
        }
#pragma unroll
        for (uint32_t k = 0; k < PROBE_BATCH; ++k) {
            if (from + k >= FOOTPRINT_PROBES) break;
            Entry* e = &t->entries[(h + from + k) & (FOOTPRINT_ENTRIES - 1)];
            if (claim(e, granules[k], granule)) {
                update(e, load16(e), load_residues(e), lo, hi, flags, residues);
                return;
            }
        }
    }
    // No entry: widen the launch's cover instead (the host reads it as touched, and says so;
    // a cover keeps no residues).
    uint4 head = load16(t);
    unsigned long long cover_hi = *(volatile unsigned long long*)&t->cover_hi;
    unsigned long long cover_lo_inv = (unsigned long long)head.w << 32 | head.z;
    if (head.x == 0) atomicExch(&t->overflow, 1u);
    if ((head.y & flags) != flags) atomicOr(&t->cover_flags, flags);
    if (cover_lo_inv < ~addr_lo) atomicMax(&t->cover_lo_inv, (unsigned long long)~addr_lo);
    if (cover_hi < addr_hi) atomicMax(&t->cover_hi, (unsigned long long)addr_hi);
}

static __device__ __noinline__ void record(Table* t, void* ptr, uint32_t size, uint32_t flags);

// The patch: a launch without a table returns at once; the work, and the registers it must
// save, are in record(), and the table's update in insert(), called by one lane per granule
// (so that only that lane saves what the update needs).
extern "C" __device__ __noinline__ SanitizerPatchResult streamsan_footprint_access(
    void* userdata, uint64_t pc, void* ptr, uint32_t size, uint32_t flags, const void* new_value) {
    if (userdata != nullptr) record((Table*)userdata, ptr, size, flags);
    return SANITIZER_PATCH_SUCCESS;
}

// cp.async (SANITIZER_INSTRUCTION_MEMCPY_ASYNC): a read of `size` global bytes at `src` into
// shared memory, which the global-memory class does not report (`src` null: a copy of no
// source bytes, which zero-fills).
extern "C" __device__ __noinline__ SanitizerPatchResult streamsan_footprint_memcpy_async(
    void* userdata, uint64_t pc, void* src, uint32_t dst, uint32_t size) {
    if (userdata != nullptr && src != nullptr) record((Table*)userdata, src, size, SANITIZER_MEMORY_DEVICE_FLAG_READ);
    return SANITIZER_PATCH_SUCCESS;
}

// The residue bits of [addr, addr + size): one per 4-byte slot it covers, modulo 256 bytes.
static __device__ __forceinline__ unsigned long long residues_of(uint64_t addr, uint32_t size) {
    uint64_t first = addr >> 2, last = (addr + max(size, 1u) - 1) >> 2;
    if (last - first >= 63) return ~0ull;
    unsigned long long run = (2ull << (last - first)) - 1;
    uint32_t at = (uint32_t)(first & 63);
    return at == 0 ? run : (run << at) | (run >> (64 - at));
}

static __device__ __noinline__ void record(Table* t, void* ptr, uint32_t size, uint32_t flags) {
    uint64_t addr = (uint64_t)ptr;
    uint32_t granule = (uint32_t)((addr >> GRANULE_SHIFT) + 1);
    uint32_t lo = (uint32_t)(addr & ((1u << GRANULE_SHIFT) - 1));
    uint32_t hi = lo + size;
    uint32_t f = flags_of(flags);
    unsigned long long residues = residues_of(addr, size);
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
            residues |= __shfl_xor_sync(peers, residues, offset);
        }
    } else {
        uint32_t rest = peers;
        uint32_t group_lo = lo, group_hi = hi;
        unsigned long long group_residues = residues;
        while (rest) {
            int src = __ffs(rest) - 1;
            rest &= rest - 1;
            group_lo = min(group_lo, __shfl_sync(peers, lo, src));
            group_hi = max(group_hi, __shfl_sync(peers, hi, src));
            group_residues |= __shfl_sync(peers, residues, src);
        }
        lo = group_lo;
        hi = group_hi;
        residues = group_residues;
    }
    uint32_t lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    if ((uint32_t)(__ffs(peers) - 1) == lane) {
        uint64_t base = addr & ~(uint64_t)((1u << GRANULE_SHIFT) - 1);
        insert(t, granule, lo, hi, f, residues, base + lo, base + hi);
    }
}
