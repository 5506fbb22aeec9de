//! A launch's table, as the device patch leaves it (`patch/footprint.cu` holds the same
//! layout, and the two change together), and its reading into byte ranges.

/// Bytes a granule spans (`GRANULE_SHIFT` in the patch).
pub const GRANULE_SHIFT: u32 = 15;
/// Where a key's flags start (`KEY_FLAGS_SHIFT`): above the granule of any 64-bit address.
pub const KEY_FLAGS_SHIFT: u32 = 60;
/// Bytes a block of a granule spans (`BLOCK_SHIFT`): 64 blocks, one bit each, of 512 bytes,
/// the alignment of CUDA's allocations and of the caching allocators' blocks, so that a run's
/// start in a granule is a buffer's own first byte.
pub const BLOCK_SHIFT: u32 = 9;
/// Entries of a table (`FOOTPRINT_ENTRIES`).
pub const ENTRIES: usize = 2048;
/// Entries of a wide table (`WIDE_ENTRIES`): a kernel whose launch filled a table is given
/// one, so that its later launches are measured exactly where they touch up to a GiB.
pub const WIDE_ENTRIES: usize = 32768;
/// Slots a key may take from its hash on (`FOOTPRINT_PROBES`).
pub const PROBES: usize = 16;
/// The header before the entries: overflow, cover_flags, reserved, early_lo, early_hi, then
/// the two covers ([`COVERS_AT`]).
pub const HEADER_BYTES: usize = 64;
/// Where the header holds `[early_lo, early_hi)`: the program counters of the kernel's
/// instructions before its first grid-dependency wait, written by the host before a launch
/// whose table pointer carries [`EARLY_TAG`].
pub const EARLY_AT: usize = 16;
/// Where the header holds its covers, `[lo_inv, hi]` each: the overflowed reads', then the
/// overflowed writes' and atomics' (so that an overflowed input stays read-only). Their
/// flags are in `cover_flags`, the reads' in bits 0-7, the others' in bits 8-15.
pub const COVERS_AT: usize = 32;
/// Set in a launch's table pointer (its callback data) when its header holds the early range:
/// the patch reads the header only then.
pub const EARLY_TAG: usize = 1;
/// Set in a launch's table pointer when its table is wide ([`WIDE_ENTRIES`]).
pub const WIDE_TAG: usize = 2;
/// One entry: key, lo_inv, hi, residues, blocks.
pub const ENTRY_BYTES: usize = 32;
/// A whole table, and a wide one.
pub const TABLE_BYTES: usize = HEADER_BYTES + ENTRIES * ENTRY_BYTES;
pub const WIDE_TABLE_BYTES: usize = HEADER_BYTES + WIDE_ENTRIES * ENTRY_BYTES;

/// The bytes of a table, wide or not.
pub fn table_bytes(wide: bool) -> usize {
    if wide {
        WIDE_TABLE_BYTES
    } else {
        TABLE_BYTES
    }
}

/// The entries of a table of `bytes` bytes (one of the two sizes).
fn entries_in(bytes: usize) -> usize {
    assert!(bytes == TABLE_BYTES || bytes == WIDE_TABLE_BYTES, "a whole table");
    (bytes - HEADER_BYTES) / ENTRY_BYTES
}

/// The kinds of access, as the patch's flags.
pub const READ: u32 = 1;
pub const WRITE: u32 = 2;
pub const ATOMIC: u32 = 4;
/// With a kind: made by an instruction in the early range, before the kernel's first
/// grid-dependency wait (in code order).
pub const EARLY: u32 = 8;

/// Residues of every byte: a range touched densely.
pub const DENSE: u64 = u64::MAX;

/// Runs of blocks an entry reads as apart at most: past that, the entry's accesses are
/// strided (which its residues describe) and it reads as its hull, so that a launch's ranges
/// stay bounded. Up to this many buffers of one granule (a multi-tensor kernel's small
/// tensors among others) each keep their own ends.
pub const MAX_RUNS: usize = 16;

/// Bytes `[lo, hi)` the launch accessed in the ways `flags` says; of them, only bytes `b`
/// whose residue bit `(b % 256) / 4` is set in `residues`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub lo: u64,
    pub hi: u64,
    pub flags: u32,
    pub residues: u64,
}

/// The residue bits of `[addr, addr + size)`: one per 4-byte slot it covers, modulo 256
/// bytes (the patch's `residues_of`).
pub fn residues(addr: u64, size: u64) -> u64 {
    let (first, last) = (addr >> 2, (addr + size.max(1) - 1) >> 2);
    if last - first >= 63 {
        return DENSE;
    }
    ((2u64 << (last - first)) - 1).rotate_left((first & 63) as u32)
}

/// The block bits of offsets `[lo, hi)` of a granule, an end past the granule in its last
/// block (the patch's `blocks_of`).
pub fn blocks(lo: u32, hi: u32) -> u64 {
    let (first, last) = (lo >> BLOCK_SHIFT, ((hi.max(lo + 1) - 1) >> BLOCK_SHIFT).min(63));
    // 2 << 63 wraps to 0, as in the patch: all 64 bits.
    (2u64 << (last - first)).wrapping_sub(1) << first
}

/// The key of the entry for accesses at `addr` of kind `flags`: its granule and its flags.
pub fn key(addr: u64, flags: u32) -> u64 {
    ((addr >> GRANULE_SHIFT) + 1) | u64::from(flags) << KEY_FLAGS_SHIFT
}

/// The first address of a key's granule, and its flags; `None` for a key of no granule (a
/// free entry's).
pub fn unkey(key: u64) -> Option<(u64, u32)> {
    let granule = key & ((1 << KEY_FLAGS_SHIFT) - 1);
    (granule != 0).then(|| ((granule - 1) << GRANULE_SHIFT, (key >> KEY_FLAGS_SHIFT) as u32))
}

/// The slot a key's probing starts at in a table of `entries` (the patch's `insert`): odd
/// and even flags half a table apart, so that a kernel that reads and writes the same
/// granules (in place) finds them in disjoint slots.
fn slot(key: u64, entries: usize) -> usize {
    let (granule, flags) = (key as u32, (key >> KEY_FLAGS_SHIFT) as u32);
    granule.wrapping_mul(2654435761).wrapping_add(flags * (entries as u32 / 2)) as usize & (entries - 1)
}

/// What a launch was seen to touch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Measured {
    /// Sorted by `lo`; ranges of equal flags neither overlap nor touch.
    pub ranges: Vec<Range>,
    /// The table was full: every access that found no entry lies in one of these ranges
    /// (which may span memory the launch never touched), reads apart from writes and
    /// atomics. Never [`EARLY`]: a cover may hold accesses of both sides of the wait.
    pub covers: Vec<Range>,
    /// The patch was given the launch's early range: ranges flagged [`EARLY`] were touched
    /// before the kernel's first grid-dependency wait, the others after it. Otherwise no
    /// range is early, and where each lies around a wait is not known.
    pub wait_known: bool,
}

/// The header bytes at [`EARLY_AT`] that give the patch the early range `[lo, hi)`.
pub fn early_header(lo: u64, hi: u64) -> [u8; 16] {
    let mut bytes = [0; 16];
    bytes[..8].copy_from_slice(&lo.to_le_bytes());
    bytes[8..].copy_from_slice(&hi.to_le_bytes());
    bytes
}

/// Whether the patch takes an access at program counter `pc` as early, in a launch whose
/// table is `table` and whose table pointer carries [`EARLY_TAG`] where `tagged` (the patch's
/// rule, for the stand-in engine of tests).
pub fn is_early(table: &[u8], tagged: bool, pc: u64) -> bool {
    tagged && u64_at(table, EARLY_AT) <= pc && pc < u64_at(table, EARLY_AT + 8)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// Offsets `[lo, hi)` of a granule narrowed to the runs of set bits of `blocks`, into `out`
/// (cleared first): the hull where they are more than [`MAX_RUNS`] (or none, an entry not yet
/// updated).
fn runs(lo: u32, hi: u32, blocks: u64, out: &mut Vec<(u32, u32)>) {
    out.clear();
    let mut rest = blocks;
    while rest != 0 && out.len() <= MAX_RUNS {
        let first = rest.trailing_zeros();
        let end = first + (rest >> first).trailing_ones();
        rest &= u64::MAX.checked_shl(end).unwrap_or(0);
        // The last block holds every end past it (an access running into the next granule).
        let run = (lo.max(first << BLOCK_SHIFT), if end == 64 { hi } else { hi.min(end << BLOCK_SHIFT) });
        if run.0 < run.1 {
            out.push(run);
        }
    }
    if out.is_empty() || out.len() > MAX_RUNS {
        out.clear();
        out.push((lo, hi));
    }
}

/// Reads a table copied from the device (all of it, wide or not); `wait_known`: the
/// launch's table pointer carried [`EARLY_TAG`].
pub fn read(table: &[u8], wait_known: bool) -> Measured {
    let entries = entries_in(table.len());
    let covers = (0..2)
        .map(|kind| (COVERS_AT + 16 * kind, (u32_at(table, 4) >> (8 * kind)) & 0xff & !EARLY))
        .filter(|&(_, flags)| u32_at(table, 0) != 0 && flags != 0)
        .map(|(at, flags)| Range { lo: !u64_at(table, at), hi: u64_at(table, at + 8), flags, residues: DENSE })
        .collect();
    let (mut ranges, mut parts) = (Vec::new(), Vec::with_capacity(MAX_RUNS + 1));
    for at in (0..entries).map(|i| HEADER_BYTES + i * ENTRY_BYTES) {
        let (key, lo_inv, hi) = (u64_at(table, at), u32_at(table, at + 8), u32_at(table, at + 12));
        // An entry claimed by a warp whose update other warps had not finished is still whole
        // by the time the kernel completes; lo_inv 0 would be an entry never updated (not
        // written by the patch), kept out rather than read as offset ~0.
        let Some((base, flags)) = unkey(key).filter(|&(_, flags)| flags != 0 && lo_inv != 0) else {
            continue;
        };
        // Masks not yet or-ed in (never so once the kernel completed) read as every bit.
        let residues = Some(u64_at(table, at + 16)).filter(|&r| r != 0).unwrap_or(DENSE);
        runs(!lo_inv, hi, u64_at(table, at + 24), &mut parts);
        ranges.extend(parts.iter().map(|&(lo, hi)| Range {
            lo: base + u64::from(lo),
            hi: base + u64::from(hi),
            flags,
            residues,
        }));
    }
    merge(&mut ranges);
    Measured { ranges, covers, wait_known }
}

/// Sorts `ranges` and joins those of equal flags that overlap or touch (with the residues of
/// both).
pub fn merge(ranges: &mut Vec<Range>) {
    ranges.sort_unstable_by_key(|r| (r.flags, r.lo));
    let mut out: Vec<Range> = Vec::with_capacity(ranges.len());
    for r in ranges.drain(..) {
        match out.last_mut() {
            Some(last) if last.flags == r.flags && r.lo <= last.hi => {
                last.hi = last.hi.max(r.hi);
                last.residues |= r.residues;
            }
            _ => out.push(r),
        }
    }
    out.sort_unstable_by_key(|r| r.lo);
    *ranges = out;
}

/// Adds `accesses` (address, size, flags), one access per warp step, to `table` as the patch
/// would: what the stand-in engine writes in tests, so that the host path from table to model
/// runs in CI without a GPU. Like the patch it only adds, so a table the host did not zero
/// after reading it still holds what the launch before wrote.
pub fn emulate(table: &mut [u8], accesses: &[(u64, u32, u32)]) {
    let entries = entries_in(table.len());
    // The patch's atomics: a 32-bit or 64-bit field at `at` becomes `update` of itself.
    let update32 = |t: &mut [u8], at: usize, update: &dyn Fn(u32) -> u32| {
        let v = update(u32_at(t, at));
        t[at..at + 4].copy_from_slice(&v.to_le_bytes());
    };
    let update64 = |t: &mut [u8], at: usize, update: &dyn Fn(u64) -> u64| {
        let v = update(u64_at(t, at));
        t[at..at + 8].copy_from_slice(&v.to_le_bytes());
    };
    for &(addr, size, flags) in accesses {
        let key = key(addr, flags);
        let lo = (addr & ((1 << GRANULE_SHIFT) - 1)) as u32;
        let hi = lo + size;
        let h = slot(key, entries);
        let entry = (0..PROBES).map(|probe| HEADER_BYTES + ((h + probe) & (entries - 1)) * ENTRY_BYTES).find(|&at| {
            let k = u64_at(table, at);
            k == 0 || k == key
        });
        match entry {
            Some(at) => {
                update64(table, at, &|_| key);
                update32(table, at + 8, &|v| v.max(!lo));
                update32(table, at + 12, &|v| v.max(hi));
                update64(table, at + 16, &|v| v | residues(addr, u64::from(size)));
                update64(table, at + 24, &|v| v | blocks(lo, hi));
            }
            None => {
                let kind = usize::from(flags & (WRITE | ATOMIC) != 0);
                let at = COVERS_AT + 16 * kind;
                update32(table, 0, &|_| 1);
                update32(table, 4, &|v| v | flags << (8 * kind));
                update64(table, at, &|v| v.max(!addr));
                update64(table, at + 8, &|v| v.max(addr + u64::from(size)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 0x7f00_0000_0000;
    /// The offsets within a granule.
    const IN_GRANULE: u64 = (1 << GRANULE_SHIFT) - 1;

    /// A zeroed table after `accesses`.
    fn fresh(accesses: &[(u64, u32, u32)]) -> Vec<u8> {
        let mut table = vec![0; TABLE_BYTES];
        emulate(&mut table, accesses);
        table
    }

    /// A dense range.
    fn dense(lo: u64, hi: u64, flags: u32) -> Range {
        Range { lo, hi, flags, residues: DENSE }
    }

    #[test]
    fn a_streamed_buffer_reads_as_one_range() {
        // 1 MiB written in 128-byte warp steps: 16 granules, one range.
        let steps: Vec<_> = (0..8192u64).map(|i| (BASE + i * 128, 128, WRITE)).collect();
        let m = read(&fresh(&steps), false);
        assert_eq!(m.ranges, vec![dense(BASE, BASE + (1 << 20), WRITE)]);
        assert!(m.covers.is_empty());
    }

    #[test]
    fn an_interior_range_keeps_its_exact_ends() {
        let lo = BASE + 0x1_2344;
        let m = read(&fresh(&[(lo, 4, READ), (lo + 0x2_0000, 4, READ)]), false);
        // Two granules apart: two ranges, each byte-exact.
        assert_eq!(
            m.ranges,
            vec![
                Range { lo, hi: lo + 4, flags: READ, residues: residues(lo, 4) },
                Range { lo: lo + 0x2_0000, hi: lo + 0x2_0004, flags: READ, residues: residues(lo, 4) }
            ]
        );
    }

    #[test]
    fn reads_writes_and_atomics_of_one_granule_keep_their_own_ranges() {
        // An input, an output and a counter side by side in one granule (as an allocator
        // places small arrays): a read hull never carries a write, nor a write hull a read.
        let m = read(&fresh(&[(BASE, 4096, READ), (BASE + 4096, 4096, WRITE), (BASE + 8192, 4, ATOMIC)]), false);
        assert_eq!(
            m.ranges,
            vec![
                dense(BASE, BASE + 4096, READ),
                dense(BASE + 4096, BASE + 8192, WRITE),
                Range { lo: BASE + 8192, hi: BASE + 8196, flags: ATOMIC, residues: residues(0, 4) }
            ]
        );
        // A kernel that reads and writes the same bytes (in place) has both.
        let m = read(&fresh(&[(BASE, 256, READ), (BASE, 256, WRITE)]), false);
        assert_eq!(m.ranges, vec![dense(BASE, BASE + 256, READ), dense(BASE, BASE + 256, WRITE)]);
    }

    #[test]
    fn the_key_holds_the_kind_of_access_apart_from_the_granule() {
        for addr in [BASE, BASE + IN_GRANULE, 1 << GRANULE_SHIFT] {
            let keys: Vec<u64> = (1..16).map(|flags| key(addr, flags)).collect();
            // One granule, fifteen kinds (early or not): fifteen keys, each giving back its
            // granule and kind.
            for (flags, &k) in (1..16).zip(&keys) {
                assert_eq!(unkey(k), Some((addr & !IN_GRANULE, flags)));
                assert_eq!(keys.iter().filter(|&&other| other == k).count(), 1);
            }
        }
        // The key of a free entry is no granule's.
        assert_eq!(unkey(0), None);
    }

    #[test]
    fn the_key_rebuilds_every_address_exactly() {
        // The top granule below 2^47 (x86-64's user space), below 2^48 (AArch64's), below
        // 2^57 (five-level paging) and the highest granule a 64-bit address has: the granule
        // stays below the flags' bits, and no read is taken for a write.
        for top in [1u64 << 47, 1 << 48, 1 << 57, 0] {
            let addr = top.wrapping_sub(1 << GRANULE_SHIFT) + 0x100;
            assert!(((addr >> GRANULE_SHIFT) + 1) < 1 << KEY_FLAGS_SHIFT);
            for flags in [READ, WRITE, ATOMIC | READ | WRITE, EARLY | ATOMIC | READ | WRITE] {
                assert_eq!(unkey(key(addr, flags)), Some((addr & !IN_GRANULE, flags)));
            }
        }
        let addr = (1u64 << 48) - (1 << GRANULE_SHIFT) + 0x100;
        let m = read(&fresh(&[(addr, 8, READ), (addr + 8, 8, WRITE)]), false);
        assert_eq!(
            m.ranges,
            vec![
                Range { lo: addr, hi: addr + 8, flags: READ, residues: residues(addr, 8) },
                Range { lo: addr + 8, hi: addr + 16, flags: WRITE, residues: residues(addr + 8, 8) }
            ]
        );
    }

    #[test]
    fn arrays_a_block_apart_in_one_granule_read_apart() {
        // Two inputs read with an output of another kernel between them: the output's
        // blocks stay unset.
        let m = read(&fresh(&[(BASE, 4096, READ), (BASE + 8192, 4096, READ)]), false);
        assert_eq!(m.ranges, vec![dense(BASE, BASE + 4096, READ), dense(BASE + 8192, BASE + 12288, READ)]);
        // Ends within a block are exact at the hull's ends only: [100, 200) and [3000, 3100)
        // leave blocks 1 to 4 out, and read as [100, 512) and [2560, 3100).
        let m = read(&fresh(&[(BASE + 100, 100, READ), (BASE + 3000, 100, READ)]), false);
        let both = residues(100, 100) | residues(3000, 100);
        assert_eq!(
            m.ranges,
            vec![
                Range { lo: BASE + 100, hi: BASE + 512, flags: READ, residues: both },
                Range { lo: BASE + 2560, hi: BASE + 3100, flags: READ, residues: both }
            ]
        );
        // More runs than MAX_RUNS are a strided access: the hull, with its residues.
        let steps: Vec<_> = (0..=MAX_RUNS as u64).map(|i| (BASE + 1024 * i, 4, WRITE)).collect();
        let m = read(&fresh(&steps), false);
        assert_eq!(m.ranges.len(), 1);
        assert_eq!((m.ranges[0].lo, m.ranges[0].hi), (BASE, BASE + 1024 * MAX_RUNS as u64 + 4));
        // As many as MAX_RUNS keep their gaps.
        let m = read(&fresh(&steps[..MAX_RUNS]), false);
        assert_eq!(m.ranges.len(), MAX_RUNS);
    }

    #[test]
    fn a_full_table_widens_the_cover_and_says_so() {
        // More granules than entries (and probes): the rest go to the cover.
        let steps: Vec<_> = (0..(ENTRIES as u64 + 500)).map(|i| (BASE + (i << 20), 4, WRITE)).collect();
        let m = read(&fresh(&steps), false);
        let [cover] = m.covers[..] else { panic!("one cover: {:?}", m.covers) };
        assert_eq!(cover.flags, WRITE);
        let total = m.ranges.len() as u64;
        assert!(total < ENTRIES as u64 + 500);
        // Every access is in a range or in the cover.
        for &(addr, size, _) in &steps {
            let end = addr + u64::from(size);
            assert!(m.ranges.iter().any(|r| r.lo <= addr && end <= r.hi) || (cover.lo <= addr && end <= cover.hi));
        }
    }

    #[test]
    fn an_overflowed_input_stays_read_only_in_its_own_cover() {
        // One large array read and another written, more granules than entries: the reads
        // that found no entry widen one cover, the writes another, each over its own array.
        let (input, output) = (BASE, BASE + (1 << 32));
        let steps: Vec<_> = (0..ENTRIES as u64)
            .flat_map(|i| [(input + (i << GRANULE_SHIFT), 4, READ), (output + (i << GRANULE_SHIFT), 4, WRITE)])
            .collect();
        let m = read(&fresh(&steps), false);
        let [reads, writes] = m.covers[..] else { panic!("two covers: {:?}", m.covers) };
        assert_eq!(reads.flags, READ);
        assert!(input <= reads.lo && reads.hi <= output, "{reads:x?}");
        assert_eq!(writes.flags, WRITE);
        assert!(output <= writes.lo, "{writes:x?}");
    }

    #[test]
    fn a_wide_table_holds_what_fills_a_table() {
        // The launch above in a wide table: every granule has its entry, no cover.
        let steps: Vec<_> = (0..(ENTRIES as u64 + 500)).map(|i| (BASE + (i << 20), 4, WRITE)).collect();
        let mut table = vec![0; WIDE_TABLE_BYTES];
        emulate(&mut table, &steps);
        let m = read(&table, false);
        assert_eq!((m.ranges.len(), m.covers), (ENTRIES + 500, vec![]));
    }

    #[test]
    fn the_reads_and_writes_of_the_same_granules_fill_the_table_without_collisions() {
        // Half a table of granules read and written in place: odd and even flags start half a
        // table apart, so every key finds its first slot free.
        let granules = (0..ENTRIES as u64 / 2).map(|i| BASE + (i << GRANULE_SHIFT));
        let steps: Vec<_> = granules.flat_map(|addr| [(addr, 4, READ), (addr, 4, WRITE)]).collect();
        let table = fresh(&steps);
        let first = |&(addr, _, flags): &(u64, u32, u32)| {
            u64_at(&table, HEADER_BYTES + slot(key(addr, flags), ENTRIES) * ENTRY_BYTES)
        };
        assert!(steps.iter().all(|step| first(step) == key(step.0, step.2)));
        let m = read(&table, false);
        assert_eq!((m.ranges.len(), m.covers), (ENTRIES, vec![]));
    }

    #[test]
    fn accesses_before_the_wait_keep_their_own_ranges_and_a_cover_is_never_early() {
        // The patch's rule: early only in a tagged launch, for a pc in [early_lo, early_hi).
        let mut table = vec![0; TABLE_BYTES];
        table[EARLY_AT..EARLY_AT + 16].copy_from_slice(&early_header(0x1000, 0x1040));
        let early = |pc| is_early(&table, true, pc);
        assert_eq!((early(0xfff), early(0x1000), early(0x1030), early(0x1040)), (false, true, true, false));
        assert!(!is_early(&table, false, 0x1000), "a pointer without the tag: the header is not read");
        // One granule read before the wait and after it: two ranges, apart.
        let m = read(&fresh(&[(BASE, 256, READ | EARLY), (BASE + 128, 256, READ)]), true);
        assert_eq!(m.ranges, vec![dense(BASE, BASE + 256, READ | EARLY), dense(BASE + 128, BASE + 384, READ)]);
        assert!(m.wait_known);
        // A full table's cover holds accesses of both sides: it is not early.
        let steps: Vec<_> = (0..(ENTRIES as u64 + 64)).map(|i| (BASE + (i << 20), 4, WRITE | EARLY)).collect();
        assert_eq!(read(&fresh(&steps), true).covers.iter().map(|c| c.flags).collect::<Vec<_>>(), [WRITE]);
    }

    #[test]
    fn an_empty_table_reads_as_nothing() {
        assert_eq!(read(&vec![0; TABLE_BYTES], false), Measured::default());
    }

    #[test]
    fn the_layout_is_the_patchs() {
        // The host reads what the device patch writes: its table's size, entries, granule,
        // key and blocks are read from the patch's source, so that one changed without the
        // other fails here.
        let source = include_str!("../patch/footprint.cu");
        let define = |name: &str| -> u64 {
            let line = source.lines().find(|l| l.starts_with(&format!("#define {name} "))).expect(name);
            line.split_whitespace().nth(2).expect(name).trim_end_matches('u').parse().expect(name)
        };
        assert_eq!(define("FOOTPRINT_ENTRIES"), ENTRIES as u64);
        assert_eq!(define("WIDE_ENTRIES"), WIDE_ENTRIES as u64);
        assert_eq!(define("WIDE_TAG"), WIDE_TAG as u64);
        assert_eq!(define("FOOTPRINT_PROBES"), PROBES as u64);
        assert_eq!(define("GRANULE_SHIFT"), u64::from(GRANULE_SHIFT));
        assert_eq!(define("KEY_FLAGS_SHIFT"), u64::from(KEY_FLAGS_SHIFT));
        assert_eq!(define("BLOCK_SHIFT"), u64::from(BLOCK_SHIFT));
        assert_eq!(define("EARLY"), u64::from(EARLY));
        assert_eq!(define("EARLY_TAG"), EARLY_TAG as u64);
        // 64 blocks span a granule; the granule of any 64-bit address lies below the flags,
        // which take the four bits above.
        assert_eq!(blocks(0, 1 << GRANULE_SHIFT), u64::MAX);
        assert_eq!(key(u64::MAX, 0) >> KEY_FLAGS_SHIFT, 0);
        assert_eq!(unkey(key(u64::MAX, EARLY | READ | WRITE | ATOMIC)), Some((!IN_GRANULE, 15)));
        // The header (overflow, cover_flags: 4 bytes each; reserved, early_lo, early_hi: 8
        // each; two covers of lo_inv, hi: 8 each) and 32-byte entries (key: 8 bytes; lo_inv,
        // hi: 4 each; residues, blocks: 8 each); covers and entries 16-byte aligned, for the
        // patch's 16-byte loads.
        assert!(source.contains("static_assert(sizeof(Table) == 64,"));
        assert_eq!(HEADER_BYTES, 4 + 4 + 8 + 8 + 8 + 2 * (8 + 8));
        assert_eq!(EARLY_AT, 4 + 4 + 8);
        assert_eq!(COVERS_AT, 4 + 4 + 8 + 8 + 8);
        assert_eq!(ENTRY_BYTES, 8 + 4 + 4 + 8 + 8);
        assert_eq!(TABLE_BYTES, 64 + 2048 * 32);
        assert_eq!((HEADER_BYTES % 16, EARLY_AT % 16, COVERS_AT % 16, TABLE_BYTES % 16), (0, 0, 0, 0));
    }

    #[test]
    fn an_entry_claimed_but_not_yet_filled_is_no_range() {
        // A granule whose entry holds no lowest offset (lo_inv 0) or no kind of access reads
        // as nothing, not as a range from offset ~0: the patch claims an entry before it
        // updates it. One not yet given its blocks reads as its hull.
        let base = 4u64 << GRANULE_SHIFT;
        let entry = |key: u64, lo_inv: u32, hi: u32| {
            let mut table = vec![0u8; TABLE_BYTES];
            let at = HEADER_BYTES;
            table[at..at + 8].copy_from_slice(&key.to_le_bytes());
            table[at + 8..at + 12].copy_from_slice(&lo_inv.to_le_bytes());
            table[at + 12..at + 16].copy_from_slice(&hi.to_le_bytes());
            table[at + 16..at + 24].copy_from_slice(&residues(8, 2).to_le_bytes());
            read(&table, false)
        };
        assert_eq!(entry(key(base, READ), 0, 10), Measured::default());
        assert_eq!(entry(key(base, 0), !8, 10), Measured::default());
        assert_eq!(entry(1 << KEY_FLAGS_SHIFT, !8, 10), Measured::default());
        assert_eq!(
            entry(key(base, READ), !8, 3000).ranges,
            vec![Range { lo: base + 8, hi: base + 3000, flags: READ, residues: residues(8, 2) }]
        );
    }

    #[test]
    fn strided_access_keeps_its_residues() {
        // Floats x[0::2] and x[1::2] over 1 KiB: one hull each, disjoint residues.
        let even: Vec<_> = (0..128u64).map(|i| (BASE + 8 * i, 4, WRITE)).collect();
        let odd: Vec<_> = (0..128u64).map(|i| (BASE + 8 * i + 4, 4, WRITE)).collect();
        let (even, odd) = (read(&fresh(&even), false).ranges, read(&fresh(&odd), false).ranges);
        assert_eq!((even[0].lo, even[0].hi, even[0].residues), (BASE, BASE + 1020, 0x5555_5555_5555_5555));
        assert_eq!((odd[0].lo, odd[0].hi, odd[0].residues), (BASE + 4, BASE + 1024, !0x5555_5555_5555_5555));
    }

    #[test]
    fn residues_cover_each_slot_an_access_spans_and_wrap() {
        assert_eq!(residues(0, 1), 1);
        assert_eq!(residues(3, 2), 0b11);
        assert_eq!(residues(252, 8), 1 << 63 | 1);
        assert_eq!(residues(256 + 8, 16), 0b11 << 2 | 0b11 << 4);
        assert_eq!(residues(4, 256), DENSE);
        assert_eq!(residues(0, 252).count_ones(), 63);
    }
}
