//! What the footprint engine measured of a launch, as the model takes it: byte ranges with
//! their modes, and a cover where the engine's table overflowed.

use crate::model::op::{Access, Mode};

/// What the engine measured of a launch: byte ranges, and, where its table overflowed, one
/// cover of the accesses that found no entry (bytes between them may not have been touched).
#[derive(Clone, Copy, Debug)]
pub struct Footprint<'a> {
    pub ranges: &'a [Access],
    pub cover: Option<Access>,
}

/// The mode of a measured range: what its flags (the engine's READ 1, WRITE 2, ATOMIC 4)
/// say it did.
pub fn measured_mode(flags: u32) -> Mode {
    match flags {
        1 => Mode::Read,
        2 => Mode::Write,
        4 => Mode::Atomic,
        _ => Mode::ReadWrite,
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
    }
}
