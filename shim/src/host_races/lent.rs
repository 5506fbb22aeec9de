//! Guarded pages lent to the driver for the length of a call.
//!
//! The driver itself touches pinned host memory on the program's thread, inside the call: an
//! H200's driver reads a small host-to-device copy's pinned source on the CPU in
//! `cuMemcpyHtoDAsync` once the copy's stream has waited for what wrote it, and writes a
//! copy to memory that was pinned and is pageable again (`reports/gpu/28a1910/guard-on/`). Those
//! loads and stores are the call's own: the model judges them as the call's accesses,
//! ordered as the driver orders them. So while a thread is inside an intercepted call
//! ([`enter`], made only while copies are guarded), a fault on a guarded page is not a host
//! race: the handler gives the page its ordinary protection ([`lend`]) and the call runs on;
//! when the call returns, the pages lent get back what the guarded ranges call for
//! ([`leave`]), so the host's own accesses after the call are caught as before. Another
//! thread touching a lent page during the call is not.

use core::cell::Cell;

use super::table;

thread_local! {
    /// This thread is inside an intercepted call that it entered while copies were guarded.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
    /// The span of the pages lent during that call, `[lo, hi)`; empty when `lo >= hi`.
    static LENT: Cell<(u64, u64)> = const { Cell::new((u64::MAX, 0)) };
}

/// Before an intercepted call, while copies are guarded: the driver's faults on this thread
/// are its own until [`leave`]. Returns false if this thread was inside one already (the
/// outer call leaves).
pub fn enter() -> bool {
    INSIDE.try_with(|inside| !inside.replace(true)).unwrap_or(false)
}

/// After the call [`enter`] returned true for: the pages lent during it get the protection
/// the guarded ranges call for now.
pub fn leave() {
    let _ = INSIDE.try_with(|inside| inside.set(false));
    let (lo, hi) = LENT.try_with(|lent| lent.replace((u64::MAX, 0))).unwrap_or((u64::MAX, 0));
    if lo < hi {
        table::restore(lo, hi);
    }
}

/// In the fault handler, for a fault on the guarded page `page`: if this thread is inside a
/// call, lends the page to the driver (read and write) and returns true. No allocation, no
/// lock.
pub fn lend(page: u64) -> bool {
    if !INSIDE.try_with(Cell::get).unwrap_or(false) {
        return false;
    }
    let end = page + table::page();
    table::unprotect(page, end);
    let _ = LENT.try_with(|lent| {
        let (lo, hi) = lent.get();
        lent.set((lo.min(page), hi.max(end)));
    });
    true
}
