//! Running a program the way a wrapper must: the signals that ask a job to stop
//! (SIGTERM, SIGINT, SIGHUP, SIGQUIT, as CI cancellation, Slurm, Docker and a closed
//! terminal send them) go on to the program, and the wrapper stays to see how it ends.
//!
//! Without this, a signal sent to `streamsan run` would kill the wrapper alone: no summary,
//! and the program left running as an orphan. With it, the program gets the signal (and
//! its shim writes the report on the way out), the wrapper waits for it, summarizes, and
//! then ends as the program did. A signal typed at the terminal (Ctrl-C) already reached
//! the whole foreground process group, the program included: it is not sent twice.

use std::io;
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};

/// The signals passed on to the program.
pub const FORWARDED: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// The running program's pid, 0 while there is none.
static PROGRAM: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let from_terminal = unsafe { (*info).si_code } == libc::SI_KERNEL;
    let program = PROGRAM.load(Ordering::Acquire);
    if program > 0 && !from_terminal {
        // SAFETY: kill(2) is async-signal-safe.
        unsafe { libc::kill(program, signal) };
    }
}

/// The forwarded signals, as a set.
fn forwarded_set() -> libc::sigset_t {
    // SAFETY: a set initialized by sigemptyset before use.
    unsafe {
        let mut set: libc::sigset_t = core::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in FORWARDED {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

/// Runs `command` to its end, passing on the signals sent to this process meanwhile.
pub fn run(command: &mut Command) -> io::Result<ExitStatus> {
    let set = forwarded_set();
    // SAFETY: installing a handler that only reads an atomic and calls kill(2); blocking
    // the signals until the program's pid is known (the child starts with an empty mask:
    // the standard library resets it).
    unsafe {
        let mut action: libc::sigaction = core::mem::zeroed();
        action.sa_sigaction = forward as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        for signal in FORWARDED {
            libc::sigaction(signal, &action, core::ptr::null_mut());
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, core::ptr::null_mut());
    }
    let spawned = command.spawn();
    if let Ok(child) = &spawned {
        PROGRAM.store(child.id() as i32, Ordering::Release);
    }
    // SAFETY: unblocking what was blocked above; pending signals are forwarded now.
    unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, core::ptr::null_mut()) };
    let status = spawned?.wait();
    PROGRAM.store(0, Ordering::Release);
    status
}
