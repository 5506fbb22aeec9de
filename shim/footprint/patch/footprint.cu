// The device half of streamsan's footprint engine: a Compute Sanitizer patch called before
// every global-memory instruction (and before every cp.async, a read of global memory) of
// every kernel, recording which bytes the launch read, wrote or accessed atomically.
//
// Built with `nvcc --fatbin --compile-as-tools-patch` (shim/footprint/patch/build.sh) and
// added from memory with sanitizerAddPatches; the host half is shim/footprint/src.
//
// Cost is what matters here: a patch runs for every thread of every memory instruction. So
// each lane first reads its entry's first slot, and a warp whose lanes all find their bytes
// there (the common case) does nothing more. Otherwise the lanes that touch the same 32 KiB
// granule in the same way agree on one [lo, hi), one residue mask and one block mask
// (__match_any_sync and warp reductions), and one lane per (granule, kind of access) updates
// the launch's table, reading before it writes so that bytes already covered take no
// atomic. The reads are few
// trips to memory, each waited for in turn by the whole warp: an entry is read in two loads
// issued together, a key not at its first slot has its other slots read at once, and the
// atomics' results are never waited for. A launch with no table (footprint=learn's learnt
// launches in a patched module, graph kernel nodes) returns from an entry that saves almost
// nothing.
//
// The table (one per launch, chosen by the host with sanitizerSetLaunchCallbackData) is an
// open-addressing hash of (granule, kind of access) keys: FOOTPRINT_ENTRIES entries, or
// WIDE_ENTRIES where the table pointer carries WIDE_TAG (the host gives a wide table to a
// kernel whose launch filled a table before). Its layout is shared with the host reader
// (shim/footprint/src/table.rs) and must change with it:
//
//   struct Table {                 // 64 bytes before the entries
//     u32 overflow;                // set when a key found no entry
//     u32 cover_flags;             // flags of the overflowed accesses: reads' in bits 0-7,
//                                  // writes' and atomics' in bits 8-15
//     u64 reserved;
//     u64 early_lo, early_hi;      // pcs of the kernel's code before its first grid wait
//     Cover covers[2];             // the overflowed reads', then writes' and atomics'
//     Entry entries[];             // FOOTPRINT_ENTRIES or WIDE_ENTRIES
//   };
//   struct Cover {
//     u64 lo_inv;                  // ~lo of the overflowed accesses (max of ~lo: min of lo)
//     u64 hi;                      // their hi
//   };
//   struct Entry {                 // 32 bytes
//     u64 key;                     // ((address >> 15) + 1) | flags << KEY_FLAGS_SHIFT; 0: free
//     u32 lo_inv;                  // ~(lowest offset in the granule): zero means none yet
//     u32 hi;                      // highest end offset in the granule (may pass 32768)
//     u64 residues;                // bit i: a byte b touched with (b % 256) / 4 == i
//     u64 blocks;                  // bit j: a warp's bytes met block j (512 bytes) of the granule
//   };
//
// The flags (READ 1, WRITE 2, ATOMIC 4; EARLY 8, below) are part of the key, so a granule's
// reads, its writes and its atomics each have an entry of their own: an input and an output
// that the allocator put in one granule keep their own ranges, never one read-write hull over
// both.
// The covers keep reads apart from writes too: a launch that reads one large array and writes
// another, overflowing, leaves the input read-only.
// The residues keep the gaps of strided access within [lo, hi): x[0::2] and x[1::2] of a
// float array set disjoint bits, so the host can tell their bytes apart. The blocks keep the
// gaps between arrays in one granule: two inputs with an output of another kernel between
// them leave that output's blocks unset (each warp's instruction sets the blocks of its own
// [lo, hi) in the granule, so a block is set only where some warp's bytes lay around it).
//
// The key's granule, (address >> 15) + 1, is at most 2^49 for any 64-bit address, below the
// flags at bit 60: the host rebuilds each address exactly, whatever the address space.
// Zeroed memory is an empty table; the host zeroes a table after reading it.
//
// A kernel launched with programmatic stream serialization may run beside the kernel ahead of
// it until its first grid-dependency wait (griddepcontrol.wait). Where the host knows where
// that wait lies in the kernel's code, it writes [early_lo, early_hi) into the header, the pcs
// from the kernel's first instruction to the wait, and sets bit 0 of the table pointer
// (EARLY_TAG); an access made at a pc in that range carries the flag EARLY, so that the
// kernel's accesses before its wait (in code order) have entries of their own. A launch
// without the tag never reads the header: the common case pays one test.

#include <sanitizer_patching.h>
#include <stdint.h>

#define FOOTPRINT_ENTRIES 2048u
#define WIDE_ENTRIES 32768u
#define FOOTPRINT_PROBES 16u
#define GRANULE_SHIFT 15
#define KEY_FLAGS_SHIFT 60
// Flags beside READ 1, WRITE 2, ATOMIC 4: made before the kernel's first grid-dependency wait.
#define EARLY 8u
// Set in a table pointer whose header holds the early range.
#define EARLY_TAG 1u
// Set in a table pointer to a table of WIDE_ENTRIES entries.
#define WIDE_TAG 2u
// A block is 512 bytes, the unit of CUDA's and the caching allocators' alignment: 64 of
// them, one bit each, span a granule.
#define BLOCK_SHIFT 9
// Slots whose keys are read at once when a key is not at its first.
#define PROBE_BATCH 8u

struct Entry {
    unsigned long long key;
    uint32_t lo_inv;
    uint32_t hi;
    unsigned long long residues;
    unsigned long long blocks;
};

struct Cover {
    unsigned long long lo_inv;
    unsigned long long hi;
};

struct Table {
    uint32_t overflow;
    uint32_t cover_flags;
    unsigned long long reserved;
    unsigned long long early_lo;
    unsigned long long early_hi;
    Cover covers[2];
};

static_assert(sizeof(Table) == 64, "the header table.rs reads");

// The entries follow the header.
static __device__ __forceinline__ Entry* entries_of(Table* t) { return (Entry*)(t + 1); }

static __device__ __forceinline__ uint32_t flags_of(uint32_t sanitizer_flags) {
    // An atomic instruction reports READ|WRITE (and ATOMSYS at system scope): record it as
    // atomic when it says so, as read and write otherwise.
    uint32_t f = sanitizer_flags & (SANITIZER_MEMORY_DEVICE_FLAG_READ | SANITIZER_MEMORY_DEVICE_FLAG_WRITE);
    if (sanitizer_flags & SANITIZER_MEMORY_DEVICE_FLAG_ATOMSYS) f |= 4u;
    return f;
}

// 16 aligned bytes of a table in one load: an entry's first half (key, lo_inv, hi) or its
// second (residues, blocks), the header's first 16 bytes (overflow, cover_flags) or a cover. Every field only grows, so a value read is never ahead of the truth:
// "covered" read is covered.
static __device__ __forceinline__ uint4 load16(const void* p) {
    uint4 v;
    asm volatile("ld.volatile.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p)
                 : "memory");
    return v;
}

static __device__ __forceinline__ unsigned long long join(uint32_t lo, uint32_t hi) {
    return (unsigned long long)hi << 32 | lo;
}

// `head` and `masks` as read from `e` (both zero for an entry just claimed).
static __device__ __forceinline__ void update(Entry* e, uint4 head, uint4 masks, uint32_t lo, uint32_t hi,
                                              unsigned long long residues, unsigned long long blocks) {
    if (head.z < ~lo) atomicMax(&e->lo_inv, ~lo);
    if (head.w < hi) atomicMax(&e->hi, hi);
    if ((join(masks.x, masks.y) & residues) != residues) atomicOr(&e->residues, residues);
    if ((join(masks.z, masks.w) & blocks) != blocks) atomicOr(&e->blocks, blocks);
}

// Claims `e` for `key` if it is free (`seen` its key as read); returns whether it is the
// key's entry.
static __device__ __forceinline__ bool claim(Entry* e, unsigned long long seen, unsigned long long key) {
    if (seen == 0) {
        seen = atomicCAS(&e->key, 0ull, key);
        if (seen == 0) return true;
    }
    return seen == key;
}

// The key's slots after its first (`h`), FOOTPRINT_PROBES in all, then the launch's cover: a
// function of its own, so that the registers its batch of keys takes are saved only when a
// key is not at its first slot.
static __device__ __noinline__ void probe(Table* t, uint32_t mask, uint32_t h, unsigned long long key, uint32_t lo,
                                          uint32_t hi, unsigned long long residues, unsigned long long blocks) {
    Entry* entries = entries_of(t);
    // The other slots' keys, read a batch at once rather than one trip each.
    for (uint32_t from = 1; from < FOOTPRINT_PROBES; from += PROBE_BATCH) {
        unsigned long long keys[PROBE_BATCH];
#pragma unroll
        for (uint32_t k = 0; k < PROBE_BATCH; ++k) {
            uint32_t slot = (h + from + k) & mask;
            keys[k] = from + k < FOOTPRINT_PROBES ? *(volatile unsigned long long*)&entries[slot].key : key;
        }
#pragma unroll
        for (uint32_t k = 0; k < PROBE_BATCH; ++k) {
            if (from + k >= FOOTPRINT_PROBES) break;
            Entry* e = &entries[(h + from + k) & mask];
            if (claim(e, keys[k], key)) {
                update(e, load16(e), load16(&e->residues), lo, hi, residues, blocks);
                return;
            }
        }
    }
    // No entry: widen the launch's cover of its kind instead, reads' or the others' (the host
    // reads a cover as touched, and says so; a cover keeps no residues).
    uint32_t flags = (uint32_t)(key >> KEY_FLAGS_SHIFT);
    uint32_t kind = (flags & 6u) != 0;
    uint32_t kind_flags = flags << (8 * kind);
    uint64_t base = ((key & ((1ull << KEY_FLAGS_SHIFT) - 1)) - 1) << GRANULE_SHIFT;
    uint64_t addr_lo = base + lo, addr_hi = base + hi;
    Cover* c = &t->covers[kind];
    uint4 head = load16(t);
    uint4 cover = load16(c);
    if (head.x == 0) atomicExch(&t->overflow, 1u);
    if ((head.y & kind_flags) != kind_flags) atomicOr(&t->cover_flags, kind_flags);
    if (join(cover.x, cover.y) < ~addr_lo) atomicMax(&c->lo_inv, (unsigned long long)~addr_lo);
    if (join(cover.z, cover.w) < addr_hi) atomicMax(&c->hi, (unsigned long long)addr_hi);
}

// The key's first slot in a table of `mask` + 1 entries: linear probing starts there
// (table.rs reads the same). Odd and even flags start half a table apart, so that the reads
// and the writes of the same granules (a kernel working in place) fill disjoint slots.
static __device__ __forceinline__ uint32_t first_slot(unsigned long long key, uint32_t mask) {
    return ((uint32_t)key * 2654435761u + (uint32_t)(key >> KEY_FLAGS_SHIFT) * ((mask + 1) / 2)) & mask;
}

// `mask`: the table's entries less one.
static __device__ __noinline__ void insert(Table* t, uint32_t mask, unsigned long long key, uint32_t lo, uint32_t hi,
                                           unsigned long long residues, unsigned long long blocks) {
    uint32_t h = first_slot(key, mask);
    Entry* first = &entries_of(t)[h];
    uint4 head = load16(first);
    uint4 masks = load16(&first->residues);
    unsigned long long seen = join(head.x, head.y);
    if (seen == key || (seen == 0 && claim(first, 0, key))) {
        // A slot just claimed holds nothing yet (a zeroed table).
        bool mine = seen == key;
        update(first, mine ? head : make_uint4(0, 0, 0, 0), mine ? masks : make_uint4(0, 0, 0, 0), lo, hi, residues,
               blocks);
        return;
    }
    probe(t, mask, h, key, lo, hi, residues, blocks);
}

// Update: whether the group's lane updates the table (false only in the experiment below).
template <bool Update>
static __device__ __noinline__ void record(void* userdata, uint64_t pc, void* ptr, uint32_t size, uint32_t flags);

// Records an access unless every lane of the warp here finds its bytes in its table already.
static __device__ __forceinline__ void measure(void* userdata, uint64_t pc, void* ptr, uint32_t size, uint32_t flags);

// The patch: a launch without a table returns at once, a covered access after two loads
// (measure()); the grouping, and the registers it must save, are in record(), and the
// table's update in insert(), called by one lane per group (so that only that lane saves
// what the update needs).
extern "C" __device__ __noinline__ SanitizerPatchResult streamsan_footprint_access(
    void* userdata, uint64_t pc, void* ptr, uint32_t size, uint32_t flags, const void* new_value) {
    if (userdata != nullptr) measure(userdata, pc, ptr, size, flags);
    return SANITIZER_PATCH_SUCCESS;
}

// The floor of a measured launch's cost: the same patch points, recording nothing. Only the
// shim built with `experiments` patches with it (STREAMSAN_FOOTPRINT_FLOOR, tests/gpu/perf).
extern "C" __device__ __noinline__ SanitizerPatchResult streamsan_footprint_nothing(
    void* userdata, uint64_t pc, void* ptr, uint32_t size, uint32_t flags, const void* new_value) {
    return SANITIZER_PATCH_SUCCESS;
}

// The lanes group and reduce as they do to record, every time, and the table is not
// touched. Only the shim built with `experiments` patches with it
// (STREAMSAN_FOOTPRINT_FLOOR=grouping), so that a run splits a measured launch's cost into
// patching, grouping and the table's update.
extern "C" __device__ __noinline__ SanitizerPatchResult streamsan_footprint_grouping(
    void* userdata, uint64_t pc, void* ptr, uint32_t size, uint32_t flags, const void* new_value) {
    if (userdata != nullptr) record<false>(userdata, pc, ptr, size, flags);
    return SANITIZER_PATCH_SUCCESS;
}

// cp.async (SANITIZER_INSTRUCTION_MEMCPY_ASYNC): a read of `size` global bytes at `src` into
// shared memory, which the global-memory class does not report (`src` null: a copy of no
// source bytes, which zero-fills).
extern "C" __device__ __noinline__ SanitizerPatchResult streamsan_footprint_memcpy_async(
    void* userdata, uint64_t pc, void* src, uint32_t dst, uint32_t size) {
    if (userdata != nullptr && src != nullptr) measure(userdata, pc, src, size, SANITIZER_MEMORY_DEVICE_FLAG_READ);
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

// The block bits of offsets [lo, hi) of a granule (an end past the granule in its last block).
static __device__ __forceinline__ unsigned long long blocks_of(uint32_t lo, uint32_t hi) {
    uint32_t first = lo >> BLOCK_SHIFT, last = min((max(hi, lo + 1) - 1) >> BLOCK_SHIFT, 63u);
    return ((2ull << (last - first)) - 1) << first;
}

static __device__ __forceinline__ Table* table_of(void* userdata) {
    return (Table*)((uint64_t)userdata & ~(uint64_t)(EARLY_TAG | WIDE_TAG));
}

// The flags of a key: the access's kind, and EARLY where the table's header says its pc lies
// before the kernel's first grid-dependency wait. The pc is the patched instruction's, the
// same for every lane here: a call into another function (a pc outside the range) is not
// early.
static __device__ __forceinline__ uint32_t key_flags(void* userdata, uint64_t pc, uint32_t flags) {
    uint32_t f = flags_of(flags);
    if ((uint64_t)userdata & EARLY_TAG) {
        ulonglong2 early = *(const ulonglong2*)&table_of(userdata)->early_lo;
        if (early.x <= pc && pc < early.y) f |= EARLY;
    }
    return f;
}

static __device__ __forceinline__ unsigned long long key_of(uint64_t addr, uint32_t f) {
    return ((addr >> GRANULE_SHIFT) + 1) | (unsigned long long)f << KEY_FLAGS_SHIFT;
}

static __device__ __forceinline__ uint32_t mask_of(void* userdata) {
    return ((uint64_t)userdata & WIDE_TAG ? WIDE_ENTRIES : FOOTPRINT_ENTRIES) - 1;
}

template <bool Update>
static __device__ __noinline__ void record(void* userdata, uint64_t pc, void* ptr, uint32_t size, uint32_t flags) {
    Table* t = table_of(userdata);
    uint64_t addr = (uint64_t)ptr;
    uint32_t lo = (uint32_t)(addr & ((1u << GRANULE_SHIFT) - 1));
    uint32_t hi = lo + size;
    uint32_t f = key_flags(userdata, pc, flags);
    unsigned long long residues = residues_of(addr, size);
    // The lanes of the warp here now, grouped by granule and flags: a group is one entry's.
    uint32_t active = __activemask();
    uint32_t peers = __match_any_sync(active, (addr >> GRANULE_SHIFT) << 4 | f);
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
        unsigned long long key = key_of(addr, f);
        uint32_t mask = mask_of(userdata);
        if (Update) {
            insert(t, mask, key, lo, hi, residues, blocks_of(lo, hi));
        } else if ((lo ^ hi ^ (uint32_t)residues ^ (uint32_t)key) == 0x5eed5eedu) {
            // Never true in practice; keeps the reductions from being compiled away.
            t->reserved = 1;
        }
    }
}

// The common case is a warp whose bytes its table holds already: each lane reads its key's
// first slot (the lanes of one granule read one entry, one transaction) and the warp records
// only if some lane's bytes are not there, so that a covered access costs two loads and a
// vote instead of the grouping. A lane covered on its own needs no update: the grouped one
// would only add the blocks between lanes, which no lane touched.
static __device__ __forceinline__ void measure(void* userdata, uint64_t pc, void* ptr, uint32_t size,
                                               uint32_t flags) {
    uint64_t addr = (uint64_t)ptr;
    uint32_t lo = (uint32_t)(addr & ((1u << GRANULE_SHIFT) - 1));
    uint32_t hi = lo + size;
    unsigned long long key = key_of(addr, key_flags(userdata, pc, flags));
    Entry* e = &entries_of(table_of(userdata))[first_slot(key, mask_of(userdata))];
    uint4 head = load16(e);
    uint4 masks = load16(&e->residues);
    unsigned long long residues = residues_of(addr, size), blocks = blocks_of(lo, hi);
    bool covered = join(head.x, head.y) == key && head.z >= ~lo && head.w >= hi &&
                   (join(masks.x, masks.y) & residues) == residues && (join(masks.z, masks.w) & blocks) == blocks;
    if (!__all_sync(__activemask(), covered)) record<true>(userdata, pc, ptr, size, flags);
}
