//! The shim's process-wide life: options read when the library is loaded, the model,
//! races reported as they are found, the report written again when the process exits.
//!
//! Options are parsed by a library constructor, before the program's `main`, so that a
//! wrong option stops the program before it starts (as ThreadSanitizer does). The report
//! is written only by processes that called the driver.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use streamsan::model::op::{StackId, ThreadId};
use streamsan::model::race::RaceEntry;
use streamsan::model::streams::StreamInfo;
use streamsan::model::{Model, Sink};
use streamsan::options::{expand_path, Options};
use streamsan::report::build::{self, Symbols};
use streamsan::report::{text, Frame, Report};
use streamsan_driver_api::{CUcontext, CUDA_SUCCESS, CU_STREAM_NON_BLOCKING};

use crate::{diag, driver, stack, stats, thread};

static OPTIONS: OnceLock<Options> = OnceLock::new();
static STARTED: AtomicBool = AtomicBool::new(false);

/// The options of this process.
pub fn options() -> &'static Options {
    OPTIONS.get_or_init(read_options)
}

fn read_options() -> Options {
    let text = std::env::var("STREAMSAN_OPTIONS").unwrap_or_default();
    match Options::parse(&text) {
        Ok(options) => options,
        Err(e) => {
            diag::warn(&format!("STREAMSAN_OPTIONS: {e}"));
            std::process::exit(2);
        }
    }
}

extern "C" fn on_load() {
    options();
    crate::signals::install();
}

#[used]
#[unsafe(link_section = ".init_array")]
static ON_LOAD: extern "C" fn() = on_load;

/// Called by every hook: the first call arranges for the report to be written at exit.
#[inline]
pub fn start() {
    if !STARTED.load(Ordering::Relaxed) && !STARTED.swap(true, Ordering::AcqRel) {
        // SAFETY: registering a plain extern "C" function.
        unsafe { libc::atexit(on_exit) };
    }
}

extern "C" fn on_exit() {
    write_report();
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
        stack::frames(site)
    }
    fn tid(&self, thread: ThreadId) -> Option<u32> {
        thread::tid(thread)
    }
}

/// Prints each new race on stderr and rewrites the report, so that no race is lost if the
/// process dies before exit.
struct Reporter;

impl Sink for Reporter {
    fn race(&self, entry: &RaceEntry) {
        let race = build::race(model(), entry, &ProcessSymbols);
        eprint!("{}", text::race(&race));
        write_report();
    }
}

/// Where this process's report goes, if anywhere.
fn report_path() -> Option<PathBuf> {
    let pattern = options().log_path.as_deref()?;
    Some(PathBuf::from(expand_path(pattern, std::process::id())))
}

/// Writes the report for everything seen so far.
pub fn write_report() {
    static WRITING: Mutex<()> = Mutex::new(());
    let Some(path) = report_path() else { return };
    let _one_at_a_time = WRITING.lock().unwrap_or_else(|e| e.into_inner());
    let command = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    let mut report = Report::new(std::process::id(), command);
    build::fill(&mut report, model(), &ProcessSymbols);
    report.intercepted = stats::snapshot();
    report.unrecognised_proc_addresses = stats::unrecognised();
    if let Err(e) = report.write_to(&path) {
        diag::warn(&format!("cannot write the report to {}: {e}", path.display()));
    }
}
