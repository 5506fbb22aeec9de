//! The shim's process life, the top layer: at load it reads the options and installs the
//! report sink ([`reports`]) and the fatal-signal handlers ([`signals`]); the first driver
//! call starts the [`watcher`] and the termination handlers; the report is written at exit
//! (also by the ways out that skip `exit`'s handlers, and before an `exec`: [`exits`]), on
//! a signal that ends the process, and by a forked child for itself. [`query`] lets the
//! program ask for its report so far, [`tests`] a test runner name each test and ask for
//! its races.

#[cfg(target_arch = "x86_64")]
mod exec_lists;
pub mod exits;
pub mod query;
pub mod reports;
pub mod signals;
pub mod tests;
pub mod watcher;

use core::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

use streamsan::phases;
use streamsan::report::run::Event;

use crate::hooks::{batch, footprint, model, peers};
use crate::host_races;
use crate::intercept::options::options;
use crate::intercept::{first_call, stats};

/// Set at a fork, in the child, until its first driver call forgets what the parent found.
static FORK_PENDING: AtomicBool = AtomicBool::new(false);

extern "C" {
    /// glibc's `on_exit`: like `atexit`, with the exit status.
    fn on_exit(function: extern "C" fn(c_int, *mut c_void), arg: *mut c_void) -> c_int;
}

extern "C" fn on_load() {
    if options().phase_times {
        phases::enable();
    }
    exits::owned_by_this_process();
    peers::name_directory();
    reports::note(Event::Loaded(std::process::id()));
    reports::install();
    // Before streamsan's own fatal-signal handlers, so that SIGSEGV actions installed after
    // it (those included) are kept as the program's and chained to by the guard's handler.
    if options().host_races {
        host_races::install(model::unsettled, model::model, options().host_race_pages);
    }
    signals::install_fatal();
    // Registered first, so run last: driver calls in the program's own exit handlers and
    // static destructors are seen before the final report.
    // SAFETY: registering plain extern "C" functions; the child's fork handler only sets
    // flags and closes a descriptor.
    unsafe {
        on_exit(at_exit, core::ptr::null_mut());
        libc::pthread_atfork(Some(before_fork), Some(forked_parent), Some(forked_child));
    }
    if first_call::on_first_call(started) {
        // A library constructor called the driver before this one ran.
        started();
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static ON_LOAD: extern "C" fn() = on_load;

/// What the first driver call of a process (or of a forked child) starts.
fn started() {
    if FORK_PENDING.swap(false, Ordering::AcqRel) {
        // A forked child reports what it finds itself, to a file of its own.
        reports::sink().start_over();
        model::model().forget_findings();
    }
    reports::note(Event::Called(std::process::id()));
    // Before the call is forwarded: the Compute Sanitizer API must subscribe before the
    // driver starts, and a process that never calls the driver loads none of it.
    footprint::start();
    watcher::start();
    signals::install_termination();
}

extern "C" fn at_exit(status: c_int, _: *mut c_void) {
    if !first_call::called() {
        return;
    }
    exits::ended();
    model::settle();
    footprint::finish();
    // The host races the guard caught, turned into races before the report is written.
    host_races::drain();
    let sink = reports::sink();
    let races = sink.write();
    sink.to_stderr_if_unwritten();
    if phases::enabled() {
        eprint!("{}{}", phases::table(), stats::time_table());
    }
    // The program's own status, unless it would claim success with races found.
    if status == 0 && races > 0 {
        reports::exit_now(options().exitcode);
    }
}

/// Before a fork, in the parent: the model told the work waiting in its batch, so that the
/// child does not tell its copy of the parent's work again, and the batch's locks held
/// until the fork is made, so that the child inherits them free.
extern "C" fn before_fork() {
    batch::before_fork(model::made());
}

/// After a fork, in the parent.
extern "C" fn forked_parent() {
    batch::after_fork();
}

/// In a forked child, at once: flags only (no lock, which a thread of the parent may have
/// held at the fork, but the batch's, which this thread holds); the child's first driver
/// call does the rest ([`started`]).
extern "C" fn forked_child() {
    batch::after_fork();
    FORK_PENDING.store(true, Ordering::Relaxed);
    first_call::forget();
    exits::owned_by_this_process();
    reports::forked();
    watcher::forked_child();
}
