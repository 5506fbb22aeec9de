//! Vector clocks and epochs (`docs/semantics.md#clocks`). A clock is the host's clock at some
//! moment, a snapshot shared by every clock that learnt it ([`HostSnapshot`]), plus the few
//! components it learnt otherwise, sparse: most of what a stream knows it knows from the host.

use std::fmt;
use std::sync::Arc;

/// A component of the vector clocks.
pub type Slot = u32;

/// The host's slot.
pub const HOST: Slot = 0;

/// One operation: its slot and its time in that slot.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Epoch {
    pub slot: Slot,
    pub time: u32,
}

impl Epoch {
    pub const fn new(slot: Slot, time: u32) -> Epoch {
        Epoch { slot, time }
    }

    /// Whether this operation happens before the operation with clock `clock`.
    #[inline]
    pub fn happens_before(self, clock: &VectorClock) -> bool {
        self.time <= clock.get(self.slot)
    }
}

impl fmt::Debug for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.time, self.slot)
    }
}

/// The host's clock at one version, dense (slot -> time).
#[derive(PartialEq, Eq)]
pub struct HostSnapshot {
    version: u64,
    times: Vec<u32>,
}

impl HostSnapshot {
    #[inline]
    fn get(&self, slot: Slot) -> u32 {
        self.times.get(slot as usize).copied().unwrap_or(0)
    }
}

/// A vector clock: slot -> time, zero where absent.
#[derive(Clone, Default)]
pub struct VectorClock {
    /// The host's clock as of some moment, if this clock learnt it.
    host: Option<Arc<HostSnapshot>>,
    /// Components learnt otherwise, sorted by slot; where one is below the host snapshot's,
    /// the snapshot's counts.
    own: Vec<(Slot, u32)>,
}

impl VectorClock {
    pub fn new() -> VectorClock {
        VectorClock::default()
    }

    #[inline]
    fn own(&self, slot: Slot) -> u32 {
        // Short lists are searched in order; long ones (a stream that waited on many) halved.
        if self.own.len() <= 8 {
            self.own.iter().find(|&&(s, _)| s == slot).map_or(0, |&(_, t)| t)
        } else {
            self.own.binary_search_by_key(&slot, |&(s, _)| s).map_or(0, |i| self.own[i].1)
        }
    }

    #[inline]
    pub fn get(&self, slot: Slot) -> u32 {
        let own = self.own(slot);
        match &self.host {
            Some(host) => own.max(host.get(slot)),
            None => own,
        }
    }

    /// Sets `slot` to `time`.
    pub fn set(&mut self, slot: Slot, time: u32) {
        match self.own.binary_search_by_key(&slot, |&(s, _)| s) {
            Ok(i) => self.own[i].1 = time,
            Err(i) => self.own.insert(i, (slot, time)),
        }
    }

    /// Advances `slot` by one and returns the new epoch.
    pub fn tick(&mut self, slot: Slot) -> Epoch {
        let time = self.get(slot) + 1;
        self.set(slot, time);
        Epoch::new(slot, time)
    }

    /// `self ⊔= other`. Returns whether anything changed. Linear in the two `own` lists (a
    /// merge, in place), whatever their lengths.
    pub fn join(&mut self, other: &VectorClock) -> bool {
        let mut changed = false;
        if let Some(theirs) = &other.host {
            if self.host.as_ref().is_none_or(|mine| mine.version < theirs.version) {
                self.host = Some(theirs.clone());
                self.drop_covered();
                changed = true;
            }
        }
        if other.own.is_empty() {
            return changed;
        }
        let (host, own) = (self.host.as_deref(), &mut self.own);
        let host_time = |slot| host.map_or(0, |h| h.get(slot));
        // First pass: raise the components both lists have, count those only `other` has
        // (and the host snapshot does not cover).
        let (mut i, mut missing) = (0, 0);
        for &(slot, time) in &other.own {
            while i < own.len() && own[i].0 < slot {
                i += 1;
            }
            if i < own.len() && own[i].0 == slot {
                if time > own[i].1 && time > host_time(slot) {
                    own[i].1 = time;
                    changed = true;
                }
            } else if time > host_time(slot) {
                missing += 1;
            }
        }
        if missing == 0 {
            return changed;
        }
        // Second pass, from the back: move this clock's entries up to make room, and put the
        // missing ones in their places.
        let mut i = own.len();
        own.resize(i + missing, (0, 0));
        let mut k = own.len();
        for &(slot, time) in other.own.iter().rev() {
            while i > 0 && own[i - 1].0 > slot {
                own[k - 1] = own[i - 1];
                (i, k) = (i - 1, k - 1);
            }
            if (i > 0 && own[i - 1].0 == slot) || time <= host_time(slot) {
                continue;
            }
            own[k - 1] = (slot, time);
            k -= 1;
        }
        debug_assert_eq!(i, k, "every missing component placed");
        true
    }

    /// Joins the host's clock as of `snapshot`.
    pub fn join_host(&mut self, snapshot: &Arc<HostSnapshot>) -> bool {
        if self.host.as_ref().is_some_and(|mine| mine.version >= snapshot.version) {
            return false;
        }
        self.host = Some(snapshot.clone());
        self.drop_covered();
        true
    }

    /// Forgets the components the host snapshot covers: the clock then holds, besides the
    /// shared snapshot, only what it knows beyond the host (its own recent work, streams it
    /// waited on since the host last synchronized), however many streams the process made.
    fn drop_covered(&mut self) {
        if let Some(host) = &self.host {
            self.own.retain(|&(slot, time)| time > host.get(slot));
        }
    }

    /// How many components the clock holds beside its host snapshot (for tests).
    pub fn own_len(&self) -> usize {
        self.own.len()
    }

    /// The components it holds beside its host snapshot: all the host must learn to follow
    /// it (the snapshot is an earlier state of the host's own clock).
    pub fn own_entries(&self) -> &[(Slot, u32)] {
        &self.own
    }

    /// Forgets the components beside the host snapshot whose slots `keep` refuses, and the
    /// storage they took.
    pub fn forget_own(&mut self, mut keep: impl FnMut(Slot) -> bool) {
        self.own.retain(|&(slot, _)| keep(slot));
        self.own.shrink_to_fit();
    }

    /// Empties the clock, keeping its storage.
    pub fn clear(&mut self) {
        self.host = None;
        self.own.clear();
    }

    /// Copies `other` into `self`, reusing `self`'s storage.
    pub fn assign(&mut self, other: &VectorClock) {
        self.host.clone_from(&other.host);
        self.own.clear();
        self.own.extend_from_slice(&other.own);
    }

    /// The non-zero components, by slot, for reports, debugging and tests.
    pub fn entries(&self) -> Vec<(Slot, u32)> {
        let slots = self.host.as_ref().map_or(0, |h| h.times.len() as Slot);
        let mut all: Vec<Slot> = (0..slots).chain(self.own.iter().map(|&(s, _)| s)).collect();
        all.sort_unstable();
        all.dedup();
        all.into_iter().map(|s| (s, self.get(s))).filter(|&(_, t)| t > 0).collect()
    }
}

impl PartialEq for VectorClock {
    fn eq(&self, other: &VectorClock) -> bool {
        self.entries() == other.entries()
    }
}

impl Eq for VectorClock {}

impl fmt::Debug for VectorClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.entries()).finish()
    }
}

/// The host's clock: dense, one for the process, and a snapshot of it made when a clock
/// first asks after a change.
#[derive(Default)]
pub struct HostClock {
    times: Vec<u32>,
    version: u64,
    snapshot: Option<Arc<HostSnapshot>>,
}

impl HostClock {
    pub fn get(&self, slot: Slot) -> u32 {
        self.times.get(slot as usize).copied().unwrap_or(0)
    }

    /// `H ⊔= clock`. The clock's host snapshot is an earlier state of this clock, already
    /// included. Returns whether anything changed.
    pub fn join(&mut self, clock: &VectorClock) -> bool {
        self.join_entries(&clock.own)
    }

    /// `H ⊔=` the components `entries` (slot, time), in any order.
    pub fn join_entries(&mut self, entries: &[(Slot, u32)]) -> bool {
        let mut changed = false;
        for &(slot, time) in entries {
            let i = slot as usize;
            if i >= self.times.len() {
                self.times.resize(i + 1, 0);
            }
            if time > self.times[i] {
                self.times[i] = time;
                changed = true;
            }
        }
        if changed {
            self.changed();
        }
        changed
    }

    /// Advances the host's own component (a host-side event such as a synchronous
    /// allocation).
    pub fn tick(&mut self) -> Epoch {
        if self.times.is_empty() {
            self.times.push(0);
        }
        self.times[HOST as usize] += 1;
        self.changed();
        Epoch::new(HOST, self.times[HOST as usize])
    }

    fn changed(&mut self) {
        self.version += 1;
        self.snapshot = None;
    }

    /// The clock as it is now, shared.
    pub fn snapshot(&mut self) -> Arc<HostSnapshot> {
        let (times, version) = (&self.times, self.version);
        self.snapshot.get_or_insert_with(|| Arc::new(HostSnapshot { version, times: times.clone() })).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_tick_and_order() {
        let mut a = VectorClock::new();
        let e = a.tick(3);
        assert_eq!(e, Epoch::new(3, 1));
        let mut b = VectorClock::new();
        assert!(!e.happens_before(&b));
        assert!(b.join(&a));
        assert!(!b.join(&a));
        assert!(e.happens_before(&b));
        b.tick(1);
        let mut c = VectorClock::new();
        c.assign(&b);
        assert_eq!(c, b);
        assert_eq!(c.entries(), vec![(1, 1), (3, 1)]);
    }

    #[test]
    fn the_host_part_is_shared_and_the_later_snapshot_wins() {
        let mut host = HostClock::default();
        let mut stream = VectorClock::new();
        stream.tick(5);
        host.join(&stream);
        let early = host.snapshot();
        assert!(Arc::ptr_eq(&early, &host.snapshot()), "one snapshot per version");
        host.tick();
        let late = host.snapshot();
        let (mut a, mut b) = (VectorClock::new(), VectorClock::new());
        assert!(a.join_host(&late));
        assert!(b.join_host(&early));
        assert!(!a.join_host(&early), "an earlier snapshot teaches nothing");
        assert!(b.join(&a));
        assert_eq!(b.entries(), vec![(0, 1), (5, 1)]);
        // A component learnt after the snapshot beats it; one below it does not show.
        b.set(5, 3);
        assert_eq!(b.get(5), 3);
        let mut c = VectorClock::new();
        c.set(5, 0);
        c.join_host(&late);
        assert_eq!(c.get(5), 1);
    }

    #[test]
    fn many_own_components_are_searched() {
        let mut a = VectorClock::new();
        for slot in (1..40).rev() {
            a.set(slot * 3, slot);
        }
        assert_eq!(a.get(30), 10);
        assert_eq!(a.get(31), 0);
        assert_eq!(a.entries().len(), 39);
    }

    /// A clock's components as a map, the way a reader sees them.
    fn as_map(clock: &VectorClock, slots: Slot) -> Vec<u32> {
        (0..slots).map(|s| clock.get(s)).collect()
    }

    #[test]
    fn join_is_the_componentwise_maximum() {
        // Deterministic pseudo-random clocks over 64 slots, joined pairwise in both orders,
        // with and without host snapshots below them.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut host = HostClock::default();
        for round in 0..300 {
            let (mut a, mut b) = (VectorClock::new(), VectorClock::new());
            for clock in [&mut a, &mut b] {
                for _ in 0..next(20) {
                    clock.set(next(64) as Slot, next(50) as u32 + 1);
                }
            }
            if round % 3 == 0 {
                host.join(&b);
                a.join_host(&host.snapshot());
            }
            let expected: Vec<u32> = as_map(&a, 64).iter().zip(as_map(&b, 64)).map(|(x, y)| (*x).max(y)).collect();
            let mut joined = a.clone();
            let changed = joined.join(&b);
            assert_eq!(as_map(&joined, 64), expected, "round {round}");
            assert_eq!(changed, as_map(&a, 64) != expected, "round {round}: whether it changed");
            assert!(joined.own.windows(2).all(|w| w[0].0 < w[1].0), "sorted, no duplicates");
        }
    }

    #[test]
    fn a_later_host_snapshot_drops_what_it_covers() {
        let mut host = HostClock::default();
        let mut clock = VectorClock::new();
        for slot in 1..1000 {
            clock.set(slot, 1);
        }
        host.join(&clock);
        let mut stream = VectorClock::new();
        stream.join(&clock);
        assert_eq!(stream.own_len(), 999);
        stream.join_host(&host.snapshot());
        assert_eq!(stream.own_len(), 0, "the host knows all of it");
        stream.tick(7);
        assert_eq!((stream.get(7), stream.own_len()), (2, 1));
    }

    #[test]
    fn an_epoch_shows_as_time_at_slot_and_a_clock_as_its_components() {
        assert_eq!(format!("{:?}", Epoch::new(3, 7)), "7@3");
        let mut clock = VectorClock::new();
        clock.set(5, 2);
        clock.set(1, 4);
        assert_eq!(format!("{clock:?}"), "{1: 4, 5: 2}");
    }

    #[test]
    fn clocks_are_equal_when_their_components_are_however_they_hold_them() {
        let (mut a, mut b) = (VectorClock::new(), VectorClock::new());
        a.set(3, 1);
        b.set(3, 2);
        assert_ne!(a, b);
        // One learnt from a host snapshot, one set by hand: the same components.
        let mut host = HostClock::default();
        host.tick();
        let mut learnt = VectorClock::new();
        learnt.join_host(&host.snapshot());
        let mut set = VectorClock::new();
        set.set(HOST, 1);
        assert_eq!(learnt, set);
    }

    #[test]
    fn the_host_joining_what_it_knows_changes_nothing() {
        let mut host = HostClock::default();
        let mut stream = VectorClock::new();
        stream.tick(5);
        assert!(host.join(&stream));
        let before = host.snapshot();
        assert!(!host.join(&stream), "a component the host holds already is no news");
        assert!(Arc::ptr_eq(&before, &host.snapshot()), "and its snapshot stays");
    }

    #[test]
    fn joining_a_clock_of_the_same_host_snapshot_changes_nothing() {
        let mut host = HostClock::default();
        host.tick();
        let snapshot = host.snapshot();
        let (mut a, mut b) = (VectorClock::new(), VectorClock::new());
        a.join_host(&snapshot);
        b.join_host(&snapshot);
        assert!(!a.join(&b));
        b.tick(4);
        assert!(a.join(&b) && !a.join(&b));
        // A component the snapshot already holds is no news either, whatever `a` held
        // of it beside the snapshot.
        let mut c = VectorClock::new();
        c.set(HOST, 1);
        a.set(HOST, 0);
        assert!(!a.join(&c));
        assert_eq!(a.get(HOST), 1);
    }
}
