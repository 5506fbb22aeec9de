//! A fast hasher for the launch path's maps, whose keys (addresses, handles, small ids) no
//! attacker chooses: each word is folded in with a multiply and the result mixed once, so
//! that aligned addresses still spread over buckets and shards.

use std::hash::{BuildHasherDefault, Hasher};

use dashmap::{DashMap, DashSet};

/// A concurrent map keyed by addresses, handles or ids.
pub type FastMap<K, V> = DashMap<K, V, BuildHasherDefault<FastHasher>>;
/// A concurrent set of addresses, handles or ids.
pub type FastSet<K> = DashSet<K, BuildHasherDefault<FastHasher>>;

/// A new, empty [`FastMap`].
pub fn fast_map<K: Eq + std::hash::Hash, V>() -> FastMap<K, V> {
    DashMap::with_hasher(BuildHasherDefault::default())
}

/// A new, empty [`FastSet`].
pub fn fast_set<K: Eq + std::hash::Hash>() -> FastSet<K> {
    DashSet::with_hasher(BuildHasherDefault::default())
}

const K: u64 = 0x9e37_79b9_7f4a_7c15;

#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }

    #[inline]
    fn write_u32(&mut self, word: u32) {
        self.write_u64(word as u64);
    }

    #[inline]
    fn write_usize(&mut self, word: usize) {
        self.write_u64(word as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // The high bits of the product depend on every bit of the key; bring them down.
        let h = self.0;
        (h ^ (h >> 32)).wrapping_mul(K) ^ (h >> 29)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn aligned_handles_spread_over_low_bits() {
        let build = BuildHasherDefault::<FastHasher>::default();
        let buckets: std::collections::HashSet<u64> =
            (0..1024u64).map(|i| build.hash_one(0x5eed_0000 + i * 256) & 1023).collect();
        assert!(buckets.len() > 512, "{} distinct buckets of 1024", buckets.len());
    }
}
