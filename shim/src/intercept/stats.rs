//! How many times each exported name was called: the evidence that interception works.
//!
//! Counters are sharded by thread so that threads launching at once do not share cache
//! lines: a thread adds to its own row with a relaxed atomic, and a snapshot sums the rows.

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::collections::BTreeMap;
use std::sync::Mutex;

use super::variants::{Variant, VARIANTS, VARIANT_COUNT};

const SHARDS: usize = 16;

#[repr(align(64))]
struct Row([AtomicU64; VARIANT_COUNT]);

static ROWS: [Row; SHARDS] = [const { Row([const { AtomicU64::new(0) }; VARIANT_COUNT]) }; SHARDS];

fn shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.try_with(|s| *s).unwrap_or(0)
}

/// Counts one call of `variant`.
#[inline]
pub fn count(variant: Variant) {
    ROWS[shard()].0[variant as usize].fetch_add(1, Ordering::Relaxed);
}

/// Calls per exported name, names never called left out.
pub fn snapshot() -> BTreeMap<String, u64> {
    let mut calls = BTreeMap::new();
    for (i, v) in VARIANTS.iter().enumerate() {
        let n: u64 = ROWS.iter().map(|row| row.0[i].load(Ordering::Relaxed)).sum();
        if n > 0 {
            calls.insert(v.name.to_string_lossy().into_owned(), n);
        }
    }
    calls
}

static UNRECOGNISED: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

/// `cuGetProcAddress` gave, for a name the shim hooks, a pointer that is none of the
/// driver's exported functions: the program will call it unseen.
pub fn unrecognised_proc_address(symbol: &[u8]) {
    let name = String::from_utf8_lossy(symbol).into_owned();
    let mut map = UNRECOGNISED.lock().unwrap_or_else(|e| e.into_inner());
    *map.entry(name).or_insert(0) += 1;
}

/// The names counted by [`unrecognised_proc_address`].
pub fn unrecognised() -> BTreeMap<String, u64> {
    UNRECOGNISED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}
