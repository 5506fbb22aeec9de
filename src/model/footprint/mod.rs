//! Measured footprints' state (`footprint=exact|learn`): what the footprint engine measured
//! of a launch, the measured launches waiting for it, and the footprints learnt from them.
//! Their rules are `rules/footprint_late.rs` and `rules/footprint_learning.rs`;
//! `docs/footprints.md` says what each mode catches and misses.
//!
//! | file | holds |
//! |---|---|
//! | [`measured`] | what the engine measured of a launch: ranges and modes, and a cover where its table overflowed |
//! | [`pending`] | measured launches waiting for their footprint, and the log of what was issued while they wait |
//! | [`learnt`] | footprints learnt from measured launches, by kernel and key: what bears on the key, how a range is attributed to a pointer |

pub mod learnt;
pub mod measured;
pub mod pending;
