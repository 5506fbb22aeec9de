//! SIGSEGV stays the guard's: the program's own `sigaction`/`signal` for SIGSEGV is recorded,
//! not installed, and the guard's handler chains to it for every fault that is not the
//! guard's ([`chain`]), so the program sees what it would without streamsan.

use core::ffi::c_int;
use core::sync::atomic::{AtomicBool, Ordering};

/// Whether the guard's handler is installed: until then, and with `host_races=0`, the
/// interposers only pass calls on.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The program's SIGSEGV action, behind a spin lock (sigaction may be called in signal
/// handlers, and the guard's handler reads it).
struct ProgramAction {
    busy: AtomicBool,
    action: core::cell::UnsafeCell<core::mem::MaybeUninit<libc::sigaction>>,
}
// SAFETY: `action` is only touched with `busy` held.
unsafe impl Sync for ProgramAction {}

static PROGRAM: ProgramAction = ProgramAction {
    busy: AtomicBool::new(false),
    action: core::cell::UnsafeCell::new(core::mem::MaybeUninit::zeroed()),
};

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

/// Installs `handler` as the real SIGSEGV action, keeping the one in place as the
/// program's; from now on the program's calls change only the recorded one.
pub fn install(handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut core::ffi::c_void)) -> bool {
    // SAFETY: a zeroed, filled-in action; `old` is written by the C library.
    unsafe {
        let mut action: libc::sigaction = core::mem::zeroed();
        action.sa_sigaction = handler as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        let mut old: libc::sigaction = core::mem::zeroed();
        if __sigaction(libc::SIGSEGV, &action, &mut old) != 0 {
            return false;
        }
        PROGRAM.swap(Some(old));
    }
    INSTALLED.store(true, Ordering::Release);
    true
}

/// Lets a fault that is not the guard's take its course: the program's handler runs (with
/// its mask, and reset first if it asked for SA_RESETHAND); with no handler, the default
/// action is put in place so that the faulting instruction, executed again, ends the
/// process as it would have without streamsan (a sent signal is sent again).
pub fn chain(signal: c_int, info: *mut libc::siginfo_t, context: *mut core::ffi::c_void) {
    let action = PROGRAM.swap(None);
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
                if sent {
                    libc::raise(signal);
                }
            }
        }
        handler => {
            if action.sa_flags & libc::SA_RESETHAND != 0 {
                // SAFETY: a zeroed action is SIG_DFL.
                PROGRAM.swap(Some(unsafe { core::mem::zeroed() }));
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
    if signal != libc::SIGSEGV || !INSTALLED.load(Ordering::Acquire) {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { __sigaction(signal, action, old) };
    }
    // SAFETY: the caller's pointers, read and written as sigaction(2) does.
    let before = PROGRAM.swap(unsafe { action.as_ref() }.copied());
    if let Some(old) = unsafe { old.as_mut() } {
        *old = before;
    }
    0
}

/// `signal(3)` as the program calls it: glibc's BSD semantics (SA_RESTART, the signal
/// blocked while its handler runs).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn signal(signal: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if signal != libc::SIGSEGV || !INSTALLED.load(Ordering::Acquire) || handler == libc::SIG_ERR {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { bsd_signal(signal, handler) };
    }
    // SAFETY: a zeroed action, filled in.
    let mut action: libc::sigaction = unsafe { core::mem::zeroed() };
    action.sa_sigaction = handler;
    action.sa_flags = libc::SA_RESTART;
    PROGRAM.swap(Some(action)).sa_sigaction
}
