//! Directions learnt for pointers of unknown direction (kernels whose names carry no
//! parameter types): a kernel's parameter slot once given device bytes nobody touched is an
//! output of that kernel, and later accesses through it may write.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::hash::FastSet;
use crate::thread_cache::ThreadCache;

use super::op::{KernelId, Mode};

/// The parameter slots known to be outputs, per kernel.
pub struct Directions {
    outputs: FastSet<(KernelId, u32)>,
    /// Tells this table's entries in [`KNOWN`] from another's.
    id: u64,
    /// Bumped when a slot is learnt: a thread's remembered "not an output" may be stale.
    generation: AtomicU64,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Whether (table, kernel, slot) is an output, as this thread last looked it up: every
    /// launch of an untyped kernel asks for each of its pointers ([`crate::thread_cache`]).
    static KNOWN: RefCell<ThreadCache<(u64, KernelId, u32), bool, 4096>> = RefCell::new(ThreadCache::default());
}

impl Default for Directions {
    fn default() -> Directions {
        Directions {
            outputs: FastSet::default(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            generation: AtomicU64::new(0),
        }
    }
}

impl Directions {
    /// The mode to record for an access in `mode` by `kernel` through the parameter slot
    /// `slot`, to bytes that nobody touched yet if `untouched`.
    pub fn resolve(
        &self,
        mode: Mode,
        kernel: Option<KernelId>,
        slot: Option<u32>,
        untouched: impl FnOnce() -> bool,
    ) -> Mode {
        if mode != Mode::Unknown {
            return mode;
        }
        let key = kernel.zip(slot);
        if key.is_some_and(|key| self.is_output(key)) {
            return Mode::ReadWrite;
        }
        if !untouched() {
            return Mode::Unknown;
        }
        if let Some(key) = key {
            if self.outputs.insert(key) {
                self.generation.fetch_add(1, Ordering::AcqRel);
            }
        }
        Mode::Write
    }

    fn is_output(&self, (kernel, slot): (KernelId, u32)) -> bool {
        let generation = self.generation.load(Ordering::Acquire);
        let key = (self.id, kernel, slot);
        if let Ok(Some(known)) = KNOWN.try_with(|k| k.try_borrow().ok()?.get(&key, generation).copied()) {
            return known;
        }
        let known = self.outputs.contains(&(kernel, slot));
        let _ = KNOWN.try_with(|k| {
            if let Ok(mut k) = k.try_borrow_mut() {
                k.put(key, generation, known);
            }
        });
        known
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: Option<KernelId> = Some(KernelId(7));

    #[test]
    fn known_directions_are_kept() {
        let d = Directions::default();
        assert_eq!(d.resolve(Mode::Read, K, Some(0), || true), Mode::Read);
        assert_eq!(d.resolve(Mode::ReadWrite, K, Some(0), || true), Mode::ReadWrite);
    }

    #[test]
    fn a_slot_given_fresh_memory_is_an_output_from_then_on() {
        let d = Directions::default();
        assert_eq!(d.resolve(Mode::Unknown, K, Some(8), || false), Mode::Unknown);
        assert_eq!(d.resolve(Mode::Unknown, K, Some(8), || true), Mode::Write);
        assert_eq!(d.resolve(Mode::Unknown, K, Some(8), || false), Mode::ReadWrite);
        assert_eq!(d.resolve(Mode::Unknown, K, Some(0), || false), Mode::Unknown, "another slot");
        assert_eq!(d.resolve(Mode::Unknown, Some(KernelId(8)), Some(8), || false), Mode::Unknown, "another kernel");
    }

    #[test]
    fn without_a_slot_only_the_first_touch_writes() {
        let d = Directions::default();
        assert_eq!(d.resolve(Mode::Unknown, K, None, || true), Mode::Write);
        assert_eq!(d.resolve(Mode::Unknown, K, None, || false), Mode::Unknown);
    }
}
