//! Running programs under streamsan from Rust tests, and asserting on what it found.
//!
//! ```no_run
//! use std::process::Command;
//! use streamsan::harness::Streamsan;
//!
//! let run = Streamsan::locate().unwrap().run(Command::new("target/debug/my-cuda-app")).unwrap();
//! // Fails listing every race, as streamsan prints them:
//! run.assert_clean();
//! // Or ask after particular races:
//! assert_eq!(run.races().kind("free-race").kernel("scale").at("main.rs").count(), 1);
//! ```
//!
//! A test binary can also look at itself: run under the shim (for instance by running
//! itself again with [`Streamsan::command`]), it gets its report so far with
//! [`report_so_far`].

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::cli::start;
use crate::options::{OptionError, Options};
use crate::report::text::describe_site;
use crate::report::{merge, text, OpReport, RaceReport, Report};

/// The shim to preload, and the options to run with.
#[derive(Clone, Debug)]
pub struct Streamsan {
    shim: PathBuf,
    options: Options,
}

impl Streamsan {
    /// Finds the shim: `STREAMSAN_SHIM`, else `libstreamsan_shim.so` beside the current
    /// executable or one directory up (where cargo puts a test binary's siblings).
    pub fn locate() -> Result<Streamsan, String> {
        if let Some(path) = std::env::var_os("STREAMSAN_SHIM") {
            return Ok(Streamsan::with_shim(PathBuf::from(path)));
        }
        let exe = std::env::current_exe().map_err(|e| format!("cannot find the current executable: {e}"))?;
        let mut dir = exe.parent();
        for _ in 0..2 {
            let Some(d) = dir else { break };
            let shim = d.join(start::SHIM_FILE);
            if shim.is_file() {
                return Ok(Streamsan::with_shim(shim));
            }
            dir = d.parent();
        }
        Err(format!(
            "cannot find {} beside {} or one directory up: build the shim (cargo build -p streamsan-shim) or set STREAMSAN_SHIM",
            start::SHIM_FILE,
            exe.display()
        ))
    }

    pub fn with_shim(shim: PathBuf) -> Streamsan {
        Streamsan { shim, options: Options::default() }
    }

    /// Sets an option by its `STREAMSAN_OPTIONS` name (`suppressions`, `halt_on_error`, ...).
    pub fn option(mut self, key: &str, value: impl AsRef<OsStr>) -> Result<Streamsan, OptionError> {
        self.options.set(key, value)?;
        Ok(self)
    }

    /// `program` set up to run under the shim, its reports going to `report_dir`.
    pub fn command(&self, mut program: Command, report_dir: &Path) -> Command {
        let mut options = self.options.clone();
        options.log_path = report_dir.join("report.%p.json");
        program.env("LD_PRELOAD", start::preload_value(&self.shim, std::env::var_os("LD_PRELOAD")));
        program.env("STREAMSAN_OPTIONS", options.to_env());
        program
    }

    /// Runs `program` under the shim to its end and collects its output and reports.
    pub fn run(&self, program: Command) -> std::io::Result<Run> {
        static RUNS: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "streamsan-harness-{}-{}",
            std::process::id(),
            RUNS.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let output = self.command(program, &dir).output()?;
        // The reports, not their race logs (`.NAME.races`, read with them).
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
            .collect();
        paths.sort();
        let reports = paths.iter().map(|p| Report::read_from(p)).collect::<std::io::Result<Vec<_>>>()?;
        let _ = std::fs::remove_dir_all(&dir);
        let report = merge::merge(&reports);
        Ok(Run {
            status: output.status,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            reports,
            report,
        })
    }
}

/// A program's run under streamsan.
#[derive(Debug)]
pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// One per process that called the driver.
    pub reports: Vec<Report>,
    /// All of them as one.
    report: Report,
}

impl Run {
    /// The reports of every process, merged.
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// The races found, to narrow down with [`Races`]' filters.
    pub fn races(&self) -> Races<'_> {
        self.report.races()
    }

    /// Panics, listing the races as streamsan prints them, unless there were none.
    pub fn assert_clean(&self) {
        self.report.assert_clean();
    }
}

impl Report {
    /// The races found, to narrow down with [`Races`]' filters.
    pub fn races(&self) -> Races<'_> {
        Races { races: self.races.iter().collect() }
    }

    /// Panics, listing the races as streamsan prints them, unless there were none.
    pub fn assert_clean(&self) {
        if !self.races.is_empty() {
            panic!("streamsan found races:\n{}", text::report(self));
        }
    }
}

/// A selection of races.
#[derive(Clone, Debug)]
pub struct Races<'a> {
    races: Vec<&'a RaceReport>,
}

impl<'a> Races<'a> {
    fn keep(mut self, keep: impl Fn(&RaceReport) -> bool) -> Races<'a> {
        self.races.retain(|r| keep(r));
        self
    }

    fn either(race: &RaceReport, test: impl Fn(&OpReport) -> bool) -> bool {
        test(&race.first) || test(&race.second)
    }

    /// Races of this kind (`use-before-alloc`, `free-race`, `use-after-free`,
    /// `cross-stream-race`, `host-race`).
    pub fn kind(self, kind: &str) -> Races<'a> {
        self.keep(|r| r.kind == kind)
    }

    /// Races where either operation is a launch of a kernel whose name contains `name`.
    pub fn kernel(self, name: &str) -> Races<'a> {
        self.keep(|r| Races::either(r, |op| op.kernel.as_deref().is_some_and(|k| k.contains(name))))
    }

    /// Races where either operation ran on the stream whose handle (`0x...`) or label
    /// contains `stream`.
    pub fn stream(self, stream: &str) -> Races<'a> {
        self.keep(|r| Races::either(r, |op| op.stream.handle == stream || op.stream.label.contains(stream)))
    }

    /// Races where either operation's call site has a frame whose function or `file:line`
    /// contains `site` (`"train.py:42"`, `"main.rs"`, `"my_crate::step"`).
    pub fn at(self, site: &str) -> Races<'a> {
        self.keep(|r| {
            Races::either(r, |op| {
                op.site.iter().any(|f| {
                    let place = match (&f.file, f.line) {
                        (Some(file), Some(line)) => format!("{file}:{line}"),
                        (Some(file), None) => file.clone(),
                        _ => String::new(),
                    };
                    place.contains(site) || f.function.as_deref().is_some_and(|func| func.contains(site))
                })
            })
        })
    }

    pub fn count(&self) -> usize {
        self.races.len()
    }

    pub fn is_empty(&self) -> bool {
        self.races.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &'a RaceReport> + '_ {
        self.races.iter().copied()
    }

    /// One line per race: kind and where each operation was issued.
    pub fn describe(&self) -> String {
        self.races
            .iter()
            .map(|r| format!("{}: {} then {}", r.kind, describe_site(&r.first.site), describe_site(&r.second.site)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The report so far of this process, when it runs under the shim (None otherwise): for a
/// test that checks itself.
///
/// # Panics
/// Under the shim, when what it returns is not a report: a test that runs itself again
/// under the shim when this says None would otherwise start itself over and over.
pub fn report_so_far() -> Option<Report> {
    type ReportJson = unsafe extern "C" fn() -> *mut libc::c_char;
    type FreeReport = unsafe extern "C" fn(*mut libc::c_char);
    // SAFETY: looking up the shim's exports in the global scope; they have these signatures
    // (shim/include/streamsan.h).
    unsafe {
        let get = libc::dlsym(libc::RTLD_DEFAULT, c"streamsan_report_json".as_ptr());
        let free = libc::dlsym(libc::RTLD_DEFAULT, c"streamsan_free_report".as_ptr());
        if get.is_null() || free.is_null() {
            return None;
        }
        let get: ReportJson = std::mem::transmute::<*mut libc::c_void, ReportJson>(get);
        let free: FreeReport = std::mem::transmute::<*mut libc::c_void, FreeReport>(free);
        let text = get();
        assert!(!text.is_null(), "streamsan_report_json returned no report");
        let report = serde_json::from_slice(std::ffi::CStr::from_ptr(text).to_bytes());
        free(text);
        Some(report.unwrap_or_else(|e| panic!("streamsan_report_json returned no report: {e}")))
    }
}
