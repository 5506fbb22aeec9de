//! Fatal signals: say where the process died, with streamsan's frames too (the fault may be
//! streamsan's), then die of the same signal, through the handler that was there before.
//!
//! The handlers are installed when the library is loaded; a program that installs its own
//! later replaces them, and loses nothing.

use core::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::stack;

const FATAL: [c_int; 5] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE, libc::SIGABRT];

/// The actions in place before ours, by index in FATAL. Written once, at load, before any
/// handler can run.
static mut PREVIOUS: [core::mem::MaybeUninit<libc::sigaction>; 5] = [const { core::mem::MaybeUninit::uninit() }; 5];

fn name(signal: c_int) -> &'static str {
    match signal {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGABRT => "SIGABRT",
        _ => "signal",
    }
}

extern "C" fn on_fatal(signal: c_int, info: *mut libc::siginfo_t, _context: *mut core::ffi::c_void) {
    static REPORTED: AtomicBool = AtomicBool::new(false);
    if !REPORTED.swap(true, Ordering::SeqCst) {
        // SAFETY: the kernel passes a valid siginfo.
        let address = unsafe { (*info).si_addr() } as usize;
        let mut text = format!("streamsan: the program received {} (address {address:#x}); stack:\n", name(signal));
        for (i, frame) in stack::current_frames().iter().enumerate() {
            text.push_str(&format!(
                "    #{i} {} {}{} ({} {})\n",
                frame.function.as_deref().unwrap_or("<unknown>"),
                frame.file.as_deref().unwrap_or(""),
                frame.line.map(|l| format!(":{l}")).unwrap_or_default(),
                frame.module.as_deref().unwrap_or(""),
                frame.address
            ));
        }
        // SAFETY: write(2) is async-signal-safe.
        unsafe { libc::write(2, text.as_ptr().cast(), text.len()) };
    }
    // Put back what was there and let the signal take its course: a fault re-executes the
    // faulting instruction; a sent signal is sent again.
    let index = FATAL.iter().position(|&s| s == signal).unwrap_or(0);
    // SAFETY: PREVIOUS was written at load.
    unsafe {
        let previous = &*(&raw const PREVIOUS[index]);
        libc::sigaction(signal, previous.as_ptr(), core::ptr::null_mut());
        if (*info).si_code <= 0 {
            libc::raise(signal);
        }
    }
}

/// Installs the handlers, on an alternate stack so that a stack overflow can be reported.
pub fn install() {
    const ALTERNATE_STACK: usize = 256 << 10;
    // SAFETY: a leaked, never-freed stack; sigaction with a zeroed, filled-in action.
    unsafe {
        let stack = Box::leak(vec![0u8; ALTERNATE_STACK].into_boxed_slice());
        let alt = libc::stack_t { ss_sp: stack.as_mut_ptr().cast(), ss_flags: 0, ss_size: ALTERNATE_STACK };
        libc::sigaltstack(&alt, core::ptr::null_mut());
        for (i, &signal) in FATAL.iter().enumerate() {
            let mut action: libc::sigaction = core::mem::zeroed();
            action.sa_sigaction = on_fatal as extern "C" fn(c_int, *mut libc::siginfo_t, *mut core::ffi::c_void) as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            let previous = &mut *(&raw mut PREVIOUS[i]);
            libc::sigaction(signal, &action, previous.as_mut_ptr());
        }
    }
}
