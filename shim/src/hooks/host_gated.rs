//! Whether device work that waits for the host may be in flight: a stream waiting for a
//! value in memory or for an external semaphore, which the host (or another device) may
//! release only later. Loading code may wait for the device to drain, so the footprint
//! engine loads no twin while such work may be pending.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Streams that waited since they (or their context) were last synchronized.
static WAITING: Mutex<Vec<usize>> = Mutex::new(Vec::new());

streamsan::hot! {
    /// Whether [`WAITING`] is not empty.
    static ANY: AtomicBool = AtomicBool::new(false);
}

/// `stream` waits for something the host may release later.
pub fn waits(stream: *mut core::ffi::c_void) {
    let mut waiting = WAITING.lock().unwrap_or_else(|e| e.into_inner());
    if !waiting.contains(&(stream as usize)) {
        waiting.push(stream as usize);
    }
    ANY.store(true, Ordering::Release);
}

/// The host synchronized with `stream` (None: with its whole context): its waits are over.
pub fn synchronized(stream: Option<*mut core::ffi::c_void>) {
    if !ANY.load(Ordering::Acquire) {
        return;
    }
    let mut waiting = WAITING.lock().unwrap_or_else(|e| e.into_inner());
    match stream {
        Some(s) => waiting.retain(|&w| w != s as usize),
        None => waiting.clear(),
    }
    ANY.store(!waiting.is_empty(), Ordering::Release);
}

/// Whether no device work may be waiting for the host.
#[inline]
pub fn none() -> bool {
    !ANY.load(Ordering::Acquire)
}
