//! Signals that end the process: the report is written before it goes, and the process
//! then ends exactly as it would have without streamsan.
//!
//! A signal handler may interrupt a thread in the middle of the model, holding its locks, so
//! the handler does not write the report itself: it wakes a watcher thread through a pipe,
//! and the watcher writes it (and, when the file cannot be written, prints it on stderr, as
//! at exit).
//!
//! For the signals that ask a process to stop (SIGTERM, SIGINT, SIGHUP, SIGQUIT: sent by
//! `kill`, a scheduler, `streamsan run`, or raised by the program itself), the handler
//! waits for the watcher, then does what was there before: dies of the signal (the default
//! action restored and the signal raised again, so that the status is the native one), or
//! calls the program's own handler, installed before its first driver call. The thread it
//! interrupted may hold a lock the watcher needs: after [`PATIENCE`] the handler returns to
//! let it go on, and the watcher, once done, sends the signal to that thread again, whose
//! handler then finishes at once. An ignored signal stays ignored.
//!
//! A fatal signal (SIGSEGV, ...) cannot return to the faulting code: its handler prints the
//! stack with streamsan's frames (the fault may be streamsan's), waits a moment for the
//! watcher, then dies of the same signal through the action that was there before.
//!
//! The watcher also serves the model's batch ([`crate::hooks::batch`]): launches, memsets,
//! copies, NCCL calls, records, waits and synchronizes wait there; the watcher tells the
//! model of them when the batch asks (a full queue, a synchronize), every [`NAP`] while the
//! program keeps queueing and every [`SETTLE_EVERY`] between signals: the program's threads
//! do not wait for the model, and a race among them is on the disk within that time. Races
//! are on the disk as soon as found (`streamsan::report::sink`), so what a process killed
//! without a chance to write (SIGKILL) loses is counts, not races. A program that installs
//! its own handler after its first driver call replaces these, and loses
//! nothing more: when it exits the report is written at exit.

use core::ffi::c_int;
use std::sync::atomic::{fence, AtomicBool, AtomicI32, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use super::reports;
use crate::hooks::{batch, model};
use crate::sites::stack;

const FATAL: [c_int; 5] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE, libc::SIGABRT];
const TERMINATION: [c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// How often the watcher tells the model the work waiting in its batch while the program
/// queues little.
const SETTLE_EVERY: Duration = Duration::from_millis(20);

/// How long the watcher naps between batches while the program keeps queueing work.
///
/// Why: so that a call that reads the model (an allocation, a free) finds the last few
/// operations to tell on its thread, not up to a full queue (64), a race among queued work
/// is on the disk within that time, and the program's threads never fill the queue and wake
/// the watcher through its pipe. It did not shorten what a synchronize told on its thread
/// (the optimizer's launches before it were still being told: `reports/gpu/b2202ca/`): the
/// synchronize's join is queued for that (`crate::hooks::batch`).
const NAP: Duration = Duration::from_micros(100);

/// How long a termination handler waits for the report before it lets its thread go on.
const PATIENCE: Duration = Duration::from_secs(2);

/// The actions in place before ours, by signal number. Written before the handler is
/// installed, read by the handler.
static mut PREVIOUS: [core::mem::MaybeUninit<libc::sigaction>; 65] = [const { core::mem::MaybeUninit::uninit() }; 65];

/// The watcher's pipe (write end), or -1 while there is no watcher.
static WAKE: AtomicI32 = AtomicI32::new(-1);
/// A message asking the watcher to settle the batch is in the pipe, not yet read.
static ASKED: AtomicBool = AtomicBool::new(false);
/// The watcher naps ([`NAP`]): it tells the batch within a nap unasked, so a thread that
/// asks it to writes nothing to its pipe ([`ask_to_settle`]).
static NAPPING: AtomicBool = AtomicBool::new(false);
/// Set by the watcher when it wrote the report for a fatal signal.
static WRITTEN: AtomicBool = AtomicBool::new(false);

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

/// What the handler tells the watcher: the signal, and the thread it interrupted; signal 0
/// asks it to settle the batch ([`ask_to_settle`]).
#[repr(C)]
#[derive(Clone, Copy)]
struct Wake {
    signal: c_int,
    tid: libc::pid_t,
}

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

/// At the first driver call: the watcher, and the termination signals the program does
/// not ignore (its own handler, if it has one, is called after the report is written).
pub fn install_termination() {
    start_watcher();
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
        batch::serve_by(ask_to_settle);
    }
}

/// Asks the watcher to settle the batch; false when there is no watcher to ask. One message
/// at a time: a full queue that finds one unread needs no other. None to a napping watcher,
/// which tells the batch within a nap anyway: a write to its pipe (a system call that wakes
/// another thread) at each of a program's synchronizes cost 7.7 µs a synchronize where they
/// came every few launches (`reports/perf/runs/24-napping-watcher/`).
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
    let sent = wake(0);
    if !sent {
        ASKED.store(false, Ordering::Release);
    }
    sent
}

/// The watcher: for each signal, writes the report (on stderr if the file cannot be
/// written); then tells the handler, or, if it stopped waiting, sends its signal again.
/// When asked, and between wake-ups, settles the model's batch.
fn watch(read: c_int) {
    // Signals for the process go to the program's threads, never to this one.
    // SAFETY: blocking every signal in this thread.
    unsafe {
        let mut all: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, core::ptr::null_mut());
    }
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
        let mut wake = Wake { signal: 0, tid: 0 };
        // SAFETY: reading one message from our pipe.
        let n = unsafe { libc::read(read, (&raw mut wake).cast(), core::mem::size_of::<Wake>()) };
        if n != core::mem::size_of::<Wake>() as isize {
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            // No watcher from now on: asks go to its pipe, unanswered, as before it napped.
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
        sink.write();
        sink.to_stderr_if_unwritten();
        if !TERMINATION.contains(&wake.signal) {
            WRITTEN.store(true, Ordering::Release);
        } else if TERMINATING.compare_exchange(WRITING, DONE, Ordering::AcqRel, Ordering::Acquire).is_err() {
            // The handler gave up waiting: the signal again, to the thread it interrupted
            // (or, if that thread is gone, to the process), whose handler finishes it.
            TERMINATING.store(DONE, Ordering::Release);
            // SAFETY: signalling this process.
            unsafe {
                let pid = libc::getpid();
                if libc::syscall(libc::SYS_tgkill, pid, wake.tid, wake.signal) != 0 {
                    libc::kill(pid, wake.signal);
                }
            }
        }
    }
}

/// Tells the watcher `signal` (0: settle the batch); false when there is no watcher.
fn wake(signal: c_int) -> bool {
    let fd = WAKE.load(Ordering::Acquire);
    // SAFETY: gettid(2) and write(2) are async-signal-safe; the message is smaller than
    // PIPE_BUF, so written whole.
    let message = Wake { signal, tid: unsafe { libc::gettid() } };
    fd >= 0 && unsafe { libc::write(fd, (&raw const message).cast(), core::mem::size_of::<Wake>()) } > 0
}

extern "C" fn on_termination(signal: c_int, info: *mut libc::siginfo_t, context: *mut core::ffi::c_void) {
    match TERMINATING.compare_exchange(IDLE, WRITING, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            if wake(signal) {
                let start = Instant::now();
                while TERMINATING.load(Ordering::Acquire) == WRITING && start.elapsed() < PATIENCE {
                    std::thread::sleep(Duration::from_millis(1));
                }
                if TERMINATING.compare_exchange(WRITING, GAVE_UP, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                    // The watcher sends the signal again once the report is written.
                    return;
                }
            }
        }
        // The report is being written for another signal: that one finishes first.
        Err(WRITING | GAVE_UP) => return,
        Err(_) => {}
    }
    TERMINATING.store(IDLE, Ordering::Release);
    finish(signal, info, context);
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
