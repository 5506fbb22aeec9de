//! Measured footprints (`footprint=exact|learn`): launches whose accesses the footprint
//! engine measures as they run, checked when the measure arrives, and footprints learnt
//! from them for later launches of the same kernel. `docs/footprints.md` says what each
//! mode catches and misses.
//!
//! | file | rule and state |
//! |---|---|
//! | [`measured`] | what the engine measured of a launch: ranges and modes, and a cover where its table overflowed |
//! | [`pending`] | measured launches waiting for their footprint, and the log of what was issued while they wait |
//! | `late.rs` | the rule: a measured launch, issued at once and checked when its footprint arrives, against what was issued before it (with its clock) and after it (the log) |
//! | [`learnt`] | footprints learnt from measured launches, by kernel and key: what bears on the key, how a range is attributed to a pointer |
//! | `learning.rs` | the rule: a measured launch learnt from, and learnt extents applied at issue to later launches with the same key (`footprint=learn`) |

mod late;
mod learning;
pub mod learnt;
pub mod measured;
pub mod pending;
