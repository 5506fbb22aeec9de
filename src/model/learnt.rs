//! Footprints learnt from measured launches, applied to later launches of the same kernel
//! with the same scalar arguments (`footprint=learn`).
//!
//! What a kernel touches, relative to the pointers it is given, is a function of its scalar
//! arguments and launch shape in all but data-dependent kernels (a gather by an index tensor).
//! So a launch is keyed by its kernel, its launch shape and every parameter byte that is not
//! a pointer into a buffer (the shim computes the key); its first launch is measured, and
//! what it touched through each pointer parameter, as a direction and an extent relative to
//! the pointer, is kept for the key ([`Model::apply_learnt`]). Later launches with the same
//! key are checked at issue like any other, at no device cost.
//!
//! A measured range is attributed to the pointer parameter into the same buffer at or
//! nearest below it. A key whose launch touched a buffer no parameter points into (pointers
//! read from memory: pointer tables, NCCL's work descriptors) is unlearnable: its launches
//! are measured every time. A parameter whose buffer was not touched keeps its pointer's
//! own access (memory reached without a patch point, such as Hopper's bulk tensor copies).
//! A data-dependent kernel may touch other bytes than its first launch did: learnt, it may
//! miss a race (or, touching fewer, report one its hull covers), as the README says.
//!
//! Some scalars change at every launch without changing the footprint (a random generator's
//! seed and offset: every dropout). A kernel whose last [`AGREEING_KEYS`] learnt keys all
//! gave the same extents is taken to have those extents for every key.

use std::sync::Arc;

use crate::hash::{fast_map, FastMap};

use super::buffers::Found;
use super::op::{Access, Mode};
use super::Model;

/// What one pointer parameter's launch touched, relative to the pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Extent {
    slot: u32,
    mode: Mode,
    /// From the pointer to the first byte touched (may be negative).
    lo: i64,
    len: u64,
}

#[derive(Clone, Debug)]
enum Known {
    Extents(Arc<[Extent]>),
    Unlearnable,
}

/// Learnt keys of one kernel that agree before its extents stand for all its keys.
pub const AGREEING_KEYS: u32 = 3;

/// The learnt footprints, by launch key, and by kernel where its keys agree.
pub struct Learnt {
    keys: FastMap<u64, Known>,
    /// Per kernel: the extents its learnt keys gave, and how many agreed (0: they differed).
    kernels: FastMap<u64, (Arc<[Extent]>, u32)>,
}

impl Default for Learnt {
    fn default() -> Learnt {
        Learnt { keys: fast_map(), kernels: fast_map() }
    }
}

/// What [`Model::apply_learnt`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The accesses are now the learnt ones: check the launch at once.
    Applied,
    /// Nothing learnt for this key yet: measure the launch.
    Unknown,
    /// Its launches touch memory no parameter points into: measure every launch.
    Unlearnable,
}

fn union(a: Mode, b: Mode) -> Mode {
    if a == b {
        a
    } else if a == Mode::Read && b == Mode::Read {
        Mode::Read
    } else {
        Mode::ReadWrite
    }
}

impl Model {
    /// Replaces a launch's parameter accesses (`accesses`, each with its slot) by what was
    /// learnt for `key` (of `kernel`), if anything was.
    pub fn apply_learnt(&self, key: u64, kernel: u64, accesses: &mut [Access]) -> Lookup {
        let extents = match self.learnt.keys.get(&key).map(|k| k.clone()) {
            Some(Known::Unlearnable) => return Lookup::Unlearnable,
            Some(Known::Extents(extents)) => extents,
            None => match self.learnt.kernels.get(&kernel).map(|k| k.clone()) {
                Some((extents, agreed)) if agreed >= AGREEING_KEYS => extents,
                _ => return Lookup::Unknown,
            },
        };
        for access in accesses.iter_mut() {
            if let Some(e) = access.slot.and_then(|s| extents.iter().find(|e| e.slot == s)) {
                *access = Access {
                    addr: access.addr.wrapping_add_signed(e.lo),
                    len: e.len,
                    mode: e.mode,
                    exact: true,
                    slot: access.slot,
                };
            }
        }
        Lookup::Applied
    }

    /// Learns `key`'s footprint from a measured launch: `guess` its parameters' accesses,
    /// `measured` what it touched.
    pub(super) fn learn(&self, key: u64, kernel: u64, guess: &[Access], measured: &[Access]) {
        let bounds = |addr: u64| match self.buffers.find(addr) {
            Found::Live(b) | Found::Freed(b) => Some((b.base, b.end())),
            Found::Nothing => None,
        };
        let mut extents: Vec<Extent> = Vec::new();
        for m in measured {
            let Some(buffer) = bounds(m.addr) else {
                continue;
            };
            // A cover beyond its buffer (an overflowed table) is no extent of one pointer.
            if m.addr + m.len > buffer.1 {
                self.learnt.keys.insert(key, Known::Unlearnable);
                self.learnt.kernels.insert(kernel, (Arc::from(Vec::new()), 0));
                return;
            }
            // The pointer into this buffer at or nearest below the range, else the lowest.
            let into = guess.iter().filter(|g| g.slot.is_some() && bounds(g.addr) == Some(buffer));
            let below = into.clone().filter(|g| g.addr <= m.addr).max_by_key(|g| g.addr);
            let Some(pointer) = below.or_else(|| into.min_by_key(|g| g.addr)) else {
                self.learnt.keys.insert(key, Known::Unlearnable);
                self.learnt.kernels.insert(kernel, (Arc::from(Vec::new()), 0));
                return;
            };
            let slot = pointer.slot.expect("filtered");
            let lo = m.addr.wrapping_sub(pointer.addr) as i64;
            let hi = lo + m.len as i64;
            match extents.iter_mut().find(|e| e.slot == slot) {
                Some(e) => {
                    let (elo, ehi) = (e.lo.min(lo), (e.lo + e.len as i64).max(hi));
                    *e = Extent { slot, mode: union(e.mode, m.mode), lo: elo, len: (ehi - elo) as u64 };
                }
                None => extents.push(Extent { slot, mode: m.mode, lo, len: m.len }),
            }
        }
        let extents: Arc<[Extent]> = extents.into();
        self.learnt.keys.insert(key, Known::Extents(extents.clone()));
        // The kernel's extents are those of its last keys, counted while they agree.
        let mut entry = self.learnt.kernels.entry(kernel).or_insert_with(|| (extents.clone(), 0));
        if entry.0 == extents {
            entry.1 = entry.1.saturating_add(1);
        } else {
            *entry = (extents, 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::buffers::MemoryKind;
    use crate::model::op::{Origin, StackId, ThreadId};
    use crate::model::Alloc;

    const BASE: u64 = 0x10_0000;
    const SIZE: u64 = 0x1_0000;

    fn model() -> Model {
        let m = Model::default();
        let origin = Origin { api: "cuMemAlloc_v2", thread: ThreadId(1), site: StackId(0) };
        m.alloc(Alloc { base: BASE, size: SIZE, kind: MemoryKind::Device, ctx: 1 }, None, &origin);
        m
    }

    fn pointer(addr: u64, slot: u32) -> Access {
        Access { addr, len: 1, mode: Mode::Unknown, exact: false, slot: Some(slot) }
    }

    #[test]
    fn extents_are_learnt_relative_to_each_pointer_and_applied_to_new_pointers() {
        let m = model();
        // Slot 0 points at the buffer, slot 8 at its middle; the launch wrote the first half
        // and read the second.
        let guess = [pointer(BASE, 0), pointer(BASE + SIZE / 2, 8)];
        let measured = [Access::new(BASE, SIZE / 2, Mode::Write), Access::new(BASE + SIZE / 2, SIZE / 2, Mode::Read)];
        m.learn(7, 1, &guess, &measured);
        // A later launch with the same key, its pointers 256 bytes further on.
        let mut later = [pointer(BASE + 256, 0), pointer(BASE + 256 + SIZE / 4, 8)];
        assert_eq!(m.apply_learnt(7, 1, &mut later), Lookup::Applied);
        assert_eq!((later[0].addr, later[0].len, later[0].mode), (BASE + 256, SIZE / 2, Mode::Write));
        assert_eq!((later[1].addr, later[1].len, later[1].mode), (BASE + 256 + SIZE / 4, SIZE / 2, Mode::Read));
        assert_eq!(m.apply_learnt(8, 1, &mut later), Lookup::Unknown, "another key of a kernel with one learnt key");
    }

    #[test]
    fn memory_no_pointer_leads_to_makes_a_key_unlearnable() {
        let m = model();
        let origin = Origin { api: "cuMemAlloc_v2", thread: ThreadId(1), site: StackId(0) };
        m.alloc(Alloc { base: 0x40_0000, size: SIZE, kind: MemoryKind::Device, ctx: 1 }, None, &origin);
        m.learn(7, 1, &[pointer(BASE, 0)], &[Access::new(0x40_0000, 64, Mode::Read)]);
        assert_eq!(m.apply_learnt(7, 1, &mut [pointer(BASE, 0)]), Lookup::Unlearnable);
    }

    #[test]
    fn a_kernel_whose_keys_agree_has_their_extents_for_every_key() {
        let m = model();
        let guess = [pointer(BASE, 0)];
        let measured = [Access::new(BASE, 64, Mode::Write)];
        for key in 1..AGREEING_KEYS as u64 {
            m.learn(key, 9, &guess, &measured);
        }
        assert_eq!(m.apply_learnt(100, 9, &mut [pointer(BASE, 0)]), Lookup::Unknown, "not enough agreeing keys yet");
        m.learn(AGREEING_KEYS as u64, 9, &guess, &measured);
        let mut fresh = [pointer(BASE + 128, 0)];
        assert_eq!(m.apply_learnt(100, 9, &mut fresh), Lookup::Applied);
        assert_eq!((fresh[0].addr, fresh[0].len, fresh[0].mode), (BASE + 128, 64, Mode::Write));
        // A disagreeing key withdraws the kernel's extents.
        m.learn(50, 9, &guess, &[Access::new(BASE, 128, Mode::Write)]);
        assert_eq!(m.apply_learnt(101, 9, &mut [pointer(BASE, 0)]), Lookup::Unknown);
    }
}
