//! Guarded pages lent to the driver for the length of a call: the driver's own loads and
//! stores of pinned host memory, on the program's thread inside the call, are the call's,
//! not host races.

use core::cell::Cell;

use super::table;

thread_local! {
    /// This thread is inside an intercepted call that it entered while operations were guarded.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
    /// The span of the pages lent during that call, `[lo, hi)`; empty when `lo >= hi`.
    static LENT: Cell<(u64, u64)> = const { Cell::new((u64::MAX, 0)) };
}

/// Before an intercepted call, while operations are guarded: the driver's faults on this thread
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
