//! The shim's process-wide life: options read when the library is loaded, the report
//! written when the process exits.
//!
//! Options are parsed by a library constructor, before the program's `main`, so that a
//! wrong option stops the program before it starts (as ThreadSanitizer does). The report
//! is written only by processes that called the driver.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use streamsan::options::{expand_path, Options};
use streamsan::report::Report;

use crate::{diag, stats};

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

/// Where this process's report goes, if anywhere.
fn report_path() -> Option<PathBuf> {
    let pattern = options().log_path.as_deref()?;
    Some(PathBuf::from(expand_path(pattern, std::process::id())))
}

/// Writes the report for everything seen so far.
pub fn write_report() {
    let Some(path) = report_path() else { return };
    let command = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    let mut report = Report::new(std::process::id(), command);
    report.intercepted = stats::snapshot();
    report.unrecognised_proc_addresses = stats::unrecognised();
    if let Err(e) = report.write_to(&path) {
        diag::warn(&format!("cannot write the report to {}: {e}", path.display()));
    }
}
