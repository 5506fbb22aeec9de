//! Per-thread memories of recent lookups in shared tables.
//!
//! The launch path looks up a stream, a kernel and every pointer in tables that all threads
//! share. Each shared lookup takes a lock and a reference count: atomic read-modify-writes
//! that cost more than the rest of the lookup, and that bounce between cores when threads
//! launch at once. A program asks for the same few streams, kernels and pointers over and
//! over, so each thread keeps what it found in a small direct-mapped table, stamped with the
//! shared table's generation: a table bumps its generation when an answer may have changed,
//! and older entries are ignored.

use std::hash::{BuildHasher, BuildHasherDefault, Hash};

use crate::hash::FastHasher;

/// A direct-mapped table of `(key, generation) -> value`, `SLOTS` entries.
pub struct Recent<K, V, const SLOTS: usize> {
    slots: Box<[Option<(K, u64, V)>]>,
}

impl<K: Hash + Eq, V, const SLOTS: usize> Default for Recent<K, V, SLOTS> {
    fn default() -> Self {
        Recent { slots: (0..SLOTS).map(|_| None).collect() }
    }
}

impl<K: Hash + Eq, V, const SLOTS: usize> Recent<K, V, SLOTS> {
    fn slot(key: &K) -> usize {
        BuildHasherDefault::<FastHasher>::default().hash_one(key) as usize % SLOTS
    }

    /// The value remembered for `key` at `generation`.
    #[inline]
    pub fn get(&self, key: &K, generation: u64) -> Option<&V> {
        match &self.slots[Self::slot(key)] {
            Some((k, g, v)) if *g == generation && k == key => Some(v),
            _ => None,
        }
    }

    /// Remembers `value` for `key` at `generation`, in place of whatever shared its slot.
    pub fn put(&mut self, key: K, generation: u64, value: V) {
        let slot = Self::slot(&key);
        self.slots[slot] = Some((key, generation, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_by_key_and_generation() {
        let mut recent: Recent<u64, &str, 16> = Recent::default();
        assert_eq!(recent.get(&7, 1), None);
        recent.put(7, 1, "seven");
        assert_eq!(recent.get(&7, 1), Some(&"seven"));
        assert_eq!(recent.get(&7, 2), None, "a newer generation");
        assert_eq!(recent.get(&8, 1), None);
        for k in 100..200 {
            recent.put(k, 1, "other");
        }
        assert!((100..200).filter(|k| recent.get(k, 1).is_some()).count() <= 16);
    }
}
