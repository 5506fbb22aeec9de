//! Parts of the shim a program can leave out while it runs, to measure what each costs it
//! within one process. Only with the `experiments` feature: in the shim streamsan ships,
//! [`leaves_out`] is a constant `false` the compiler removes.

/// Every launch entry point calls the driver and nothing else.
pub const FORWARD_LAUNCHES: u32 = 1;
/// A launch is told to the model without its call site.
pub const NO_CAPTURE: u32 = 2;
/// A launch's parameters are not read: no accesses, no kernel.
pub const NO_SCAN: u32 = 4;
/// A launch is not queued in the model's batch.
pub const NO_QUEUE: u32 = 8;
/// Every hook but `cuGetProcAddress`'s calls the driver and nothing else (which would hand
/// the program the driver's own functions for good).
pub const FORWARD_ALL: u32 = 16;
// Bits 32 to 131072 are retired, not given again, so that recorded runs keep their meaning.

/// The bits that have the hooks of the driver-API family `family` (its name in
/// `streamsan_driver_api`'s table) call the driver alone: evaluated when the hook is built.
/// `cuGetProcAddress` is never forwarded: the program would keep the driver's functions.
pub const fn forwarding(family: &str) -> u32 {
    match family.as_bytes() {
        [b'g', b'e', b't', b'_', b'p', b'r', b'o', b'c', b'_', ..] => 0,
        _ => FORWARD_ALL,
    }
}

streamsan::hot! {
    #[cfg(feature = "experiments")]
    static LEFT_OUT: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);
}

/// Leaves out the parts whose bits `parts` sets, and brings back the others. The program
/// finds it with `dlsym` (Python: `ctypes.CDLL(None).streamsan_experiment`).
#[cfg(feature = "experiments")]
#[unsafe(no_mangle)]
pub extern "C" fn streamsan_experiment(parts: u32) {
    LEFT_OUT.store(parts, core::sync::atomic::Ordering::Relaxed);
}

/// Whether the program left `part` out.
#[cfg(feature = "experiments")]
#[inline]
pub fn leaves_out(part: u32) -> bool {
    LEFT_OUT.load(core::sync::atomic::Ordering::Relaxed) & part != 0
}

/// Whether the program left `part` out: never, without the `experiments` feature.
#[cfg(not(feature = "experiments"))]
#[inline(always)]
pub const fn leaves_out(_part: u32) -> bool {
    false
}

/// Held by the tests that leave parts out, one at a time.
#[cfg(all(test, feature = "experiments"))]
pub static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(all(test, feature = "experiments"))]
mod tests {
    use super::*;

    #[test]
    fn the_program_leaves_parts_out_and_brings_them_back() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        assert!(!leaves_out(NO_SCAN));
        streamsan_experiment(NO_CAPTURE | NO_SCAN);
        assert!(leaves_out(NO_SCAN) && leaves_out(NO_CAPTURE) && !leaves_out(NO_QUEUE));
        streamsan_experiment(0);
        assert!(!leaves_out(NO_SCAN));
    }

    #[test]
    fn every_family_but_get_proc_address_is_forwarded_with_all() {
        assert_eq!(forwarding("get_proc_address_v2"), 0, "never: the program would keep the driver's functions");
        assert_eq!(forwarding("launch_kernel_ex"), FORWARD_ALL);
        assert_eq!(forwarding("launch_cooperative_kernel"), FORWARD_ALL);
        assert_eq!(forwarding("stream_synchronize"), FORWARD_ALL);
        assert_eq!(forwarding("memcpy_dtoh_async"), FORWARD_ALL);
        assert_eq!(forwarding("get"), FORWARD_ALL, "a name shorter than the prefix");
    }
}
