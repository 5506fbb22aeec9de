//! The watcher thread: it writes the report for a signal's handler, which may have
//! interrupted a thread holding the model's locks, and drains the model's batch
//! ([`crate::hooks::batch`]) so that the program's threads never wait for the model.

use core::ffi::c_int;
use std::sync::atomic::{fence, AtomicBool, AtomicI32, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::reports;
use crate::hooks::{batch, model};

/// How often the watcher tells the model the work waiting in its batch while the program
/// queues little.
const SETTLE_EVERY: Duration = Duration::from_millis(20);

/// How long the watcher naps between batches while the program keeps queueing work: a call
/// that reads the model then finds only the last few operations to tell on its thread, a
/// race among queued work is on the disk within a nap, and the program's threads never fill
/// the queue and wake the watcher through its pipe.
const NAP: Duration = Duration::from_micros(100);

/// How long a termination handler waits for the report before it lets its thread go on.
const PATIENCE: Duration = Duration::from_secs(2);

/// The watcher's pipe (write end), or -1 while there is no watcher.
static WAKE: AtomicI32 = AtomicI32::new(-1);
/// A message asking the watcher to settle the batch is in the pipe, not yet read.
static ASKED: AtomicBool = AtomicBool::new(false);
/// The watcher naps ([`NAP`]): it tells the batch within a nap unasked, so a thread that
/// asks it to writes nothing to its pipe ([`ask_to_settle`]).
static NAPPING: AtomicBool = AtomicBool::new(false);
/// Set by the watcher when it wrote the report for a fatal signal or an ending process.
static WRITTEN: AtomicBool = AtomicBool::new(false);
/// How many races the report written for an ending process holds.
static RACES_WRITTEN: AtomicUsize = AtomicUsize::new(0);
/// The `signal` of a [`Wake`] that asks for the report of a process about to end or `exec`.
const ENDING: c_int = -1;

/// Where the report for a termination signal stands.
static TERMINATING: AtomicU8 = AtomicU8::new(IDLE);
/// No termination signal is being handled.
const IDLE: u8 = 0;
/// The watcher is writing the report; the handler waits.
const WRITING: u8 = 1;
/// The report is written: the next handler to see this finishes the signal.
const DONE: u8 = 2;
/// The handler stopped waiting: the watcher sends the signal again when done.
const GAVE_UP: u8 = 3;

/// What a thread tells the watcher: the signal, the thread it interrupted, and whether the
/// signal is fatal (1) or asks the process to stop (0); signal 0 asks it to settle the batch
/// ([`ask_to_settle`]), [`ENDING`] to write the report of a process about to end. Integers
/// only, so that the message has no padding.
#[repr(C)]
#[derive(Clone, Copy)]
struct Wake {
    signal: c_int,
    tid: libc::pid_t,
    fatal: c_int,
}

/// At the first driver call: starts the watcher, which serves the model's batch from then on.
pub fn start() {
    let mut fds = [0 as c_int; 2];
    // SAFETY: a pipe for this process.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let read = fds[0];
    if spawn_with_signals_blocked(move || watch(read)) {
        WAKE.store(fds[1], Ordering::Release);
        batch::serve_by(ask_to_settle);
    }
}

/// Starts `body` on a thread of its own that never takes a signal: the mask is blocked
/// before the thread exists, so that no signal can reach it before it could block them
/// itself (a termination handler run there would wait for itself), and restored after.
fn spawn_with_signals_blocked(body: impl FnOnce() + Send + 'static) -> bool {
    // SAFETY: changing and restoring this thread's signal mask.
    let mut before: libc::sigset_t = unsafe { core::mem::zeroed() };
    unsafe {
        let mut all: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut before);
    }
    let spawned = std::thread::Builder::new().name("streamsan-signals".into()).spawn(body);
    // SAFETY: the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &before, core::ptr::null_mut()) };
    spawned.is_ok()
}

/// In a forked child: the parent's watcher thread did not come along.
pub fn forked_child() {
    let fd = WAKE.swap(-1, Ordering::AcqRel);
    if fd >= 0 {
        // SAFETY: closing this process's copy of the pipe.
        unsafe { libc::close(fd) };
    }
    TERMINATING.store(IDLE, Ordering::Relaxed);
    ASKED.store(false, Ordering::Relaxed);
    NAPPING.store(false, Ordering::Relaxed);
}

/// For a termination signal's handler: has the watcher write the report, waiting for it at
/// most [`PATIENCE`]. True when the handler is to finish the signal now; false when it is to
/// return: the report is being written for another signal, which finishes first, or the
/// thread it interrupted may hold a lock the watcher needs, and the watcher sends the signal
/// to that thread again once the report is written.
pub fn report_for_termination(signal: c_int) -> bool {
    match TERMINATING.compare_exchange(IDLE, WRITING, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            if wake(signal, false) {
                let start = Instant::now();
                while TERMINATING.load(Ordering::Acquire) == WRITING && start.elapsed() < PATIENCE {
                    std::thread::sleep(Duration::from_millis(1));
                }
                if TERMINATING.compare_exchange(WRITING, GAVE_UP, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                    return false;
                }
            }
        }
        Err(WRITING | GAVE_UP) => return false,
        Err(_) => {}
    }
    TERMINATING.store(IDLE, Ordering::Release);
    true
}

/// For a fatal signal's handler: has the watcher write the report, and waits for it two
/// seconds at most (the watcher may need a lock the faulting thread holds).
pub fn report_for_fatal(signal: c_int) {
    if wake(signal, true) {
        wait_written();
    }
}

/// For a process about to end without `exit`'s handlers, or to `exec`: has the watcher
/// write the report, waiting for it at most [`PATIENCE`] (the caller may be a signal
/// handler that interrupted a thread holding a lock the watcher needs). The races the
/// report holds; `None` when there is no watcher or it did not finish in time.
pub fn report_before_ending() -> Option<usize> {
    WRITTEN.store(false, Ordering::Release);
    if wake(ENDING, true) && wait_written() {
        Some(RACES_WRITTEN.load(Ordering::Acquire))
    } else {
        None
    }
}

/// Waits at most [`PATIENCE`] for the watcher to write the report; whether it did.
fn wait_written() -> bool {
    let start = Instant::now();
    while !WRITTEN.load(Ordering::Acquire) {
        if start.elapsed() >= PATIENCE {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// Asks the watcher to settle the batch; false when there is no watcher to ask. One message
/// at a time: a full queue that finds one unread needs no other. None to a napping watcher,
/// which tells the batch within a nap anyway, so that a program's synchronizes do not each
/// pay a system call that wakes another thread.
fn ask_to_settle() -> bool {
    // The work was queued before this ask; the fence pairs with the watcher's in [`watch`]:
    // either this sees the watcher napping, or the watcher sees the work waiting.
    fence(Ordering::SeqCst);
    if NAPPING.load(Ordering::Relaxed) {
        return true;
    }
    if ASKED.swap(true, Ordering::AcqRel) {
        return true;
    }
    let sent = wake(0, false);
    if !sent {
        ASKED.store(false, Ordering::Release);
    }
    sent
}

/// The watcher: for each signal, writes the report (on stderr if the file cannot be
/// written); then tells the handler, or, if it stopped waiting, sends its signal again.
/// When asked, and between wake-ups, settles the model's batch.
fn watch(read: c_int) {
    batch::serving();
    // The last settle told something: the program is queueing work.
    let mut busy = false;
    loop {
        NAPPING.store(busy, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if !busy && batch::waiting() {
            // Queued while this thread stopped napping, by a thread that saw it napping.
            busy = model::settle() > 0;
            continue;
        }
        let mut ready = libc::pollfd { fd: read, events: libc::POLLIN, revents: 0 };
        let wait = if busy { NAP } else { SETTLE_EVERY };
        let timeout = libc::timespec { tv_sec: wait.as_secs() as _, tv_nsec: wait.subsec_nanos() as _ };
        // SAFETY: one descriptor of ours; the signal mask left as it is.
        if unsafe { libc::ppoll(&mut ready, 1, &timeout, core::ptr::null()) } == 0 {
            busy = model::settle() > 0;
            continue;
        }
        let mut wake = Wake { signal: 0, tid: 0, fatal: 0 };
        // SAFETY: reading one message from our pipe.
        let n = unsafe { libc::read(read, (&raw mut wake).cast(), core::mem::size_of::<Wake>()) };
        if n != core::mem::size_of::<Wake>() as isize {
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            // No watcher from now on: asks go to its pipe, unanswered.
            NAPPING.store(false, Ordering::Relaxed);
            return;
        }
        if wake.signal == 0 {
            ASKED.store(false, Ordering::Release);
            busy = model::settle() > 0;
            continue;
        }
        model::settle();
        let sink = reports::sink();
        let races = sink.write();
        sink.to_stderr_if_unwritten();
        if wake.fatal != 0 {
            RACES_WRITTEN.store(races, Ordering::Release);
            WRITTEN.store(true, Ordering::Release);
        } else if TERMINATING.compare_exchange(WRITING, DONE, Ordering::AcqRel, Ordering::Acquire).is_err() {
            // The handler gave up waiting: the signal again, to the thread it interrupted
            // (or, if that thread is gone, to the process), whose handler finishes it. Never
            // to this thread, which blocks every signal.
            TERMINATING.store(DONE, Ordering::Release);
            // SAFETY: signalling this process.
            unsafe {
                let pid = libc::getpid();
                if wake.tid == libc::gettid() || libc::syscall(libc::SYS_tgkill, pid, wake.tid, wake.signal) != 0 {
                    libc::kill(pid, wake.signal);
                }
            }
        }
    }
}

/// Tells the watcher `signal` (0: settle the batch); false when there is no watcher.
fn wake(signal: c_int, fatal: bool) -> bool {
    let fd = WAKE.load(Ordering::Acquire);
    // SAFETY: gettid(2) and write(2) are async-signal-safe; the message is smaller than
    // PIPE_BUF, so written whole.
    let message = Wake { signal, tid: unsafe { libc::gettid() }, fatal: fatal.into() };
    fd >= 0 && unsafe { libc::write(fd, (&raw const message).cast(), core::mem::size_of::<Wake>()) } > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread's mask is full from its first instruction: a signal sent to the process
    /// just as the watcher starts can never be taken on it.
    #[test]
    fn the_watcher_thread_starts_with_every_signal_blocked() {
        let (tell, told) = std::sync::mpsc::channel();
        assert!(spawn_with_signals_blocked(move || {
            // SAFETY: reading this thread's mask.
            let mut mask: libc::sigset_t = unsafe { core::mem::zeroed() };
            unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, core::ptr::null(), &mut mask) };
            let blocked = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGUSR1]
                .iter()
                .all(|&s| unsafe { libc::sigismember(&mask, s) } == 1);
            tell.send(blocked).unwrap();
        }));
        assert!(told.recv().unwrap(), "the thread started with signals it could take");
        // SAFETY: reading this thread's mask.
        let mut mask: libc::sigset_t = unsafe { core::mem::zeroed() };
        unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, core::ptr::null(), &mut mask) };
        assert_eq!(unsafe { libc::sigismember(&mask, libc::SIGTERM) }, 0, "the caller's mask restored");
    }
}
