//! Whether this process has called the driver, and what its first call sets off: every
//! exported hook enters here first; the process life installs what a first call starts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

streamsan::hot! {
    /// Whether this process (since its fork, for a child) called the driver.
    static CALLED: AtomicBool = AtomicBool::new(false);
}
/// What the first call starts, installed by the process life.
static ON_FIRST_CALL: OnceLock<fn()> = OnceLock::new();

/// Called by every hook: the first call makes this a process that reports.
#[inline]
pub fn enter() {
    if !CALLED.load(Ordering::Relaxed) && !CALLED.swap(true, Ordering::AcqRel) {
        if let Some(start) = ON_FIRST_CALL.get() {
            start();
        }
    }
}

/// Installs what the first call starts; returns whether a call came before it was installed
/// (the caller then starts it itself).
pub fn on_first_call(start: fn()) -> bool {
    let _ = ON_FIRST_CALL.set(start);
    CALLED.load(Ordering::Acquire)
}

/// Whether this process called the driver.
pub fn called() -> bool {
    CALLED.load(Ordering::Acquire)
}

/// In a forked child: the child has not called the driver yet (a flag only, safe at a fork).
pub fn forget() {
    CALLED.store(false, Ordering::Relaxed);
}
