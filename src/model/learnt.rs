//! Footprints learnt from measured launches, applied to later launches of the same kernel
//! (`footprint=learn`).
//!
//! What a kernel touches, relative to the pointers it is given, is a function of its scalar
//! arguments and launch shape in all but data-dependent kernels (a gather by an index
//! tensor). The shim gives each launch as its kernel and its *words*: the launch shape, then
//! the parameter block in 8-byte words, each pointer into a buffer replaced by [`POINTER`].
//! A measured launch's footprint is kept as what it touched through each pointer parameter,
//! a direction and an extent relative to the pointer ([`Model::learn`]); a later launch whose
//! words give the same key is checked at issue with those extents, at no device cost
//! ([`Model::apply_learnt`]).
//!
//! **The key.** Some words change at every launch without changing the footprint (AdamW's
//! step count and bias corrections, a random generator's offset at every dropout, stale
//! bytes of a by-value structure), while others are sizes the footprint follows. So the key
//! is the kernel's words *less those found not to bear on its footprint*. Each measured launch
//! is compared with the kernel's last [`RECENT`] measured launches, and with the last one
//! that had the same footprint however long ago (a kernel may run many footprints in turn,
//! one per chunk of a tensor list, and meet its own again a step later): a word that differed from
//! one with the same footprint (no word known to bear on it differing too) gains a point, and
//! at [`IGNORED_AFTER`] points it leaves the key; a word that alone differed from one with
//! another footprint bears on it and is never left out. A launch whose key hits is given the
//! learnt extents; a size word that changes still makes a new key (it changed the footprint
//! when it changed before), so a learnt extent is never applied across a change of a word
//! that was seen to move it. Where two learnt launches fall under one key, the key keeps the
//! union of their extents, never the smaller. What this cannot see: a word that moved the
//! footprint only beyond the values measured (a size rounded up, a clamp), and data-dependent
//! kernels; both may then be given too small an extent, as the README says.
//!
//! **Attribution.** A measured range is attributed to the pointer parameter into the same
//! buffer at or nearest below it. A launch that touched a buffer no parameter points into
//! (pointers read from memory: pointer tables, NCCL's work descriptors) is unlearnable: its
//! launches are measured every time. A parameter whose buffer was not touched keeps its
//! pointer's own access (memory reached without a patch point, such as Hopper's bulk tensor
//! copies).
//!
//! **Covers.** A launch whose table overflowed has its overflowed accesses as one cover
//! from the lowest to the highest byte, which may span buffers it never touched. Learnt, the
//! cover is kept as its part in each buffer a pointer parameter points into, relative to
//! that pointer and marked as a cover (a `footprint-learnt-cover` note names the launch). Its
//! ends were touched: an end in a buffer no parameter points into makes the launch
//! unlearnable. Accesses that overflowed into a buffer reached through memory, strictly inside
//! the cover, are what a learnt cover cannot see.

use std::collections::hash_map::Entry as MapEntry;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::hash::{fast_map, FastHasher, FastMap};

use super::buffers::Found;
use super::measured::Footprint;
use super::op::{Access, Mode, OpRecord};
use super::race::NoteKind;
use super::Model;

/// A pointer into a buffer, in a launch's words: the footprint is relative to it, so its
/// value is no part of the key.
pub const POINTER: u64 = 0x5354_5245_414d_5054;

/// Points (launches with the same footprint though the word differed) after which a word
/// leaves its kernel's key.
pub const IGNORED_AFTER: u32 = 2;

/// Measured launches of a kernel that a new one is compared with.
pub const RECENT: usize = 8;

/// Footprints of a kernel whose last launch a new one with the same footprint is compared
/// with (beyond, the record starts afresh).
pub const FOOTPRINTS: usize = 1024;

/// A measured launch to learn from: its kernel and its words (see the module's doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Learning {
    pub kernel: u64,
    pub words: Arc<[u64]>,
}

/// What one pointer parameter's launch touched, relative to the pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Extent {
    slot: u32,
    mode: Mode,
    /// From the pointer to the first byte touched (may be negative).
    lo: i64,
    len: u64,
    /// Part of an overflowed table's cover: bytes that may not all have been touched.
    cover: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Known {
    Extents(Arc<[Extent]>),
    Unlearnable,
}

impl Known {
    /// Both footprints at once: per slot, the hull of the two extents.
    fn union(&self, other: &Known) -> Known {
        let (Known::Extents(a), Known::Extents(b)) = (self, other) else {
            return Known::Unlearnable;
        };
        let mut out: Vec<Extent> = a.to_vec();
        for e in b.iter() {
            add_extent(&mut out, *e);
        }
        Known::Extents(out.into())
    }
}

/// Adds `e` to `extents`, joined with the extent of its slot if there is one.
fn add_extent(extents: &mut Vec<Extent>, e: Extent) {
    match extents.iter_mut().find(|x| x.slot == e.slot) {
        Some(x) => {
            let (lo, hi) = (x.lo.min(e.lo), (x.lo + x.len as i64).max(e.lo + e.len as i64));
            *x = Extent {
                slot: e.slot,
                mode: union(x.mode, e.mode),
                lo,
                len: (hi - lo) as u64,
                cover: x.cover || e.cover,
            };
        }
        None => extents.push(e),
    }
}

fn union(a: Mode, b: Mode) -> Mode {
    if a == b {
        a
    } else {
        Mode::ReadWrite
    }
}

/// A set of word positions.
#[derive(Clone, Debug, Default)]
struct Words(Vec<u64>);

impl Words {
    fn has(&self, i: usize) -> bool {
        self.0.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 1)
    }

    fn set(&mut self, i: usize, on: bool) {
        if self.0.len() <= i / 64 {
            self.0.resize(i / 64 + 1, 0);
        }
        if on {
            self.0[i / 64] |= 1 << (i % 64);
        } else {
            self.0[i / 64] &= !(1 << (i % 64));
        }
    }

    fn count(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }
}

/// A learnt key's footprint and the words of the launch (or launches) it came from.
struct Entry {
    words: Arc<[u64]>,
    known: Known,
}

/// What is learnt of one kernel.
#[derive(Default)]
struct Kernel {
    /// Words left out of the key: found not to bear on the footprint.
    ignored: Words,
    /// Words found to bear on the footprint: never left out.
    relevant: Words,
    /// Per word: its points toward leaving the key.
    points: HashMap<usize, u32, BuildHasherDefault<FastHasher>>,
    keys: HashMap<u64, Entry, BuildHasherDefault<FastHasher>>,
    /// The last measured launches, oldest first.
    recent: VecDeque<(Arc<[u64]>, Known)>,
    /// Per footprint (its hash), the last measured launch that had it. A kernel that runs
    /// many footprints in turn (PyTorch's foreach kernels, one launch per chunk of a tensor
    /// list, with a step's bias correction among the words) meets its own footprint again
    /// only after more than [`RECENT`] others: without this, a word that changes at every
    /// step would never be compared across launches that touched the same bytes.
    same_footprint: HashMap<u64, (Arc<[u64]>, Known), BuildHasherDefault<FastHasher>>,
}

impl Kernel {
    fn key(&self, words: &[u64]) -> u64 {
        let mut h = FastHasher::default();
        h.write_usize(words.len());
        for (i, &w) in words.iter().enumerate() {
            if !self.ignored.has(i) {
                h.write_u64(w);
            }
        }
        h.finish()
    }

    /// Files `known` under the key of `words`, as the union with what the key had.
    fn insert(&mut self, words: Arc<[u64]>, known: Known) {
        let key = self.key(&words);
        match self.keys.entry(key) {
            MapEntry::Occupied(mut o) => {
                let e = o.get_mut();
                if e.known != known {
                    e.known = e.known.union(&known);
                }
            }
            MapEntry::Vacant(v) => {
                v.insert(Entry { words, known });
            }
        }
    }

    /// Learns from a measured launch: its words and what it touched.
    fn learn(&mut self, words: Arc<[u64]>, known: Known) {
        let mut changed = false;
        let mut pointed: Vec<usize> = Vec::new();
        let footprint_hash = {
            let mut h = FastHasher::default();
            known.hash(&mut h);
            h.finish()
        };
        let last_same = self.same_footprint.get(&footprint_hash).filter(|(_, k)| *k == known);
        for (other, footprint) in self.recent.iter().chain(last_same) {
            if other.len() != words.len() {
                continue;
            }
            let differ: Vec<usize> = (0..words.len()).filter(|&i| words[i] != other[i]).collect();
            if differ.is_empty() {
                continue;
            }
            if *footprint == known {
                if !differ.iter().any(|&i| self.relevant.has(i)) {
                    for i in differ {
                        if !pointed.contains(&i) {
                            pointed.push(i);
                        }
                    }
                }
            } else {
                // The footprint moved: with the one word of the key that differed, that word
                // bears on it; with none, the words left out that differed may (or the kernel
                // is data-dependent): they go back into the key for good.
                let kept: Vec<usize> = differ.iter().copied().filter(|&i| !self.ignored.has(i)).collect();
                match kept[..] {
                    [i] => self.relevant.set(i, true),
                    [] => {
                        for &i in &differ {
                            self.relevant.set(i, true);
                            self.ignored.set(i, false);
                        }
                        changed = true;
                    }
                    _ => {}
                }
            }
        }
        for i in pointed {
            let points = self.points.entry(i).or_default();
            *points += 1;
            if *points >= IGNORED_AFTER && !self.relevant.has(i) && !self.ignored.has(i) {
                self.ignored.set(i, true);
                changed = true;
            }
        }
        if changed {
            // The key changed: file every learnt launch anew (those now under one key, unioned).
            let keys = std::mem::take(&mut self.keys);
            for (_, e) in keys {
                self.insert(e.words, e.known);
            }
        }
        self.insert(words.clone(), known.clone());
        if self.same_footprint.len() >= FOOTPRINTS {
            self.same_footprint.clear();
        }
        self.same_footprint.insert(footprint_hash, (words.clone(), known.clone()));
        self.recent.push_back((words, known));
        if self.recent.len() > RECENT {
            self.recent.pop_front();
        }
    }
}

/// The learnt footprints, by kernel.
pub struct Learnt {
    kernels: FastMap<u64, Kernel>,
    /// Launches given learnt extents.
    applied: AtomicU64,
}

impl Default for Learnt {
    fn default() -> Learnt {
        Learnt { kernels: fast_map(), applied: AtomicU64::new(0) }
    }
}

/// What [`Model::apply_learnt`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The accesses are now the learnt ones: check the launch at once.
    Applied,
    /// Nothing learnt for this key yet: measure the launch. `kernel_seen`: a launch of its
    /// kernel was learnt before (this is a new key of it).
    Unknown { kernel_seen: bool },
    /// Its launches touch memory no parameter points into: measure every launch.
    Unlearnable,
}

/// What was learnt, for the engine's trace at exit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LearntSummary {
    pub kernels: u64,
    pub keys: u64,
    /// Keys whose extents hold a cover.
    pub covers: u64,
    pub unlearnable: u64,
    /// Words left out of their kernel's key.
    pub ignored_words: u64,
    /// Launches given learnt extents.
    pub applied: u64,
}

impl Model {
    /// Replaces a launch's parameter accesses (`accesses`, each with its slot) by what was
    /// learnt for its kernel and words, if anything was.
    pub fn apply_learnt(&self, kernel: u64, words: &[u64], accesses: &mut [Access]) -> Lookup {
        let extents = {
            let Some(k) = self.learnt.kernels.get(&kernel) else {
                return Lookup::Unknown { kernel_seen: false };
            };
            match k.keys.get(&k.value().key(words)).map(|e| &e.known) {
                None => return Lookup::Unknown { kernel_seen: true },
                Some(Known::Unlearnable) => return Lookup::Unlearnable,
                Some(Known::Extents(extents)) => extents.clone(),
            }
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
        self.learnt.applied.fetch_add(1, Ordering::Relaxed);
        Lookup::Applied
    }

    /// Learns from a measured launch (`op`): `guess` its parameters' accesses, `measured`
    /// what it touched.
    pub(super) fn learn(&self, learning: &Learning, guess: &[Access], measured: Footprint<'_>, op: OpRecord) {
        let known = self.extents(guess, measured);
        if let Known::Extents(extents) = &known {
            if extents.iter().any(|e| e.cover) {
                self.notes.add(NoteKind::FootprintLearntCover, op, learning.kernel);
            }
        }
        self.learnt.kernels.entry(learning.kernel).or_default().learn(learning.words.clone(), known);
    }

    /// What a measured launch touched through each pointer parameter.
    fn extents(&self, guess: &[Access], measured: Footprint<'_>) -> Known {
        let bounds = |addr: u64| match self.buffers.find(addr) {
            Found::Live(b) | Found::Freed(b) => Some((b.base, b.end())),
            Found::Nothing => None,
        };
        // The pointer into `buffer` at or nearest below `addr`, else the lowest.
        let pointer = |buffer: (u64, u64), addr: u64| {
            let into = guess.iter().filter(|g| g.slot.is_some() && bounds(g.addr) == Some(buffer));
            let below = into.clone().filter(|g| g.addr <= addr).max_by_key(|g| g.addr);
            below.or_else(|| into.min_by_key(|g| g.addr)).copied()
        };
        let extent = |p: &Access, lo: u64, hi: u64, mode: Mode, cover: bool| {
            let from = lo.wrapping_sub(p.addr) as i64;
            Extent { slot: p.slot.expect("a pointer"), mode, lo: from, len: hi - lo, cover }
        };
        let mut extents: Vec<Extent> = Vec::new();
        for m in measured.ranges {
            // A range joined across touching granules may span adjacent buffers: each part.
            let (mut lo, hi) = (m.addr, m.addr + m.len);
            for _ in 0..8 {
                let Some(buffer) = bounds(lo) else { break };
                let Some(p) = pointer(buffer, lo) else {
                    return Known::Unlearnable;
                };
                let end = hi.min(buffer.1);
                add_extent(&mut extents, extent(&p, lo, end, m.mode, false));
                lo = end;
                if lo >= hi {
                    break;
                }
            }
        }
        if let Some(cover) = measured.cover {
            let (lo, hi) = (cover.addr, cover.addr + cover.len);
            // Its ends were touched: in a buffer no parameter points into, memory was reached
            // through memory.
            for end in [lo, hi.saturating_sub(1).max(lo)] {
                if bounds(end).is_some_and(|b| pointer(b, end).is_none()) {
                    return Known::Unlearnable;
                }
            }
            let mut buffers: Vec<(u64, u64)> =
                guess.iter().filter(|g| g.slot.is_some()).filter_map(|g| bounds(g.addr)).collect();
            buffers.sort_unstable();
            buffers.dedup();
            for buffer in buffers {
                let (plo, phi) = (lo.max(buffer.0), hi.min(buffer.1));
                if plo < phi {
                    let p = pointer(buffer, plo).expect("a pointer into the buffer");
                    add_extent(&mut extents, extent(&p, plo, phi, cover.mode, true));
                }
            }
        }
        Known::Extents(extents.into())
    }

    /// What was learnt so far (for the engine's trace at exit).
    pub fn learnt_summary(&self) -> LearntSummary {
        let mut s = LearntSummary { applied: self.learnt.applied.load(Ordering::Relaxed), ..Default::default() };
        for k in self.learnt.kernels.iter() {
            s.kernels += 1;
            s.ignored_words += u64::from(k.ignored.count());
            for e in k.keys.values() {
                s.keys += 1;
                match &e.known {
                    Known::Unlearnable => s.unlearnable += 1,
                    Known::Extents(x) if x.iter().any(|x| x.cover) => s.covers += 1,
                    Known::Extents(_) => {}
                }
            }
        }
        s
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
        alloc(&m, BASE, SIZE);
        m
    }

    fn alloc(m: &Model, base: u64, size: u64) {
        let origin = Origin { api: "cuMemAlloc_v2", thread: ThreadId(1), site: StackId(0) };
        m.alloc(Alloc { base, size, kind: MemoryKind::Device, ctx: 1 }, None, &origin);
    }

    fn op() -> OpRecord {
        OpRecord {
            api: "cuLaunchKernel",
            kernel: None,
            epoch: Default::default(),
            thread: ThreadId(1),
            site: StackId(0),
        }
    }

    fn pointer(addr: u64, slot: u32) -> Access {
        Access { addr, len: 1, mode: Mode::Unknown, exact: false, slot: Some(slot) }
    }

    fn learning(kernel: u64, words: &[u64]) -> Learning {
        Learning { kernel, words: words.into() }
    }

    fn exact(ranges: &[Access]) -> Footprint<'_> {
        Footprint { ranges, cover: None }
    }

    fn span(a: &Access) -> (u64, u64, Mode) {
        (a.addr, a.len, a.mode)
    }

    #[test]
    fn extents_are_learnt_relative_to_each_pointer_and_applied_to_new_pointers() {
        let m = model();
        // Slot 0 points at the buffer, slot 8 at its middle; the launch wrote the first half
        // and read the second.
        let guess = [pointer(BASE, 0), pointer(BASE + SIZE / 2, 8)];
        let measured = [Access::new(BASE, SIZE / 2, Mode::Write), Access::new(BASE + SIZE / 2, SIZE / 2, Mode::Read)];
        let words = [7, POINTER, POINTER];
        m.learn(&learning(1, &words), &guess, exact(&measured), op());
        // A later launch with the same words, its pointers 256 bytes further on.
        let mut later = [pointer(BASE + 256, 0), pointer(BASE + 256 + SIZE / 4, 8)];
        assert_eq!(m.apply_learnt(1, &words, &mut later), Lookup::Applied);
        assert_eq!(span(&later[0]), (BASE + 256, SIZE / 2, Mode::Write));
        assert_eq!(span(&later[1]), (BASE + 256 + SIZE / 4, SIZE / 2, Mode::Read));
        assert_eq!(m.apply_learnt(1, &[8, POINTER, POINTER], &mut later), Lookup::Unknown { kernel_seen: true });
        assert_eq!(m.apply_learnt(2, &words, &mut later), Lookup::Unknown { kernel_seen: false });
    }

    #[test]
    fn memory_no_pointer_leads_to_makes_a_launch_unlearnable() {
        let m = model();
        alloc(&m, 0x40_0000, SIZE);
        let words = [POINTER];
        m.learn(&learning(1, &words), &[pointer(BASE, 0)], exact(&[Access::new(0x40_0000, 64, Mode::Read)]), op());
        assert_eq!(m.apply_learnt(1, &words, &mut [pointer(BASE, 0)]), Lookup::Unlearnable);
    }

    #[test]
    fn a_range_over_two_adjacent_buffers_is_split_between_their_pointers() {
        let m = model();
        alloc(&m, BASE + SIZE, SIZE);
        let guess = [pointer(BASE, 0), pointer(BASE + SIZE, 8)];
        let words = [POINTER, POINTER];
        m.learn(&learning(1, &words), &guess, exact(&[Access::new(BASE + 16, SIZE, Mode::Write)]), op());
        let mut later = guess;
        assert_eq!(m.apply_learnt(1, &words, &mut later), Lookup::Applied);
        assert_eq!(span(&later[0]), (BASE + 16, SIZE - 16, Mode::Write));
        assert_eq!(span(&later[1]), (BASE + SIZE, 16, Mode::Write));
    }

    #[test]
    fn a_cover_is_learnt_as_its_part_in_each_parameters_buffer() {
        let m = model();
        // Three buffers: the kernel's two parameters point into the outer ones; the cover
        // of its overflowed table spans the middle one too.
        alloc(&m, BASE + SIZE, SIZE);
        alloc(&m, BASE + 2 * SIZE, SIZE);
        let guess = [pointer(BASE, 0), pointer(BASE + 2 * SIZE, 8)];
        let words = [POINTER, POINTER];
        let cover = Access::new(BASE + 64, 2 * SIZE, Mode::Write);
        m.learn(&learning(1, &words), &guess, Footprint { ranges: &[], cover: Some(cover) }, op());
        let mut later = [pointer(BASE + 0x100_0000, 0), pointer(BASE + 0x200_0000, 8)];
        assert_eq!(m.apply_learnt(1, &words, &mut later), Lookup::Applied);
        assert_eq!(span(&later[0]), (BASE + 0x100_0000 + 64, SIZE - 64, Mode::Write));
        assert_eq!(span(&later[1]), (BASE + 0x200_0000, 64, Mode::Write));
        assert_eq!(m.learnt_summary().covers, 1);
        assert_eq!(m.notes.entries()[0].kind, NoteKind::FootprintLearntCover);
        // A cover ending in a buffer no parameter points into: memory reached through memory.
        m.learn(&learning(2, &words), &[pointer(BASE, 0)], Footprint { ranges: &[], cover: Some(cover) }, op());
        assert_eq!(m.apply_learnt(2, &words, &mut [pointer(BASE, 0)]), Lookup::Unlearnable);
    }

    #[test]
    fn a_word_that_changes_without_moving_the_footprint_leaves_the_key() {
        let m = model();
        let guess = [pointer(BASE, 0)];
        let measured = [Access::new(BASE, 64, Mode::Write)];
        // Words: the pointer, a size (64), a step count.
        for step in 0..u64::from(IGNORED_AFTER) {
            assert_ne!(m.apply_learnt(1, &[POINTER, 64, step + 1], &mut [pointer(BASE, 0)]), Lookup::Applied);
            m.learn(&learning(1, &[POINTER, 64, step]), &guess, exact(&measured), op());
        }
        // Step IGNORED_AFTER: a second change with the same footprint.
        m.learn(&learning(1, &[POINTER, 64, 99]), &guess, exact(&measured), op());
        let mut fresh = [pointer(BASE + 128, 0)];
        assert_eq!(m.apply_learnt(1, &[POINTER, 64, 12345], &mut fresh), Lookup::Applied);
        assert_eq!(span(&fresh[0]), (BASE + 128, 64, Mode::Write));
        // The size still makes a key of its own.
        assert_eq!(m.apply_learnt(1, &[POINTER, 128, 7], &mut fresh), Lookup::Unknown { kernel_seen: true });
        assert_eq!(m.learnt_summary().ignored_words, 1);
    }

    #[test]
    fn a_word_that_alone_moved_the_footprint_stays_in_the_key() {
        let m = model();
        let guess = [pointer(BASE, 0)];
        let write = |n: u64| [Access::new(BASE, n, Mode::Write)];
        // The size word changes with the footprint, then three launches of one size agree.
        m.learn(&learning(1, &[POINTER, 64]), &guess, exact(&write(64)), op());
        m.learn(&learning(1, &[POINTER, 128]), &guess, exact(&write(128)), op());
        for _ in 0..3 {
            m.learn(&learning(1, &[POINTER, 256]), &guess, exact(&write(256)), op());
        }
        let mut at = [pointer(BASE, 0)];
        assert_eq!(m.apply_learnt(1, &[POINTER, 512], &mut at), Lookup::Unknown { kernel_seen: true });
        assert_eq!(m.apply_learnt(1, &[POINTER, 128], &mut at), Lookup::Applied);
        assert_eq!(span(&at[0]), (BASE, 128, Mode::Write));
    }

    #[test]
    fn launches_under_one_key_keep_the_union_of_their_extents() {
        let m = model();
        let guess = [pointer(BASE, 0)];
        let words = [POINTER, 1];
        m.learn(&learning(1, &words), &guess, exact(&[Access::new(BASE, 64, Mode::Read)]), op());
        m.learn(&learning(1, &words), &guess, exact(&[Access::new(BASE + 32, 64, Mode::Write)]), op());
        let mut at = [pointer(BASE, 0)];
        assert_eq!(m.apply_learnt(1, &words, &mut at), Lookup::Applied);
        assert_eq!(span(&at[0]), (BASE, 96, Mode::ReadWrite));
    }

    #[test]
    fn a_step_word_leaves_the_key_of_a_kernel_that_runs_many_footprints_in_turn() {
        // A foreach kernel as an optimizer step runs it: one launch per chunk of a tensor
        // list (12 chunks of different sizes, more than RECENT), every launch of a step
        // with the step's bias correction among its words. Each chunk meets its own
        // footprint again only a step later.
        let m = model();
        let chunk = |c: u64| 64 * (c + 1);
        let mut measured_per_step = Vec::new();
        for step in 0..6u64 {
            let bias_correction = 0x3f80_0000 + step * 977;
            let mut measured = 0;
            for c in 0..12 {
                let words = [POINTER, chunk(c), bias_correction];
                let mut at = [pointer(BASE, 0)];
                if m.apply_learnt(1, &words, &mut at) == Lookup::Applied {
                    assert_eq!(span(&at[0]), (BASE, chunk(c), Mode::ReadWrite));
                } else {
                    measured += 1;
                    m.learn(
                        &learning(1, &words),
                        &[pointer(BASE, 0)],
                        exact(&[Access::new(BASE, chunk(c), Mode::ReadWrite)]),
                        op(),
                    );
                }
            }
            measured_per_step.push(measured);
        }
        // In the second step, two chunks measured again each see the word changed under
        // their own footprint: it leaves the key, and every later launch stands on what was
        // learnt.
        assert_eq!(measured_per_step, [12, 2, 0, 0, 0, 0]);
    }

    /// A small deterministic generator for the property test below.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn learnt_extents_cover_what_every_launch_touches_when_the_footprint_follows_its_words() {
        // Kernels whose footprint follows some of their words (a size; a mode flag, for half
        // of them) and not others (a step, a seed, the flag for the other half): whenever a
        // launch is given learnt extents, they hold every byte it touches, in a mode at least
        // as strong. (A word that moves the footprint only at values never measured is out
        // of reach: see the module's doc.)
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for kernel in 0..200u64 {
            let m = Model::default();
            alloc(&m, BASE, 1 << 24);
            let sizes = 1 + rng.next() % 4;
            let moody = rng.next().is_multiple_of(2);
            let mut applied = 0;
            for _ in 0..60 {
                let n = 64 * (1 + rng.next() % sizes);
                let flag = rng.next() % 3;
                let words = [POINTER, n, flag, rng.next(), POINTER, rng.next() % 5];
                let (p, q) = (BASE + 4096 * (rng.next() % 64), BASE + (1 << 23) + 4096 * (rng.next() % 64));
                let guess = [pointer(p, 0), pointer(q, 32)];
                // n bytes from p, read; when `moody`, written under flag 1 and read 32 bytes
                // further under flag 2; and n / 2 bytes of q from its 16th, written.
                let (mode, extra) = match (moody, flag) {
                    (true, 1) => (Mode::Write, 0),
                    (true, 2) => (Mode::Read, 32),
                    _ => (Mode::Read, 0),
                };
                let truth = [Access::new(p, n + extra, mode), Access::new(q + 16, n / 2, Mode::Write)];
                let mut at = guess;
                if m.apply_learnt(kernel, &words, &mut at) == Lookup::Applied {
                    applied += 1;
                    for (t, a) in truth.iter().zip(&at) {
                        assert!(a.addr <= t.addr && t.addr + t.len <= a.addr + a.len, "{t:?} in {a:?}");
                        assert!(a.mode == t.mode || a.mode == Mode::ReadWrite, "{t:?} as {a:?}");
                    }
                } else {
                    m.learn(&learning(kernel, &words), &guess, exact(&truth), op());
                }
            }
            assert!(applied > 10, "kernel {kernel}: learnt extents applied {applied} times in 60");
        }
    }
}
