//! The shim's process-wide life: options and suppressions read when the library is loaded,
//! the model, races reported as they are found, and the report written again at exit, on
//! SIGTERM/SIGINT and on a fatal signal ([`crate::signals`]), and by a forked child for
//! itself.
//!
//! Options are parsed by a library constructor, before the program's `main`, so that a
//! wrong option or suppressions file stops the program before it starts (as
//! ThreadSanitizer does). Only processes that called the driver write a report. The report
//! file is created once and never over something already there; when it cannot be, the
//! report goes to stderr at exit and the program runs on.

use core::ffi::{c_int, c_void};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use streamsan::model::op::{StackId, ThreadId};
use streamsan::model::race::RaceEntry;
use streamsan::model::streams::StreamInfo;
use streamsan::model::{Model, Sink};
use streamsan::options::{expand_path, Options};
use streamsan::report::build::{self, Symbols};
use streamsan::report::file::{render, ReportFile};
use streamsan::report::{text, Frame, Report};
use streamsan::suppressions::Suppressions;
use streamsan_driver_api::{CUcontext, CUDA_SUCCESS, CU_STREAM_NON_BLOCKING};

use crate::{diag, driver, host_guard, signals, stack, stats, thread};

static OPTIONS: OnceLock<Options> = OnceLock::new();
static SUPPRESSIONS: OnceLock<Suppressions> = OnceLock::new();
/// Whether this process (since its fork, for a child) called the driver.
static CALLED: AtomicBool = AtomicBool::new(false);
/// Whether this process is a forked child of the one that loaded the shim.
static FORKED: AtomicBool = AtomicBool::new(false);
/// Set at a fork, in the child, until its first driver call forgets what the parent found.
static FORK_PENDING: AtomicBool = AtomicBool::new(false);
/// Races printed on stderr so far (for `print_limit`).
static PRINTED: AtomicU64 = AtomicU64::new(0);

/// The options of this process.
pub fn options() -> &'static Options {
    OPTIONS.get_or_init(|| {
        let text = std::env::var("STREAMSAN_OPTIONS").unwrap_or_default();
        Options::parse(&text).unwrap_or_else(|e| fail(&format!("STREAMSAN_OPTIONS: {e}")))
    })
}

fn suppressions() -> &'static Suppressions {
    SUPPRESSIONS.get_or_init(|| match &options().suppressions {
        Some(path) => Suppressions::load(path.as_ref()).unwrap_or_else(|e| fail(&e.to_string())),
        None => Suppressions::default(),
    })
}

/// A mistake in what the user asked for: said, and the program stopped before it starts.
fn fail(why: &str) -> ! {
    diag::error(why);
    std::process::exit(2)
}

extern "C" {
    /// glibc's `on_exit`: like `atexit`, with the exit status.
    fn on_exit(function: extern "C" fn(c_int, *mut c_void), arg: *mut c_void) -> c_int;
}

extern "C" fn on_load() {
    options();
    suppressions();
    // First, so that SIGSEGV actions installed after it (streamsan's own included) are the
    // program's, chained to by the guard's handler.
    if options().host_races {
        host_guard::install();
    }
    signals::install_fatal();
    // Registered first, so run last: driver calls in the program's own exit handlers and
    // static destructors are seen before the final report.
    // SAFETY: registering plain extern "C" functions; the fork handler only sets flags and
    // closes a descriptor.
    unsafe {
        on_exit(at_exit, core::ptr::null_mut());
        libc::pthread_atfork(None, None, Some(forked_child));
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static ON_LOAD: extern "C" fn() = on_load;

/// Called by every hook: the first call makes this a process that reports.
#[inline]
pub fn start() {
    if !CALLED.load(Ordering::Relaxed) && !CALLED.swap(true, Ordering::AcqRel) {
        if FORK_PENDING.swap(false, Ordering::AcqRel) {
            // A forked child reports what it finds itself, to a file of its own.
            *REPORT.lock().unwrap_or_else(|e| e.into_inner()) = Destination::NotYet;
            model().forget_findings();
        }
        signals::install_termination();
    }
}

extern "C" fn at_exit(status: c_int, _: *mut c_void) {
    if !CALLED.load(Ordering::Acquire) {
        return;
    }
    host_guard::drain();
    let races = write_report();
    report_to_stderr_if_unwritten();
    // The program's own status, unless it would claim success with races found.
    if status == 0 && races > 0 {
        exit_now(options().exitcode);
    }
}

/// Ends the process with `status`, the program's buffered output written first (as exit
/// would, after its handlers).
fn exit_now(status: i32) -> ! {
    // SAFETY: fflush(NULL) flushes every stdio stream; _exit ends the process.
    unsafe {
        libc::fflush(core::ptr::null_mut());
        libc::_exit(status)
    }
}

/// In a forked child, at once: flags only (no lock, which a thread of the parent may have
/// held at the fork); the child's first driver call does the rest ([`start`]).
extern "C" fn forked_child() {
    FORKED.store(true, Ordering::Relaxed);
    FORK_PENDING.store(true, Ordering::Relaxed);
    CALLED.store(false, Ordering::Relaxed);
    PRINTED.store(0, Ordering::Relaxed);
    signals::forked_child();
}

/// The happens-before model of this process.
pub fn model() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| Model::new(Box::new(describe_stream), Some(Box::new(Reporter))))
}

/// A stream the model did not see created: ask the driver its context and flags.
fn describe_stream(handle: u64) -> Option<StreamInfo> {
    let queries = driver::queries();
    let stream = handle as *mut core::ffi::c_void;
    let mut ctx: CUcontext = core::ptr::null_mut();
    let mut flags = 0u32;
    // SAFETY: valid out-pointers; the driver checks the handle.
    unsafe {
        if queries.stream_get_ctx?(stream, &mut ctx) != CUDA_SUCCESS {
            return None;
        }
        if let Some(get_flags) = queries.stream_get_flags {
            get_flags(stream, &mut flags);
        }
    }
    Some(StreamInfo { ctx: ctx as u64, non_blocking: flags & CU_STREAM_NON_BLOCKING != 0 })
}

/// Call sites and threads of this process, for reports.
struct ProcessSymbols;

impl Symbols for ProcessSymbols {
    fn frames(&self, site: StackId) -> Vec<Frame> {
        let mut frames = stack::frames(site);
        frames.truncate(options().backtrace_depth);
        frames
    }
    fn tid(&self, thread: ThreadId) -> Option<u32> {
        thread::tid(thread)
    }
}

/// Prints each new race on stderr (within `print_limit`, unless quiet) and rewrites the
/// report, so that no race is lost if the process dies before exit; with `halt_on_error`,
/// ends the process at the first race.
struct Reporter;

impl Sink for Reporter {
    fn race(&self, entry: &RaceEntry) {
        let race = build::race(model(), entry, &ProcessSymbols);
        if suppressions().suppresses(&race) {
            return;
        }
        let options = options();
        let printed = PRINTED.fetch_add(1, Ordering::Relaxed);
        if !options.quiet && options.print_limit.is_none_or(|limit| printed < limit) {
            eprint!("{}", text::race(&race));
        }
        write_report();
        if options.halt_on_error {
            report_to_stderr_if_unwritten();
            diag::warn("halting at the first race (halt_on_error=1)");
            exit_now(options.exitcode);
        }
    }
}

/// Where the report goes.
enum Destination {
    /// Nothing written yet.
    NotYet,
    File(ReportFile),
    /// The file could not be created (the reason): the report goes to stderr at exit.
    Stderr(String),
    /// No `log_path`.
    Nowhere,
}

static REPORT: Mutex<Destination> = Mutex::new(Destination::NotYet);

/// Where this process's report goes: the pattern with `%p` expanded, and for a forked child
/// of a pattern without `%p`, its pid appended (its parent's report is at the pattern).
fn report_path() -> Option<PathBuf> {
    let pattern = options().log_path.as_deref()?;
    let pid = std::process::id();
    let mut path = expand_path(pattern, pid);
    if FORKED.load(Ordering::Relaxed) && !pattern.contains("%p") {
        path = format!("{path}.{pid}");
    }
    Some(PathBuf::from(path))
}

/// The report of everything found so far, suppressions applied.
fn current_report() -> Report {
    let command = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    let mut report = Report::new(std::process::id(), command);
    build::fill(&mut report, model(), &ProcessSymbols);
    report.suppress(suppressions());
    report.intercepted = stats::snapshot();
    report.unrecognised_proc_addresses = stats::unrecognised();
    report
}

/// Writes the report for everything found so far; returns how many races it holds.
pub fn write_report() -> usize {
    let report = current_report();
    let mut destination = REPORT.lock().unwrap_or_else(|e| e.into_inner());
    if let Destination::NotYet = *destination {
        *destination = match report_path() {
            None => Destination::Nowhere,
            Some(path) => match ReportFile::create(&path, &report) {
                Ok(file) => Destination::File(file),
                Err(e) => {
                    let why = format!("cannot write the report to {}: {e}", path.display());
                    diag::error(&format!("{why}; it goes to stderr at exit"));
                    Destination::Stderr(why)
                }
            },
        };
        return report.races.len();
    }
    if let Destination::File(file) = &*destination {
        if let Err(e) = file.write(&report) {
            let why = format!("cannot write the report to {}: {e}", file.path().display());
            diag::error(&format!("{why}; it goes to stderr at exit"));
            *destination = Destination::Stderr(why);
        }
    }
    report.races.len()
}

/// When the report file could not be written: the report, on stderr.
fn report_to_stderr_if_unwritten() {
    let destination = REPORT.lock().unwrap_or_else(|e| e.into_inner());
    if let Destination::Stderr(why) = &*destination {
        if let Ok(text) = render(&current_report()) {
            eprintln!("streamsan: the report ({why}):");
            eprint!("{}", String::from_utf8_lossy(&text));
        }
    }
}

/// The report so far as JSON, for a program that asks ([`crate::harness_entry`]).
pub fn report_json() -> Vec<u8> {
    render(&current_report()).unwrap_or_default()
}
