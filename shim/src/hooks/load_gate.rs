//! Whether the footprint engine may load code or allocate now. Loading code may wait for the
//! device to drain, which a stream waiting for a value or an external semaphore that the host
//! releases later would never do; and a load or an allocation while a stream captures in
//! global or thread-local mode is an unsafe call that invalidates the program's capture.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// What closes the gate, each by stream handle.
#[derive(Default)]
struct Closing {
    /// Streams that waited since they (or their context) were last synchronized.
    waiting: Vec<usize>,
    /// Streams capturing in a mode other than relaxed.
    capturing: Vec<usize>,
}

static CLOSING: Mutex<Closing> = Mutex::new(Closing { waiting: Vec::new(), capturing: Vec::new() });

streamsan::hot! {
    /// Whether anything closes the gate.
    static CLOSED: AtomicBool = AtomicBool::new(false);
}
/// Whether a capture closes it.
static CAPTURING: AtomicBool = AtomicBool::new(false);

/// `CU_STREAM_CAPTURE_MODE_RELAXED`: a capture that forbids no call.
const RELAXED: u32 = 2;

fn change(f: impl FnOnce(&mut Closing)) {
    let mut closing = CLOSING.lock().unwrap_or_else(|e| e.into_inner());
    f(&mut closing);
    CAPTURING.store(!closing.capturing.is_empty(), Ordering::Release);
    CLOSED.store(!closing.waiting.is_empty() || !closing.capturing.is_empty(), Ordering::Release);
}

fn add(list: &mut Vec<usize>, stream: usize) {
    if !list.contains(&stream) {
        list.push(stream);
    }
}

/// `stream` waits for something the host may release later.
pub fn waits(stream: *mut core::ffi::c_void) {
    change(|c| add(&mut c.waiting, stream as usize));
}

/// The host synchronized with `stream` (None: with its whole context): its waits are over.
pub fn synchronized(stream: Option<*mut core::ffi::c_void>) {
    if !CLOSED.load(Ordering::Acquire) {
        return;
    }
    change(|c| match stream {
        Some(s) => c.waiting.retain(|&w| w != s as usize),
        None => c.waiting.clear(),
    });
}

/// `stream` began capturing in `mode`.
pub fn capture_began(stream: *mut core::ffi::c_void, mode: u32) {
    if mode != RELAXED {
        change(|c| add(&mut c.capturing, stream as usize));
    }
}

/// `stream`'s capture ended.
pub fn capture_ended(stream: *mut core::ffi::c_void) {
    if CLOSED.load(Ordering::Acquire) {
        change(|c| c.capturing.retain(|&s| s != stream as usize));
    }
}

/// Whether the engine may load code or allocate.
#[inline]
pub fn open() -> bool {
    !CLOSED.load(Ordering::Acquire)
}

/// Whether a capture forbids the engine's own copies and synchronizations (reading tables).
#[inline]
pub fn capturing() -> bool {
    CAPTURING.load(Ordering::Acquire)
}
