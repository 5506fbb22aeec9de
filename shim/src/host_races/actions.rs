//! SIGSEGV and SIGTRAP stay the guard's: the program's own `sigaction`/`signal` for either is
//! recorded, not installed, and the guard's handler chains to it for every fault or trap
//! that is not the guard's ([`chain`]), so the program sees what it would without streamsan.

use core::ffi::c_int;
use core::sync::atomic::{AtomicBool, Ordering};

/// The program's action for a signal the guard handles, behind a spin lock (sigaction may be
/// called in signal handlers, and the guard's handler reads it).
struct ProgramAction {
    /// Whether the guard's handler is installed: until then, and with `host_races=0`, the
    /// interposers only pass calls on.
    installed: AtomicBool,
    busy: AtomicBool,
    action: core::cell::UnsafeCell<core::mem::MaybeUninit<libc::sigaction>>,
}
// SAFETY: `action` is only touched with `busy` held.
unsafe impl Sync for ProgramAction {}

impl ProgramAction {
    const fn new() -> ProgramAction {
        ProgramAction {
            installed: AtomicBool::new(false),
            busy: AtomicBool::new(false),
            action: core::cell::UnsafeCell::new(core::mem::MaybeUninit::zeroed()),
        }
    }
}

static SEGV: ProgramAction = ProgramAction::new();
static TRAP: ProgramAction = ProgramAction::new();

/// The program's action for `signal`, if the guard handles it and its handler is installed.
fn program(signal: c_int) -> Option<&'static ProgramAction> {
    let action = match signal {
        libc::SIGSEGV => &SEGV,
        libc::SIGTRAP => &TRAP,
        _ => return None,
    };
    action.installed.load(Ordering::Acquire).then_some(action)
}

impl ProgramAction {
    /// Replaces the action with `new` (if any) and returns the one before.
    fn swap(&self, new: Option<libc::sigaction>) -> libc::sigaction {
        while self.busy.swap(true, Ordering::Acquire) {
            core::hint::spin_loop();
        }
        // SAFETY: `busy` is held; zeroed is a valid (default) action.
        let old = unsafe { (*self.action.get()).assume_init() };
        if let Some(new) = new {
            // SAFETY: as above.
            unsafe { (*self.action.get()).write(new) };
        }
        self.busy.store(false, Ordering::Release);
        old
    }
}

extern "C" {
    /// The C library's own `sigaction`, under its other exported name: what the
    /// interposer below passes calls to.
    fn __sigaction(signal: c_int, action: *const libc::sigaction, old: *mut libc::sigaction) -> c_int;
    /// The C library's `signal` (BSD semantics), under its other exported name.
    fn bsd_signal(signal: c_int, handler: libc::sighandler_t) -> libc::sighandler_t;
}

/// Installs `handler` as the real action for `signal` (SIGSEGV or SIGTRAP), keeping the one
/// in place as the program's; from now on the program's calls change only the recorded one.
pub fn install(signal: c_int, handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut core::ffi::c_void)) -> bool {
    let program = match signal {
        libc::SIGSEGV => &SEGV,
        libc::SIGTRAP => &TRAP,
        _ => return false,
    };
    // SAFETY: a zeroed, filled-in action; `old` is written by the C library.
    unsafe {
        let mut action: libc::sigaction = core::mem::zeroed();
        action.sa_sigaction = handler as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        let mut old: libc::sigaction = core::mem::zeroed();
        if __sigaction(signal, &action, &mut old) != 0 {
            return false;
        }
        program.swap(Some(old));
    }
    program.installed.store(true, Ordering::Release);
    true
}

/// Lets a fault or trap that is not the guard's take its course: the program's handler runs
/// (with its mask, and reset first if it asked for SA_RESETHAND); with no handler, the
/// default action is put in place so that the faulting instruction, executed again, ends the
/// process as it would have without streamsan. A sent signal, and a trap (which running on
/// does not raise again), are raised again.
pub fn chain(signal: c_int, info: *mut libc::siginfo_t, context: *mut core::ffi::c_void) {
    let Some(program) = program(signal) else { return };
    let action = program.swap(None);
    // SAFETY: the kernel's siginfo.
    let sent = unsafe { (*info).si_code } <= 0;
    match action.sa_sigaction {
        libc::SIG_IGN if sent => {}
        libc::SIG_DFL | libc::SIG_IGN => {
            // SAFETY: async-signal-safe calls; the default action ends the process.
            unsafe {
                let mut default: libc::sigaction = core::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                __sigaction(signal, &default, core::ptr::null_mut());
                if sent || signal == libc::SIGTRAP {
                    libc::raise(signal);
                }
            }
        }
        handler => {
            if action.sa_flags & libc::SA_RESETHAND != 0 {
                // SAFETY: a zeroed action is SIG_DFL.
                program.swap(Some(unsafe { core::mem::zeroed() }));
            }
            // SAFETY: the program's own handler, called as the kernel would: with its mask
            // added (and the signal itself let through for SA_NODEFER).
            unsafe {
                let mut mask = action.sa_mask;
                let mut before: libc::sigset_t = core::mem::zeroed();
                libc::pthread_sigmask(libc::SIG_BLOCK, &mask, &mut before);
                if action.sa_flags & libc::SA_NODEFER != 0 {
                    libc::sigemptyset(&mut mask);
                    libc::sigaddset(&mut mask, signal);
                    libc::pthread_sigmask(libc::SIG_UNBLOCK, &mask, core::ptr::null_mut());
                }
                if action.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut core::ffi::c_void) =
                        core::mem::transmute(handler);
                    f(signal, info, context);
                } else {
                    let f: extern "C" fn(c_int) = core::mem::transmute(handler);
                    f(signal);
                }
                libc::pthread_sigmask(libc::SIG_SETMASK, &before, core::ptr::null_mut());
            }
        }
    }
}

/// `sigaction(2)` as the program calls it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigaction(signal: c_int, action: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    let Some(program) = program(signal) else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { __sigaction(signal, action, old) };
    };
    // SAFETY: the caller's pointers, read and written as sigaction(2) does.
    let before = program.swap(unsafe { action.as_ref() }.copied());
    if let Some(old) = unsafe { old.as_mut() } {
        *old = before;
    }
    0
}

/// `signal(3)` as the program calls it: glibc's BSD semantics (SA_RESTART, the signal
/// blocked while its handler runs).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn signal(signal: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    let Some(program) = program(signal).filter(|_| handler != libc::SIG_ERR) else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { bsd_signal(signal, handler) };
    };
    // SAFETY: a zeroed action, filled in.
    let mut action: libc::sigaction = unsafe { core::mem::zeroed() };
    action.sa_sigaction = handler;
    action.sa_flags = libc::SA_RESTART;
    program.swap(Some(action)).sa_sigaction
}
