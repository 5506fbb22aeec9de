//! On x86-64, a fault on a guarded page that touched no guarded bytes (a table beside the
//! buffers a kernel writes, on one managed page) lets that one instruction through and guards
//! the page again, so that the host's next access to the buffers on the page is still seen.
//! The SIGSEGV handler unprotects the page and sets the trap flag in the interrupted context:
//! the instruction runs, the processor traps, and the SIGTRAP handler ([`on_trap`]) protects
//! the page again as the published ranges call for and clears the flag.
//!
//! A page the host keeps touching beside its guarded bytes (a loop over a table) is let
//! through [`MAX_STEPS`] times between two changes of the guarded pages, then left open
//! until they change, and a note says the guard gave up there: a program is slowed by a
//! bounded number of traps per page. Both handlers allocate nothing and take no lock.

use core::cell::Cell;
use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::{actions, table};

/// Times a page is let through between two changes of the guarded pages, at most.
const MAX_STEPS: u64 = 64;

/// Pages one instruction may be let through on (a string copy across two pages, say).
const PENDING: usize = 4;

/// Pages whose let-throughs are counted at once; a page finding no room is left open.
const COUNTED: usize = 256;
/// Slots looked at for a page's count.
const PROBES: usize = 8;

/// Whether the SIGTRAP handler is installed.
static TRAPPING: AtomicBool = AtomicBool::new(false);

/// A page's let-throughs in the generation of the guarded pages they were counted in:
/// `generation << 16 | count`.
struct Count {
    page: AtomicU64,
    seen: AtomicU64,
}

static COUNTS: [Count; COUNTED] = [const { Count { page: AtomicU64::new(0), seen: AtomicU64::new(0) } }; COUNTED];

thread_local! {
    /// The pages let through for this thread's instruction, to guard again at its trap (0:
    /// none).
    static PAGES: [Cell<u64>; PENDING] = const { [const { Cell::new(0) }; PENDING] };
    /// The trap flag was set before the guard set it: the program traces itself, and the
    /// trap is its own too.
    static TRACED: Cell<bool> = const { Cell::new(false) };
}

/// The trap flag, bit 8 of EFLAGS.
const TRAP_FLAG: i64 = 1 << 8;

/// At install: the SIGTRAP handler, ahead of the program's.
pub fn install() {
    if actions::install(libc::SIGTRAP, on_trap) {
        TRAPPING.store(true, Ordering::Release);
    }
}

/// In the SIGSEGV handler, for a fault on the guarded page `page` outside every guarded
/// byte: unprotects the page for the faulting instruction alone (`context`, the
/// interrupted one's). False when it cannot (SIGTRAP blocked where the fault came from, the
/// page let through [`MAX_STEPS`] times already): the page is then the caller's to leave
/// open.
pub fn let_through(page: u64, context: *mut c_void) -> bool {
    if !TRAPPING.load(Ordering::Acquire) {
        return false;
    }
    // SAFETY: the kernel's ucontext for this signal, ours to change until we return.
    let context = unsafe { &mut *(context as *mut libc::ucontext_t) };
    // A trap the interrupted code blocks would end the process.
    // SAFETY: a signal set the kernel filled in.
    if unsafe { libc::sigismember(&context.uc_sigmask, libc::SIGTRAP) } != 0 || !counted(page) {
        return false;
    }
    let flags = &mut context.uc_mcontext.gregs[libc::REG_EFL as usize];
    let remembered = PAGES.try_with(|pages| {
        if pages.iter().all(|p| p.get() == 0) {
            let _ = TRACED.try_with(|t| t.set(*flags & TRAP_FLAG != 0));
        }
        let free = pages.iter().find(|p| p.get() == 0 || p.get() == page);
        free.inspect(|p| p.set(page)).is_some()
    });
    if !remembered.unwrap_or(false) {
        return false;
    }
    *flags |= TRAP_FLAG;
    table::unprotect(page, page + table::page());
    true
}

/// In the SIGSEGV handler, for `page` left open after a race there: not guarded again when
/// the instruction let through on it traps (a string copy would fault, and be reported, at
/// every element).
pub fn leave_open(page: u64) {
    let _ = PAGES.try_with(|pages| pages.iter().filter(|p| p.get() == page).for_each(|p| p.set(0)));
}

/// Whether `page` may be let through once more in the current generation of the guarded
/// pages ([`table::CHANGES`]), counting this time.
fn counted(page: u64) -> bool {
    let generation = table::CHANGES.load(Ordering::SeqCst) & (u64::MAX >> 16);
    let first = (page / table::page()) as usize;
    for i in 0..PROBES {
        let slot = &COUNTS[(first + i) % COUNTED];
        let (held, seen) = (slot.page.load(Ordering::Acquire), slot.seen.load(Ordering::Acquire));
        let current = seen >> 16 == generation;
        if held != page {
            // Another page's, counted in this generation: not ours to take.
            if held != 0 && current {
                continue;
            }
            if slot.page.compare_exchange(held, page, Ordering::AcqRel, Ordering::Acquire).is_err() {
                continue;
            }
            slot.seen.store(generation << 16 | 1, Ordering::Release);
            return true;
        }
        let next = if current { seen + 1 } else { generation << 16 | 1 };
        slot.seen.store(next, Ordering::Release);
        return next & 0xffff <= MAX_STEPS;
    }
    false
}

/// Protects `page` again as the published ranges call for: read, protected, and read once
/// more if the guarded pages changed meanwhile (their writer protects pages and publishes
/// their table under an odd count), so that a lift is never undone. If changes keep coming,
/// the page is left open.
fn guard_again(page: u64) {
    let end = page + table::page();
    for _ in 0..1000 {
        let before = table::CHANGES.load(Ordering::SeqCst);
        if before % 2 == 1 {
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
            continue;
        }
        let prot = table::read(|t| table::protection(&t.ranges, page, end));
        // SAFETY: a page of a guarded range, which the program owns.
        unsafe { libc::mprotect(page as *mut c_void, (end - page) as usize, prot) };
        if table::CHANGES.load(Ordering::SeqCst) == before {
            return;
        }
    }
    table::unprotect(page, end);
}

/// The guard's SIGTRAP handler: the trap after an instruction let through ([`let_through`])
/// guards its pages again; any other trap is the program's.
extern "C" fn on_trap(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    let mut pages = [0u64; PENDING];
    let _ = PAGES.try_with(|pending| {
        for (page, pending) in pages.iter_mut().zip(pending) {
            *page = pending.replace(0);
        }
    });
    if pages.iter().all(|&p| p == 0) {
        actions::chain(signal, info, context);
        return;
    }
    let traced = TRACED.try_with(Cell::get).unwrap_or(false);
    if !traced {
        // SAFETY: the kernel's ucontext for this signal, ours to change until we return.
        let context = unsafe { &mut *(context as *mut libc::ucontext_t) };
        context.uc_mcontext.gregs[libc::REG_EFL as usize] &= !TRAP_FLAG;
    }
    for &page in pages.iter().filter(|&&p| p != 0) {
        guard_again(page);
    }
    if traced {
        actions::chain(signal, info, context);
    }
}
