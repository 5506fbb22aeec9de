//! This process's reports: the report sink of `streamsan::report::sink`, given what only
//! the shim knows (the call sites' frames, the threads' ids, the calls it counted, where
//! the report goes, how the process ends) and installed as the model's sink.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use streamsan::model::op::{StackId, ThreadId};
use streamsan::model::{Model, Sink};
use streamsan::options::{expand_path, has_pid};
use streamsan::report::build::Symbols;
use streamsan::report::run::{Event, RunLog};
use streamsan::report::sink::{Policy, Process, ReportSink};
use streamsan::report::{Frame, Report};

use crate::hooks::model;
use crate::intercept::options::{fail, options};
use crate::intercept::stats;
use crate::sites::{stack, thread};

/// Whether this process is a forked child of the one that loaded the shim.
static FORKED: AtomicBool = AtomicBool::new(false);

static SINK: OnceLock<ReportSink<ThisProcess>> = OnceLock::new();

/// This process, as its reports see it.
pub struct ThisProcess;

impl Symbols for ThisProcess {
    fn frames(&self, site: StackId) -> Vec<Frame> {
        let mut frames = stack::frames(site);
        frames.truncate(options().backtrace_depth);
        frames
    }
    fn tid(&self, thread: ThreadId) -> Option<u32> {
        thread::tid(thread)
    }
    fn test(&self, site: StackId) -> Option<String> {
        stack::test_of(site)
    }
}

impl Process for ThisProcess {
    /// The model as it stands, its batch not settled: the sink asks it while holding the
    /// report file's lock, and a thread settling the batch may be reporting a race, waiting
    /// for that lock. Whoever writes the whole report settles first (at exit, the watcher,
    /// the query API).
    fn model(&self) -> &Model {
        model::unsettled()
    }

    fn blank_report(&self) -> Report {
        let command = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
        let mut report = Report::new(std::process::id(), command);
        report.intercepted = stats::snapshot();
        report.unrecognised_proc_addresses = stats::unrecognised();
        report
    }

    /// The pattern with `%p` expanded, and for a forked child of a pattern without `%p`,
    /// its pid appended (its parent's report is at the pattern); for an image that an
    /// `exec` of this process started after one that reported, `.exec<n>` before the
    /// extension (the image before it left its report at the path).
    fn report_path(&self) -> PathBuf {
        let pattern = &options().log_path;
        let pid = std::process::id();
        let mut path = expand_path(pattern, pid).into_os_string();
        if FORKED.load(Ordering::Relaxed) && !has_pid(pattern) {
            path.push(format!(".{pid}"));
        }
        if let Some(suffix) = exec_suffix() {
            path = match path.as_bytes().strip_suffix(b".json") {
                Some(stem) => OsString::from_vec([stem, suffix.as_bytes(), b".json"].concat()),
                None => {
                    path.push(suffix);
                    path
                }
            };
        }
        PathBuf::from(path)
    }

    fn say(&self, text: &str) {
        eprint!("{text}");
    }

    fn exit(&self, status: i32) -> ! {
        exit_now(status)
    }
}

/// Ends the process with `status`, the program's buffered output written first (as exit
/// would, after its handlers).
pub fn exit_now(status: i32) -> ! {
    // SAFETY: fflush(NULL) flushes every stdio stream.
    unsafe { libc::fflush(core::ptr::null_mut()) };
    exit_group(status)
}

/// The sink of this process; made (its suppressions file read) on first need, at the
/// latest when the library is loaded. A wrong suppressions file stops the program.
pub fn sink() -> &'static ReportSink<ThisProcess> {
    SINK.get_or_init(|| {
        let policy = Policy::of(options()).unwrap_or_else(|why| fail(&why));
        ReportSink::new(policy, ThisProcess, run().cloned())
    })
}

/// Makes the sink and hands it the model's races from now on, and those found before.
pub fn install() {
    let sink = sink();
    // The work waiting in the model's batch told before: its races are among those handed
    // over below, not heard twice.
    model::settle();
    model::install_sink(sink);
    if let Some(model) = model::made() {
        for entry in model.races() {
            sink.race(&entry);
        }
    }
}

/// The run's list (under `streamsan run`), as named at load: the program may clear its
/// environment before it `exec`s.
fn run() -> Option<&'static RunLog> {
    static RUN: OnceLock<Option<RunLog>> = OnceLock::new();
    RUN.get_or_init(RunLog::from_env).as_ref()
}

/// Tells the run's list what this process did.
pub fn note(event: Event) {
    if let Some(run) = run() {
        run.note(&event);
    }
}

/// In a forked child, at the fork: flags only.
pub fn forked() {
    FORKED.store(true, Ordering::Relaxed);
    if let Some(sink) = SINK.get() {
        sink.forked();
    }
}

/// Ends the process at once, as the C library's `_exit` does.
pub fn exit_group(status: core::ffi::c_int) -> ! {
    // SAFETY: the system call that ends every thread of the process.
    unsafe { libc::syscall(libc::SYS_exit_group, status) };
    unreachable!("exit_group returned")
}

/// `<pid>:<n>`: the process `pid` has `exec`ed `n` times, each image leaving a report; the
/// next one names its report apart ([`exec_suffix`]).
pub const EXECED: &str = "STREAMSAN_EXECED";

/// How many images of process `pid` left a report before this one.
pub fn execs_before(pid: u32) -> u32 {
    let value = std::env::var(EXECED).unwrap_or_default();
    match value.split_once(':') {
        Some((of, n)) if of.parse() == Ok(pid) => n.parse().unwrap_or(0),
        _ => 0,
    }
}

/// What this image puts before its report's extension: `.exec<n>` when an image before it
/// in this process left a report, else nothing.
pub fn exec_suffix() -> Option<String> {
    let n = execs_before(std::process::id());
    (n > 0).then(|| format!(".exec{n}"))
}

#[cfg(test)]
mod tests {
    use streamsan::model::op::{HostEffect, Origin};
    use streamsan::model::streams::StreamRef;
    use streamsan::model::Work;
    use streamsan::phases::Phase;

    use super::*;
    use crate::hooks::batch;

    #[test]
    fn the_sink_reads_the_model_without_settling_its_batch() {
        // The sink asks the model while it holds the report file's lock, and a thread settling
        // the batch may be reporting a race, waiting for that lock: settling there would deadlock.
        let _serial = batch::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let origin = Origin { api: "cuLaunchKernel", thread: ThreadId(1), site: StackId(0) };
        let work = Work { origin, kernel: None, accesses: &[], host: HostEffect::None };
        batch::queue(model::unsettled(), StreamRef::Legacy { ctx: 1 }, work, Phase::Model);
        assert!(batch::waiting());
        ThisProcess.model();
        assert!(batch::waiting(), "the sink settled the batch");
        model::settle();
        assert!(!batch::waiting());
    }
}
