//! Residues: which bytes of a range an access touched, modulo 256. A measured range is the
//! hull of its accesses of one kind within a run of 512-byte blocks of a 32 KiB granule; its
//! residue mask has bit `i` set when some
//! byte `b` it touched has `(b % 256) / 4 == i`. Two ranges share a byte only if their
//! masks share a bit in the bytes both span, so strided and interleaved accesses (`x[0::2]`
//! against `x[1::2]` of a float array) keep their gaps. A mask only ever errs towards
//! touched: never a hidden overlap.

/// Every residue: a range touched densely (every access the parameters or the host make).
pub const DENSE: u64 = u64::MAX;

/// The residues of the bytes `[lo, hi)`.
pub fn of(lo: u64, hi: u64) -> u64 {
    let (first, last) = (lo >> 2, (hi.max(lo + 1) - 1) >> 2);
    if last - first >= 63 {
        return DENSE;
    }
    ((2u64 << (last - first)) - 1).rotate_left((first & 63) as u32)
}

/// Whether two ranges with residues `a` and `b` may share a byte of `[lo, hi)`, the bytes
/// both span.
pub fn meet(a: u64, b: u64, lo: u64, hi: u64) -> bool {
    a & b & of(lo, hi) != 0
}

/// Whether `inner` touched no residue `outer` did not: the bytes of a range with residues
/// `inner` are then all bytes of one with `outer` over the same span.
pub fn within(inner: u64, outer: u64) -> bool {
    inner & !outer == 0
}

/// The residues of a range moved by `delta` bytes: rotated by a move of whole 4-byte
/// slots, dense by any other (a slot then straddles two).
pub fn moved(residues: u64, delta: i64) -> u64 {
    if delta % 4 != 0 {
        return DENSE;
    }
    residues.rotate_left((delta.rem_euclid(256) / 4) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVEN: u64 = 0x5555_5555_5555_5555;

    #[test]
    fn a_range_sets_each_slot_it_spans_wrapping_at_256_bytes() {
        assert_eq!(of(0, 1), 1);
        assert_eq!(of(3, 5), 0b11);
        assert_eq!(of(252, 260), 1 << 63 | 1);
        assert_eq!(of(4, 260), DENSE);
        assert_eq!(of(0, 252).count_ones(), 63);
        assert_eq!(of(8, 8), 1 << 2, "an empty range is its first byte");
    }

    #[test]
    fn interleaved_halves_never_meet_and_overlapping_strides_do() {
        let every_fourth = 0x1111_1111_1111_1111;
        assert!(!meet(EVEN, !EVEN, 0, 1024));
        assert!(meet(EVEN, every_fourth, 0, 1024));
        // Bytes both span decide: slot 0 alone shared, outside [4, 8).
        assert!(!meet(EVEN, 1, 4, 8));
        assert!(meet(DENSE, 1 << 1, 4, 8));
    }

    #[test]
    fn a_move_of_whole_slots_rotates_others_make_dense() {
        assert_eq!(moved(EVEN, 4), !EVEN);
        assert_eq!(moved(EVEN, -4), !EVEN);
        assert_eq!(moved(1, 256 + 8), 1 << 2);
        assert_eq!(moved(1, -8), 1 << 62);
        assert_eq!(moved(EVEN, 2), DENSE);
        assert!(within(EVEN, DENSE) && !within(DENSE, EVEN));
    }
}
