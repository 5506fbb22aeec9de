//! How many times each exported name (driver's, then NCCL's) was called, and with
//! `phase_times=1` how long those calls took, the driver included; counted on per-thread rows
//! so that threads launching at once do not share cache lines.

use core::sync::atomic::{AtomicU64, Ordering};
use std::collections::BTreeMap;
use std::sync::Mutex;

use streamsan::phases::{self, shard, SHARDS};

use super::nccl::{NcclVariant, NCCL_COUNT, NCCL_VARIANTS};
use super::variants::{Variant, VARIANTS, VARIANT_COUNT};

/// Driver names, then NCCL names.
const COUNTED: usize = VARIANT_COUNT + NCCL_COUNT;

#[repr(align(64))]
struct Row([AtomicU64; COUNTED]);

static ROWS: [Row; SHARDS] = [const { Row([const { AtomicU64::new(0) }; COUNTED]) }; SHARDS];

/// Per shard and exported name, the ticks spent in its calls ([`streamsan::phases`]).
static TICKS: [Row; SHARDS] = [const { Row([const { AtomicU64::new(0) }; COUNTED]) }; SHARDS];

/// Counts one call of `variant`.
#[inline]
pub fn count(variant: Variant) {
    ROWS[shard()].0[variant as usize].fetch_add(1, Ordering::Relaxed);
}

/// Adds the `ticks` one call of `variant` took.
#[inline]
pub fn timed(variant: Variant, ticks: u64) {
    TICKS[shard()].0[variant as usize].fetch_add(ticks, Ordering::Relaxed);
}

/// The table printed at exit with `phase_times=1`: per exported name called, its calls,
/// their total time and their mean, the driver included; the longest total first.
pub fn time_table() -> String {
    let sum = |rows: &[Row; SHARDS], i: usize| rows.iter().map(|row| row.0[i].load(Ordering::Relaxed)).sum::<u64>();
    let mut names: Vec<(f64, u64, String)> = VARIANTS
        .iter()
        .enumerate()
        .map(|(i, v)| (phases::millis(sum(&TICKS, i)), sum(&ROWS, i), v.name.to_string_lossy().into_owned()))
        .filter(|&(_, calls, _)| calls > 0)
        .collect();
    names.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut out = String::from("streamsan: time per intercepted entry point, the driver included (phase_times=1)\n");
    out.push_str(&format!("  {:<32} {:>12} {:>12} {:>10}\n", "entry point", "calls", "total ms", "ns each"));
    for (millis, calls, name) in names {
        out.push_str(&format!("  {name:<32} {calls:>12} {millis:>12.3} {:>10.0}\n", millis * 1e6 / calls as f64));
    }
    out
}

/// Counts one call of an NCCL name.
#[inline]
pub fn count_nccl(variant: NcclVariant) {
    ROWS[shard()].0[VARIANT_COUNT + variant as usize].fetch_add(1, Ordering::Relaxed);
}

/// Calls per exported name, names never called left out.
pub fn snapshot() -> BTreeMap<String, u64> {
    let names = VARIANTS.iter().map(|v| v.api).chain(NCCL_VARIANTS.iter().map(|v| v.api));
    let mut calls = BTreeMap::new();
    for (i, name) in names.enumerate() {
        let n: u64 = ROWS.iter().map(|row| row.0[i].load(Ordering::Relaxed)).sum();
        if n > 0 {
            calls.insert(name.to_string(), n);
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
