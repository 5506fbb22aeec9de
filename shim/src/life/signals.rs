//! Signals that end the process: the report is written before it goes.
//!
//! A signal handler may interrupt a thread in the middle of the model, holding its locks, so
//! the handler does not write the report itself: it wakes a watcher thread through a pipe,
//! and the watcher writes it. For SIGTERM and SIGINT (when the program left them to their
//! default action) the handler returns, the interrupted thread goes on and releases what it
//! holds, and the watcher, once the report is written, lets the signal take its course. A
//! fatal signal (SIGSEGV, ...) cannot return to the faulting code: its handler prints the
//! stack with streamsan's frames (the fault may be streamsan's), waits a moment for the
//! watcher, then dies of the same signal through the action that was there before. Races
//! are in the report file as soon as they are found, so what a dying process can lose is
//! counts, not races.
//!
//! Programs that install their own handlers replace these, and lose nothing: they exit,
//! and the report is written at exit.

use core::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use super::reports;
use crate::sites::stack;

const FATAL: [c_int; 5] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE, libc::SIGABRT];
const TERMINATION: [c_int; 2] = [libc::SIGTERM, libc::SIGINT];

/// The actions in place before ours, by signal number. Written before the handler is
/// installed, read by the handler.
static mut PREVIOUS: [core::mem::MaybeUninit<libc::sigaction>; 65] = [const { core::mem::MaybeUninit::uninit() }; 65];

/// The watcher's pipe (write end), or -1 while there is no watcher.
static WAKE: AtomicI32 = AtomicI32::new(-1);
/// Set by the watcher when it wrote the report for a fatal signal.
static WRITTEN: AtomicBool = AtomicBool::new(false);

fn name(signal: c_int) -> &'static str {
    match signal {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGABRT => "SIGABRT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
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

/// Puts back the action that was there before ours.
fn restore(signal: c_int) {
    // SAFETY: PREVIOUS[signal] was written when ours was installed.
    unsafe { libc::sigaction(signal, (&raw const PREVIOUS[signal as usize]).cast(), core::ptr::null_mut()) };
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

/// At the first driver call: the watcher, and SIGTERM and SIGINT where the program left
/// them to their default action (an ignored signal stays ignored).
pub fn install_termination() {
    start_watcher();
    for signal in TERMINATION {
        // SAFETY: reading the current action.
        let current = unsafe {
            let mut current: libc::sigaction = core::mem::zeroed();
            libc::sigaction(signal, core::ptr::null(), &mut current);
            current
        };
        if current.sa_sigaction == libc::SIG_DFL {
            install(signal, on_termination);
        }
    }
}

/// In a forked child: the parent's watcher thread did not come along.
pub fn forked_child() {
    let fd = WAKE.swap(-1, Ordering::AcqRel);
    if fd >= 0 {
        // SAFETY: closing this process's copy of the pipe.
        unsafe { libc::close(fd) };
    }
}

fn start_watcher() {
    let mut fds = [0 as c_int; 2];
    // SAFETY: a pipe for this process.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let read = fds[0];
    let spawned = std::thread::Builder::new().name("streamsan-signals".into()).spawn(move || watch(read));
    if spawned.is_ok() {
        WAKE.store(fds[1], Ordering::Release);
    }
}

/// The watcher: for each signal number read, writes the report; then lets a termination
/// signal take its course.
fn watch(read: c_int) {
    loop {
        let mut signal = 0 as c_int;
        // SAFETY: reading one int from our pipe.
        let n = unsafe { libc::read(read, (&raw mut signal).cast(), core::mem::size_of::<c_int>()) };
        if n != core::mem::size_of::<c_int>() as isize {
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        reports::sink().write();
        if TERMINATION.contains(&signal) {
            restore(signal);
            // SAFETY: the signal again, now with the program's own (default) action.
            unsafe { libc::raise(signal) };
        } else {
            WRITTEN.store(true, Ordering::Release);
        }
    }
}

/// Tells the watcher; false when there is none.
fn wake(signal: c_int) -> bool {
    let fd = WAKE.load(Ordering::Acquire);
    // SAFETY: write(2) of one int is async-signal-safe.
    fd >= 0 && unsafe { libc::write(fd, (&raw const signal).cast(), core::mem::size_of::<c_int>()) } > 0
}

extern "C" fn on_termination(signal: c_int, _info: *mut libc::siginfo_t, _context: *mut core::ffi::c_void) {
    if !wake(signal) {
        restore(signal);
        // SAFETY: raise(3) is async-signal-safe.
        unsafe { libc::raise(signal) };
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
        if wake(signal) {
            // The watcher may need a lock this thread holds: give it two seconds, not more.
            for _ in 0..200 {
                if WRITTEN.load(Ordering::Acquire) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
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
