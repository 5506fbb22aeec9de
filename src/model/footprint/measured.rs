//! What the footprint engine measured of a launch, as the model takes it: byte ranges with
//! their modes, and covers where the engine's table overflowed.

use crate::model::op::{Access, Mode, WaitPlace};

/// What the engine measured of a launch: byte ranges, and, where its table overflowed, the
/// covers of the accesses that found no entry, reads apart from writes and atomics (bytes
/// between them may not have been touched).
#[derive(Clone, Copy, Debug)]
pub struct Footprint<'a> {
    pub ranges: &'a [Access],
    pub covers: &'a [Access],
}

impl Footprint<'_> {
    /// Whether the cover reaches into the buffer `[base, end)`: where a whole pointer
    /// parameter points into it (`whole_pointer`), or where a measured range lies in it. A
    /// field of a by-value structure may be stale, pointing at a buffer the kernel never
    /// reaches (a tensor list's unused entry holding a staging buffer's address).
    pub fn cover_reaches(&self, (base, end): (u64, u64), whole_pointer: bool) -> bool {
        whole_pointer || self.ranges.iter().any(|r| base <= r.addr && r.addr < end)
    }
}

/// The engine's flag of a range touched before its kernel's first grid-dependency wait,
/// beside READ 1, WRITE 2, ATOMIC 4.
const EARLY: u32 = 8;

/// The mode of a measured range: what its flags (the engine's READ 1, WRITE 2, ATOMIC 4)
/// say it did.
pub fn measured_mode(flags: u32) -> Mode {
    match flags & !EARLY {
        1 => Mode::Read,
        2 => Mode::Write,
        4 => Mode::Atomic,
        _ => Mode::ReadWrite,
    }
}

/// Where a measured range lies around its kernel's first grid-dependency wait: before it
/// where its flags hold EARLY, after it otherwise, when the engine knew where the wait is
/// (`wait_known`); not known when it did not.
pub fn measured_place(flags: u32, wait_known: bool) -> WaitPlace {
    match (wait_known, flags & EARLY != 0) {
        (false, _) => WaitPlace::Unknown,
        (true, true) => WaitPlace::Before,
        (true, false) => WaitPlace::After,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_give_modes() {
        assert_eq!(measured_mode(1), Mode::Read);
        assert_eq!(measured_mode(2), Mode::Write);
        assert_eq!(measured_mode(3), Mode::ReadWrite);
        assert_eq!(measured_mode(4), Mode::Atomic);
        assert_eq!(measured_mode(5), Mode::ReadWrite);
        assert_eq!(measured_mode(1 | EARLY), Mode::Read);
        assert_eq!(measured_mode(4 | EARLY), Mode::Atomic);
    }

    #[test]
    fn the_early_flag_places_a_range_before_the_wait_only_where_the_wait_was_known() {
        assert_eq!(measured_place(1 | EARLY, true), WaitPlace::Before);
        assert_eq!(measured_place(1, true), WaitPlace::After);
        assert_eq!(measured_place(1 | EARLY, false), WaitPlace::Unknown);
        assert_eq!(measured_place(2, false), WaitPlace::Unknown);
    }
}
