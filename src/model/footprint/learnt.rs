//! Footprints learnt from measured launches (`footprint=learn`): what a launch touched through
//! each pointer parameter, relative to the pointer, filed under a key made of its kernel's
//! words less those found not to bear on the footprint, and given at issue to later launches
//! with the same key. `docs/footprints.md` says how the key, attribution and covers work.

use std::collections::hash_map::Entry as MapEntry;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::hash::{fast_map, FastHasher, FastMap};
use crate::phases::{self, Tally};

use super::measured::Footprint;
use crate::model::op::{Access, Mode, WaitPlace};
use crate::model::residue;

/// A pointer into a buffer, in a launch's words: the footprint is relative to it, so its
/// value is no part of the key.
pub const POINTER: u64 = 0x5354_5245_414d_5054;

/// Prints each learnt launch, and its kernel's words found to bear on its footprint or not
/// (the shim sets it with `STREAMSAN_FOOTPRINT_TRACE=1`).
pub static TRACE: AtomicBool = AtomicBool::new(false);

/// Points (launches with the same footprint though the word differed) after which a word
/// leaves its kernel's key.
pub const IGNORED_AFTER: u32 = 2;

/// Measured launches of a kernel that a new one is compared with.
pub const RECENT: usize = 8;

/// Footprints of a kernel whose last launch a new one with the same footprint is compared
/// with (beyond, the record starts afresh).
pub const FOOTPRINTS: usize = 1024;

/// A measured launch to learn from: its kernel and its words, the launch shape then the
/// parameter block in 8-byte words, each pointer into a buffer replaced by [`POINTER`] (a
/// parameter of fewer than 8 bytes that shares its word with another is a word of its own, at
/// the end). `anchors`: its pointers that are no access of the launch (fields the parameter
/// scan left out), each with its slot: its ranges are attributed to them as to the others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Learning {
    pub kernel: u64,
    pub words: Arc<[u64]>,
    pub anchors: Arc<[Access]>,
}

/// What one pointer parameter's launch touched on one side of its kernel's first
/// grid-dependency wait, relative to the pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Extent {
    slot: u32,
    mode: Mode,
    /// From the pointer to the first byte touched (may be negative).
    lo: i64,
    len: u64,
    /// Its residues relative to the pointer ([`residue`]): those of a pointer at 0.
    residues: u64,
    /// Part of an overflowed table's cover: bytes that may not all have been touched.
    cover: bool,
    /// Where it was touched around the kernel's first grid-dependency wait: a programmatic
    /// launch given it overlaps the kernel ahead of it there only.
    place: WaitPlace,
}

/// What was learnt of one key: the extents of its pointer parameters, or that its launches
/// touch memory no parameter points into.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Known {
    Extents(Arc<[Extent]>),
    Unlearnable,
}

impl Known {
    /// The footprint of these extents (one per slot and place), in slot order: the same
    /// bytes measured in buffers laid out in another order are the same footprint, and must
    /// compare equal (a caching allocator hands a kernel's buffers out in a new order at every
    /// step).
    fn extents(mut extents: Vec<Extent>) -> Known {
        extents.sort_unstable_by_key(|e| (e.slot, e.place));
        Known::Extents(extents.into())
    }

    /// Whether both footprints touch the same bytes through each slot, in the same direction
    /// or one of them read-write: under one key their modes join, so what is applied holds
    /// both, and a word that differs between such footprints does not bear on them. Read and
    /// write apart are different footprints: a flag that turns a read into a write bears on
    /// it. Residues are no part of it: a granule shared with a neighbouring tensor touched the
    /// same way mixes in that tensor's residues where the allocator put it (and under one key
    /// they join).
    fn same_bytes(&self, other: &Known) -> bool {
        let (Known::Extents(a), Known::Extents(b)) = (self, other) else {
            return self == other;
        };
        let compatible = |x: Mode, y: Mode| x == y || x == Mode::ReadWrite || y == Mode::ReadWrite;
        // Two covers' parts in one buffer reach as far as the warps that found the table full
        // ran: where they end does not bear on the words.
        let reach = |x: &Extent, y: &Extent| (x.cover && y.cover) || (x.lo, x.len) == (y.lo, y.len);
        a.len() == b.len()
            && a.iter().zip(b.iter()).all(|(x, y)| {
                (x.slot, x.place, x.cover) == (y.slot, y.place, y.cover) && reach(x, y) && compatible(x.mode, y.mode)
            })
    }

    /// A hash equal for footprints of the same bytes ([`Known::same_bytes`]): of each
    /// extent's slot and place, and its bytes unless it is a cover's.
    fn bytes_hash(&self) -> u64 {
        let mut h = FastHasher::default();
        match self {
            Known::Unlearnable => h.write_u8(0),
            Known::Extents(extents) => {
                for e in extents.iter() {
                    (e.slot, e.place, e.cover).hash(&mut h);
                    if !e.cover {
                        (e.lo, e.len).hash(&mut h);
                    }
                }
            }
        }
        h.finish()
    }

    /// Whether every extent of `inner` lies within this footprint's extent of its slot and
    /// place, in a direction it holds.
    fn holds(&self, inner: &Known) -> bool {
        let (Known::Extents(outer), Known::Extents(inner)) = (self, inner) else {
            return self == inner;
        };
        inner.iter().all(|i| {
            outer.iter().any(|o| {
                (o.slot, o.place) == (i.slot, i.place)
                    && o.lo <= i.lo
                    && i.lo + i.len as i64 <= o.lo + o.len as i64
                    && (o.mode == i.mode || o.mode == Mode::ReadWrite)
                    && residue::within(i.residues, o.residues)
            })
        })
    }

    /// Whether an extent is part of an overflowed table's cover.
    pub fn has_cover(&self) -> bool {
        matches!(self, Known::Extents(extents) if extents.iter().any(|e| e.cover))
    }

    /// Both footprints at once: per slot and place, the hull of the two extents.
    fn union(&self, other: &Known) -> Known {
        let (Known::Extents(a), Known::Extents(b)) = (self, other) else {
            return Known::Unlearnable;
        };
        let mut out: Vec<Extent> = a.to_vec();
        for e in b.iter() {
            add_extent(&mut out, *e);
        }
        Known::extents(out)
    }
}

/// Adds `e` to `extents`, joined with the extent of its slot and place if there is one.
fn add_extent(extents: &mut Vec<Extent>, e: Extent) {
    match extents.iter_mut().find(|x| (x.slot, x.place) == (e.slot, e.place)) {
        Some(x) => {
            let (lo, hi) = (x.lo.min(e.lo), (x.lo + x.len as i64).max(e.lo + e.len as i64));
            *x = Extent {
                slot: e.slot,
                mode: union(x.mode, e.mode),
                lo,
                len: (hi - lo) as u64,
                residues: x.residues | e.residues,
                cover: x.cover || e.cover,
                place: e.place,
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
    /// Launches of its key since it was learnt, the one it was learnt from the first (or 3
    /// since a sample replaced it): the 4th, and one in each doubling, then quadrupling,
    /// after, are measured to check it ([`sampled`]).
    launches: AtomicU32,
    /// Where in each period its check falls: keys learnt one after another check at
    /// different launches, so that a program whose keys were all learnt in its first step
    /// does not measure all of them again in one later step.
    phase: u32,
    /// Launches measured to check it whose footprint is still to come.
    samples: AtomicU32,
    /// Whether the last sample contradicted it.
    contradicted: bool,
}

impl Entry {
    fn new(words: Arc<[u64]>, known: Known, phase: u32) -> Entry {
        Entry { words, known, launches: AtomicU32::new(1), phase, samples: AtomicU32::new(0), contradicted: false }
    }

    /// Whether a measured launch's footprint `measured` is what was learnt: the same extents,
    /// in compatible directions, touching no residue that was not learnt. (Residues learnt
    /// and not measured are no contradiction: a granule shared with a neighbour mixes its
    /// residues in where the allocator put it.)
    fn agrees(&self, measured: &Known) -> bool {
        if self.known.has_cover() {
            // Learnt from covers: a launch whose cover lies within what was learnt agrees.
            return self.known.holds(measured);
        }
        let (Known::Extents(learnt), Known::Extents(now)) = (&self.known, measured) else {
            return self.known == *measured;
        };
        learnt.len() == now.len()
            && learnt.iter().zip(now.iter()).all(|(l, m)| {
                (l.slot, l.place, l.lo, l.len, l.cover) == (m.slot, m.place, m.lo, m.len, m.cover)
                    && (l.mode == m.mode || l.mode == Mode::ReadWrite)
                    && residue::within(m.residues, l.residues)
            })
    }
}

/// What is learnt of one kernel.
#[derive(Default)]
struct Kernel {
    /// Words left out of the key: found not to bear on the footprint.
    ignored: Words,
    /// Words left out of the key whose being a pointer into a buffer is in it: a stale field
    /// (a tensor list's unused entry) that points into a buffer at some launches is an anchor
    /// there, and the launch's ranges beyond it are attributed to it, while its value, and
    /// stale words beside it, change from launch to launch.
    pointer_shaped: Words,
    /// Words found to bear on the footprint: never left out.
    relevant: Words,
    /// Words seen equal in two launches compared. One never seen so (a counter, stale
    /// bytes of a structure's unused entries) differs at every launch: in the key it would
    /// make every launch a new key, so it is never taken to bear on the footprint.
    repeats: Words,
    /// Words that earned a point from two exact footprints, not only from two covers (whose
    /// reach says little: a size word may differ under two covers that compare the same).
    exact_points: Words,
    /// Per word: its points toward leaving the key.
    points: HashMap<usize, u32, BuildHasherDefault<FastHasher>>,
    keys: HashMap<u64, Entry, BuildHasherDefault<FastHasher>>,
    /// The last measured launches, oldest first.
    recent: VecDeque<(Arc<[u64]>, Known)>,
    /// Per footprint ([`Known::bytes_hash`]), the last measured launch that had it. A kernel
    /// that runs many footprints in turn (PyTorch's foreach kernels, one launch per chunk of
    /// a tensor list, with a step's bias correction among the words) meets its own footprint
    /// again only after more than [`RECENT`] others: without this, a word that changes at
    /// every step would never be compared across launches that touched the same bytes.
    same_footprint: HashMap<u64, (Arc<[u64]>, Known), BuildHasherDefault<FastHasher>>,
}

impl Kernel {
    fn key(&self, words: &[u64]) -> u64 {
        let mut h = FastHasher::default();
        h.write_usize(words.len());
        for (i, &w) in words.iter().enumerate() {
            if !self.ignored.has(i) {
                h.write_u64(w);
            } else if self.pointer_shaped.has(i) {
                h.write_u8(u8::from(w == POINTER));
            }
        }
        h.finish()
    }

    /// Files `known` under the key of `words`, as the union with what the key had; a new key
    /// checks at `phase` ([`Entry::phase`]).
    fn insert(&mut self, words: Arc<[u64]>, known: Known, phase: impl FnOnce() -> u32) {
        let key = self.key(&words);
        match self.keys.entry(key) {
            MapEntry::Occupied(mut o) => {
                let e = o.get_mut();
                if e.known != known {
                    e.known = e.known.union(&known);
                }
            }
            MapEntry::Vacant(v) => {
                v.insert(Entry::new(words, known, phase()));
            }
        }
    }

    /// Checks a launch measured as a sample of its key against what the key had learnt: a
    /// footprint that contradicts it replaces it, and the key's next launch is measured again
    /// unless the sample before contradicted it too. A key whose footprint changes at every
    /// launch (a gather by an index tensor, an overflowed table's cover that reaches as far as
    /// the allocator put its buffers) is then sampled as often as one that holds, not at every
    /// launch. Returns false if the launch was not a sample.
    fn check_sample(&mut self, words: &[u64], known: &Known) -> bool {
        let key = self.key(words);
        let Some(e) = self.keys.get_mut(&key) else { return false };
        let sampled = e.samples.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok();
        if sampled {
            let agrees = e.agrees(known);
            if !agrees {
                // A cover is no exact footprint to replace another with: the next launch's
                // may reach further. Covers join what was learnt.
                e.known = if known.has_cover() || e.known.has_cover() { e.known.union(known) } else { known.clone() };
                if !e.contradicted {
                    e.launches.store(3, Ordering::Relaxed);
                }
            }
            e.contradicted = !agrees;
        }
        sampled
    }

    /// Learns from a measured launch: its words and what it touched; `keys_made` counts the
    /// keys made so far (a new key's phase).
    fn learn(&mut self, words: Arc<[u64]>, known: Known, keys_made: &AtomicU32) {
        if self.check_sample(&words, &known) {
            return;
        }
        let mut changed = false;
        let mut pointed: Vec<usize> = Vec::new();
        let footprint_hash = known.bytes_hash();
        let last_same = self.same_footprint.get(&footprint_hash).filter(|(_, k)| k.same_bytes(&known));
        for (other, footprint) in self.recent.iter().chain(last_same) {
            if other.len() != words.len() {
                continue;
            }
            phases::tally(Tally::LearnWordsCompared, words.len());
            let mut differ: Vec<usize> = Vec::new();
            for i in 0..words.len() {
                if words[i] == other[i] {
                    self.repeats.set(i, true);
                } else {
                    differ.push(i);
                }
            }
            if differ.is_empty() {
                continue;
            }
            if footprint.same_bytes(&known) {
                let exact = !footprint.has_cover() && !known.has_cover();
                if !differ.iter().any(|&i| self.relevant.has(i)) {
                    for i in differ {
                        if exact {
                            self.exact_points.set(i, true);
                        }
                        if !pointed.contains(&i) {
                            pointed.push(i);
                        }
                    }
                }
            } else if !footprint.has_cover() && !known.has_cover() {
                // The footprint moved: with the one word of the key that differed, that word
                // bears on it; with none, the words left out that differed may (or the kernel
                // is data-dependent): they go back into the key for good, those left out on
                // covers' word alone if any differed (a size word, beside stale bytes that
                // exact footprints showed to bear on nothing). Never a word that differs at
                // every launch ([`Kernel::repeats`]), and not from a cover, whose reach
                // follows where the allocator put the buffers it spans: either would stay in
                // every key of the kernel, measured every time.
                let kept: Vec<usize> = differ.iter().copied().filter(|&i| !self.ignored.has(i)).collect();
                // Of the words left out, those that held a pointer in one launch and data in
                // the other: an anchor came or went, which moves what ranges are attributed
                // to. Their being pointers goes back into the key, and nothing else.
                let anchored = |i: &usize| (words[*i] == POINTER) != (other[*i] == POINTER);
                match kept[..] {
                    [i] if self.repeats.has(i) => self.relevant.set(i, true),
                    [] if differ.iter().any(anchored) => {
                        for i in differ.iter().copied().filter(anchored) {
                            changed |= !self.pointer_shaped.has(i);
                            self.pointer_shaped.set(i, true);
                        }
                    }
                    [] => {
                        let back: Vec<usize> = differ.iter().copied().filter(|&i| self.repeats.has(i)).collect();
                        let on_covers: Vec<usize> =
                            back.iter().copied().filter(|&i| !self.exact_points.has(i)).collect();
                        for i in if on_covers.is_empty() { back } else { on_covers } {
                            self.relevant.set(i, true);
                            self.ignored.set(i, false);
                            changed = true;
                        }
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
            phases::tally(Tally::LearnKeysRefiled, keys.len());
            for (_, e) in keys {
                self.insert(e.words, e.known, || e.phase);
            }
        }
        self.insert(words.clone(), known.clone(), || keys_made.fetch_add(1, Ordering::Relaxed));
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
    /// Keys made so far, of every kernel: each new key's [`Entry::phase`].
    keys_made: AtomicU32,
}

impl Default for Learnt {
    fn default() -> Learnt {
        Learnt { kernels: fast_map(), applied: AtomicU64::new(0), keys_made: AtomicU32::new(0) }
    }
}

/// What [`Learnt::apply`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The accesses are now the learnt ones: check the launch at once.
    Applied,
    /// Nothing learnt for this key yet: measure the launch. `kernel_seen`: a launch of its
    /// kernel was learnt before (this is a new key of it).
    Unknown { kernel_seen: bool },
    /// Measure the launch to check what was learnt (its parameters' accesses are kept, the
    /// learnt ones given beside): a kernel whose footprint follows device data (an index
    /// buffer) must not be mispredicted for good. The key's 4th launch counted from the one it
    /// was learnt from, one in each doubling after, then in each quadrupling ([`sampled`]), and
    /// the next launch after a sample contradicted it: a logarithmic share of its launches.
    Sample,
    /// Its launches touch memory no parameter points into: measure every launch.
    Unlearnable,
}

/// Whether a learnt key's `n`th launch is measured to check what was learnt: the 4th, then
/// one in each doubling from the 8th to the 63rd, at `phase` within its first half (the 8th
/// to 11th, the 16th to 23rd...), then one in each quadrupling, at `phase` within its first
/// two quarters (the 64th to 191st, the 256th to 767th...). A check costs its launch tens of
/// times its native time on the device, and a long run's keys hold still: the later checks
/// thin out faster than the first.
pub(crate) fn sampled(n: u32, phase: u32) -> bool {
    if n < 8 {
        return n == 4;
    }
    let log = n.ilog2();
    if log < 6 {
        let doubling = 1 << log;
        return n - doubling == phase & (doubling / 2 - 1);
    }
    let quadrupling = 1 << (log & !1);
    n - quadrupling == phase & (2 * quadrupling - 1)
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

impl Learnt {
    /// Replaces a launch's parameter accesses (`accesses`, each with its slot) by what was
    /// learnt for its kernel and words, if anything was: an access per extent of its slot
    /// (one per place around the kernel's wait), and likewise through its `anchors`
    /// ([`Learning::anchors`]). A pointer that no extent was learnt for was not followed: it
    /// goes, unless the measure is blind to it. A launch to measure as a sample keeps its
    /// parameters' accesses (what its measure is learnt from) and is given the learnt ones
    /// beside, without a slot: what it stands on if it cannot be measured (a measured launch
    /// keeps none of them).
    pub fn apply(&self, kernel: u64, words: &[u64], accesses: &mut Vec<Access>, anchors: &[Access]) -> Lookup {
        let (extents, sample) = {
            let Some(k) = self.kernels.get(&kernel) else {
                return Lookup::Unknown { kernel_seen: false };
            };
            let Some(e) = k.keys.get(&k.value().key(words)) else {
                return Lookup::Unknown { kernel_seen: true };
            };
            match &e.known {
                Known::Unlearnable => return Lookup::Unlearnable,
                Known::Extents(extents) => {
                    let sample = sampled(e.launches.fetch_add(1, Ordering::Relaxed) + 1, e.phase);
                    if sample {
                        e.samples.fetch_add(1, Ordering::Relaxed);
                    }
                    (extents.clone(), sample)
                }
            }
        };
        let learnt = |access: &Access, e: &Extent| Access {
            addr: access.addr.wrapping_add_signed(e.lo),
            len: e.len,
            mode: e.mode,
            exact: true,
            residues: residue::moved(e.residues, (access.addr % 256) as i64),
            place: e.place,
            ..*access
        };
        // A pointer's extents, found by halving: a tensor list's kernel has a hundred
        // pointers, each looked up (the extents are in slot order, [`Known::extents`]).
        let of = |access: &Access| {
            let slot = access.slot;
            let from = slot.map_or(extents.len(), |slot| extents.partition_point(|e| e.slot < slot));
            extents[from..].iter().take_while(move |e| slot == Some(e.slot))
        };
        if sample {
            let beside: Vec<Access> = accesses
                .iter()
                .chain(anchors)
                .flat_map(|a| of(a).map(|e| Access { slot: None, blind: false, ..learnt(a, e) }))
                .collect();
            accesses.extend(beside);
            return Lookup::Sample;
        }
        // In place, with no allocation on the launch path: each access becomes its slot's
        // first extent, kept at the front; a slot's further extents go to the end.
        let given = accesses.len();
        let mut kept = 0;
        for i in 0..given {
            let access = accesses[i];
            let mut mine = of(&access);
            match mine.next() {
                Some(e) => {
                    accesses[kept] = learnt(&access, e);
                    kept += 1;
                    for e in mine {
                        accesses.push(learnt(&access, e));
                    }
                }
                None if access.blind => {
                    accesses[kept] = access;
                    kept += 1;
                }
                None => {}
            }
        }
        for anchor in anchors {
            accesses.extend(of(anchor).map(|e| learnt(anchor, e)));
        }
        accesses.drain(kept..given);
        self.applied.fetch_add(1, Ordering::Relaxed);
        Lookup::Applied
    }

    /// Learns `known`, what a measured launch of `kernel` with `words` touched.
    pub fn learn(&self, kernel: u64, words: Arc<[u64]>, known: Known) {
        let trace = TRACE.load(Ordering::Relaxed).then(|| format!("{words:x?} as {known:?}"));
        let mut k = self.kernels.entry(kernel).or_default();
        k.learn(words, known, &self.keys_made);
        if let Some(launch) = trace {
            let positions = |w: &Words| (0..w.0.len() * 64).filter(|&i| w.has(i)).collect::<Vec<_>>();
            eprintln!(
                "streamsan: learnt {kernel:x} {launch}; words bearing on it {:?}, left out {:?}",
                positions(&k.relevant),
                positions(&k.ignored)
            );
        }
    }

    /// What was learnt so far (for the engine's trace at exit).
    pub fn summary(&self) -> LearntSummary {
        let mut s = LearntSummary { applied: self.applied.load(Ordering::Relaxed), ..Default::default() };
        for k in self.kernels.iter() {
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

/// What a measured launch touched through each pointer parameter: `guess` its parameters'
/// accesses, `anchors` its other pointers ([`Learning::anchors`]), `measured` what it
/// touched, `bounds` the buffer (its first and end byte) an address is in.
pub fn known(
    guess: &[Access],
    anchors: &[Access],
    measured: Footprint<'_>,
    bounds: impl Fn(u64) -> Option<(u64, u64)>,
) -> Known {
    // Each pointer and the buffer it points into, looked up once, not once per range: a
    // launch may have hundreds of ranges. Of two pointers at one address, a parameter's is
    // taken before an anchor's (which may be a stale field).
    let pointers: Vec<(Access, (u64, u64), bool)> = guess
        .iter()
        .map(|g| (g, false))
        .chain(anchors.iter().map(|a| (a, true)))
        .filter(|(g, _)| g.slot.is_some())
        .filter_map(|(g, anchor)| Some((*g, bounds(g.addr)?, anchor)))
        .collect();
    let into = |buffer: (u64, u64)| pointers.iter().filter(move |(_, b, _)| *b == buffer).map(|(g, _, a)| (g, *a));
    // The pointer into `buffer` at or nearest below `addr`, else the lowest; of two at one
    // address, the one in the lower slot (a stale field repeating a parameter's pointer lies
    // after it: CatArrayBatchedCopy's unused entries hold its output's), so that the
    // footprint is the same at every launch whatever order the pointers come in.
    let pointer = |buffer: (u64, u64), addr: u64| {
        let rank = |g: &Access, anchor: bool| (anchor, g.slot);
        let below = into(buffer)
            .filter(|(g, _)| g.addr <= addr)
            .max_by(|(a, x), (b, y)| a.addr.cmp(&b.addr).then(rank(b, *y).cmp(&rank(a, *x))));
        below.or_else(|| into(buffer).min_by_key(|(g, anchor)| (g.addr, *anchor, g.slot))).map(|(g, _)| *g)
    };
    // The first parameter's pointer into `buffer` above `addr`. An anchor splits no range: a
    // stale field left pointing inside what a parameter's range covers (CatArrayBatchedCopy's
    // unused entries, into its output) would move the footprint at every launch.
    let next_pointer = |buffer: (u64, u64), addr: u64| {
        into(buffer).filter(|(_, a)| !a).map(|(g, _)| g.addr).filter(|&a| a > addr).min()
    };
    let extent = |p: &Access, (lo, hi): (u64, u64), m: &Access, cover: bool| {
        let from = lo.wrapping_sub(p.addr) as i64;
        // Relative to the pointer: exact where it is 4-byte aligned, else dense.
        let residues = if cover { residue::DENSE } else { residue::moved(m.residues, -((p.addr % 256) as i64)) };
        let (slot, mode, place) = (p.slot.expect("a pointer"), m.mode, m.place);
        Extent { slot, mode, lo: from, len: hi - lo, residues, cover, place }
    };
    let mut extents: Vec<Extent> = Vec::new();
    for m in measured.ranges {
        // A range joined across touching granules may span adjacent buffers, and adjacent
        // tensors of one buffer (a caching allocator's block): each part is its pointer's,
        // so that the footprint is the same wherever the allocator put them.
        let (mut lo, hi) = (m.addr, m.addr + m.len);
        while lo < hi {
            let Some(buffer) = bounds(lo) else { break };
            let Some(p) = pointer(buffer, lo) else {
                return Known::Unlearnable;
            };
            let end = hi.min(buffer.1).min(next_pointer(buffer, lo).unwrap_or(u64::MAX));
            add_extent(&mut extents, extent(&p, (lo, end), m, false));
            lo = end;
        }
    }
    for cover in measured.covers {
        let (lo, hi) = (cover.addr, cover.addr + cover.len);
        // Its ends were touched: in a buffer no parameter points into, memory was reached
        // through memory.
        for end in [lo, hi.saturating_sub(1).max(lo)] {
            if bounds(end).is_some_and(|b| pointer(b, end).is_none()) {
                return Known::Unlearnable;
            }
        }
        // Spread over the buffers it reaches ([`Footprint::cover_reaches`]).
        let mut buffers: Vec<(u64, u64)> = pointers
            .iter()
            .filter(|(p, b, anchor)| measured.cover_reaches(*b, !anchor && p.exact))
            .map(|(_, b, _)| *b)
            .collect();
        buffers.sort_unstable();
        buffers.dedup();
        for buffer in buffers {
            let (plo, phi) = (lo.max(buffer.0), hi.min(buffer.1));
            if plo < phi {
                let p = pointer(buffer, plo).expect("a pointer into the buffer");
                add_extent(&mut extents, extent(&p, (plo, phi), cover, true));
            }
        }
    }
    Known::extents(extents)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extent(lo: i64, len: u64, mode: Mode) -> Extent {
        Extent { slot: 8, mode, lo, len, residues: residue::DENSE, cover: false, place: WaitPlace::Unknown }
    }

    #[test]
    fn two_footprints_of_one_key_keep_the_hull_of_each_slot() {
        // Never the smaller: a later launch under the key may touch either footprint.
        let first = Known::Extents(vec![extent(0, 100, Mode::Write)].into());
        let second = Known::Extents(vec![extent(10, 10, Mode::Read), extent(-16, 8, Mode::Read)].into());
        let joined = first.union(&second);
        assert_eq!(joined, Known::Extents(vec![extent(-16, 116, union(Mode::Write, Mode::Read))].into()));
        assert_eq!(Known::Unlearnable.union(&first), Known::Unlearnable);
    }

    #[test]
    fn extents_on_two_sides_of_the_wait_are_two_footprints_and_their_union_keeps_both() {
        let at = |place| Extent { place, ..extent(0, 64, Mode::Read) };
        let (before, after) = (at(WaitPlace::Before), at(WaitPlace::After));
        let (early, late) = (Known::Extents(vec![before].into()), Known::Extents(vec![after].into()));
        assert!(!early.same_bytes(&late), "a read moved across the wait");
        assert!(early.same_bytes(&early.clone()));
        assert_eq!(early.union(&late), Known::Extents(vec![before, after].into()));
    }
}
