//! A launch's table, as the device patch leaves it (`patch/footprint.cu` holds the same
//! layout, and the two change together), and its reading into byte ranges.

/// Bytes a granule spans (`GRANULE_SHIFT` in the patch).
pub const GRANULE_SHIFT: u32 = 16;
/// Entries of a table (`FOOTPRINT_ENTRIES`).
pub const ENTRIES: usize = 1024;
/// The header before the entries: overflow, cover_flags, cover_lo_inv, cover_hi, reserved.
pub const HEADER_BYTES: usize = 32;
/// One entry: granule, flags, lo_inv, hi, residues, reserved.
pub const ENTRY_BYTES: usize = 32;
/// A whole table.
pub const TABLE_BYTES: usize = HEADER_BYTES + ENTRIES * ENTRY_BYTES;

/// The kinds of access, as the patch's flags.
pub const READ: u32 = 1;
pub const WRITE: u32 = 2;
pub const ATOMIC: u32 = 4;

/// Residues of every byte: a range touched densely.
pub const DENSE: u64 = u64::MAX;

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

/// What a launch was seen to touch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Measured {
    /// Sorted by `lo`; ranges of equal flags neither overlap nor touch.
    pub ranges: Vec<Range>,
    /// The table was full: every access that found no entry lies in this range (which may
    /// span memory the launch never touched).
    pub overflow: Option<Range>,
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// Reads a table copied from the device (`TABLE_BYTES` bytes).
pub fn read(table: &[u8]) -> Measured {
    assert_eq!(table.len(), TABLE_BYTES, "a whole table");
    let overflow = (u32_at(table, 0) != 0).then(|| Range {
        lo: !u64_at(table, 8),
        hi: u64_at(table, 16),
        flags: u32_at(table, 4),
        residues: DENSE,
    });
    let mut ranges: Vec<Range> = (0..ENTRIES)
        .filter_map(|i| {
            let at = HEADER_BYTES + i * ENTRY_BYTES;
            let (granule, flags, lo_inv, hi) =
                (u32_at(table, at), u32_at(table, at + 4), u32_at(table, at + 8), u32_at(table, at + 12));
            // Residues not yet or-ed in (never so once the kernel completed) read as dense.
            let residues = Some(u64_at(table, at + 16)).filter(|&r| r != 0).unwrap_or(DENSE);
            // An entry claimed by a warp whose update other warps had not finished is still
            // whole by the time the kernel completes; lo_inv 0 would be an entry never
            // updated (not written by the patch), kept out rather than read as offset ~0.
            if granule == 0 || lo_inv == 0 || flags == 0 {
                return None;
            }
            let base = u64::from(granule - 1) << GRANULE_SHIFT;
            Some(Range { lo: base + u64::from(!lo_inv), hi: base + u64::from(hi), flags, residues })
        })
        .collect();
    merge(&mut ranges);
    Measured { ranges, overflow }
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
    assert_eq!(table.len(), TABLE_BYTES, "a whole table");
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
        let granule = ((addr >> GRANULE_SHIFT) + 1) as u32;
        let lo = (addr & ((1 << GRANULE_SHIFT) - 1)) as u32;
        let hi = lo + size;
        let h = granule.wrapping_mul(2654435761) as usize & (ENTRIES - 1);
        let entry = (0..16).map(|probe| HEADER_BYTES + ((h + probe) & (ENTRIES - 1)) * ENTRY_BYTES).find(|&at| {
            let k = u32_at(table, at);
            k == 0 || k == granule
        });
        match entry {
            Some(at) => {
                update32(table, at, &|_| granule);
                update32(table, at + 4, &|v| v | flags);
                update32(table, at + 8, &|v| v.max(!lo));
                update32(table, at + 12, &|v| v.max(hi));
                update64(table, at + 16, &|v| v | residues(addr, u64::from(size)));
            }
            None => {
                update32(table, 0, &|_| 1);
                update32(table, 4, &|v| v | flags);
                update64(table, 8, &|v| v.max(!addr));
                update64(table, 16, &|v| v.max(addr + u64::from(size)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 0x7f00_0000_0000;

    /// A zeroed table after `accesses`.
    fn fresh(accesses: &[(u64, u32, u32)]) -> Vec<u8> {
        let mut table = vec![0; TABLE_BYTES];
        emulate(&mut table, accesses);
        table
    }

    #[test]
    fn a_streamed_buffer_reads_as_one_range() {
        // 1 MiB written in 128-byte warp steps: 16 granules, one range.
        let steps: Vec<_> = (0..8192u64).map(|i| (BASE + i * 128, 128, WRITE)).collect();
        let m = read(&fresh(&steps));
        assert_eq!(m.ranges, vec![Range { lo: BASE, hi: BASE + (1 << 20), flags: WRITE, residues: DENSE }]);
        assert_eq!(m.overflow, None);
    }

    #[test]
    fn an_interior_range_keeps_its_exact_ends() {
        let lo = BASE + 0x1_2344;
        let m = read(&fresh(&[(lo, 4, READ), (lo + 0x2_0000, 4, READ)]));
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
    fn kinds_of_access_stay_apart_unless_one_granule_mixes_them() {
        let m = read(&fresh(&[(BASE, 64, READ), (BASE + (1 << 16), 64, WRITE)]));
        assert_eq!(m.ranges.len(), 2);
        let m = read(&fresh(&[(BASE, 64, READ), (BASE + 64, 64, WRITE)]));
        assert_eq!(
            m.ranges,
            vec![Range { lo: BASE, hi: BASE + 128, flags: READ | WRITE, residues: residues(BASE, 128) }]
        );
    }

    #[test]
    fn a_full_table_widens_the_cover_and_says_so() {
        // More granules than entries (and probes): the rest go to the cover.
        let steps: Vec<_> = (0..(ENTRIES as u64 + 500)).map(|i| (BASE + (i << 20), 4, WRITE)).collect();
        let m = read(&fresh(&steps));
        let cover = m.overflow.expect("overflowed");
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
    fn an_empty_table_reads_as_nothing() {
        assert_eq!(read(&vec![0; TABLE_BYTES]), Measured::default());
    }

    #[test]
    fn the_layout_is_the_patchs() {
        // The host reads what the device patch writes: its table's size, entries and granule
        // are read from the patch's source, so that one changed without the other fails here.
        let source = include_str!("../patch/footprint.cu");
        let define = |name: &str| -> u64 {
            let line = source.lines().find(|l| l.starts_with(&format!("#define {name} "))).expect(name);
            line.split_whitespace().nth(2).expect(name).trim_end_matches('u').parse().expect(name)
        };
        assert_eq!(define("FOOTPRINT_ENTRIES"), ENTRIES as u64);
        assert_eq!(define("GRANULE_SHIFT"), u64::from(GRANULE_SHIFT));
        // The header (overflow, cover_flags: 4 bytes each; cover_lo_inv, cover_hi, reserved: 8
        // each) and 32-byte entries (four u32, residues and reserved: 8 bytes each).
        assert_eq!(HEADER_BYTES, 4 + 4 + 8 + 8 + 8);
        assert_eq!(ENTRY_BYTES, 4 * 4 + 8 + 8);
        assert_eq!(TABLE_BYTES, 32 + 1024 * 32);
    }

    #[test]
    fn an_entry_claimed_but_not_yet_filled_is_no_range() {
        // A granule whose entry holds no lowest offset (lo_inv 0) or no kind of access reads
        // as nothing, not as a range from offset ~0: the patch claims an entry before it
        // updates it.
        let entry = |granule: u32, flags: u32, lo_inv: u32, hi: u32| {
            let mut table = vec![0u8; TABLE_BYTES];
            for (k, v) in [granule, flags, lo_inv, hi].into_iter().enumerate() {
                table[HEADER_BYTES + 4 * k..HEADER_BYTES + 4 * k + 4].copy_from_slice(&v.to_le_bytes());
            }
            table[HEADER_BYTES + 16..HEADER_BYTES + 24].copy_from_slice(&residues(8, 2).to_le_bytes());
            read(&table)
        };
        assert_eq!(entry(5, READ, 0, 10), Measured::default());
        assert_eq!(entry(5, 0, !8, 10), Measured::default());
        let base = 4u64 << GRANULE_SHIFT;
        assert_eq!(
            entry(5, READ, !8, 10).ranges,
            vec![Range { lo: base + 8, hi: base + 10, flags: READ, residues: residues(8, 2) }]
        );
    }

    #[test]
    fn strided_access_keeps_its_residues() {
        // Floats x[0::2] and x[1::2] over 1 KiB: one hull each, disjoint residues.
        let even: Vec<_> = (0..128u64).map(|i| (BASE + 8 * i, 4, WRITE)).collect();
        let odd: Vec<_> = (0..128u64).map(|i| (BASE + 8 * i + 4, 4, WRITE)).collect();
        let (even, odd) = (read(&fresh(&even)).ranges, read(&fresh(&odd)).ranges);
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
