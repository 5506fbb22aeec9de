//! Answers `cuGetProcAddress` with hooks: the real driver chooses the variant for a (symbol,
//! version, flags) request, and the shim returns the hook of exactly the variant whose real
//! function the driver returned; a pointer it does not recognise goes back untouched.

use core::ffi::c_void;
use std::sync::OnceLock;

use streamsan_driver_api::CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;

use super::driver;
use super::stats;
use super::variants::{base_name, VariantInfo, VARIANTS};

/// Real function address -> the hooked names exported at that address, sorted by address.
/// Built once, without blocking other threads (see [`driver`]).
fn by_address() -> &'static [(usize, u16)] {
    static MAP: OnceLock<Vec<(usize, u16)>> = OnceLock::new();
    if let Some(map) = MAP.get() {
        return map;
    }
    let mut map: Vec<(usize, u16)> = VARIANTS
        .iter()
        .enumerate()
        .filter_map(|(i, v)| {
            let f = driver::lookup(v.name);
            (!f.is_null()).then_some((f as usize, i as u16))
        })
        .collect();
    map.sort_unstable();
    let _ = MAP.set(map);
    MAP.get().expect("set above")
}

/// The hook to hand out for `real`, the pointer the driver returned for `symbol`.
pub fn hook_for(symbol: &[u8], real: *mut c_void, flags: u64) -> *mut c_void {
    if VARIANTS.iter().any(|v| v.hook == real as *const ()) {
        // Already a hook (a driver whose table resolves to the preloaded exports).
        return real;
    }
    let map = by_address();
    let start = map.partition_point(|&(addr, _)| addr < real as usize);
    let candidates: Vec<&VariantInfo> = map[start..]
        .iter()
        .take_while(|&&(addr, _)| addr == real as usize)
        .map(|&(_, i)| &VARIANTS[i as usize])
        .collect();
    let want_per_thread = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM != 0;
    let chosen = candidates.iter().find(|v| v.per_thread == want_per_thread).or(candidates.first());
    match chosen {
        Some(v) => v.hook as *mut c_void,
        None => {
            // A name we hook, answered with a pointer we cannot place: count it, so that a
            // report shows what went unseen.
            if VARIANTS.iter().any(|v| base_name(v.name.to_bytes()) == base_name(symbol)) {
                stats::unrecognised_proc_address(symbol);
            }
            real
        }
    }
}
