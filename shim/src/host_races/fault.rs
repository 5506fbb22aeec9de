//! The SIGSEGV handler: a fault on a guarded page is the host touching an operation in flight. It
//! allocates nothing and takes no lock: it records the fault in a preallocated [`Slot`], gives
//! the page its ordinary protection, wakes the watcher and returns, and the instruction runs
//! again unprotected. A fault beside the guarded bytes on x86-64 is let through for that one
//! instruction, and the page guarded again ([`super::step`]).

use core::cell::{Cell, UnsafeCell};
use core::ffi::c_int;
use core::sync::atomic::{AtomicI32, AtomicU64, AtomicU8, Ordering};

use streamsan::model::host_races::DeviceBytes;
use streamsan::model::op::Mode;
use streamsan::options::MAX_BACKTRACE_DEPTH;

#[cfg(target_arch = "x86_64")]
use super::step;
use super::table::{self, Guarded};
use super::{actions, lent};
use crate::sites::{python, stack};

/// Faults waiting for the watcher at most.
const SLOTS: usize = 64;

/// `si_code` of a fault on a mapped page that forbids the access (`<signal.h>`).
const SEGV_ACCERR: c_int = 2;

const FREE: u8 = 0;
const WRITING: u8 = 1;
const READY: u8 = 2;
const TAKEN: u8 = 3;

/// What a fault was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Inside `work`'s bytes, conflicting: the host's access was `mode`.
    Race { work: DeviceBytes, mode: Mode },
    /// On a guarded page, not a conflict: `work` is one the page was guarded for.
    Outside { work: DeviceBytes },
}

/// One fault, as the handler saw it, or one system call's bytes on guarded pages
/// ([`super::calls`]).
pub struct Fault {
    pub verdict: Verdict,
    /// The bytes accessed: a fault's address (its width unknown), a call's whole span.
    pub addr: u64,
    pub len: u64,
    /// The operating system's id of the faulting thread.
    pub tid: u32,
    /// The faulting instruction's address plus one (as a return address would be), then
    /// the return addresses of its callers; for a call, the return addresses from the
    /// program's call.
    pub native: [u64; MAX_BACKTRACE_DEPTH],
    pub native_len: usize,
    pub python: [python::RawFrame; python::DEPTH],
    pub python_len: usize,
}

/// A preallocated place for one fault.
struct Slot {
    state: AtomicU8,
    fault: UnsafeCell<core::mem::MaybeUninit<Fault>>,
}
// SAFETY: `fault` is written by the one thread that moved `state` to WRITING, read by the
// one that moved it to TAKEN.
unsafe impl Sync for Slot {}

static RING: [Slot; SLOTS] =
    [const { Slot { state: AtomicU8::new(FREE), fault: UnsafeCell::new(core::mem::MaybeUninit::uninit()) } }; SLOTS];

/// Faults not recorded because every slot stayed full.
pub static DROPPED: AtomicU64 = AtomicU64::new(0);
/// The watcher's pipe (write end), or -1.
pub static WAKE: AtomicI32 = AtomicI32::new(-1);

thread_local! {
    /// The change count at this thread's last retry (see [`on_segv`]).
    static RETRIED_AT: Cell<u64> = const { Cell::new(u64::MAX) };
}

/// What the guarded ranges say about a fault at `addr`; `write`: whether the access was a
/// store, when the processor says.
pub fn classify(ranges: &[Guarded], addr: u64, write: Option<bool>) -> Option<Verdict> {
    let page = table::page_of(addr);
    let on_page = |r: &&Guarded| {
        let (lo, hi) = table::span(r.lo, r.hi);
        lo <= page && page < hi
    };
    let first = ranges.iter().find(on_page)?;
    // Only stores fault on a page under sources alone.
    let inaccessible = ranges.iter().filter(on_page).any(|r| r.work.mode != Mode::Read);
    let write = if inaccessible { write } else { Some(true) };
    let inside = |r: &&Guarded| r.lo <= addr && addr < r.hi.max(r.lo + 1);
    if let Some(r) = ranges.iter().filter(on_page).filter(inside).find(|r| r.work.mode != Mode::Read) {
        let mode = if write == Some(true) { Mode::Write } else { Mode::Read };
        return Some(Verdict::Race { work: r.work, mode });
    }
    if write == Some(true) {
        if let Some(r) = ranges.iter().filter(on_page).find(inside) {
            return Some(Verdict::Race { work: r.work, mode: Mode::Write });
        }
    }
    Some(Verdict::Outside { work: first.work })
}

/// Whether the processor says the fault was a store.
fn was_write(context: *mut core::ffi::c_void) -> Option<bool> {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the kernel's ucontext for this signal.
        let context = unsafe { &*(context as *const libc::ucontext_t) };
        // Bit 1 of the page-fault error code: the access was a write.
        Some(context.uc_mcontext.gregs[libc::REG_ERR as usize] & 2 != 0)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = context;
        None
    }
}

/// The faulting instruction's address.
fn fault_ip(context: *mut core::ffi::c_void) -> u64 {
    // SAFETY: the kernel's ucontext for this signal.
    let context = unsafe { &*(context as *const libc::ucontext_t) };
    #[cfg(target_arch = "x86_64")]
    {
        context.uc_mcontext.gregs[libc::REG_RIP as usize] as u64
    }
    #[cfg(target_arch = "aarch64")]
    {
        context.uc_mcontext.pc
    }
}

/// The guard's SIGSEGV handler.
pub extern "C" fn on_segv(signal: c_int, info: *mut libc::siginfo_t, context: *mut core::ffi::c_void) {
    // SAFETY: the kernel's siginfo.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as u64) };
    if code == SEGV_ACCERR {
        match table::read(|t| classify(&t.ranges, addr, was_write(context))) {
            // The driver's own access, inside a call: the call's, not the host's.
            Some(_) if lent::lend(table::page_of(addr)) => return,
            Some(verdict) => {
                let page = table::page_of(addr);
                // Other data on the page: the page is guarded again once the access ran.
                #[cfg(target_arch = "x86_64")]
                match verdict {
                    Verdict::Outside { .. } if step::let_through(page, context) => return,
                    Verdict::Outside { .. } => {}
                    Verdict::Race { .. } => step::leave_open(page),
                }
                record(verdict, addr, 1, Some(fault_ip(context)));
                table::unprotect(page, page + table::page());
                return;
            }
            None => {
                // A lift may have unprotected the page and published between the fault and
                // this look: run the instruction once more before calling it the program's.
                let changes = table::CHANGES.load(Ordering::SeqCst);
                if RETRIED_AT.try_with(|r| r.replace(changes) != changes).unwrap_or(false) {
                    return;
                }
            }
        }
    }
    actions::chain(signal, info, context);
}

/// Writes a fault into a free slot and wakes the watcher. `ip`: the faulting instruction,
/// whose frame is the innermost kept; without one (a call), the frames from the first
/// outside the shim. When every slot stays full for a second (the watcher stuck), the fault
/// is counted as dropped.
pub fn record(verdict: Verdict, addr: u64, len: u64, ip: Option<u64>) {
    let mut slot = None;
    for _ in 0..1000 {
        slot =
            RING.iter().find(|s| s.state.compare_exchange(FREE, WRITING, Ordering::Acquire, Ordering::Relaxed).is_ok());
        if slot.is_some() {
            break;
        }
        wake();
        // SAFETY: nanosleep is async-signal-safe.
        unsafe { libc::nanosleep(&libc::timespec { tv_sec: 0, tv_nsec: 1_000_000 }, core::ptr::null_mut()) };
    }
    let Some(slot) = slot else {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    };
    // As many as a call site keeps; the guard is set up after the options are read, so
    // this reads a value already there.
    let most = stack::depth();
    let mut native = [0u64; MAX_BACKTRACE_DEPTH];
    let mut depth = 0;
    if let Some(ip) = ip {
        // The faulting instruction, as if it were a return address: reports look up the byte
        // before a return address (`stack::resolve`), here the faulting instruction's first.
        native[0] = ip + 1;
        depth = 1;
    }
    let shim = stack::shim_range();
    let mut found = false;
    // SAFETY: the unwinder walks this thread's stack (through the signal frame, for a fault);
    // the closure only stores addresses. Frames up to the faulting one, or inside the shim,
    // are the guard's own.
    unsafe {
        backtrace::trace_unsynchronized(|frame| {
            let at = frame.ip() as u64;
            if at == 0 {
                return false;
            }
            if found {
                native[depth] = at;
                depth += 1;
            } else {
                match ip {
                    // The faulting frame is in `native` already; the ones after it follow.
                    Some(ip) => found = at == ip || at == ip + 1,
                    // The first frame outside the shim returns into the program's call.
                    None if !(shim.0..shim.1).contains(&at) => {
                        found = true;
                        native[0] = at;
                        depth = 1;
                    }
                    None => {}
                }
            }
            depth < most
        });
    }
    let mut python = [(0usize, 0); python::DEPTH];
    let python_len = python::walk(&mut python);
    // SAFETY: gettid is a system call.
    let tid = unsafe { libc::gettid() } as u32;
    // SAFETY: this thread owns the slot (WRITING).
    unsafe {
        (*slot.fault.get()).write(Fault { verdict, addr, len, tid, native, native_len: depth, python, python_len })
    };
    slot.state.store(READY, Ordering::Release);
    wake();
}

fn wake() {
    let fd = WAKE.load(Ordering::Acquire);
    if fd >= 0 {
        let byte = 0u8;
        // SAFETY: write(2) is async-signal-safe.
        unsafe { libc::write(fd, (&raw const byte).cast(), 1) };
    }
}

/// Takes every recorded fault, in no particular order.
pub fn take_each(mut f: impl FnMut(&Fault)) {
    for slot in &RING {
        if slot.state.compare_exchange(READY, TAKEN, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            // SAFETY: READY: fully written; TAKEN: this thread's.
            f(unsafe { (*slot.fault.get()).assume_init_ref() });
            slot.state.store(FREE, Ordering::Release);
        }
    }
}

/// In a forked child: slots other threads were writing will never be finished.
pub fn forked_child() {
    for slot in &RING {
        if slot.state.load(Ordering::Relaxed) != READY {
            slot.state.store(FREE, Ordering::Relaxed);
        }
    }
    let fd = WAKE.swap(-1, Ordering::Relaxed);
    if fd >= 0 {
        // SAFETY: this process's copy of the parent's pipe.
        unsafe { libc::close(fd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host_races::table::tests::bytes;

    #[test]
    fn faults_are_races_only_inside_conflicting_bytes() {
        let destination = bytes(Mode::Write, 0x1100, 0x1200);
        let source = bytes(Mode::Read, 0x1800, 0x1900);
        let both = [destination, source];
        assert_eq!(classify(&both, 0x5000, Some(false)), None, "no guarded page");
        assert_eq!(
            classify(&both, 0x1100, Some(false)),
            Some(Verdict::Race { work: destination.work, mode: Mode::Read })
        );
        assert_eq!(
            classify(&both, 0x11ff, Some(true)),
            Some(Verdict::Race { work: destination.work, mode: Mode::Write })
        );
        assert_eq!(
            classify(&both, 0x1200, Some(true)),
            Some(Verdict::Outside { work: destination.work }),
            "past the bytes"
        );
        // A load from a source on a page that a destination makes inaccessible: no conflict.
        assert_eq!(classify(&both, 0x1800, Some(false)), Some(Verdict::Outside { work: destination.work }));
        assert_eq!(
            classify(&both, 0x1800, None),
            Some(Verdict::Outside { work: destination.work }),
            "unknown direction"
        );
        assert_eq!(classify(&both, 0x1800, Some(true)), Some(Verdict::Race { work: source.work, mode: Mode::Write }));
        // Alone, a source's page is read-only: its faults are stores.
        assert_eq!(classify(&[source], 0x1880, None), Some(Verdict::Race { work: source.work, mode: Mode::Write }));
    }
}
