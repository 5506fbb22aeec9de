//! Signals that end the process: their handlers have the [`super::watcher`] write the
//! report, then the process ends exactly as it would have without streamsan. A signal that
//! asks the process to stop (SIGTERM, SIGINT, SIGHUP, SIGQUIT) then does what was there
//! before: the default action, or the program's own handler; a fatal one (SIGSEGV, ...)
//! prints the stack first, then dies of the same signal through the action before ours.

use core::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

use super::watcher;
use crate::sites::stack;

const FATAL: [c_int; 5] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE, libc::SIGABRT];
const TERMINATION: [c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// The actions in place before ours, by signal number. Written before the handler is
/// installed, read by the handler.
static mut PREVIOUS: [core::mem::MaybeUninit<libc::sigaction>; 65] = [const { core::mem::MaybeUninit::uninit() }; 65];

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

/// Installs `handler` for `signal`, keeping the previous action; on an alternate stack so
/// that a stack overflow can be reported.
fn install(signal: c_int, handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut core::ffi::c_void)) {
    // SAFETY: a zeroed, filled-in action; PREVIOUS[signal] is written before the handler
    // can run.
    unsafe {
        let mut action: libc::sigaction = core::mem::zeroed();
        action.sa_sigaction = handler as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, (&raw mut PREVIOUS[signal as usize]).cast());
    }
}

/// The action that was there before ours.
fn previous(signal: c_int) -> libc::sigaction {
    // SAFETY: PREVIOUS[signal] was written when ours was installed.
    unsafe { (&raw const PREVIOUS[signal as usize]).cast::<libc::sigaction>().read() }
}

/// Puts back the action that was there before ours.
fn restore(signal: c_int) {
    // SAFETY: a valid action, read above.
    unsafe { libc::sigaction(signal, &previous(signal), core::ptr::null_mut()) };
}

/// At load: the fatal signals.
pub fn install_fatal() {
    const ALTERNATE_STACK: usize = 256 << 10;
    // SAFETY: a leaked, never-freed stack for this thread.
    unsafe {
        let stack = Box::leak(vec![0u8; ALTERNATE_STACK].into_boxed_slice());
        let alt = libc::stack_t { ss_sp: stack.as_mut_ptr().cast(), ss_flags: 0, ss_size: ALTERNATE_STACK };
        libc::sigaltstack(&alt, core::ptr::null_mut());
    }
    for signal in FATAL {
        install(signal, on_fatal);
    }
}

/// At the first driver call, once the watcher runs: the termination signals the program
/// does not ignore (its own handler, if it has one, is called after the report is written).
pub fn install_termination() {
    for signal in TERMINATION {
        // SAFETY: reading the current action.
        let current = unsafe {
            let mut current: libc::sigaction = core::mem::zeroed();
            libc::sigaction(signal, core::ptr::null(), &mut current);
            current
        };
        if current.sa_sigaction != libc::SIG_IGN {
            install(signal, on_termination);
        }
    }
}

/// The report first, then what the signal would have done; unless the watcher finishes the
/// signal instead ([`watcher::report_for_termination`]).
extern "C" fn on_termination(signal: c_int, info: *mut libc::siginfo_t, context: *mut core::ffi::c_void) {
    if watcher::report_for_termination(signal) {
        finish(signal, info, context);
    }
}

/// What the signal would have done without streamsan, now that the report is written.
fn finish(signal: c_int, info: *mut libc::siginfo_t, context: *mut core::ffi::c_void) {
    let before = previous(signal);
    if before.sa_sigaction == libc::SIG_DFL || before.sa_flags & libc::SA_RESETHAND != 0 {
        restore_default(signal);
    }
    if before.sa_sigaction == libc::SIG_DFL {
        // Raised again with the default action: it is delivered when this handler returns,
        // and the process dies of it, with the status it would have had.
        // SAFETY: raise(3) is async-signal-safe.
        unsafe { libc::raise(signal) };
    } else if before.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the program's own three-argument handler, as it installed it.
        let handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut core::ffi::c_void) =
            unsafe { core::mem::transmute(before.sa_sigaction) };
        handler(signal, info, context);
    } else {
        // SAFETY: the program's own one-argument handler, as it installed it.
        let handler: extern "C" fn(c_int) = unsafe { core::mem::transmute(before.sa_sigaction) };
        handler(signal);
    }
}

/// The signal's default action.
fn restore_default(signal: c_int) {
    // SAFETY: signal(2) with SIG_DFL is async-signal-safe.
    unsafe { libc::signal(signal, libc::SIG_DFL) };
}

extern "C" fn on_fatal(signal: c_int, info: *mut libc::siginfo_t, _context: *mut core::ffi::c_void) {
    static REPORTED: AtomicBool = AtomicBool::new(false);
    if !REPORTED.swap(true, Ordering::SeqCst) {
        // SAFETY: the kernel passes a valid siginfo.
        let (code, address) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
        // A fault (si_code > 0) has an address; a signal sent by a process (raise, kill:
        // si_code <= 0) has its sender's pid where the address would be.
        let cause = if code > 0 { format!("address {address:#x}") } else { "sent by a process".to_string() };
        let mut text = format!("streamsan: the program received {} ({cause}); stack:\n", name(signal));
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
        watcher::report_for_fatal(signal);
    }
    // Let the signal take its course through what was there before: a fault re-executes the
    // faulting instruction, a sent signal is sent again.
    restore(signal);
    // SAFETY: reading the siginfo; raise(3) is async-signal-safe.
    unsafe {
        if (*info).si_code <= 0 {
            libc::raise(signal);
        }
    }
}
