//! Per-thread caches of recent lookups in shared tables, so that the launch path's repeated
//! lookups take no lock. An entry is stamped with its table's generation, which the table
//! bumps when an answer may have changed: older entries are ignored.

use std::hash::{BuildHasher, BuildHasherDefault, Hash};

use crate::hash::FastHasher;

/// A two-way set-associative table of `(key, generation) -> value`, `SLOTS` entries: a key
/// may sit in either slot of its pair, the more recently put first, so that two keys that
/// hash alike (an address pattern, a handle pattern) do not evict each other in turn.
pub struct ThreadCache<K, V, const SLOTS: usize> {
    slots: Box<[Option<(K, u64, V)>]>,
}

impl<K: Hash + Eq, V, const SLOTS: usize> Default for ThreadCache<K, V, SLOTS> {
    fn default() -> Self {
        ThreadCache { slots: (0..SLOTS).map(|_| None).collect() }
    }
}

impl<K: Hash + Eq, V, const SLOTS: usize> ThreadCache<K, V, SLOTS> {
    /// The first slot of `key`'s pair.
    fn set(key: &K) -> usize {
        (BuildHasherDefault::<FastHasher>::default().hash_one(key) as usize % (SLOTS / 2)) * 2
    }

    /// The value remembered for `key` at `generation`.
    #[inline]
    pub fn get(&self, key: &K, generation: u64) -> Option<&V> {
        let set = Self::set(key);
        self.slots[set..set + 2].iter().find_map(|slot| match slot {
            Some((k, g, v)) if *g == generation && k == key => Some(v),
            _ => None,
        })
    }

    /// Remembers `value` for `key` at `generation`, in the first slot of its pair; what was
    /// there moves to the second (unless it was `key`'s own), and what was second goes.
    pub fn put(&mut self, key: K, generation: u64, value: V) {
        let set = Self::set(&key);
        let first_is_key = self.slots[set].as_ref().is_some_and(|(k, _, _)| *k == key);
        if !first_is_key {
            self.slots.swap(set, set + 1);
        }
        self.slots[set] = Some((key, generation, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_by_key_and_generation() {
        let mut recent: ThreadCache<u64, &str, 16> = ThreadCache::default();
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

    #[test]
    fn two_keys_of_one_set_both_stay() {
        let mut recent: ThreadCache<u64, u64, 4> = ThreadCache::default();
        // Two keys that fall in the same pair.
        let (a, b) = (0..100u64)
            .flat_map(|a| (a + 1..100).map(move |b| (a, b)))
            .find(|&(a, b)| ThreadCache::<u64, u64, 4>::set(&a) == ThreadCache::<u64, u64, 4>::set(&b))
            .unwrap();
        recent.put(a, 1, a);
        recent.put(b, 1, b);
        recent.put(b, 1, b);
        assert_eq!((recent.get(&a, 1), recent.get(&b, 1)), (Some(&a), Some(&b)));
    }
}
