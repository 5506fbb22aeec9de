//! What becomes of a race once it is found: the one place that applies what the user asked of
//! reports (suppressions, the print limit, `quiet`, `halt_on_error`) and that puts each race
//! on the disk before the racing call returns.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use super::suppressions::Suppressions;
use crate::model::race::RaceEntry;
use crate::model::{Model, Sink};
use crate::options::{shown_path, Options};
use crate::phases::{self, Phase};

use super::build::{self, Symbols};
use super::file::{render, ReportFile};
use super::run::{Entry, RunLog};
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
            Some(path) => Suppressions::load(path).map_err(|e| e.to_string())?,
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
    /// Where its report file goes (asked when the file is first written).
    fn report_path(&self) -> PathBuf;
    /// Says `text` on stderr.
    fn say(&self, text: &str);
    /// Ends the process with `status`, its buffered output written first.
    fn exit(&self, status: i32) -> !;
}

/// Where the report goes.
enum Destination {
    /// Nothing written yet.
    NotYet,
    File(Written),
    /// The file could not be written (the reason): the report goes to stderr at exit.
    Stderr(String),
}

/// The report file, and how many races it holds (those found since are in its log).
struct Written {
    file: ReportFile,
    races: usize,
}

/// Reports one process's races as they are found, and its report whenever asked.
pub struct ReportSink<P: Process> {
    policy: Policy,
    process: P,
    /// The run this process belongs to (under `streamsan run`).
    run: Option<RunLog>,
    /// Races found so far, suppressed ones left out (the print limit counts them).
    found: AtomicU64,
    destination: Mutex<Destination>,
    /// With `halt_on_error`, the race the process halts at: the only one reported, though
    /// other threads find races before the process ends.
    halted_at: OnceLock<RaceReport>,
}

impl<P: Process> ReportSink<P> {
    pub fn new(policy: Policy, process: P, run: Option<RunLog>) -> ReportSink<P> {
        ReportSink {
            policy,
            process,
            run,
            found: AtomicU64::new(0),
            destination: Mutex::new(Destination::NotYet),
            halted_at: OnceLock::new(),
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
        if let Some(race) = self.halted_at.get() {
            report.races = vec![race.clone()];
            report.summarize();
        }
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
        self.rewrite(&mut destination, &report);
        report.races.len()
    }

    /// Creates or rewrites the report file with `report`.
    fn rewrite(&self, destination: &mut Destination, report: &Report) {
        let result = match destination {
            Destination::Stderr(_) => return,
            Destination::NotYet => {
                let path = self.process.report_path();
                ReportFile::create(&path, report)
                    .map(|file| {
                        if let Some(run) = &self.run {
                            run.record(&Entry::Written(path.clone()));
                        }
                        *destination = Destination::File(Written { file, races: report.races.len() });
                    })
                    .map_err(|e| (path, e, ""))
            }
            Destination::File(written) => match written.file.write(report) {
                Ok(()) => {
                    written.races = report.races.len();
                    Ok(())
                }
                Err(e) => Err((written.file.path().to_path_buf(), e, " (the file there is an older version)")),
            },
        };
        if let Err((path, e, stale)) = result {
            self.unwritable(destination, path, &format!("{e}{stale}"), report.races.len());
        }
    }

    /// The report cannot be written to `path`: said now, the report on stderr at exit.
    fn unwritable(&self, destination: &mut Destination, path: PathBuf, why: &str, races: usize) {
        let why = format!("cannot write the report to {}: {why}", shown_path(&path));
        self.error(&format!("{why}; it goes to stderr at exit"));
        if let Some(run) = &self.run {
            run.record(&Entry::Unwritten { path, races: races as u64, why: why.clone() });
        }
        *destination = Destination::Stderr(why);
    }

    /// Puts a new race, the `found`th, on the disk: the report rewritten when the races
    /// have doubled since it was written, else the race appended to its log. Returns whether
    /// the race must be printed whatever the print limit (the report cannot be written).
    fn record(&self, race: &RaceReport, found: u64) -> bool {
        let mut destination = self.destination.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *destination {
            Destination::File(written) if (found as usize) < 2 * written.races.max(1) => {
                if let Err(e) = written.file.append(race) {
                    let path = written.file.path().to_path_buf();
                    self.unwritable(&mut destination, path, &e.to_string(), found as usize);
                }
            }
            Destination::Stderr(_) => {}
            _ => {
                let report = self.report();
                self.rewrite(&mut destination, &report);
            }
        }
        matches!(*destination, Destination::Stderr(_))
    }

    /// When the report file could not be written: the report, on stderr.
    pub fn to_stderr_if_unwritten(&self) {
        let destination = self.destination.lock().unwrap_or_else(|e| e.into_inner());
        if let Destination::Stderr(why) = &*destination {
            let report = self.report();
            if let Ok(text) = render(&report) {
                self.process.say(&format!("streamsan: the report ({why}):\n{}", String::from_utf8_lossy(&text)));
            }
            if let Some(run) = &self.run {
                run.record(&Entry::Unwritten {
                    path: self.process.report_path(),
                    races: report.races.len() as u64,
                    why: why.clone(),
                });
            }
        }
    }

    /// In a forked child, at the fork: no race found yet (no lock taken, which a thread of
    /// the parent may have held).
    pub fn forked(&self) {
        self.found.store(0, Ordering::Relaxed);
    }

    /// In a forked child, at its first driver call: its report is a file of its own.
    pub fn start_over(&self) {
        *self.destination.lock().unwrap_or_else(|e| e.into_inner()) = Destination::NotYet;
    }
}

impl<P: Process> Sink for ReportSink<P> {
    /// Puts the new race on the disk and prints it (within `print_limit`, unless quiet);
    /// with `halt_on_error`, ends the process at the first race.
    fn race(&self, entry: &RaceEntry) {
        let _timer = phases::start(Phase::Report);
        let race = build::race(self.process.model(), entry, &self.process);
        if self.policy.suppresses(&race) {
            return;
        }
        if self.policy.halt_on_error && self.halted_at.set(race.clone()).is_err() {
            // Another thread halts the process at its race.
            return;
        }
        let before = self.found.fetch_add(1, Ordering::Relaxed);
        let unwritable = self.record(&race, before + 1);
        let within_limit = self.policy.print_limit.is_none_or(|limit| before < limit);
        if unwritable || (!self.policy.quiet && within_limit) {
            self.process.say(&text::race(&race));
        }
        if self.policy.halt_on_error {
            self.write();
            self.to_stderr_if_unwritten();
            if !self.policy.quiet {
                self.process.say("streamsan: halting at the first race (halt_on_error=1)\n");
            }
            self.process.exit(self.policy.exitcode);
        }
    }
}
