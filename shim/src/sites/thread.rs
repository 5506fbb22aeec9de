//! Host threads, numbered T1, T2, ... in the order they first call the driver (or are caught
//! touching the memory of a copy in flight).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use streamsan::model::op::ThreadId;

static NEXT: AtomicU32 = AtomicU32::new(1);
/// Operating-system thread ids, indexed by streamsan's number.
static TIDS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// The calling thread's number: the one it got if it was caught touching memory before it
/// called the driver ([`of_tid`]), else the next.
fn register() -> ThreadId {
    // SAFETY: gettid has no preconditions.
    of_tid(unsafe { libc::gettid() } as u32)
}

/// Gives the thread `tid` the next number.
fn number(tid: u32) -> ThreadId {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut tids = TIDS.lock().unwrap_or_else(|e| e.into_inner());
    if tids.len() <= id as usize {
        tids.resize(id as usize + 1, 0);
    }
    tids[id as usize] = tid;
    ThreadId(id)
}

thread_local! {
    static CURRENT: ThreadId = register();
}

/// The calling thread (T0 once its storage is gone, in exit handlers).
#[inline]
pub fn current() -> ThreadId {
    CURRENT.try_with(|t| *t).unwrap_or_default()
}

/// The thread whose operating-system id is `tid` (a thread caught touching memory, which
/// may never have called the driver: it is numbered now).
pub fn of_tid(tid: u32) -> ThreadId {
    let known = TIDS.lock().unwrap_or_else(|e| e.into_inner()).iter().rposition(|&t| t == tid);
    known.map_or_else(|| number(tid), |id| ThreadId(id as u32))
}

/// The operating system's id of a thread.
pub fn tid(thread: ThreadId) -> Option<u32> {
    TIDS.lock().unwrap_or_else(|e| e.into_inner()).get(thread.0 as usize).copied().filter(|&t| t != 0)
}
