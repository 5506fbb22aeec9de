//! Vector clocks and epochs.
//!
//! Every stream, and every lane of a launched graph, owns a *slot*: a component of the
//! vector clocks. Slot 0 is the host. A clock maps slots to times; an epoch `(slot, t)`
//! names one operation. An epoch happens before an operation whose clock is `V` iff
//! `t <= V[slot]` (SEMANTICS.md, "Clocks").
//!
//! Clocks are dense vectors indexed by slot: the check on the launch path is one load.
//! Slots are never reused (an epoch of a destroyed stream may still sit in shadow state),
//! so a clock grows with the number of streams the process ever used.

use std::fmt;

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

/// A vector clock: slot -> time, zero where absent.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct VectorClock {
    times: Vec<u32>,
}

impl VectorClock {
    pub fn new() -> VectorClock {
        VectorClock { times: Vec::new() }
    }

    #[inline]
    pub fn get(&self, slot: Slot) -> u32 {
        self.times.get(slot as usize).copied().unwrap_or(0)
    }

    /// Sets `slot` to `time` (growing the clock as needed).
    pub fn set(&mut self, slot: Slot, time: u32) {
        let i = slot as usize;
        if i >= self.times.len() {
            self.times.resize(i + 1, 0);
        }
        self.times[i] = time;
    }

    /// Advances `slot` by one and returns the new epoch.
    pub fn tick(&mut self, slot: Slot) -> Epoch {
        let time = self.get(slot) + 1;
        self.set(slot, time);
        Epoch::new(slot, time)
    }

    /// `self ⊔= other`. Returns whether anything changed.
    pub fn join(&mut self, other: &VectorClock) -> bool {
        if other.times.len() > self.times.len() {
            self.times.resize(other.times.len(), 0);
        }
        let mut changed = false;
        for (mine, &theirs) in self.times.iter_mut().zip(&other.times) {
            if theirs > *mine {
                *mine = theirs;
                changed = true;
            }
        }
        changed
    }

    /// Empties the clock, keeping its storage.
    pub fn clear(&mut self) {
        self.times.clear();
    }

    /// Copies `other` into `self`, reusing `self`'s storage.
    pub fn assign(&mut self, other: &VectorClock) {
        self.times.clear();
        self.times.extend_from_slice(&other.times);
    }

    /// Whether every component of `self` is at most `other`'s.
    pub fn le(&self, other: &VectorClock) -> bool {
        self.times.iter().enumerate().all(|(i, &t)| t <= other.get(i as Slot))
    }

    /// The non-zero components, for debugging and tests.
    pub fn entries(&self) -> impl Iterator<Item = (Slot, u32)> + '_ {
        self.times.iter().enumerate().filter(|(_, &t)| t > 0).map(|(i, &t)| (i as Slot, t))
    }
}

impl fmt::Debug for VectorClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.entries()).finish()
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
        assert!(a.le(&b));
        assert!(!b.le(&a));
        let mut c = VectorClock::new();
        c.assign(&b);
        assert_eq!(c, b);
        assert_eq!(c.entries().collect::<Vec<_>>(), vec![(1, 1), (3, 1)]);
    }
}
