//! Runs the program as a wrapper must: the signals that ask a job to stop (SIGTERM, SIGINT,
//! SIGHUP, SIGQUIT) go on to the program, and the wrapper waits for it, to summarize and end
//! as it did. A signal typed at the terminal already reached the program: it is not sent twice.

use std::io;
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};

/// The signals passed on to the program.
pub const FORWARDED: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// The running program's pid, 0 while there is none.
static PROGRAM: AtomicI32 = AtomicI32::new(0);
/// A signal that came before the program's pid was known, to pass on once it is.
static EARLY: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    if unsafe { (*info).si_code } == libc::SI_KERNEL {
        // From the terminal: the program got it too.
        return;
    }
    match PROGRAM.load(Ordering::Acquire) {
        0 => EARLY.store(signal, Ordering::Release),
        // SAFETY: kill(2) is async-signal-safe.
        program => unsafe {
            libc::kill(program, signal);
        },
    }
}

/// Runs `command` to its end, passing on the signals sent to this process meanwhile.
pub fn run(command: &mut Command) -> io::Result<ExitStatus> {
    // SAFETY: installing a handler that only uses atomics and kill(2).
    unsafe {
        let mut action: libc::sigaction = core::mem::zeroed();
        action.sa_sigaction = forward as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        for signal in FORWARDED {
            libc::sigaction(signal, &action, core::ptr::null_mut());
        }
    }
    let mut child = command.spawn()?;
    PROGRAM.store(child.id() as i32, Ordering::Release);
    let early = EARLY.swap(0, Ordering::AcqRel);
    if early != 0 {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, early) };
    }
    let status = child.wait();
    PROGRAM.store(0, Ordering::Release);
    status
}
