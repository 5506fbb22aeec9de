//! What becomes of a race once it is found: the one place that applies what the user asked
//! of reports (suppressions, the print limit, `quiet`, `halt_on_error`).
//!
//! [`Policy`] is that request; the `streamsan report` command applies its suppressions to
//! reports read back, and [`ReportSink`] applies all of it to a running process. The sink
//! is the model's [`Sink`]: each new race is built into the report's form, dropped if
//! suppressed, printed on stderr within `print_limit` (unless quiet), and the report file
//! rewritten at once, so that no race is lost if the process dies before exit. What only
//! the process knows (its call sites, where its report goes, how to end it) comes from a
//! [`Process`]; the preloaded shim supplies one and installs the sink.
//!
//! The report file is created once and never over something already there; when it cannot
//! be, the report goes to stderr at exit (the process asks, [`ReportSink::to_stderr_if_unwritten`])
//! and the program runs on.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::model::race::RaceEntry;
use crate::model::{Model, Sink};
use crate::options::Options;
use crate::phases::{self, Phase};
use super::suppressions::Suppressions;

use super::build::{self, Symbols};
use super::file::{render, ReportFile};
use super::{text, RaceReport, Report};

/// What the user asked of reports.
#[derive(Clone, Debug)]
pub struct Policy {
    pub suppressions: Suppressions,
    /// Races printed on stderr at most (all go to the report).
    pub print_limit: Option<u64>,
    /// Print nothing on stderr but errors.
    pub quiet: bool,
    /// End the process at the first race, with `exitcode`.
    pub halt_on_error: bool,
    pub exitcode: i32,
}

impl Policy {
    /// The policy `options` ask for, its suppressions file read; the error says what is
    /// wrong with the file.
    pub fn of(options: &Options) -> Result<Policy, String> {
        let suppressions = match &options.suppressions {
            Some(path) => Suppressions::load(path.as_ref()).map_err(|e| e.to_string())?,
            None => Suppressions::default(),
        };
        Ok(Policy::with(options, suppressions))
    }

    /// Only `suppressions`, the rest as by default: for reports read back.
    pub fn suppressing(suppressions: Suppressions) -> Policy {
        Policy::with(&Options::default(), suppressions)
    }

    fn with(options: &Options, suppressions: Suppressions) -> Policy {
        Policy {
            suppressions,
            print_limit: options.print_limit,
            quiet: options.quiet,
            halt_on_error: options.halt_on_error,
            exitcode: options.exitcode,
        }
    }

    /// Whether a race is left out of reports.
    pub fn suppresses(&self, race: &RaceReport) -> bool {
        self.suppressions.suppresses(race)
    }

    /// Leaves out the races the suppressions suppress, counting them in the summary.
    pub fn apply(&self, report: &mut Report) {
        let before = report.races.len();
        report.races.retain(|race| !self.suppresses(race));
        let suppressed = report.summary.suppressed + (before - report.races.len()) as u64;
        report.summarize();
        report.summary.suppressed = suppressed;
    }
}

/// What only the process being reported knows.
pub trait Process: Symbols + Send + Sync {
    /// The model that finds its races.
    fn model(&self) -> &Model;
    /// Its report with nothing found in it: who it is, what it called.
    fn blank_report(&self) -> Report;
    /// Where its report file goes, if anywhere (asked when the file is first written).
    fn report_path(&self) -> Option<PathBuf>;
    /// Says `text` on stderr.
    fn say(&self, text: &str);
    /// Ends the process with `status`, its buffered output written first.
    fn exit(&self, status: i32) -> !;
}

/// Where the report goes.
enum Destination {
    /// Nothing written yet.
    NotYet,
    File(ReportFile),
    /// The file could not be created (the reason): the report goes to stderr at exit.
    Stderr(String),
    /// No report path.
    Nowhere,
}

/// Reports one process's races as they are found, and its report whenever asked.
pub struct ReportSink<P: Process> {
    policy: Policy,
    process: P,
    /// Races printed on stderr so far (for `print_limit`).
    printed: AtomicU64,
    destination: Mutex<Destination>,
}

impl<P: Process> ReportSink<P> {
    pub fn new(policy: Policy, process: P) -> ReportSink<P> {
        ReportSink {
            policy,
            process,
            printed: AtomicU64::new(0),
            destination: Mutex::new(Destination::NotYet),
        }
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The report of everything found so far, suppressions applied.
    pub fn report(&self) -> Report {
        let mut report = self.process.blank_report();
        build::fill(&mut report, self.process.model(), &self.process);
        self.policy.apply(&mut report);
        report
    }

    /// The report so far, as the file holds it.
    pub fn json(&self) -> Vec<u8> {
        render(&self.report()).unwrap_or_default()
    }

    fn error(&self, message: &str) {
        self.process.say(&format!("streamsan: {message}\n"));
    }

    /// Writes the report of everything found so far; returns how many races it holds.
    pub fn write(&self) -> usize {
        let report = self.report();
        let mut destination = self.destination.lock().unwrap_or_else(|e| e.into_inner());
        if let Destination::NotYet = *destination {
            *destination = match self.process.report_path() {
                None => Destination::Nowhere,
                Some(path) => match ReportFile::create(&path, &report) {
                    Ok(file) => Destination::File(file),
                    Err(e) => {
                        let why = format!("cannot write the report to {}: {e}", path.display());
                        self.error(&format!("{why}; it goes to stderr at exit"));
                        Destination::Stderr(why)
                    }
                },
            };
            return report.races.len();
        }
        if let Destination::File(file) = &*destination {
            if let Err(e) = file.write(&report) {
                let why = format!("cannot write the report to {}: {e}", file.path().display());
                self.error(&format!("{why}; it goes to stderr at exit"));
                *destination = Destination::Stderr(why);
            }
        }
        report.races.len()
    }

    /// When the report file could not be written: the report, on stderr.
    pub fn to_stderr_if_unwritten(&self) {
        let destination = self.destination.lock().unwrap_or_else(|e| e.into_inner());
        if let Destination::Stderr(why) = &*destination {
            if let Ok(text) = render(&self.report()) {
                self.process.say(&format!(
                    "streamsan: the report ({why}):\n{}",
                    String::from_utf8_lossy(&text)
                ));
            }
        }
    }

    /// In a forked child, at the fork: nothing printed yet (no lock taken, which a thread of
    /// the parent may have held).
    pub fn forked(&self) {
        self.printed.store(0, Ordering::Relaxed);
    }

    /// In a forked child, at its first driver call: its report is a file of its own.
    pub fn start_over(&self) {
        *self.destination.lock().unwrap_or_else(|e| e.into_inner()) = Destination::NotYet;
    }
}

impl<P: Process> Sink for ReportSink<P> {
    /// Prints the new race (within `print_limit`, unless quiet) and rewrites the report; with
    /// `halt_on_error`, ends the process at the first race.
    fn race(&self, entry: &RaceEntry) {
        let _timer = phases::start(Phase::Report);
        let race = build::race(self.process.model(), entry, &self.process);
        if self.policy.suppresses(&race) {
            return;
        }
        let printed = self.printed.fetch_add(1, Ordering::Relaxed);
        if !self.policy.quiet && self.policy.print_limit.is_none_or(|limit| printed < limit) {
            self.process.say(&text::race(&race));
        }
        self.write();
        if self.policy.halt_on_error {
            self.to_stderr_if_unwritten();
            if !self.policy.quiet {
                self.process
                    .say("streamsan: halting at the first race (halt_on_error=1)\n");
            }
            self.process.exit(self.policy.exitcode);
        }
    }
}
