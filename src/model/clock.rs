//! Vector clocks and epochs.
//!
//! Every stream, and every lane of a launched graph, owns a *slot*: a component of the
//! vector clocks. Slot 0 is the host. A clock maps slots to times; an epoch `(slot, t)`
//! names one operation. An epoch happens before an operation whose clock is `V` iff
//! `t <= V[slot]` (`docs/semantics.md#clocks`).
//!
//! Slots are never reused (an epoch of a destroyed stream may still sit in shadow state), so
//! a process that used ten thousand streams has ten thousand slots. Most of what a stream's
//! clock knows it knows from the host (every operation is ordered after what the host
//! waited for, and the host waits for every stream at a device synchronization): stored as
//! a dense vector per stream, that would be ten thousand times ten thousand words. So a clock
//! is two parts: the host's clock as of some moment, an immutable snapshot shared by every
//! clock that learnt it ([`HostSnapshot`]), and the few components it learnt otherwise (its
//! own ticks, events it waited on), sparse. Host snapshots are totally ordered (the host's
//! clock only grows), so joining two clocks keeps the later snapshot.

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

    /// `self ⊔= other`. Returns whether anything changed.
    pub fn join(&mut self, other: &VectorClock) -> bool {
        let mut changed = false;
        if let Some(theirs) = &other.host {
            if self.host.as_ref().is_none_or(|mine| mine.version < theirs.version) {
                self.host = Some(theirs.clone());
                changed = true;
            }
        }
        for &(slot, time) in &other.own {
            if time > self.get(slot) {
                self.set(slot, time);
                changed = true;
            }
        }
        changed
    }

    /// Joins the host's clock as of `snapshot`.
    pub fn join_host(&mut self, snapshot: &Arc<HostSnapshot>) -> bool {
        if self.host.as_ref().is_some_and(|mine| mine.version >= snapshot.version) {
            return false;
        }
        self.host = Some(snapshot.clone());
        true
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
        let mut changed = false;
        for &(slot, time) in &clock.own {
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
}
