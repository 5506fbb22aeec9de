//! The guarded ranges: the bytes the host reaches of the operations in flight, and the page
//! protection they call for (a source read-only, a destination inaccessible). The fault
//! handler reads them without a lock: a page the shim has protected is always in the
//! published table.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use streamsan::model::clock::Epoch;
use streamsan::model::host_races::DeviceBytes;
use streamsan::model::op::Mode;

/// The ranges in flight, as one published snapshot.
#[derive(Clone, Default)]
pub struct Table {
    pub ranges: Vec<Guarded>,
}

/// An operation's bytes under guard, `[lo, hi)`: all of them, or one of a long range's
/// [`parts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Guarded {
    pub work: DeviceBytes,
    pub lo: u64,
    pub hi: u64,
}

static CURRENT: AtomicPtr<Table> = AtomicPtr::new(core::ptr::null_mut());
/// Handlers reading a table now.
static READERS: AtomicUsize = AtomicUsize::new(0);
streamsan::hot! {
    /// Ranges in the published table: zero on the common path, where nothing is in flight.
    pub static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
}
/// Counts the changes of the guarded pages, twice each: odd while one is under way (its
/// pages protected and its table published). A handler that finds a fault on no guarded
/// page retries once if a change may have raced with the fault ([`super::fault`]); one that
/// guards a page again reads the table until no change came between its read and its
/// protection ([`super::step`]).
pub static CHANGES: AtomicU64 = AtomicU64::new(0);

/// The page size, set once at install.
pub static PAGE: AtomicUsize = AtomicUsize::new(4096);
/// Pages guarded at the start of a long range (`host_race_pages`, set once at install; 0:
/// every page).
pub static HEAD_PAGES: AtomicUsize = AtomicUsize::new(0);

pub fn page() -> u64 {
    PAGE.load(Ordering::Relaxed) as u64
}

/// The first byte of the page of `addr`.
pub fn page_of(addr: u64) -> u64 {
    addr & !(page() - 1)
}

/// The pages `[lo, hi)` covers, as a page-aligned span.
pub fn span(lo: u64, hi: u64) -> (u64, u64) {
    let page = page();
    (page_of(lo), hi.max(lo + 1).div_ceil(page) * page)
}

/// The parts of an operation's bytes to guard: all of them, or, when they span more than
/// [`HEAD_PAGES`] pages and one, the bytes on their first `HEAD_PAGES` pages and on their
/// last. Protection costs by the page, each way, while the host's usual ways into a buffer
/// in flight meet its first or last page: a loader's refill, a conversion or a checksum
/// start at its first byte, a printed tensor shows its first and last elements.
pub fn parts(work: DeviceBytes) -> impl Iterator<Item = Guarded> {
    let (lo, hi) = (work.lo, work.hi);
    let head = HEAD_PAGES.load(Ordering::Relaxed) as u64;
    let (first, last) = (page_of(lo), page_of(hi.max(lo + 1) - 1));
    let head_end = first.saturating_add(head.saturating_mul(page()));
    let (whole_or_head, tail) =
        if head != 0 && last > head_end { ((lo, head_end), Some((last, hi))) } else { ((lo, hi), None) };
    core::iter::once(whole_or_head).chain(tail).map(move |(lo, hi)| Guarded { work, lo, hi })
}

/// Reads the published table, without a lock: for the fault handler (no allocation, no
/// waiting).
pub fn read<R>(f: impl FnOnce(&Table) -> R) -> R {
    READERS.fetch_add(1, Ordering::SeqCst);
    let table = CURRENT.load(Ordering::SeqCst);
    static EMPTY: Table = Table { ranges: Vec::new() };
    // SAFETY: a published table is freed only once READERS is back to zero.
    let result = f(unsafe { table.as_ref() }.unwrap_or(&EMPTY));
    READERS.fetch_sub(1, Ordering::SeqCst);
    result
}

/// Serializes changes; held across a fork so that the child finds the table whole.
struct WriterLock(UnsafeCell<libc::pthread_mutex_t>);
// SAFETY: a pthread mutex is made to be shared between threads.
unsafe impl Sync for WriterLock {}

static WRITER: WriterLock = WriterLock(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));

pub fn lock() {
    // SAFETY: a static, initialized mutex.
    unsafe { libc::pthread_mutex_lock(WRITER.0.get()) };
}

pub fn unlock() {
    // SAFETY: held by this thread (or, in a forked child, by the thread that forked).
    unsafe { libc::pthread_mutex_unlock(WRITER.0.get()) };
}

/// In a forked child: handlers that were reading belonged to threads that did not come
/// along, and the lock is made anew.
pub fn forked_child() {
    READERS.store(0, Ordering::SeqCst);
    // SAFETY: only this thread exists in the child.
    unsafe { *WRITER.0.get() = libc::PTHREAD_MUTEX_INITIALIZER };
}

/// The published table (the writer lock held).
fn current() -> Table {
    // SAFETY: tables are freed only by writers, which hold the lock.
    unsafe { CURRENT.load(Ordering::SeqCst).as_ref() }.cloned().unwrap_or_default()
}

/// Publishes `table`; frees the one before once no handler reads it.
fn publish(table: Table) {
    IN_FLIGHT.store(table.ranges.len(), Ordering::SeqCst);
    let old = CURRENT.swap(Box::into_raw(Box::new(table)), Ordering::SeqCst);
    while READERS.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
    if !old.is_null() {
        // SAFETY: made by Box::into_raw above, and no longer read.
        drop(unsafe { Box::from_raw(old) });
    }
}

/// The protection `ranges` call for on `[lo, hi)` (a run of pages all under the same ranges).
/// No allocation: for the signal handlers too.
pub fn protection(ranges: &[Guarded], lo: u64, hi: u64) -> i32 {
    let mut prot = libc::PROT_READ | libc::PROT_WRITE;
    for r in ranges {
        let (a, b) = span(r.lo, r.hi);
        if a < hi && lo < b {
            prot = match r.work.mode {
                Mode::Read => prot & libc::PROT_READ,
                _ => libc::PROT_NONE,
            };
        }
    }
    prot
}

/// Sets the pages of `[lo, hi)` (page-aligned) to what `table` calls for. Returns false if
/// the system refused (memory that is not the program's to protect: the range goes
/// unguarded).
fn apply(table: &Table, lo: u64, hi: u64) -> bool {
    let mut cuts = vec![lo, hi];
    for r in &table.ranges {
        let (a, b) = span(r.lo, r.hi);
        if a < hi && lo < b {
            cuts.extend([a.max(lo), b.min(hi)]);
        }
    }
    cuts.sort_unstable();
    cuts.dedup();
    let mut ok = true;
    let mut run: Option<(u64, u64, i32)> = None;
    let mut flush = |run: (u64, u64, i32)| {
        // SAFETY: pages of pinned host memory the program owns (a known allocation).
        ok &= unsafe { libc::mprotect(run.0 as *mut libc::c_void, (run.1 - run.0) as usize, run.2) } == 0;
    };
    for pair in cuts.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let prot = protection(&table.ranges, a, b);
        run = match run {
            Some((start, _, p)) if p == prot => Some((start, b, p)),
            Some(done) => {
                flush(done);
                Some((a, b, prot))
            }
            None => Some((a, b, prot)),
        };
    }
    if let Some(done) = run {
        flush(done);
    }
    ok
}

/// Guards `ranges`: published, then protected. Returns how many could not be protected.
pub fn add(ranges: &[Guarded]) -> usize {
    lock();
    let mut table = current();
    table.ranges.extend_from_slice(ranges);
    CHANGES.fetch_add(1, Ordering::SeqCst);
    publish(table.clone());
    let refused = ranges
        .iter()
        .filter(|r| {
            let (lo, hi) = span(r.lo, r.hi);
            !apply(&table, lo, hi)
        })
        .count();
    CHANGES.fetch_add(1, Ordering::SeqCst);
    unlock();
    refused
}

/// Lifts every range of an operation `done` says is done: unprotected, then published.
pub fn lift(done: impl Fn(&DeviceBytes) -> bool) {
    lock();
    let table = current();
    let (lifted, kept): (Vec<Guarded>, Vec<Guarded>) = table.ranges.iter().partition(|r| done(&r.work));
    if !lifted.is_empty() {
        let table = Table { ranges: kept };
        CHANGES.fetch_add(1, Ordering::SeqCst);
        for r in &lifted {
            let (lo, hi) = span(r.lo, r.hi);
            apply(&table, lo, hi);
        }
        publish(table);
        CHANGES.fetch_add(1, Ordering::SeqCst);
    }
    unlock();
}

/// Gives the ranges of the operation guarded under `pending` the epoch the model gave it, or, with
/// none (the operation was captured, not run), lifts them.
pub fn told(pending: Epoch, told: Option<Epoch>) {
    match told {
        None => lift(|work| work.op.epoch == pending),
        Some(epoch) => {
            lock();
            let mut table = current();
            let mut changed = false;
            for r in table.ranges.iter_mut().filter(|r| r.work.op.epoch == pending) {
                r.work.op.epoch = epoch;
                changed = true;
            }
            if changed {
                publish(table);
            }
            unlock();
        }
    }
}

/// Gives the pages of `[lo, hi)` (page-aligned) their ordinary protection, read and write,
/// the ranges on them still published: after a fault there, or before a call the kernel
/// would refuse them ([`super::calls`]). No allocation, no lock: for the fault handler.
pub fn unprotect(lo: u64, hi: u64) {
    // SAFETY: pages of guarded ranges, which the program owns.
    unsafe { libc::mprotect(lo as *mut libc::c_void, (hi - lo) as usize, libc::PROT_READ | libc::PROT_WRITE) };
}

/// Gives the pages of `[lo, hi)` (page-aligned) the protection the published ranges call
/// for: after the driver had them for a call ([`super::lent`]).
pub fn restore(lo: u64, hi: u64) {
    lock();
    apply(&current(), lo, hi);
    unlock();
}

/// In a forked child (the writer lock held since the fork): every page back to read and
/// write, nothing in flight. The child cannot synchronize with its parent's copies.
pub fn clear_in_child() {
    let table = current();
    let empty = Table::default();
    for r in &table.ranges {
        let (lo, hi) = span(r.lo, r.hi);
        apply(&empty, lo, hi);
    }
    publish(empty);
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use streamsan::model::op::{OpRecord, Origin, StackId, ThreadId};

    /// A guarded operation's bytes `[lo, hi)`, read or written (the fault tests use it too).
    pub fn bytes(mode: Mode, lo: u64, hi: u64) -> Guarded {
        let origin = Origin { api: "cuMemcpyAsync", thread: ThreadId(1), site: StackId(0) };
        Guarded { work: DeviceBytes { op: OpRecord::new(&origin, None, Epoch::new(1, 1)), mode, lo, hi }, lo, hi }
    }

    #[test]
    fn a_page_takes_the_strongest_protection_of_its_ranges() {
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let source = bytes(Mode::Read, 0x1010, 0x1020);
        let destination = bytes(Mode::Write, 0x1ff0, 0x2010);
        assert_eq!(protection(&[source], 0x1000, 0x2000), libc::PROT_READ);
        assert_eq!(protection(&[source, destination], 0x1000, 0x2000), libc::PROT_NONE);
        assert_eq!(protection(&[source, destination], 0x2000, 0x3000), libc::PROT_NONE);
        assert_eq!(protection(&[source], 0x2000, 0x3000), rw);
        assert_eq!(span(0x1ff0, 0x2010), (0x1000, 0x3000));
        assert_eq!(span(0x1000, 0x1000), (0x1000, 0x2000), "an empty range still names its page");
    }

    #[test]
    fn a_long_range_is_guarded_on_its_first_pages_and_its_last() {
        HEAD_PAGES.store(2, Ordering::Relaxed);
        let parts = |lo, hi| {
            let work = bytes(Mode::Write, lo, hi).work;
            super::parts(work).map(|g| (g.lo, g.hi)).collect::<Vec<_>>()
        };
        assert_eq!(parts(0x1010, 0x3ff0), [(0x1010, 0x3ff0)], "three pages: all guarded");
        assert_eq!(parts(0x1010, 0x4010), [(0x1010, 0x3000), (0x4000, 0x4010)], "four: the gap unguarded");
        assert_eq!(parts(0x1000, 0x9000), [(0x1000, 0x3000), (0x8000, 0x9000)]);
        HEAD_PAGES.store(0, Ordering::Relaxed);
        assert_eq!(parts(0x1000, 0x9000), [(0x1000, 0x9000)], "0: every page");
    }
}
